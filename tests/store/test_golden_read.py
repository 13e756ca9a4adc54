"""Golden stores written by Apache RocketMQ, read through the Python store opened read-only.

Why: the manifests are an independent oracle of what Java wrote (records, CQ/BCQ units, queue
offsets, index answers); reading them back field by field proves byte compatibility in the reading
direction, and the before/after file hashes prove read-only opening is safe beside a live broker.
"""

from __future__ import annotations

import base64
import hashlib
import ipaddress
import struct
from pathlib import Path

import pytest
from golden_helpers import golden_store_config

from broker_core.store.batch_consume_queue import BatchConsumeQueue
from broker_core.store.codec.hashing import index_key_hash
from broker_core.store.codec.hosts import parse_host
from broker_core.store.codec.message import MessageExt
from broker_core.store.message_store import GetMessageStatus, MessageStore
from broker_core.store.store_config import StoreConfig

STORES = ["store-basic", "store-batchcq", "store-timer"]


def open_ro(root: Path, name: str) -> MessageStore:
    return MessageStore(root, StoreConfig.from_properties(golden_store_config(name)), read_only=True).open()


def same_host(actual: tuple[str, int], text: str) -> bool:
    ip, port = parse_host(text)
    return ipaddress.ip_address(actual[0]) == ipaddress.ip_address(ip) and actual[1] == port


def tree_state(root: Path) -> dict[str, tuple[str, int, int]]:
    """Every path under root with (sha256, size, mtime_ns); directories too, so nothing is created."""
    out = {}
    for p in sorted(root.rglob("*")):
        st = p.stat()
        digest = hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else "dir"
        out[str(p.relative_to(root))] = (digest, st.st_size, st.st_mtime_ns)
    return out


def assert_record_matches(m: MessageExt | None, x: dict) -> None:
    assert m is not None, f"message {x['index']} not readable at {x['physicalOffset']}"
    where = f"message {x['index']}"
    assert m.topic == x["topic"], where
    assert m.queue_id == x["queueId"], where
    assert m.queue_offset == x["queueOffsetInLog"], where
    assert m.commit_log_offset == x["physicalOffset"], where
    assert m.store_size == x["size"], where
    assert m.flag == x["flag"], where
    assert m.sys_flag == x["sysFlag"], where
    assert m.born_timestamp == x["bornTimestamp"], where
    assert m.store_timestamp == x["storeTimestamp"], where
    assert same_host(m.born_host, x["bornHost"]), (where, m.born_host, x["bornHost"])
    assert same_host(m.store_host, x["storeHost"]), where
    assert m.reconsume_times == x["reconsumeTimes"], where
    assert m.prepared_transaction_offset == x["preparedTransactionOffset"], where
    assert m.properties_string == x["propertiesString"], where
    assert m.body == base64.b64decode(x["body"]), where
    assert len(m.body) == x["bodyLength"], where
    assert m.body_crc == x["bodyCRCInLog"] == int(x["bodyCrc32"]) & 0x7FFFFFFF, where
    assert m.msg_id == x["storedMsgId"] == x["offsetMsgId"], where
    assert m.tags == x["tags"] and m.keys == x["keys"] and m.uniq_key == x["uniqKey"], where


@pytest.mark.parametrize("name", STORES)
def test_every_manifest_message_readable(name: str, golden_copy, manifests) -> None:
    man = manifests[name]
    store = open_ro(golden_copy(name), name)
    try:
        for x in man["messages"]:
            assert_record_matches(store.look_message_by_offset(x["physicalOffset"]), x)
            assert_record_matches(store.look_message_by_offset(x["physicalOffset"], x["size"]), x)
        # the commitlog holds exactly the manifest records (plus, for the timer store, the deliveries)
        expected = sorted([x["physicalOffset"] for x in man["messages"]]
                          + [d["physicalOffset"] for d in man.get("deliveredToRealTopic", [])])
        seen = [m.commit_log_offset for m in store.iter_commit_log(check_crc=True)]
        assert seen == expected
        assert store.get_min_phy_offset() == man["commitLogMinOffset"]
        assert store.get_max_phy_offset() == man["commitLogMaxOffset"]
        rep = store.recovery_report
        assert rep is not None and rep.process_offset == man["commitLogMaxOffset"] and rep.truncated_bytes == 0
    finally:
        store.shutdown()


