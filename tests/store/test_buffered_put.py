"""Inner batches on the write buffer through the flat put and dispatch of ``store/buffered_put.py``
(``hotpath.buffer_inner_batch`` and ``hotpath.dispatch_inner_batch``) against the general path.

Why: with transientStorePoolEnable a batch is encoded into the buffer at the put and written by a
commit of ~1 MiB; its BatchCQ unit and index entries are written only after that commit. The flat
path must give every put the general path's answer, leave the same commitlog, BatchCQ and index
bytes (on both implementations, C and pure Python), hand every case it does not cover to the
general path untouched (the INNER_BASE/INNER_NUM it set put back), and keep the write buffer's
guarantee on an I/O error: a commit that fails writes no unit and no index entry, loses nothing,
and the records are dispatched once a later commit succeeds.
"""

from __future__ import annotations

import errno
import random
from pathlib import Path

import pytest
from store_util import BASE_TS
from test_put_inner_batch_fast import TOPICS, StepClock, batches, copy_batches, store_files

from broker_core.store import buffered_put, commit_log, message_store
from broker_core.store.codec import hot_py
from broker_core.store.codec.batch import BatchItem, encode_batch
from broker_core.store.codec.message import MessageInner
from broker_core.store.mapped_file import MappedFile
from broker_core.store.message_store import MessageStore
from broker_core.store.store_config import ASYNC_FLUSH, StoreConfig
from broker_core.store.topic_config import TopicConfig

try:
    from broker_core.store.codec import _hotpath as compiled
except ImportError:  # no compiler here: only the twin runs
    compiled = None

IMPLEMENTATIONS = [
    pytest.param((hot_py.buffer_inner_batch, hot_py.dispatch_inner_batches), id="python"),
    pytest.param((compiled.buffer_inner_batch, compiled.dispatch_inner_batches) if compiled is not None else None,
                 id="c", marks=pytest.mark.skipif(compiled is None, reason="_hotpath is not built here")),
]


def config() -> StoreConfig:
    """The write buffer on; files small enough that commitlog, BatchCQ and index files roll."""
    return StoreConfig(mapped_file_size_commit_log=512 * 1024, mapper_file_size_batch_consume_queue=46 * 20,
                       max_hash_slot_num=97, max_index_num=300, flush_disk_type=ASYNC_FLUSH,
                       transient_store_pool_enable=True)


def with_many_keys(items: list[tuple[MessageInner, int]]) -> list[tuple[MessageInner, int]]:
    """Some batches carry 120 keys: more than the room the flat dispatch keeps, so its index roll runs."""
    for i in range(7, len(items), 29):
        items[i][0].properties["KEYS"] = " ".join(f"many{i}-{j}" for j in range(120))
    return items


def put_all(root: Path, items: list[tuple[MessageInner, int]], started: bool = False,
            record_filter=None) -> list[tuple]:
    """Put ``items``; ``started``: into a started store (reput thread, commit service), as a broker's."""
    clock = StepClock()
    answers = []
    store = MessageStore(root, config(), clock=clock).open()
    assert store.commit_log.write_buffer
    for topic in {*TOPICS, "BatchA"}:
        store.topic_table.put(TopicConfig(topic, 3, 3, attributes={"queue.type": "BatchCQ"}), 0)
    store.dispatch_filter = record_filter
    if started:
        store.start()
    try:
        for i, (m, n) in enumerate(items):
            clock.now = BASE_TS + i * 1013
            r = store.put_inner_batch(m, n)
            answers.append((r.status, r.wrote_offset, r.wrote_bytes, r.msg_id, r.queue_offset, r.msg_num,
                            r.store_timestamp, dict(m.properties)))
        if started:  # what the commit service does within commitIntervalCommitLog: the answers below see it all
            assert store.commit_log.commit()
        assert store.wait_for_dispatch()
        answers.append({(t, q): store.get_max_offset_in_queue(t, q) for t in TOPICS for q in range(3)})
        answers.append(sorted(m.commit_log_offset for m in store.query_message("BatchA", "many36-119")))
    finally:
        store.shutdown()
    return answers


