"""Dispatch of records this process appended (from ``CommitLog.appended_records``) against dispatch
of the same records read back from the commitlog file.

Why: the append path hands dispatch the fields it already knows, and looks TAGS/KEYS/UNIQ_KEY up in
the message's dict instead of the encoded string. Consume queues, BatchCQ units and index files
must come out byte for byte as when the records are decoded from the file, including for properties
the dict and the string disagree on (separators inside values, None values), delay-level tagsCodes,
transactions and inner batches. Large records go in with pwritev: the file must hold exactly the
bytes ``encode_record`` gives.
"""

from __future__ import annotations

import collections
from pathlib import Path

from store_util import BASE_TS, FakeClock, make_msg, small_config

from broker_core.store.codec.batch import BatchItem, encode_batch
from broker_core.store.codec.message import MessageInner, encode_record
from broker_core.store.codec.sys_flag import TRANSACTION_PREPARED_TYPE
from broker_core.store.commit_log import DIRECT_WRITE_MIN
from broker_core.store.message_store import MessageStore
from broker_core.store.topic_config import TopicConfig

BATCH_TOPIC = "BatchT"


def messages() -> list[tuple[str, object]]:
    """(kind, payload) steps covering every way the dict and the encoded string can relate."""
    steps: list[tuple[str, object]] = []
    for i in range(60):
        steps.append(("one", make_msg("T", i % 3, b"b%d" % i, key=f"k{i} k{i}b", tags=f"tag{i % 4}", uniq=f"U{i}")))
    # A value or a key holding the separators would be parsed back as other properties: refused
    # before anything is written (issue 11 item 9), so neither path ever sees one.
    steps.append(("refused", make_msg("T", 0, b"sep", key="plain", uniq="Usep", NOTE="x\x02KEYS\x01evil")))
    sneaky = make_msg("T", 1, b"sneaky", uniq="Usneaky")
    sneaky.properties["KEYS\x01sneaky"] = "v"
    steps.append(("refused", sneaky))
    odd = make_msg("T", 1, b"none", key="kn", uniq="Unone")
    odd.properties["GONE"] = None  # type: ignore[assignment]  # skipped when encoding, as Java skips nulls
    steps.append(("one", odd))
    steps.append(("one", make_msg("T", 2, b"empty", key="", uniq="Uempty", tags="")))
    steps.append(("one", make_msg("SCHEDULE_TOPIC_XXXX", 2, b"delayed", uniq="Udelay", DELAY="3",
                                  REAL_TOPIC="T", REAL_QID="0")))
    prepared = make_msg("T", 0, b"half", key="khalf", uniq="Uhalf")
    prepared.sys_flag |= TRANSACTION_PREPARED_TYPE
    steps.append(("one", prepared))
    steps.append(("batch", [make_msg("T", 1, b"e%d" % i, key=f"eb{i}", uniq=f"EB{i}") for i in range(5)]))
    steps.append(("strings", [make_msg("T", 2, b"s%d" % i, key="ignored", uniq="ignored") for i in range(3)]))
    for q in range(2):
        items = [BatchItem(b"i%d" % n, {"TAGS": "bt"}) for n in range(7)]
        steps.append(("inner", make_msg(BATCH_TOPIC, q, encode_batch(items), key=f"ib{q}", uniq=f"IB{q}", tags="bt")))
    # Inner batches whose dict and string disagree (a None value skipped) or with empty KEYS/TAGS.
    odd_inner = make_msg(BATCH_TOPIC, 0, encode_batch([BatchItem(b"o", {})]), key="ibodd", uniq="IBodd", tags="x")
    odd_inner.properties["GONE"] = None  # type: ignore[assignment]
    steps.append(("inner", odd_inner))
    steps.append(("inner", make_msg(BATCH_TOPIC, 1, encode_batch([BatchItem(b"e", {})]), key="", uniq="IBe", tags="")))
    steps.append(("one", make_msg("T", 0, b"x" * (DIRECT_WRITE_MIN * 3), key="big", uniq="Ubig")))
    return steps


def fill(root: Path, through_lane: bool, arrivals: list[tuple] | None = None) -> MessageStore:
    store = MessageStore(root, small_config(mapped_file_size_commit_log=64 * 1024), clock=FakeClock(step=1)).open()
    if arrivals is not None:  # what long polling is told: the queue's next offset after each record
        store.arrival_listeners.append(lambda *args: arrivals.append(args))
    if not through_lane:
        store.commit_log.appended_records = collections.deque(maxlen=0)  # every record is read back from the file
    store.topic_table.put(TopicConfig(BATCH_TOPIC, 2, 2, attributes={"queue.type": "BatchCQ"}), 0)
    for kind, payload in messages():
        if kind == "one":
            assert store.put_message(payload).ok  # type: ignore[arg-type]
        elif kind == "refused":
            assert store.put_message(payload).status == "MESSAGE_ILLEGAL"  # type: ignore[arg-type]
        elif kind == "batch":
            assert store.put_messages(payload).ok  # type: ignore[arg-type]
        elif kind == "strings":
            strings = [f"KEYS\x01sk{i}\x02UNIQ_KEY\x01SU{i}\x02" for i in range(3)]
            assert store.commit_log.put_messages(payload, strings).ok  # type: ignore[arg-type]
            store.reput.do_reput()
        else:
            assert store.put_inner_batch(payload, 7).ok  # type: ignore[arg-type]
    assert store.dispatch_behind_bytes() == 0
    return store


