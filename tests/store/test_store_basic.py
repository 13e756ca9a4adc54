"""MessageStore behaviour with small files: append, read, statuses, lookups, flush, config, locking.

Why: the golden tests pin the bytes of one fixed run; these pin the behaviour around it — rolling
files with blank tails, batches, inner-batch unwrapping, time and key lookups, group commit, the
config files operators bring, and the one-writer rule for a store directory.
"""

from __future__ import annotations

import json
import os
import random
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from store_util import BASE_TS, FakeClock, make_msg, small_config

from broker_core.store.codec.batch import BatchItem, encode_batch
from broker_core.store.codec.message import BLANK_MAGIC_CODE, RECORD_VALID, check_record
from broker_core.store.commit_log import PutMessageStatus
from broker_core.store.config_file import read_config_json, write_config_json
from broker_core.store.message_store import GetMessageStatus, MessageStore
from broker_core.store.store_config import ASYNC_FLUSH, SYNC_FLUSH, StoreConfig
from broker_core.store.store_lock import StoreLockedError
from broker_core.store.topic_config import TopicConfig

HERE = Path(__file__).resolve().parent
BATCH_TOPIC = "BatchT"


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(step=1)


def open_store(root: Path, clock: FakeClock | None = None, **over: object) -> MessageStore:
    return MessageStore(root, small_config(**over), clock=clock or FakeClock(step=1)).open()


def walk_file(data: memoryview, file_size: int) -> tuple[list[int], int, int | None]:
    """Record positions, the end of the last record, and the blank's size field (None if no blank)."""
    pos, starts = 0, []
    while True:
        rc = check_record(data, pos, file_size)
        if rc.kind != RECORD_VALID:
            break
        starts.append(pos)
        pos += rc.size
    blank = None
    if pos + 8 <= file_size and struct.unpack_from(">i", data, pos + 4)[0] == BLANK_MAGIC_CODE:
        blank = struct.unpack_from(">i", data, pos)[0]
    return starts, pos, blank


class TagFilter:
    def __init__(self, code: int) -> None:
        self.code = code

    def is_matched_by_consume_queue(self, tags_code: int) -> bool:
        return tags_code == self.code

    def is_matched_by_commit_log(self, properties: dict[str, str]) -> bool:
        return True


# ---------------------------------------------------------------- append / read


def test_put_get_across_file_boundaries(tmp_path: Path, clock: FakeClock) -> None:
    rnd = random.Random(7)
    store = open_store(tmp_path, clock)
    sent: dict[tuple[str, int], list[tuple[bytes, str]]] = {}
    results = []
    for i in range(160):
        topic, qid = ("TopA", i % 3) if i % 2 else ("TopB", 0)
        body = rnd.randbytes(rnd.choice([0, 1, 50, 300, 900, 1500]))
        r = store.put_message(make_msg(topic, qid, body, key=f"key{i}", tags=f"tag{i % 5}"))
        assert r.ok and r.queue_offset == len(sent.get((topic, qid), []))
        sent.setdefault((topic, qid), []).append((body, r.msg_id))
        results.append(r)
    fs = 4096
    files = store.commit_log.file_queue.files
    assert len(files) >= 8
    # every record starts where the previous one ended, or at the start of the next file
    for prev, cur in zip(results, results[1:], strict=False):
        end = prev.wrote_offset + prev.wrote_bytes
        assert cur.wrote_offset == end or (cur.wrote_offset % fs == 0 and cur.wrote_offset > end)
    # every full file ends with a BLANK whose size covers the rest of the file, >= 8 bytes
    for mf in files[:-1]:
        starts, end, blank = walk_file(mf.mv, fs)
        assert starts and blank == fs - end and blank >= 8, mf.path.name
    for (topic, qid), items in sent.items():
        r = store.get_messages(topic, qid, 0, 1000)
        assert r.status is GetMessageStatus.FOUND and r.next_begin_offset == len(items) == r.max_offset
        assert [m.body for m in r.messages] == [b for b, _ in items]
        assert [m.msg_id for m in r.messages] == [mid for _, mid in items]
        assert [m.queue_offset for m in r.messages] == list(range(len(items)))
    store.shutdown()
    # a clean reopen recovers the same state (normal recovery)
    store = open_store(tmp_path, clock)
    try:
        assert not store.recovery_report.abnormal
        for (topic, qid), items in sent.items():
            assert store.get_max_offset_in_queue(topic, qid) == len(items)
            r = store.get_messages(topic, qid, len(items) - 1, 10)
            assert r.messages[0].body == items[-1][0]
        r = store.put_message(make_msg("TopB", 0, b"after-reopen"))
        assert r.queue_offset == len(sent[("TopB", 0)])
    finally:
        store.shutdown()