@pytest.mark.parametrize("name", STORES)
def test_cq_units_and_queue_offsets(name: str, golden_copy, manifests) -> None:
    man = manifests[name]
    store = open_ro(golden_copy(name), name)
    try:
        for x in man["messages"]:
            cq = store.consume_queues[(x["topic"], x["queueId"])]
            assert cq.cq_type == x["cqType"]
            u = cq.get_unit(x["queueOffset"])
            assert u is not None, x["index"]
            assert (u.queue_offset, u.phy_offset, u.size, u.tags_code, u.batch_num) == \
                (x["queueOffset"], x["physicalOffset"], x["size"], x["tagsCode"], x["cqBatchNum"]), x["index"]
            if isinstance(cq, BatchConsumeQueue):
                assert u.store_time == x["storeTimestamp"] and u.compacted_offset == -1
        for d in man.get("deliveredToRealTopic", []):
            u = store.consume_queues[(d["topic"], d["queueId"])].get_unit(d["queueOffset"])
            assert u is not None and (u.phy_offset, u.size, u.tags_code) == \
                (d["physicalOffset"], d["size"], d["tagsCode"])
        for topic, queues in man["queues"].items():
            for qid, q in queues.items():
                qid = int(qid)
                assert store.get_min_offset_in_queue(topic, qid) == q["minOffset"], (topic, qid)
                assert store.get_max_offset_in_queue(topic, qid) == q["maxOffset"], (topic, qid)
                cq = store.consume_queues[(topic, qid)]
                assert cq.cq_type == q["cqType"]
                if q["cqType"] == "SimpleCQ":
                    assert cq.max_physic_end() == q["maxPhysicOffset"]
        assert set(store.consume_queues) == {(t, int(q)) for t, qs in man["queues"].items() for q in qs}
    finally:
        store.shutdown()


@pytest.mark.parametrize("name", STORES)
def test_get_messages_walks_every_queue(name: str, golden_copy, manifests) -> None:
    """Consuming every queue from 0 yields every logical message once, in offset order."""
    man = manifests[name]
    store = open_ro(golden_copy(name), name)
    try:
        by_phy = {x["physicalOffset"]: x for x in man["messages"]}
        for topic, queues in man["queues"].items():
            for qid, q in queues.items():
                offset, got = 0, []
                while True:
                    r = store.get_messages(topic, int(qid), offset, 7)
                    if r.status is not GetMessageStatus.FOUND:
                        assert r.status is GetMessageStatus.OFFSET_OVERFLOW_ONE
                        break
                    assert r.min_offset == q["minOffset"] and r.max_offset == q["maxOffset"]
                    got.extend(r.messages)
                    offset = r.next_begin_offset
                assert [m.queue_offset for m in got] == list(range(q["maxOffset"]))
                for m in got:
                    x = by_phy.get(m.commit_log_offset)
                    if x is None:  # a delivered timer message
                        continue
                    assert m.topic == topic and m.queue_id == int(qid)
                    if x.get("innerBatch"):
                        assert x["queueOffset"] <= m.queue_offset < x["queueOffset"] + x["innerNum"]
                        assert m.sys_flag & 0xC0 == 0
                    else:
                        assert m.queue_offset == x["queueOffset"]
                        assert m.body == base64.b64decode(x["body"])
    finally:
        store.shutdown()


def test_batch_cq_lookups(golden_copy, manifests) -> None:
    man = manifests["store-batchcq"]
    store = open_ro(golden_copy("store-batchcq"), "store-batchcq")
    try:
        assert len(man["batchCqLookups"]) == 95
        for lk in man["batchCqLookups"]:
            cq = store.consume_queues[("GoldenBatchTopic", lk["queueId"])]
            assert isinstance(cq, BatchConsumeQueue)
            u = cq.get_unit(lk["lookupOffset"])
            assert u is not None, lk
            assert (u.queue_offset, u.phy_offset, u.size, u.tags_code, u.batch_num, u.compacted_offset) == \
                (lk["unitQueueOffset"], lk["pos"], lk["size"], lk["tagsCode"], lk["batchNum"],
                 lk["compactedOffset"]), lk
            # reading from the lookup offset lands on exactly that message
            r = store.get_messages("GoldenBatchTopic", lk["queueId"], lk["lookupOffset"], 1)
            assert r.status is GetMessageStatus.FOUND and r.messages[0].queue_offset == lk["lookupOffset"]
            assert r.messages[0].commit_log_offset == lk["pos"]
        for qid in (0, 1):
            cq = store.consume_queues[("GoldenBatchTopic", qid)]
            assert cq.get_unit(cq.get_max_offset_in_queue()) is None
            assert cq.file_count() == 2
        inner = [x for x in man["messages"] if x.get("innerBatch")]
        assert len(inner) == 21 and all(x["sysFlag"] & 0x80 for x in inner)
    finally:
        store.shutdown()