def general_and_flat(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, impl, items: list[tuple[MessageInner, int]],
                     started: bool = False, record_filter=None) -> tuple[list, list, dict[str, int]]:
    """``put_all`` of ``items`` on the general path (no one-call buffered put), then on the flat one with
    ``impl``'s encode and dispatch: both answers, and how many puts and dispatched records were flat."""
    monkeypatch.setattr(message_store, "put_inner_batch_buffered", lambda store, msg, inner_num: None)
    general = put_all(tmp_path / "general", copy_batches(items), started, record_filter)
    taken = {"put": 0, "dispatch": 0}
    encode, dispatch = impl

    def counting_put(*args):
        done = buffered_put.put_inner_batch_buffered(*args)
        taken["put"] += done is not None
        return done

    def counting_dispatch(*args):
        state = dispatch(*args)
        taken["dispatch"] += state[1] + (state[9] is not None)  # records dispatched, one with an index roll
        return state

    monkeypatch.setattr(message_store, "put_inner_batch_buffered", counting_put)
    monkeypatch.setattr(buffered_put, "_buffer_inner_batch", encode)
    monkeypatch.setattr(buffered_put, "_dispatch_inner_batches", counting_dispatch)
    flat = put_all(tmp_path / "flat", copy_batches(items), started, record_filter)
    return general, flat, taken


@pytest.mark.parametrize("impl", IMPLEMENTATIONS)
def test_flat_buffered_path_writes_the_general_paths_bytes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                          impl) -> None:
    monkeypatch.setattr(commit_log, "WRITE_BUFFER_COMMIT_BYTES", 16 * 1024)  # many commits
    items = with_many_keys(batches(400))
    general, flat, taken = general_and_flat(tmp_path, monkeypatch, impl, items)

    assert flat == general
    assert len(general[-1]) == 1  # the 120-key batch is found by its last key
    assert sum(a[0] == "PUT_OK" for a in flat[:-2]) > 390
    # most batches took the flat put and the flat dispatch; the rest (file ends, refusals; first units
    # and index rolls at dispatch) not
    assert 300 < taken["put"] < len(items) - 3
    assert 150 < taken["dispatch"] < taken["put"]
    a, b = store_files(tmp_path / "general"), store_files(tmp_path / "flat")
    assert sorted(a) == sorted(b)
    assert len([n for n in a if n.startswith("index")]) > 2
    assert len([n for n in a if n.startswith("commitlog")]) > 3
    for name in a:
        assert a[name] == b[name], f"{name} differs"


@pytest.mark.parametrize("refused_topic", [None, TOPICS[1]])
@pytest.mark.parametrize("impl", IMPLEMENTATIONS)
def test_a_started_store_takes_the_flat_put_and_writes_the_general_paths_bytes(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, impl, refused_topic: str | None) -> None:
    """A running broker's store (reput thread, commit service, a dispatch filter): the flat put buffers
    the records and its reput thread dispatches what each commit hands over in one compiled call;
    the files and answers are the general path's. A filter refusing a topic's records (a deleted
    topic's, in a broker) is obeyed: each flat call takes only the records before the first refused."""
    monkeypatch.setattr(commit_log, "WRITE_BUFFER_COMMIT_BYTES", 16 * 1024)  # many commits
    items = with_many_keys(batches(300))

    def record_filter(topic: str, commit_log_offset: int) -> bool:
        return topic != refused_topic

    general, flat, taken = general_and_flat(tmp_path, monkeypatch, impl, items, True, record_filter)

    assert flat == general
    assert 200 < taken["put"] < len(items)
    # the reput thread took most of them flat (fewer with a topic refused: the run ends before each)
    assert (100 if refused_topic is None else 60) < taken["dispatch"] < taken["put"]
    if refused_topic is not None:
        assert all(general[-2][(refused_topic, q)] == 0 for q in range(3))  # refused: in no queue
        assert sum(general[-2].values()) > 0
    a, b = store_files(tmp_path / "general"), store_files(tmp_path / "flat")
    # An index file is named by the clock when the reput thread rolls it, which a started store's
    # putting thread moves meanwhile: index files are compared in order, by content.
    assert sorted(n for n in a if not n.startswith("index")) == sorted(n for n in b if not n.startswith("index"))
    for name in a:
        if not name.startswith("index"):
            assert a[name] == b[name], f"{name} differs"
    assert [a[n] for n in sorted(a) if n.startswith("index")] == [b[n] for n in sorted(b) if n.startswith("index")]
    assert len([n for n in a if n.startswith("index")]) > 2