def tree_bytes(root: Path, sub: str) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted((root / sub).rglob("*")) if p.is_file()}


def test_dispatch_from_the_append_path_equals_dispatch_from_the_file(tmp_path: Path) -> None:
    lane_arrivals: list[tuple] = []
    file_arrivals: list[tuple] = []
    lane = fill(tmp_path / "lane", True, lane_arrivals)
    read_back = fill(tmp_path / "file", False, file_arrivals)
    try:
        assert lane_arrivals == file_arrivals
        # An inner batch of 7 moves its queue's next offset by 7 (queues 0, 1, then 0, 1 again).
        assert [(a[1], a[2]) for a in lane_arrivals if a[0] == BATCH_TOPIC] == [(0, 7), (1, 7), (0, 14), (1, 14)]
        for store in (lane, read_back):
            store.index_service.flush()
        assert tree_bytes(tmp_path / "lane", "commitlog") == tree_bytes(tmp_path / "file", "commitlog")
        cq = tree_bytes(tmp_path / "lane", "consumequeue")
        assert cq and cq == tree_bytes(tmp_path / "file", "consumequeue")
        bcq = tree_bytes(tmp_path / "lane", "batchconsumequeue")
        assert bcq and bcq == tree_bytes(tmp_path / "file", "batchconsumequeue")
        # Index file names are creation times; their contents must match in order.
        lane_index = list(tree_bytes(tmp_path / "lane", "index").values())
        assert len(lane_index) > 1 and lane_index == list(tree_bytes(tmp_path / "file", "index").values())
        # What a user sees of the odd cases: the string decides, as for a record read from disk.
        assert not lane.query_message("T", "evil") and not lane.query_message("T", "plain")  # refused, not stored
        assert lane.query_message("T", "sk1") and not lane.query_message("T", "ignored")
        delayed = lane.get_units("SCHEDULE_TOPIC_XXXX", 2, 0, 1)[0]  # level 3: due 10 s after storing
        assert delayed.tags_code == lane.look_message_by_offset(delayed.phy_offset).store_timestamp + 10_000
    finally:
        lane.shutdown()
        read_back.shutdown()


def test_large_records_are_the_bytes_encode_record_gives(tmp_path: Path) -> None:
    """Records at and above DIRECT_WRITE_MIN (pwritev) and below it (copy into the mapping), mixed,
    across commitlog file ends."""
    store = MessageStore(tmp_path, small_config(mapped_file_size_commit_log=256 * 1024),
                         clock=FakeClock(step=1)).open()
    try:
        sizes = [100, DIRECT_WRITE_MIN - 300, DIRECT_WRITE_MIN, 70_000, 5, 65_000, 90_000, 3000, 120_000, 1]
        puts = []
        for i, n in enumerate(sizes):
            msg = MessageInner(topic="Big", body=bytes([i % 251]) * n, properties={"UNIQ_KEY": f"B{i}"}, queue_id=0,
                               born_timestamp=BASE_TS, born_host=("10.0.0.9", 5555),
                               store_host=("::1", 10911) if i % 2 else ("127.0.0.1", 10911))
            result = store.put_message(msg)
            assert result.ok
            puts.append((msg, result))
        assert len(store.commit_log.file_queue.files) > 1
        for q, (msg, result) in enumerate(puts):
            expected = encode_record(msg, q, result.wrote_offset, result.store_timestamp)
            assert bytes(store.commit_log.get_data(result.wrote_offset, len(expected))) == bytes(expected)
    finally:
        store.shutdown()


def test_a_dispatch_filter_keeps_the_flat_path_and_still_filters(tmp_path: Path, monkeypatch) -> None:
    """The Broker's dispatch filter (deleted topics) takes the record's fields: with one set, appended
    records are still dispatched without a DispatchRequest, and the filtered ones reach no queue or index.
    """
    from broker_core.store import message_store

    def no_request(*args, **kwargs):
        raise AssertionError("the per-put path built a DispatchRequest")

    monkeypatch.setattr(message_store, "dispatch_request_of_appended", no_request)
    store = MessageStore(tmp_path, small_config(), clock=FakeClock(step=1)).open()
    seen: list[tuple[str, int]] = []

    def record_filter(topic: str, commit_log_offset: int) -> bool:
        seen.append((topic, commit_log_offset))
        return topic != "Gone"

    store.dispatch_filter = record_filter
    try:
        for i in range(4):
            assert store.put_message(make_msg("Kept", 0, b"k", key=f"kk{i}", uniq=f"UK{i}")).ok
            assert store.put_message(make_msg("Gone", 0, b"g", key=f"gk{i}", uniq=f"UG{i}")).ok
        assert len(seen) == 8
        assert store.get_max_offset_in_queue("Kept", 0) == 4
        assert store.find_consume_queue("Gone", 0) is None
        assert len(store.query_message("Kept", "kk3")) == 1
        assert store.query_message("Gone", "gk3") == []
    finally:
        store.shutdown()