def test_key_queries(golden_copy, manifests) -> None:
    man = manifests["store-basic"]
    store = open_ro(golden_copy("store-basic"), "store-basic")
    try:
        assert len(store.index_service.files) == 3
        for kq in man["keyQueries"]:
            assert kq["indexServiceIsExact"]
            got = store.query_offsets_by_key(kq["topic"], kq["key"])
            assert got == kq["indexServicePhysicalOffsets"] == kq["expectedPhysicalOffsets"], kq
            msgs = store.query_message(kq["topic"], kq["key"])
            assert [m.commit_log_offset for m in msgs] == kq["expectedPhysicalOffsets"]
            for m in msgs:
                assert m.topic == kq["topic"]
                assert m.uniq_key == kq["key"] or kq["key"] in (m.keys or "").split(" ")
    finally:
        store.shutdown()


def test_timer_store_pending_messages(golden_copy, manifests) -> None:
    man = manifests["store-timer"]
    store = open_ro(golden_copy("store-timer"), "store-timer")
    try:
        delivered = {d["uniqKey"] for d in man["deliveredToRealTopic"]}
        pending = [x for x in man["messages"] if x["uniqKey"] not in delivered]
        assert len(pending) == 6 and len(delivered) == 4
        for x in man["messages"]:
            m = store.look_message_by_offset(x["physicalOffset"])
            assert m is not None and m.topic == "rmq_sys_wheel_timer" and m.queue_id == 0
            assert m.get_property("TIMER_OUT_MS") == str(x["timerOutMs"])
            assert m.get_property("REAL_TOPIC") == x["realTopic"] == "GoldenTimerTopic"
            assert m.get_property("REAL_QID") == str(x["realQueueId"])
            assert int(m.get_property("TIMER_DELIVER_MS")) == x["requestedDeliverMs"]
        r = store.get_messages("rmq_sys_wheel_timer", 0, 0, 32)
        assert r.status is GetMessageStatus.FOUND and len(r.messages) == 10
        for d in man["deliveredToRealTopic"]:
            m = store.look_message_by_offset(d["physicalOffset"])
            assert m is not None and m.topic == d["topic"] and m.queue_id == d["queueId"]
            assert m.properties == d["properties"] and m.store_timestamp == d["storeTimestamp"]
            assert m.body_crc == int(d["bodyCrc32"]) & 0x7FFFFFFF
    finally:
        store.shutdown()


@pytest.mark.parametrize("name", STORES)
def test_read_only_open_writes_nothing(name: str, golden_copy, manifests) -> None:
    root = golden_copy(name)
    before = tree_state(root)
    store = open_ro(root, name)
    for x in manifests[name]["messages"][:20]:
        store.look_message_by_offset(x["physicalOffset"])
    for topic, queues in manifests[name]["queues"].items():
        for qid in queues:
            store.get_messages(topic, int(qid), 0, 100)
    store.query_message("GoldenTopicA", "hot")
    store.shutdown()
    assert tree_state(root) == before
    assert not (root / "abort").exists()


def test_read_only_open_after_crash_does_not_recover_on_disk(golden_copy, manifests) -> None:
    """An ``abort`` file (broker running or crashed) makes the reader recover in memory only."""
    root = golden_copy("store-basic")
    (root / "abort").write_text("12345")
    before = tree_state(root)
    store = open_ro(root, "store-basic")
    try:
        assert store.recovery_report.abnormal
        assert store.get_max_offset_in_queue("GoldenTopicA", 0) == 25
        assert len(store.query_offsets_by_key("GoldenTopicA", "hot")) == 16
    finally:
        store.shutdown()
    assert tree_state(root) == before