def test_a_buffered_put_wakes_dispatch_only_when_records_reach_the_file(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """A buffered record is not in the file until a commit: waking dispatch for it (every put, as the
    put once did) made a running broker's reput thread take the interpreter for nothing."""
    monkeypatch.setattr(commit_log, "WRITE_BUFFER_COMMIT_BYTES", 16 * 1024)
    store = MessageStore(tmp_path, config()).open()
    store.topic_table.put(TopicConfig("BatchA", 1, 1, attributes={"queue.type": "BatchCQ"}), 0)
    wakes: list[int] = []
    store.commit_log.append_listeners.append(lambda: wakes.append(store.commit_log.buffered_bytes))
    body = encode_batch([BatchItem(b"x" * 1000, {}) for _ in range(4)])
    try:
        for general_path in (False, True):
            if general_path:  # the general path's buffered put, the same rule
                monkeypatch.setattr(message_store, "put_inner_batch_buffered", lambda store, msg, inner_num: None)
            wakes.clear()
            puts = 0
            while not wakes:
                assert store.put_inner_batch(MessageInner(topic="BatchA", body=body, queue_id=0), 4).ok
                puts += 1
            assert puts > 2  # the first puts were only buffered: no wake
            assert wakes == [0]  # the put that committed woke it, with nothing left buffered
            assert store.put_inner_batch(MessageInner(topic="BatchA", body=body, queue_id=0), 4).ok
            assert wakes == [0]
            assert store.commit_log.commit()
            assert wakes == [0, 0]  # a commit by the commit service wakes it too
    finally:
        store.shutdown()


def test_a_declined_put_leaves_the_message_as_it_was(tmp_path: Path) -> None:
    """A batch the flat put cannot take (here: a property value that is not text) goes to the general
    path with its properties exactly as the caller gave them, and gets the general path's answer."""
    store = MessageStore(tmp_path, config(), clock=StepClock()).open()
    store.topic_table.put(TopicConfig("BatchA", 1, 1, attributes={"queue.type": "BatchCQ"}), 0)
    try:
        body = encode_batch([BatchItem(b"x", {})] * 2)

        def msg(**props: object) -> MessageInner:
            return MessageInner(topic="BatchA", body=body, properties=dict(props), born_host=("10.0.0.1", 1),
                                store_host=("10.0.0.1", 2), sys_flag=0x80)

        assert store.put_inner_batch(msg(KEYS="a"), 2).ok
        assert store.wait_for_dispatch() and store.commit_log.buffered_bytes == 0
        bad = msg(KEYS="b", INNER_BASE="999", ODD=7)
        before = dict(bad.properties)
        assert buffered_put.put_inner_batch_buffered(store, bad, 2) is None
        assert bad.properties == before
        assert store.commit_log.buffered_bytes == 0
        ok = msg(KEYS="c", INNER_BASE="999")
        r = buffered_put.put_inner_batch_buffered(store, ok, 2)
        assert r is not None and r.ok and r.queue_offset == 2 and ok.properties["INNER_BASE"] == "2"
        assert store.commit_log.buffered_bytes == r.wrote_bytes  # buffered, not visible yet
        assert store.get_max_offset_in_queue("BatchA", 0) == 2
        assert store.wait_for_dispatch() and store.get_max_offset_in_queue("BatchA", 0) == 4
    finally:
        store.shutdown()


@pytest.mark.parametrize("impl", IMPLEMENTATIONS)
def test_a_failed_commit_writes_no_unit_and_no_index_entry(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                           impl) -> None:
    """The commit inside a flat put fails (EIO): the put is still acknowledged (its record is buffered),
    no BatchCQ unit or index entry of any buffered record is written, nothing is visible; once a commit
    succeeds every record is dispatched and found by its keys."""
    monkeypatch.setattr(buffered_put, "_buffer_inner_batch", impl[0])
    monkeypatch.setattr(buffered_put, "_dispatch_inner_batches", impl[1])
    monkeypatch.setattr(commit_log, "WRITE_BUFFER_COMMIT_BYTES", 4000)
    store = MessageStore(tmp_path, config(), clock=StepClock()).open()
    store.topic_table.put(TopicConfig("BatchA", 1, 1, attributes={"queue.type": "BatchCQ"}), 0)

    def put(i: int):
        body = encode_batch([BatchItem(b"v%d" % i * 100, {})] * 3)
        m = MessageInner(topic="BatchA", body=body, properties={"KEYS": f"k{i}", "UNIQ_KEY": f"U{i:08d}"},
                         born_host=("10.0.0.1", 1), store_host=("10.0.0.1", 2))
        return store.put_inner_batch(m, 3)

    try:
        for i in range(6):  # the first unit and a few commits through the flat path
            assert put(i).ok
        assert store.wait_for_dispatch()
        idx = store.index_service._files[-1]
        cq = store.consume_queues[("BatchA", 0)]
        count, unit_end, slots = idx._index_count, cq.file_queue.files[-1].wrote_position, bytes(idx._buf[40:40 + 4 * 97])
        attempts = []

        def failing(self, pos, parts):
            attempts.append(pos)
            raise OSError(errno.EIO, "Input/output error")

        monkeypatch.setattr(MappedFile, "write_vectored", failing)
        acks = []
        while not attempts:
            r = put(6 + len(acks))
            assert r.ok
            acks.append(r)
        assert len(acks) > 1 and store.commit_log.buffered_bytes == sum(a.wrote_bytes for a in acks)
        # nothing of the buffered records reached a queue or the index
        assert idx._index_count == count and bytes(idx._buf[40:40 + 4 * 97]) == slots
        assert cq.file_queue.files[-1].wrote_position == unit_end and store.get_max_offset_in_queue("BatchA", 0) == 18
        assert not any(bytes(cq.file_queue.files[-1].mv[unit_end:unit_end + 46]))
        assert store.query_message("BatchA", "k6") == []
        monkeypatch.undo()
        assert store.commit_log.commit() and store.wait_for_dispatch()
        assert store.get_max_offset_in_queue("BatchA", 0) == 18 + 3 * len(acks)
        for i in range(6 + len(acks)):
            assert [m.keys for m in store.query_message("BatchA", f"k{i}")] == [f"k{i}"]
        assert put(99).ok and store.wait_for_dispatch()
    finally:
        store.shutdown()


@pytest.mark.skipif(compiled is None, reason="_hotpath is not built here")
def test_both_implementations_agree_on_the_buffered_record_and_its_dispatch() -> None:
    """Function by function: the same tuple (or None, or exception type) and the same bytes written."""
    rnd = random.Random(11)
    items = batches(120, seed=9)
    for i, (m, n) in enumerate(items):
        base = rnd.choice([0, 7, 123456])
        if i % 5 == 1:
            m.properties["INNER_BASE"] = "stale"  # put back as it was when declined
        if i % 17 == 3:
            m.properties["BAD\x01"] = "x"  # refused by check_message: None on both
        room = rnd.choice([1 << 30, len(m.body) + 100, 10])
        outcomes = []
        for impl in (hot_py, compiled):
            msg = copy_batches([(m, n)])[0][0]
            parts, records = [b"before"], []
            try:
                got = impl.buffer_inner_batch(msg, 4 << 20, 4096 + i, base, BASE_TS + i, n, room, room, 4096, parts,
                                              records)
            except Exception as e:  # noqa: BLE001 - the type is the comparison
                got = type(e)
            outcomes.append((got, parts, records, msg.properties))
        assert outcomes[0] == outcomes[1]
        got, parts, records, props = outcomes[0]
        if got is None:  # declined: nothing appended, the properties as the caller gave them
            assert parts == [b"before"] and records == [] and props == m.properties
        else:
            assert len(parts) == 4 and len(records) == 1 and props["INNER_BASE"] == str(base)
            assert len(b"".join(parts[1:])) == got[0] and records[0][:2] == (4096 + i, got[0])
        if i % 17 == 3 or room == 10:
            assert got is None
        known = records[0][9] if records else None
        tags, keys, uniq = known if known is not None else (m.properties.get("TAGS"), None, None)
        results = []
        for impl in (hot_py, compiled):
            cq, ix = bytearray(100), bytearray(40 + 4 * 11 + 20 * 16)
            ix[36:40] = (1).to_bytes(4, "big")
            args = (cq, 46, 4096 + i, 500, tags, BASE_TS + i, base, n, ix, 11, 16, 1, 0, 0, 0, m.topic, uniq, keys)
            try:
                results.append((impl.dispatch_inner_batch(*args), bytes(cq), bytes(ix)))
            except Exception as e:  # noqa: BLE001
                results.append((type(e), bytes(cq), bytes(ix)))
        assert results[0] == results[1]
        for impl in (hot_py, compiled):  # no room for the unit, a bad index count: nothing written
            cq, ix = bytearray(60), bytearray(200)
            with pytest.raises(Exception):  # noqa: B017 - struct.error on both
                impl.dispatch_inner_batch(cq, 46, 1, 2, "t", 3, 4, 5, None, 0, 0, 0, 0, 0, 0, "T", None, None)
            with pytest.raises(ValueError):
                impl.dispatch_inner_batch(cq, 0, 1, 2, "t", 3, 4, 5, ix, 7, 8, 0, 0, 0, 0, "T", None, "k")
            assert not any(cq) and not any(ix)


def drive_dispatch(impl, root: Path) -> tuple:
    """``impl.dispatch_inner_batches`` over one run of crafted committed entries, on real BatchCQ files
    (6 units a file, so a queue file fills mid-commit) and real index files (40 entries: a record's
    keys straddle a file end, and a file runs short of the room kept mid-commit). Wherever a call
    stops, the driver does what the caller's other paths would: a new index file after a partial
    record (its head taken off) or when the room kept ran short, a new queue file when the queue's
    is full, else the head record skipped (given to the general path). Returns every call's answer,
    the arrivals and the bytes and state of every file."""
    from collections import deque

    from broker_core.store.batch_consume_queue import BatchConsumeQueue
    from broker_core.store.index_file import IndexFile

    cqs = {}
    for q in range(3):
        cq = BatchConsumeQueue("BatchA", q, root / "cq", 46 * 6)
        assert cq.put_message_position_info(100 + q, 10, 0, 0, BASE_TS, 5)  # the first unit (general path)
        cqs[("BatchA", q)] = cq
    indexes = [IndexFile(root / "index0", 13, 40)]
    appended, sizes = deque(), deque()
    phy, bases = 1000, [5, 5, 5]
    for i in range(48):
        q = i % 3
        size, num = 700 + i, 1 + i % 4
        keys = " ".join(f"k{i}-{j}" for j in range(70)) if i == 9 else (f"k{i} x{i}" if i % 2 else None)
        known = (None if i % 5 == 0 else f"Tag{i % 3}", keys, f"U{i:06d}" if i % 7 else None)
        flag = 0x80
        if i == 20:
            known = None  # properties the dict does not say: the general path
        if i == 27:
            flag = 0x80 | 0x4  # a prepared transaction
        if i == 33:
            sizes.append((phy - 1, 0, 1))  # a stale batch size left before it
        appended.append((phy, size, "BatchA", q, bases[q], flag, BASE_TS + i * 1001, 0, f"p{i}", known))
        sizes.append((phy, bases[q] + (1 if i == 38 else 0), num))  # 38: a base the put did not give
        bases[q] += num
        phy += size
    calls, arrivals = [], []
    offset = 1000
    while appended:
        idx = indexes[-1]
        state = impl.dispatch_inner_batches(
            appended, sizes, cqs, offset, idx._buf, idx.hash_slot_num, idx.index_num, idx._index_count,
            idx._begin_timestamp, idx._begin_phy_offset, idx._hash_slot_count, idx._end_phy_offset,
            idx._end_timestamp, 4, arrivals)
        calls.append(state)
        (idx._index_count, idx._begin_timestamp, idx._begin_phy_offset, idx._hash_slot_count, idx._end_phy_offset,
         idx._end_timestamp) = state[3:9]
        offset = state[0]
        head = appended[0] if appended else None
        if head is None:
            break
        cq = cqs[("BatchA", head[3])]
        if state[9] is not None or idx.index_num - idx._index_count < 4:
            indexes.append(IndexFile(root / f"index{len(indexes)}", 13, 40))
        elif cq.file_queue.files[-1].wrote_position + 46 > cq.file_queue.files[-1].file_size:
            cq.file_queue.get_last_mapped_file(cq.file_queue.files[-1].file_from_offset + cq.file_size)
            continue
        if state[9] is not None or not (idx.index_num - idx._index_count < 4):
            appended.popleft()  # the caller's roll, or the general path, took it
            offset = head[0] + head[1]
            while sizes and sizes[0][0] <= head[0]:
                sizes.popleft()
            if head[4] == 0 or head[3] is None:
                continue
            cq.max_offset = max(cq.max_offset, head[4] + 1)  # the general path dispatched it
            cq.max_physic_offset = max(cq.max_physic_offset, head[0])
    files = {f"cq{q}-{mf.file_from_offset}": bytes(mf.mv) for (_t, q), cq in cqs.items() for mf in cq.file_queue.files}
    files.update({f"index{i}": bytes(ix._buf) for i, ix in enumerate(indexes)})
    queues = [(cq.max_offset, cq.max_physic_offset) for cq in cqs.values()]
    for cq in cqs.values():
        cq.close()
    for ix in indexes:
        ix.close()
    return calls, arrivals, queues, files


@pytest.mark.skipif(compiled is None, reason="_hotpath is not built here")
def test_both_implementations_dispatch_a_commit_alike(tmp_path: Path) -> None:
    """``dispatch_inner_batches`` of C and of the twin: the same answers call after call, the same
    arrivals, queue states and file bytes, through queue files filling mid-commit, index files
    running short of room mid-commit, a record whose keys straddle an index file's end, records
    the flat dispatch leaves (no known properties, a prepared transaction, a base it was not given)
    and a stale batch size."""
    python = drive_dispatch(hot_py, tmp_path / "python")
    c = drive_dispatch(compiled, tmp_path / "c")
    assert python == c
    calls, arrivals, _queues, files = c
    assert sum(s[1] for s in calls) > 30 and len(arrivals) == sum(s[1] for s in calls)
    assert any(s[9] is not None for s in calls)  # the 70-key record straddled an index file end
    assert len([n for n in files if n.startswith("index")]) >= 3
    assert len([n for n in files if n.startswith("cq")]) >= 6  # queue files filled mid-commit


@pytest.mark.parametrize("impl", [hot_py, compiled] if compiled is not None else [hot_py])
def test_dispatch_inner_batches_refuses_a_bad_index_count_writing_nothing(tmp_path: Path, impl) -> None:
    from collections import deque

    entry = (1000, 700, "BatchA", 0, 5, 0x80, BASE_TS, 0, "", ("t", None, None))
    appended, sizes = deque([entry]), deque([(1000, 5, 2)])
    with pytest.raises(ValueError):
        impl.dispatch_inner_batches(appended, sizes, {}, 1000, bytearray(200), 7, 8, 0, 0, 0, 0, 0, 0, 4, None)
    assert list(appended) == [entry] and list(sizes) == [(1000, 5, 2)]
    # nothing the flat dispatch takes (no queue): an answer that moves nothing
    assert impl.dispatch_inner_batches(appended, sizes, {}, 1000, None, 0, 0, 1, 0, 0, 0, 0, 0, 0, None) == \
        (1000, 0, None, 1, 0, 0, 0, 0, 0, None)
    assert len(appended) == 1
