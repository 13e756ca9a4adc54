"""The one-call BatchCQ put (``fast_put.put_inner_batch_fast`` over ``hotpath.put_fast`` with
``inner_num``) against the general ``put_inner_batch`` path.

Why: the one-call path writes the inner batch's record, its 46-byte BatchCQ unit and its index
entries itself, so every byte must be what ``CommitLog.put_inner_batch`` + dispatch would have
written, and every batch it declines must be left to that path untouched (its INNER_BASE/INNER_NUM
properties put back as they were). Two stores get the same few hundred batches (mixed keys, IPv6
hosts, non-ASCII and long topics, several queues, commitlog, BatchCQ and index files rolling, batches
the fast path must decline) with the same clock, one through the general path only, one through the
one-call path on each implementation (C and pure Python); their commitlog, BatchCQ and index files
must be byte-identical and every put must get the same answer.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from store_util import BASE_TS

from broker_core.store import fast_put, message_store
from broker_core.store.codec import hot_py
from broker_core.store.codec.batch import BatchItem, encode_batch
from broker_core.store.codec.message import MessageInner
from broker_core.store.message_store import MessageStore
from broker_core.store.store_config import ASYNC_FLUSH, StoreConfig
from broker_core.store.topic_config import TopicConfig

try:
    from broker_core.store.codec import _hotpath as compiled
except ImportError:  # no compiler here: only the twin runs
    compiled = None

IMPLEMENTATIONS = [pytest.param(hot_py.put_fast, id="python"),
                   pytest.param(compiled.put_fast if compiled is not None else None, id="c",
                                marks=pytest.mark.skipif(compiled is None, reason="_hotpath is not built here"))]
TOPICS = ["BatchA", "批次", "B" * 140]  # a non-ASCII topic; a V2 (2-byte length) topic


def config() -> StoreConfig:
    """Files small enough that a few hundred batches roll commitlog, BatchCQ and index files."""
    return StoreConfig(mapped_file_size_commit_log=512 * 1024, mapper_file_size_batch_consume_queue=46 * 20,
                       max_hash_slot_num=97, max_index_num=300, flush_disk_type=ASYNC_FLUSH)


class StepClock:
    """The store time of the current put: the same however often a path asks within one put."""

    def __init__(self) -> None:
        self.now = BASE_TS

    def __call__(self) -> int:
        return self.now


def batches(count: int, seed: int = 23) -> list[tuple[MessageInner, int]]:
    rnd = random.Random(seed)
    hosts = [("10.0.0.1", 40000), ("::1", 10911), ("2001:db8::ff00:42:8329", 65535)]
    out = []
    for i in range(count):
        n = rnd.choice([1, 3, 16, 64])
        items = [BatchItem(bytes(rnd.randrange(256) for _ in range(rnd.choice([0, 10, 200, 1024]))),
                           {"TAGS": "TagA"} if rnd.random() < 0.5 else {}) for _ in range(n)]
        props: dict[str, str] = {}
        kind = rnd.randrange(5)
        if kind != 0:
            props["UNIQ_KEY"] = f"7F000001{i:024X}"
        if kind in (2, 3):
            props["KEYS"] = " ".join(f"k{i}-{j}" for j in range(rnd.randrange(1, 4)))
        if kind == 4:
            props["KEYS"] = f"ключ{i}"
        if rnd.random() < 0.6:
            props["TAGS"] = rnd.choice(["TagA", "", "标签"])
        if i % 41 == 5:
            props["INNER_BASE"] = "999"  # a client's stale value: the store sets its own (taken)
        if i % 37 == 6:
            props["EMPTY"] = None  # type: ignore[assignment]  # declined: a None value is skipped
        msg = MessageInner(topic=rnd.choice(TOPICS), body=encode_batch(items), properties=props,
                           queue_id=rnd.randrange(3), born_timestamp=BASE_TS - i, born_host=rnd.choice(hosts),
                           store_host=rnd.choice(hosts), flag=rnd.randrange(-5, 5))
        if i % 53 == 7:
            msg.keep_store_timestamp = True  # declined: the general path keeps the given time
            msg.store_timestamp = BASE_TS + 7
        out.append((msg, n))
    # a batch larger than a whole commitlog file: refused by the general path, declined here
    out.insert(150, (MessageInner(topic="BatchA", body=encode_batch([BatchItem(bytes(600 * 1024), {})]),
                                  born_host=hosts[0], store_host=hosts[0]), 1))
    return out


def copy_batches(items: list[tuple[MessageInner, int]]) -> list[tuple[MessageInner, int]]:
    """The stores must not share message objects (a put sets properties on them)."""
    return [(MessageInner(topic=m.topic, body=m.body, properties=dict(m.properties), queue_id=m.queue_id,
                          flag=m.flag, sys_flag=m.sys_flag, born_timestamp=m.born_timestamp, born_host=m.born_host,
                          store_host=m.store_host, reconsume_times=m.reconsume_times,
                          keep_store_timestamp=m.keep_store_timestamp, store_timestamp=m.store_timestamp), n)
            for m, n in items]


def put_all(root: Path, items: list[tuple[MessageInner, int]]) -> list[tuple]:
    clock = StepClock()
    answers = []
    store = MessageStore(root, config(), clock=clock).open()
    for topic in {*TOPICS, "BatchA"}:
        store.topic_table.put(TopicConfig(topic, 3, 3, attributes={"queue.type": "BatchCQ"}), 0)
    try:
        for i, (m, n) in enumerate(items):
            clock.now = BASE_TS + i * 1013
            r = store.put_inner_batch(m, n)
            answers.append((r.status, r.wrote_offset, r.wrote_bytes, r.msg_id, r.queue_offset, r.msg_num,
                            r.store_timestamp, dict(m.properties)))
        offsets = {(t, q): store.get_max_offset_in_queue(t, q) for t in TOPICS for q in range(3)}
        answers.append(offsets)
    finally:
        store.shutdown()
    return answers


def store_files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for sub in ("commitlog", "batchconsumequeue", "index")
            for p in sorted((root / sub).rglob("*")) if p.is_file()}


@pytest.mark.parametrize("impl", IMPLEMENTATIONS)
def test_one_call_batch_path_writes_the_general_paths_bytes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                            impl) -> None:
    items = batches(400)
    monkeypatch.setattr(message_store, "put_inner_batch_fast", lambda store, msg, inner_num: None)
    general = put_all(tmp_path / "general", copy_batches(items))
    monkeypatch.undo()

    taken = 0

    def counting(*args):
        nonlocal taken
        done = impl(*args)
        taken += done is not None
        return done

    monkeypatch.setattr(fast_put, "_put_fast", counting)
    fast = put_all(tmp_path / "fast", copy_batches(items))

    assert fast == general
    assert sum(a[0] == "PUT_OK" for a in fast[:-1]) > 390
    assert general[150][0] == "MESSAGE_ILLEGAL"  # the batch larger than a file
    # most batches took the one call; the rest (first unit of a queue, rolls, declines) the general path
    assert 200 < taken < len(items) - 20
    a, b = store_files(tmp_path / "general"), store_files(tmp_path / "fast")
    assert sorted(a) == sorted(b)
    assert len([n for n in a if n.startswith("index")]) > 2  # index files rolled
    assert len([n for n in a if n.startswith("commitlog")]) > 3
    assert len([n for n in a if n.startswith("batchconsumequeue/BatchA/0")]) > 1  # BatchCQ files rolled
    for name in a:
        assert a[name] == b[name], f"{name} differs"


@pytest.mark.parametrize("impl", IMPLEMENTATIONS)
def test_declined_batch_writes_nothing(impl) -> None:
    """A decline leaves every buffer as it was; a taken batch writes the 46-byte unit."""
    cl, cq, ix = bytearray(8192), bytearray(100), bytearray(40 + 4 * 7 + 20 * 8)
    body = encode_batch([BatchItem(b"x" * 100, {})] * 3)

    def msg(**props: str) -> MessageInner:
        return MessageInner(topic="T", body=body, properties=dict(props), born_host=("1.2.3.4", 1),
                            store_host=("1.2.3.4", 2), sys_flag=0x80)

    args = (4 << 20, cl, 0, 8192, 0, 5, BASE_TS, cq, 0, ix, 7, 8, 1, 0, 0, 0)
    declined = [
        (msg(KEYS="a", INNER_NUM="3", INNER_BASE="5"), 2),  # INNER_NUM is not the batch's count
        (msg(KEYS="a", INNER_NUM="3", INNER_BASE="4"), 3),  # INNER_BASE is not the queue offset
        (msg(KEYS="a", INNER_NUM="3"), 3),  # no INNER_BASE
        (msg(KEYS="a"), 3),  # no INNER_NUM
        (msg(KEYS="a", INNER_NUM="3", INNER_BASE="5"), 40000),  # a batchSize that is no short
    ]
    for m, n in declined:
        assert impl(m, *args, n) is None
    ok = msg(KEYS="a", INNER_NUM="3", INNER_BASE="5")
    assert impl(ok, 4 << 20, cl, 0, 8192, 0, 5, BASE_TS, cq, 60, ix, 7, 8, 1, 0, 0, 0, 3) is None  # no unit room
    assert not any(cl) and not any(cq) and not any(ix)
    done = impl(ok, *args, 3)
    assert done is not None and done[7] == 2
    assert cq[20:28] == BASE_TS.to_bytes(8, "big") and cq[28:36] == (5).to_bytes(8, "big")
    assert cq[36:38] == (3).to_bytes(2, "big") and cq[38:46] == b"\xff\xff\xff\xff\x00\x00\x00\x00"


@pytest.mark.skipif(compiled is None, reason="_hotpath is not built here")
def test_both_implementations_agree_on_batches() -> None:
    rnd = random.Random(5)
    for m, n in batches(120, seed=3):
        m.sys_flag |= 0x80
        base = rnd.choice([0, 7, 123456])
        if rnd.random() < 0.8:
            m.properties["INNER_BASE"] = str(base)
            m.properties["INNER_NUM"] = str(n if rnd.random() < 0.9 else n + 1)
        limit = rnd.choice([len(m.body) + 4000, len(m.body) + 50])
        bufs = []
        for impl in (hot_py.put_fast, compiled.put_fast):
            cl, cq, ix = bytearray(len(m.body) + 4000), bytearray(46), bytearray(40 + 4 * 11 + 20 * 16)
            done = impl(m, 4 << 20, cl, 0, limit, 4096, base, BASE_TS, cq, 0, ix, 11, 16, 1, 0, 0, 0, n)
            bufs.append((done, bytes(cl), bytes(cq), bytes(ix)))
        assert bufs[0] == bufs[1]


@pytest.mark.parametrize("impl", IMPLEMENTATIONS)
def test_an_io_error_on_the_record_write_leaves_no_trace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                         impl) -> None:
    """The one call writes the unit and the index entries before the record reaches the file; when that
    write fails (EIO) the put is refused and changes nothing a reader sees: no unit, no index entry, no
    hash slot pointing at the lost record's entries, and every earlier key still found (their chains
    kept) and later puts indexed normally."""
    import errno

    from broker_core.store.mapped_file import MappedFile

    monkeypatch.setattr(fast_put, "_put_fast", impl)
    cfg = StoreConfig(mapped_file_size_commit_log=4 * 1024 * 1024, max_hash_slot_num=5, max_index_num=400,
                      flush_disk_type=ASYNC_FLUSH)
    store = MessageStore(tmp_path, cfg, clock=StepClock()).open()
    store.topic_table.put(TopicConfig("BatchA", 1, 1, attributes={"queue.type": "BatchCQ"}), 0)

    def put(i: int):
        body = encode_batch([BatchItem(b"v%d" % i, {})] * 2)
        msg = MessageInner(topic="BatchA", body=body, properties={"KEYS": f"k{i}", "UNIQ_KEY": f"U{i:08d}"},
                           born_host=("10.0.0.1", 1), store_host=("10.0.0.1", 2))
        return store.put_inner_batch(msg, 2)

    try:
        for i in range(12):  # 5 slots: every slot holds a chain of several keys
            assert put(i).ok
        idx = store.index_service._files[-1]
        count_before, slots_before = idx._index_count, bytes(idx._buf[40:40 + 4 * 5])
        taken = []
        real = MappedFile.write_vectored

        def failing(self, pos, parts):
            taken.append(pos)
            raise OSError(errno.EIO, "Input/output error")

        monkeypatch.setattr(MappedFile, "write_vectored", failing)
        r = put(12)
        monkeypatch.setattr(MappedFile, "write_vectored", real)
        assert taken and not r.ok and "append failed" in r.remark
        assert store.get_max_offset_in_queue("BatchA", 0) == 24
        assert idx._index_count == count_before and bytes(idx._buf[40:40 + 4 * 5]) == slots_before
        assert idx.is_consistent()
        assert store.query_message("BatchA", "k12") == []
        for i in range(12):
            assert [m.keys for m in store.query_message("BatchA", f"k{i}")] == [f"k{i}"]
        for i in range(13, 16):
            assert put(i).ok
        for i in [*range(12), *range(13, 16)]:
            assert [m.keys for m in store.query_message("BatchA", f"k{i}")] == [f"k{i}"]
    finally:
        store.shutdown()


def test_an_inner_batch_beyond_a_units_batch_size_is_refused_and_an_old_one_is_left_out(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """A BatchCQ unit's batchSize is a short. 32768 messages in one batch were written to the commitlog,
    then dispatch raised on the unit: every later put, the shutdown and every reopen raised with it."""
    big = StoreConfig(mapped_file_size_commit_log=4 << 20, flush_disk_type=ASYNC_FLUSH)
    store = MessageStore(tmp_path, big, clock=StepClock()).open()
    try:
        store.topic_table.put(TopicConfig("Big", 1, 1, attributes={"queue.type": "BatchCQ"}), 0)

        def batch(n: int) -> MessageInner:
            return MessageInner(topic="Big", queue_id=0, body=encode_batch([BatchItem(b"x")] * n),
                                born_host=("10.0.0.1", 1), store_host=("10.0.0.2", 10911))

        before = store.get_max_phy_offset()
        r = store.put_inner_batch(batch(32768), 32768)
        assert r.status.name == "MESSAGE_ILLEGAL"
        assert r.remark == "inner batch of 32768 messages: a BatchCQ unit holds at most 32767"
        assert store.get_max_phy_offset() == before
        assert store.put_inner_batch(batch(32767), 32767).ok
        # one written before the refusal existed: recovery leaves it out of the queue, not the store
        old = batch(40000)
        old.sys_flag |= message_store.INNER_BATCH_FLAG
        written = store.commit_log.put_inner_batch(old, 40000, lambda: None)
        assert written.ok
        assert store.put_inner_batch(batch(2), 2).ok
    finally:
        store.shutdown()
    store = MessageStore(tmp_path, big, clock=StepClock()).open()
    try:
        store.wait_for_dispatch()
        got = store.get_messages("Big", 0, 32767 + 40000, 4)
        assert [m.queue_offset for m in got.messages][:2] == [72767, 72768]
        assert store.get_max_offset_in_queue("Big", 0) == 72769
        assert f"BatchCQ Big-0: the record at commitlog offset {written.wrote_offset} holds 40000 messages, " \
            "beyond a unit's batchSize (1..32767): left out of the queue" in caplog.text
    finally:
        store.shutdown()