def _index_entries_base(hash_slot_num: int) -> int:
    return 40 + hash_slot_num * 4


def test_key_queries_find_every_message_when_an_older_index_file_is_damaged(golden_copy, manifests) -> None:
    """A clean store whose middle index file lost a header update (one entry behind its entries): the
    read-only open may not load that file or the newer one, but its key queries must still find every
    message (they silently missed all those files held: 180 of the 325 manifest queries)."""
    man = manifests["store-basic"]
    root = golden_copy("store-basic")
    middle = sorted((root / "index").iterdir())[1]
    data = bytearray(middle.read_bytes())
    struct.pack_into(">i", data, 36, struct.unpack_from(">i", data, 36)[0] - 1)  # indexCount, one behind
    middle.write_bytes(data)
    before = tree_state(root)
    store = open_ro(root, "store-basic")
    try:
        assert store.index_service.damaged_files
        for kq in man["keyQueries"]:
            got = [m.commit_log_offset for m in store.query_message(kq["topic"], kq["key"])]
            assert got == kq["expectedPhysicalOffsets"], kq
    finally:
        store.shutdown()
    assert tree_state(root) == before


def test_an_index_entry_pointing_inside_a_record_is_skipped_not_blamed_on_the_commitlog(golden_copy,
                                                                                       manifests) -> None:
    """One bad entry made the whole query fail with "corrupt data in commitlog/... at offset 7" (the
    commitlog is intact); Apache's queryMessage skips a candidate it cannot read."""
    man = manifests["store-basic"]
    settings = man["settings"]
    root = golden_copy("store-basic")
    first = sorted((root / "index").iterdir())[0]
    data = bytearray(first.read_bytes())
    base = _index_entries_base(settings["maxHashSlotNum"])
    key_hash = index_key_hash("GoldenTopicA#key-0")
    count = struct.unpack_from(">i", data, 36)[0]
    bent = 0
    for n in range(1, count):
        h, phy, diff, prev = struct.unpack_from(">iqii", data, base + n * 20)
        if h == key_hash:
            struct.pack_into(">iqii", data, base + n * 20, h, 7, diff, prev)
            bent += 1
    assert bent == 1
    first.write_bytes(data)
    store = open_ro(root, "store-basic")
    try:
        assert store.query_message("GoldenTopicA", "key-0") == []
        hot = next(kq for kq in man["keyQueries"] if kq["key"] == "hot")
        assert [m.commit_log_offset for m in store.query_message("GoldenTopicA", "hot")] == \
            hot["expectedPhysicalOffsets"]
    finally:
        store.shutdown()


def test_a_truncated_index_file_is_damage_not_another_geometry(golden_copy, manifests) -> None:
    """One index file cut short beside whole ones: every open refused the store, telling the operator
    to give --config with maxHashSlotNum/maxIndexNum (already given). It is damage: read-only opens
    answer from the commitlog, a writable open moves the files aside and rebuilds them."""
    man = manifests["store-basic"]
    root = golden_copy("store-basic")
    middle = sorted((root / "index").iterdir())[1]
    with middle.open("r+b") as f:
        f.truncate(4000)
    store = open_ro(root, "store-basic")
    try:
        assert store.index_service.damaged_files[0].startswith(f"{middle.name}: 4000 bytes, expected ")
        for kq in man["keyQueries"]:
            assert [m.commit_log_offset for m in store.query_message(kq["topic"], kq["key"])] == \
                kq["expectedPhysicalOffsets"], kq
    finally:
        store.shutdown()
    config = StoreConfig.from_properties(golden_store_config("store-basic"))
    MessageStore(root, config).open().shutdown()
    assert (root / "lost+found" / "index" / middle.name).stat().st_size == 4000
    store = open_ro(root, "store-basic")
    try:
        assert not store.index_service.damaged_files
        for kq in man["keyQueries"]:
            assert store.query_offsets_by_key(kq["topic"], kq["key"]) == kq["expectedPhysicalOffsets"], kq
    finally:
        store.shutdown()