def test_a_truncated_first_commitlog_file_is_named_against_the_others(tmp_path: Path, clock: FakeClock) -> None:
    """The store takes its file size from its first commitlog file (an existing store's sizes win over
    the config): with that file truncated, the refusal said the next, intact file "differs from the
    configured file size", sending the operator to a config that was never the cause."""
    store = open_store(tmp_path, clock)
    while len(store.commit_log.file_queue.files) < 3:
        assert store.put_message(make_msg("T", 0, b"x" * 900)).ok
    store.shutdown()
    first, second = sorted((tmp_path / "commitlog").iterdir())[:2]
    os.truncate(first, 1000)
    with pytest.raises(ValueError) as refused:
        open_store(tmp_path, clock)
    assert str(refused.value) == (
        f"{second}: length 4096 differs from the 1000 bytes of {first.name}, the first file of this log (its "
        "files are all one size): one of them was truncated or extended, or they were written with different "
        "mappedFileSize*")
    assert second.stat().st_size == 4096  # refused before any file was opened to write


def test_exploded_batch_stays_in_one_file(tmp_path: Path, clock: FakeClock) -> None:
    store = open_store(tmp_path, clock)
    try:
        r = store.put_message(make_msg("Ex", 0, b"x" * 3500))
        assert r.ok and r.wrote_offset == 0
        batch = [make_msg("Ex", 0, b"item-%d" % i + b"." * 40, key=f"item{i}") for i in range(10)]
        r = store.put_messages(batch)  # ~1.3 KiB: does not fit the ~500 bytes left in file 0
        assert r.ok and r.wrote_offset == 4096 and r.queue_offset == 1 and r.msg_num == 10
        ids = r.msg_id.split(",")
        assert len(ids) == 10 == len(r.msg_ids)
        phys = [store.look_message_by_offset(int(i[16:], 16)).commit_log_offset for i in ids]
        assert phys[0] == 4096 and all(p // 4096 == 1 for p in phys)
        msgs = [store.look_message_by_offset(p) for p in phys]
        for a, b in zip(msgs, msgs[1:], strict=False):
            assert b.commit_log_offset == a.commit_log_offset + a.store_size
        assert [m.queue_offset for m in msgs] == list(range(1, 11))
        assert len({m.store_timestamp for m in msgs}) == 1
        _, end, blank = walk_file(store.commit_log.file_queue.files[0].mv, 4096)
        assert blank == 4096 - end
        got = store.get_messages("Ex", 0, 1, 100)
        assert [m.body for m in got.messages] == [m.body for m in batch]
        too_big = [make_msg("Ex", 0, b"y" * 1000) for _ in range(5)]
        assert store.put_messages(too_big).status is PutMessageStatus.MESSAGE_ILLEGAL
    finally:
        store.shutdown()


def _batch_store(tmp_path: Path, clock: FakeClock) -> MessageStore:
    store = open_store(tmp_path, clock)
    store.topic_table.put(TopicConfig(BATCH_TOPIC, 2, 2, attributes={"queue.type": "BatchCQ"}), 0)
    return store


def _put_batch(store: MessageStore, qid: int, items: list[BatchItem], tags: str = "bt"):
    msg = make_msg(BATCH_TOPIC, qid, encode_batch(items), tags=tags, uniq=f"U{qid}-{len(items)}-{items[0].flag}")
    return store.put_inner_batch(msg, len(items))


def test_inner_batch_unwrap_exact_offsets(tmp_path: Path, clock: FakeClock) -> None:
    store = _batch_store(tmp_path, clock)
    try:
        sizes = [3, 5, 1, 7, 2, 4, 6, 1, 3, 8, 2, 5]
        expected: list[BatchItem] = []
        for n, size in enumerate(sizes):
            items = [BatchItem(b"b%d-i%d" % (n, j), {"TAGS": "inner", "seq": str(len(expected) + j)}, j + 100 * n)
                     for j in range(size)]
            r = _put_batch(store, 0, items)
            assert r.ok and r.queue_offset == len(expected) and r.msg_num == size
            expected.extend(items)
        cq = store.consume_queues[(BATCH_TOPIC, 0)]
        assert cq.cq_type == "BatchCQ" and cq.file_count() == 2
        assert store.get_max_offset_in_queue(BATCH_TOPIC, 0) == len(expected)
        for off in range(len(expected)):
            r = store.get_messages(BATCH_TOPIC, 0, off, 1)
            assert r.status is GetMessageStatus.FOUND and len(r.messages) == 1, off
            m = r.messages[0]
            assert m.queue_offset == off and r.next_begin_offset == off + 1
            assert (m.body, m.flag, m.properties) == (expected[off].body, expected[off].flag, expected[off].properties)
            assert m.sys_flag & 0xC0 == 0 and m.topic == BATCH_TOPIC
        r = store.get_messages(BATCH_TOPIC, 0, 4, 1000)
        assert [m.queue_offset for m in r.messages] == list(range(4, len(expected)))
        r = store.get_messages(BATCH_TOPIC, 0, 5, 6)  # ends inside a batch
        assert [m.queue_offset for m in r.messages] == list(range(5, 11)) and r.next_begin_offset == 11
        # the record keeps INNER_NUM/INNER_BASE and the flag
        raw = store.look_message_by_offset(store.consume_queues[(BATCH_TOPIC, 0)].get_unit(9).phy_offset)
        assert raw.sys_flag & 0x80 and raw.get_property("INNER_NUM") == "7" and raw.get_property("INNER_BASE") == "9"
        # a plain message on a BatchCQ topic takes one offset
        r = store.put_message(make_msg(BATCH_TOPIC, 0, b"single"))
        assert r.queue_offset == len(expected)
        assert store.get_messages(BATCH_TOPIC, 0, len(expected), 5).messages[0].body == b"single"
    finally:
        store.shutdown()


def test_get_message_statuses(tmp_path: Path, clock: FakeClock) -> None:
    store = open_store(tmp_path, clock)
    try:
        assert store.get_messages("Nope", 0, 0, 1).status is GetMessageStatus.NO_MATCHED_LOGIC_QUEUE
        for i in range(40):
            store.put_message(make_msg("St", 0, b"z" * 300, tags="keep" if i == 39 else "drop"))
        r = store.get_messages("St", 0, 40, 1)
        assert r.status is GetMessageStatus.OFFSET_OVERFLOW_ONE and r.next_begin_offset == 40
        r = store.get_messages("St", 0, 41, 1)
        assert r.status is GetMessageStatus.OFFSET_OVERFLOW_BADLY and r.next_begin_offset == 40
        from broker_core.store.codec.hashing import tags_code

        r = store.get_messages("St", 0, 0, 5, TagFilter(tags_code("none")))
        assert r.status is GetMessageStatus.NO_MATCHED_MESSAGE and r.next_begin_offset > 0
        r = store.get_messages("St", 0, 0, 5, TagFilter(tags_code("keep")))
        assert r.status is GetMessageStatus.FOUND and [m.queue_offset for m in r.messages] == [39]
        # retention deletes the oldest commitlog files: the queue's min offset moves up
        store.retention.mtime_of = lambda p: 0
        rep = store.delete_expired_files(force=True)
        assert rep.deleted_commit_log_files and rep.commit_log_min_offset > 0
        min_off = store.get_min_offset_in_queue("St", 0)
        assert min_off > 0
        r = store.get_messages("St", 0, 0, 1)
        assert r.status is GetMessageStatus.OFFSET_TOO_SMALL and r.next_begin_offset == min_off
        r = store.get_messages("St", 0, min_off, 1)
        assert r.status is GetMessageStatus.FOUND and r.messages[0].commit_log_offset >= rep.commit_log_min_offset
    finally:
        store.shutdown()


def test_query_by_key_and_uniq_key(tmp_path: Path, clock: FakeClock) -> None:
    store = open_store(tmp_path, clock)
    try:
        offs = {}
        for i in range(120):  # > maxIndexNum entries: several index files
            r = store.put_message(make_msg("Q", i % 2, b"q%d" % i, key=f"k{i} shared{i % 7}", uniq=f"UNIQ{i:04d}"))
            offs[i] = r.wrote_offset
        assert len(store.index_service.files) > 1
        assert [m.commit_log_offset for m in store.query_message("Q", "k5")] == [offs[5]]
        assert [m.body for m in store.query_message("Q", "UNIQ0042")] == [b"q42"]
        assert sorted(m.commit_log_offset for m in store.query_message("Q", "shared3")) == \
            sorted(offs[i] for i in range(120) if i % 7 == 3)
        assert store.query_message("Q", "missing") == []
        assert store.query_message("Other", "k5") == []
        assert store.query_offsets_by_key("Q", "k5") == [offs[5]]
        ts = store.look_message_by_offset(offs[100]).store_timestamp
        assert all(m.store_timestamp >= ts for m in store.query_message("Q", "shared2", begin=ts))
    finally:
        store.shutdown()


def test_offset_by_time_simple_cq(tmp_path: Path) -> None:
    clock = FakeClock(step=0)
    store = open_store(tmp_path, clock)
    try:
        times = []
        for i in range(50):  # crosses CQ files (16 units each); two messages share each timestamp
            if i % 2 == 0:
                clock.advance(1000)
            store.put_message(make_msg("Tm", 0, b"t%d" % i))
            times.append(clock.now)
        for i, t in enumerate(times):
            first = times.index(t)
            assert store.get_offset_in_queue_by_time("Tm", 0, t) == first, i
            assert store.get_offset_in_queue_by_time("Tm", 0, t, "upper") == len(times) - 1 - times[::-1].index(t)
            assert store.get_offset_in_queue_by_time("Tm", 0, t - 500) == first
        assert store.get_offset_in_queue_by_time("Tm", 0, 0) == 0
        assert store.get_offset_in_queue_by_time("Tm", 0, times[-1] + 1) == 50
        assert store.get_offset_in_queue_by_time("Tm", 0, times[-1] + 1, "upper") == 49
    finally:
        store.shutdown()


def test_offset_by_time_batch_cq_is_exact(tmp_path: Path) -> None:
    """A reset by time must land on the exact message, also inside inner batches."""
    clock = FakeClock(step=0)
    store = _batch_store(tmp_path, clock)
    try:
        spans = []  # (base, n, store time)
        base = 0
        for n in [4, 1, 6, 3, 5, 2, 7, 1, 4, 3, 2]:  # 11 units: 2 BCQ files
            clock.advance(1000)
            r = _put_batch(store, 1, [BatchItem(b"%d" % j) for j in range(n)])
            assert r.queue_offset == base
            spans.append((base, n, clock.now))
            base += n
        assert store.consume_queues[(BATCH_TOPIC, 1)].file_count() == 2
        for b, n, t in spans:
            # LOWER: the first message stored at/after t is the batch's first item
            assert store.get_offset_in_queue_by_time(BATCH_TOPIC, 1, t) == b
            assert store.get_offset_in_queue_by_time(BATCH_TOPIC, 1, t - 1) == b
            # UPPER: the last message stored at/before t is the batch's last item
            assert store.get_offset_in_queue_by_time(BATCH_TOPIC, 1, t, "upper") == b + n - 1
            assert store.get_offset_in_queue_by_time(BATCH_TOPIC, 1, t + 1, "upper") == b + n - 1
            off = store.get_offset_in_queue_by_time(BATCH_TOPIC, 1, t)
            r = store.get_messages(BATCH_TOPIC, 1, off, 1)
            assert r.messages[0].queue_offset == b and r.messages[0].store_timestamp == t
        assert store.get_offset_in_queue_by_time(BATCH_TOPIC, 1, spans[-1][2] + 1) == base
        assert store.get_offset_in_queue_by_time(BATCH_TOPIC, 1, spans[-1][2] + 1, "upper") == base - 1
        assert store.get_offset_in_queue_by_time(BATCH_TOPIC, 1, 0) == 0
    finally:
        store.shutdown()


def test_max_message_size_rejected_nothing_stored(tmp_path: Path, clock: FakeClock) -> None:
    store = open_store(tmp_path, clock, max_message_size=1000)
    try:
        r = store.put_message(make_msg("Big", 0, b"x" * 1001))
        assert r.status is PutMessageStatus.MESSAGE_ILLEGAL and not r.ok
        assert store.get_max_phy_offset() == 0 and store.get_max_offset_in_queue("Big", 0) == 0
        assert not list((tmp_path / "commitlog").glob("*")) if (tmp_path / "commitlog").exists() else True
        r = store.put_message(make_msg("Big", 0, b"x" * 1000))
        assert r.ok and r.queue_offset == 0 and r.wrote_offset == 0
        r = store.put_message(make_msg("Big", 0, b"", **{"p": "v" * 40000}))
        assert r.status is PutMessageStatus.PROPERTIES_SIZE_EXCEEDED
        assert store.get_max_offset_in_queue("Big", 0) == 1
    finally:
        store.shutdown()


# ---------------------------------------------------------------- flushing


def test_sync_flush_group_commit(tmp_path: Path) -> None:
    store = MessageStore(tmp_path, small_config(flush_disk_type=SYNC_FLUSH,
                                                mapped_file_size_commit_log=1 << 20)).open()
    store.start()
    errors: list[object] = []
    per_thread = 40

    def producer(t: int) -> None:
        for i in range(per_thread):
            r = store.put_message(make_msg("Sync", t % 4, b"s" * 200, key=f"s{t}-{i}"))
            if not r.ok:
                errors.append(r)
            elif store.commit_log.flushed_offset < r.wrote_offset + r.wrote_bytes:
                errors.append(("acked before flushed", r.wrote_offset))

    threads = [threading.Thread(target=producer, args=(t,)) for t in range(16)]
    try:
        for th in threads:
            th.start()
        for th in threads:
            th.join(30)
        assert not errors
        puts = 16 * per_thread
        fsyncs = store.commit_log.fsync_count
        assert 0 < fsyncs < puts, (fsyncs, puts)
        assert store.wait_for_dispatch()
        assert sum(store.get_max_offset_in_queue("Sync", q) for q in range(4)) == puts
    finally:
        store.shutdown()


def test_async_flush_acks_before_fsync(tmp_path: Path) -> None:
    store = MessageStore(tmp_path, small_config(flush_disk_type=ASYNC_FLUSH, flush_interval_commit_log=10,
                                                flush_commit_log_least_pages=0)).open()
    store.start()
    try:
        before = store.commit_log.fsync_count
        results = [store.put_message(make_msg("As", 0, b"a" * 100)) for _ in range(30)]
        assert all(r.ok for r in results)
        assert store.commit_log.fsync_count - before < 30
        end = store.get_max_phy_offset()
        deadline = time.monotonic() + 5
        while store.commit_log.flushed_offset < end and time.monotonic() < deadline:
            time.sleep(0.005)
        assert store.commit_log.flushed_offset >= end
        assert store.wait_for_dispatch()
        assert store.get_max_offset_in_queue("As", 0) == 30
    finally:
        store.shutdown()


# ---------------------------------------------------------------- config files


def test_config_from_broker_conf(tmp_path: Path) -> None:
    conf = tmp_path / "broker.conf"
    conf.write_text("# broker.conf as operators write it\n"
                    "brokerClusterName = DefaultCluster\n"
                    "brokerName=broker-a\n"
                    "mappedFileSizeCommitLog=8192\n"
                    "mapperFileSizeBatchConsumeQueue=460\n"
                    "flushDiskType=SYNC_FLUSH\n"
                    "deleteWhen=04;16\n"
                    "fileReservedTime = 48\n"
                    "checkCRCOnRecover=false\n"
                    "messageIndexEnable=false\n"
                    "messageDelayLevel=1s 2s 1h\n")
    cfg = StoreConfig.load(conf, tmp_path / "store")
    assert cfg.mapped_file_size_commit_log == 8192 and cfg.mapper_file_size_batch_consume_queue == 460
    assert cfg.flush_disk_type == SYNC_FLUSH and cfg.delete_when == "04;16" and cfg.file_reserved_time == 48
    assert cfg.check_crc_on_recover is False and cfg.message_index_enable is False
    assert cfg.store_path_root_dir == str(tmp_path / "store")
    assert cfg.max_message_size == 4 * 1024 * 1024  # untouched default
    store = MessageStore(tmp_path / "store", cfg).open()
    try:
        assert store.delay_levels_ms == [1000, 2000, 3_600_000]
        store.put_message(make_msg("C", 0, b"c"))
        assert (tmp_path / "store" / "commitlog" / ("0" * 20)).stat().st_size == 8192
        assert store.index_service.files == []  # messageIndexEnable=false
    finally:
        store.shutdown()
    bad = tmp_path / "bad.conf"
    bad.write_text("fileReservedTime=soon\n")
    with pytest.raises(ValueError, match="fileReservedTime"):
        StoreConfig.load(bad)


def test_java_dialect_config_json_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "config" / "consumerOffset.json"
    value = {"offsetTable": {"TopicTest@g": {0: 250, 1: 251}, "%RETRY%g@g": {0: 0}},
             "note": "a string with {0:1, 2:3} inside"}
    write_config_json(path, value)
    text = path.read_text(encoding="utf-8")
    assert "\t\t\t0:250" in text and '"0"' not in text.split('"note"')[0]
    assert '"note":"a string with {0:1, 2:3} inside"' in text and not text.endswith("\n")
    with pytest.raises(json.JSONDecodeError):
        json.loads(text)  # really the Java dialect, not standard JSON
    back = read_config_json(path)
    assert back == {"offsetTable": {"TopicTest@g": {"0": 250, "1": 251}, "%RETRY%g@g": {"0": 0}},
                    "note": "a string with {0:1, 2:3} inside"}
    # what fastjson writes is read, also compact and with negative keys
    path.write_text('{"offsetTable":{"T@g":{0:5,-1:7}},"dataVersion":{"counter":1}}')
    assert read_config_json(path)["offsetTable"]["T@g"] == {"0": 5, "-1": 7}
    assert read_config_json(tmp_path / "missing.json") is None


def test_atomic_write_leaves_old_or_new(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "topics.json"
    write_config_json(path, {"v": 1})
    assert read_config_json(path) == {"v": 1}
    import broker_core.store.config_file as cf

    real_replace = os.replace

    def crash_on_final_rename(src, dst):
        if Path(dst) == path:
            raise OSError("simulated crash before the rename")
        return real_replace(src, dst)

    monkeypatch.setattr(cf.os, "replace", crash_on_final_rename)
    with pytest.raises(OSError):
        write_config_json(path, {"v": 2})
    assert read_config_json(path) == {"v": 1}  # old content intact
    monkeypatch.setattr(cf.os, "replace", real_replace)
    write_config_json(path, {"v": 3})
    assert read_config_json(path) == {"v": 3}
    assert read_config_json(path.with_name("topics.json.bak")) == {"v": 1}


# ---------------------------------------------------------------- locking


def test_lock_held_by_another_process(tmp_path: Path) -> None:
    root = tmp_path / "store"
    proc = subprocess.Popen([sys.executable, str(HERE / "store_util.py"), "hold", str(root)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "ready"
        with pytest.raises(StoreLockedError):
            MessageStore(root, small_config()).open()
        assert (root / "abort").exists()  # the writer is running: the lock was not disturbed
        # a read-only open beside the live writer works and sees its data
        ro = MessageStore(root, small_config(), read_only=True).open()
        try:
            assert ro.recovery_report.abnormal
            r = ro.get_messages("Held", 0, 0, 10)
            assert [m.body for m in r.messages] == [b"held-%d" % i for i in range(5)]
            assert [m.body for m in ro.query_message("Held", "held3")] == [b"held-3"]
            assert not ro.put_message(make_msg("Held", 0, b"no")).ok
        finally:
            ro.shutdown()
    finally:
        proc.stdin.close()
        proc.wait(20)
    assert proc.returncode == 0
    assert not (root / "abort").exists()
    store = MessageStore(root, small_config()).open()  # the lock is free again
    try:
        assert store.get_max_offset_in_queue("Held", 0) == 5
    finally:
        store.shutdown()


def test_second_writable_open_in_same_process_fails(tmp_path: Path) -> None:
    store = open_store(tmp_path)
    try:
        with pytest.raises(StoreLockedError):
            open_store(tmp_path)
    finally:
        store.shutdown()
    open_store(tmp_path).shutdown()


def test_store_time_is_taken_from_the_injected_clock(tmp_path: Path) -> None:
    clock = FakeClock(BASE_TS + 5, step=0)
    store = open_store(tmp_path, clock)
    try:
        r = store.put_message(make_msg("Clk", 0, b"c"))
        assert r.store_timestamp == BASE_TS + 5
        assert store.look_message_by_offset(r.wrote_offset).store_timestamp == BASE_TS + 5
    finally:
        store.shutdown()


def test_verify_accepts_a_deleted_topics_records_the_dispatch_filter_kept_out_of_the_index(tmp_path: Path) -> None:
    """Records of a deleted topic that dispatch reaches only after the deletion (a recovery
    re-dispatching them) are filtered out of their queue and of the index, as ``RecordFilter`` says;
    verifyStore counted their keys as missing index entries, on a store with nothing wrong."""
    from broker_core.store.verify import verify_store

    store = open_store(tmp_path / "s")
    store.put_message(make_msg("Kept", 0, b"k", key="kept-key"))
    store.dispatch_filter = lambda topic, offset: topic != "Gone"
    for i in range(3):
        store.put_message(make_msg("Gone", 0, b"g%d" % i, key=f"gone-{i}"))
    cut = store.get_max_phy_offset()
    store.put_message(make_msg("Kept", 0, b"k2", key="kept-key"))  # dispatch went on past them
    store.shutdown()
    store = open_store(tmp_path / "s")  # (verify checks what was dispatched when the store opened)
    report = verify_store(store, deleted_topics={"Gone": cut})
    assert report.issues == [] and report.deleted_topic_records == 3
    assert [m.body for m in store.query_message("Kept", "kept-key")] == [b"k", b"k2"]
    store.shutdown()


def test_a_put_reaching_a_closed_commitlog_is_refused_and_writes_nothing(tmp_path: Path) -> None:
    """A put that passed the store's open check just before shutdown closed the commitlog (a request a
    server thread was still running) found no file, made file 0 again and wrote its record at offset
    0, over the first records: the next open cut the log there. Now the closed file queue refuses to
    make a file and the put is refused."""
    store = open_store(tmp_path / "s")
    for i in range(5):
        assert store.put_message(make_msg("T", 0, b"m%d" % i)).ok
    first = (tmp_path / "s" / "commitlog" / "00000000000000000000").read_bytes()
    store.shutdown()
    r = store.commit_log.put_message(make_msg("T", 0, b"late"))
    assert r.status is PutMessageStatus.SERVICE_NOT_AVAILABLE and "shut down" in r.remark
    assert (tmp_path / "s" / "commitlog" / "00000000000000000000").read_bytes() == first
    reopened = open_store(tmp_path / "s")
    assert [m.body for m in reopened.get_messages("T", 0, 0, 10).messages] == [b"m%d" % i for i in range(5)]
    reopened.shutdown()
