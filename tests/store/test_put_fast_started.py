"""The one-call put on a started store (reput thread running, a dispatch filter set: a broker's store).

Why: a started store's puts used to take the general path only (append, then dispatch on the reput
thread). Now ``fast_put.put_fast`` writes and dispatches a put itself when dispatch has caught up,
under the append and dispatch locks, while the reput thread dispatches whatever the general path
appended. What a user must see is unchanged: the same files as a store that is not started given
the same puts; with several producers every message in its queue at the offset its put answered,
every key found; a record put after a topic was deleted dispatched into the new queue; a crash
recovered as before. Run on both implementations of the hot call (C and the pure-Python twin).
"""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from store_util import BASE_TS, FakeClock, crash, make_msg, small_config, verify_consistency
from test_put_fast import IMPLEMENTATIONS, StepClock, config, copy_msgs, messages

from broker_core.broker.broker_config import BrokerConfig
from broker_core.store import fast_put, message_store
from broker_core.store.commit_log import PutMessageResult
from broker_core.store.message_store import MessageStore
from broker_core.store.verify import verify_store


def broker_config() -> BrokerConfig:
    return BrokerConfig.from_properties({"mappedFileSizeCommitLog": str(1024 * 1024), "maxHashSlotNum": "512",
                                         "maxIndexNum": "4096"})


@pytest.fixture(params=IMPLEMENTATIONS)
def taken(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Run fast_put on the implementation ``request.param``; the list counts the calls that wrote."""
    impl = request.param
    count = [0]

    def counting(*args):  # noqa: ANN002, ANN202
        done = impl(*args)
        if done is not None:
            count[0] += 1
        return done

    monkeypatch.setattr(fast_put, "_put_fast", counting)
    return count


def files_in_order(root: Path) -> list[bytes]:
    """Commitlog, consume queue and index files' contents in name order. (Index file names are the
    clock at their creation, which the reput thread may read a put later: the names are not compared.)"""
    out = []
    for sub in ("commitlog", "consumequeue", "index"):
        for p in sorted((root / sub).rglob("*")):
            if p.is_file():
                out.append((str(p.relative_to(root)) if sub != "index" else "index", p.read_bytes()))
    return out


def test_started_store_writes_the_same_files_as_a_store_that_is_not(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                  taken: list[int]) -> None:
    msgs = messages(1500)
    clock = StepClock()

    def put_all(root: Path, start: bool) -> list[PutMessageResult]:
        store = MessageStore(root, config(), clock=clock).open()
        if start:
            store.start()
        answers = []
        try:
            for i, m in enumerate(copy_msgs(msgs)):
                clock.now = BASE_TS + i * 13
                answers.append(store.put_message(m))
                if start and i % 50 == 0:
                    # let the reput thread catch up with what the general path appended now and then
                    assert store.wait_for_dispatch()
        finally:
            store.shutdown()
        return answers

    with monkeypatch.context() as m:
        m.setattr(message_store, "put_fast", lambda store, msg: None)
        general = put_all(tmp_path / "general", False)
    taken[0] = 0
    started = put_all(tmp_path / "started", True)
    assert started == general
    assert taken[0] > 700  # most puts took the one call on the started store (non-started: ~1000)
    assert files_in_order(tmp_path / "general") == files_in_order(tmp_path / "started")


def _producer(store: MessageStore, topic: str, thread: int, n: int, out: list, errors: list) -> None:
    try:
        for i in range(n):
            props = {} if i % 7 else {"EMPTY": None}  # None: declined by the one call, the general path puts it
            msg = make_msg(topic, i % 3, b"t%d-%d" % (thread, i), key=f"k{thread}-{i}", uniq=f"U{thread:02d}{i:08d}")
            msg.properties.update(props)  # type: ignore[arg-type]
            r = store.put_message(msg)
            out.append((thread, i, r))
    except BaseException as e:  # noqa: BLE001 - reported by the test
        errors.append(e)


def test_concurrent_producers_on_a_started_store(tmp_path: Path, taken: list[int]) -> None:
    """Four producers, some puts taking the general path (dispatched later by the reput thread), the
    rest the one call: every message in its queue at the offset its put answered, in each producer's
    order, every key found once, and the store verifies."""
    cfg = small_config(mapped_file_size_commit_log=64 * 1024, mapped_file_size_consume_queue=20 * 64,
                       max_hash_slot_num=512, max_index_num=2048)
    store = MessageStore(tmp_path, cfg, clock=FakeClock(step=1)).open().start()
    results: list[tuple[int, int, PutMessageResult]] = []
    errors: list[BaseException] = []
    n = 600
    threads = [threading.Thread(target=_producer, args=(store, "Conc", t, n, results, errors)) for t in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert store.wait_for_dispatch()
    assert len(results) == 4 * n and all(r.status == "PUT_OK" for _, _, r in results)
    assert taken[0] > n  # the one call did run, concurrently with the reput thread
    by_queue: dict[int, dict[int, bytes]] = {}
    for thread, i, r in results:
        by_queue.setdefault(i % 3, {})[r.queue_offset] = b"t%d-%d" % (thread, i)
        assert store.query_offsets_by_key("Conc", f"k{thread}-{i}") == [r.wrote_offset]
        assert store.query_offsets_by_key("Conc", f"U{thread:02d}{i:08d}") == [r.wrote_offset]
    for qid, want in by_queue.items():
        assert sorted(want) == list(range(len(want)))  # no offset lost or given twice
        got = store.get_messages("Conc", qid, 0, len(want) + 10)
        assert [m.body for m in got.messages] == [want[q] for q in range(len(want))]
        assert [m.queue_offset for m in got.messages] == list(range(len(want)))
    verify_consistency(store)
    store.shutdown()
    ro = MessageStore(tmp_path, cfg, read_only=True).open()
    try:
        report = verify_store(ro)
        assert not report.issues and report.records == 4 * n and report.undispatched_records == 0
    finally:
        ro.shutdown()


def test_a_record_the_dispatch_filter_refuses_is_not_dispatched(tmp_path: Path, taken: list[int]) -> None:
    """The filter is asked for each put: one that refuses the record leaves it to the general path,
    which appends it and never dispatches it."""
    cfg = small_config(max_hash_slot_num=256, max_index_num=1024)  # (64 entries: too few for the one call)
    store = MessageStore(tmp_path, cfg, clock=FakeClock(step=1)).open().start()
    try:
        for i in range(5):  # the queue exists (a one-call put would find it) before the filter refuses
            assert store.put_message(make_msg("Refused", 0, b"early%d" % i)).ok
        assert store.wait_for_dispatch() and store.get_max_offset_in_queue("Refused", 0) == 5
        store.dispatch_filter = lambda topic, phy: topic != "Refused"
        for i in range(20):
            assert store.put_message(make_msg("Refused", 0, b"r%d" % i, key=f"r{i}")).ok
            assert store.put_message(make_msg("Kept", 0, b"k%d" % i, key=f"k{i}")).ok
        assert store.wait_for_dispatch()
        assert taken[0] > 10
        assert store.get_max_offset_in_queue("Refused", 0) == 5
        assert not store.query_offsets_by_key("Refused", "r3")
        assert [m.body for m in store.get_messages("Kept", 0, 0, 50).messages] == [b"k%d" % i for i in range(20)]
    finally:
        store.shutdown()


def test_topic_deleted_while_producers_put(tmp_path: Path, taken: list[int]) -> None:
    """Queues are removed under the append and dispatch locks: a put racing the deletion lands in the
    old queue (destroyed with it) or the new one, never in a destroyed file, and the new queue is
    complete from offset 0."""
    cfg = small_config(mapped_file_size_commit_log=64 * 1024, max_hash_slot_num=512, max_index_num=4096)
    store = MessageStore(tmp_path, cfg, clock=FakeClock(step=1)).open().start()
    results: list[tuple[int, int, PutMessageResult]] = []
    errors: list[BaseException] = []
    threads = [threading.Thread(target=_producer, args=(store, "Churn", t, 400, results, errors)) for t in range(3)]
    for t in threads:
        t.start()
    deletions = 0
    while any(t.is_alive() for t in threads):
        store.delete_topics(["Churn"])
        deletions += 1
        threading.Event().wait(0.005)
    for t in threads:
        t.join()
    assert not errors and deletions > 1
    assert all(r.status == "PUT_OK" for _, _, r in results)
    assert store.wait_for_dispatch()
    # every unit of the queues left points at its record, whose queue offset is the unit's, from 0 on
    # (records put before a deletion stay in the commitlog without a unit)
    for (topic, qid), cq in store.consume_queues.items():
        units = list(cq.iter_all_units())
        assert [u.queue_offset for u in units] == list(range(len(units)))
        for u in units:
            m = store.commit_log.get_message(u.phy_offset, u.size)
            assert m is not None and (m.topic, m.queue_id, m.queue_offset) == (topic, qid, u.queue_offset)
    store.shutdown()


def test_deleted_and_recreated_topic_on_a_started_broker(tmp_path: Path) -> None:
    """A broker's store has the deleted-topics filter set: a record put after the deletion is past its
    cut, so the one call takes it and it is dispatched into the recreated topic, now and after a restart."""
    from broker_core.broker.broker import Broker

    def broker() -> Broker:
        return Broker(tmp_path / "store", broker_config(), clock=FakeClock(step=1)).start()

    b = broker()
    taken = [0]
    real = fast_put._put_fast

    def counting(*args):  # noqa: ANN002, ANN202
        done = real(*args)
        taken[0] += done is not None
        return done

    fast_put._put_fast = counting
    try:
        assert b.store.dispatch_filter is not None and b.store._started
        b.create_or_update_topic("Again", 1, 1)
        for i in range(10):
            assert b.send_message("Again", b"old%d" % i, queue_id=0).status == "SEND_OK"
        assert b.delete_topic("Again")
        b.create_or_update_topic("Again", 1, 1)
        before = taken[0]
        for i in range(10):
            r = b.send_message("Again", b"new%d" % i, queue_id=0)
            assert r.status == "SEND_OK" and r.queue_offset == i
        assert taken[0] - before >= 8  # the first put creates the queue (general path), the rest: one call
        assert b.store.wait_for_dispatch()
        assert [m.body for m in b.pull_message("g", "Again", 0, 0).messages] == [b"new%d" % i for i in range(10)]
    finally:
        fast_put._put_fast = real
    b.shutdown()
    b2 = broker()
    try:
        assert [m.body for m in b2.pull_message("g2", "Again", 0, 0).messages] == [b"new%d" % i for i in range(10)]
    finally:
        b2.shutdown()


def test_crash_after_one_call_puts_on_a_started_store(tmp_path: Path, taken: list[int]) -> None:
    """kill -9 after puts the one call wrote and dispatched on a started store: recovery finds every
    record, its unit and its keys, once."""
    cfg = small_config(max_hash_slot_num=256, max_index_num=1024)
    store = MessageStore(tmp_path, cfg, clock=FakeClock(step=10)).open().start()
    phys = []
    for i in range(300):
        r = store.put_message(make_msg("Crash", i % 2, b"c%d" % i, key=f"k{i}", uniq=f"U{i:08d}"))
        assert r.ok
        phys.append(r.wrote_offset)
    assert taken[0] > 200
    assert store.wait_for_dispatch()
    crash(store)
    store = MessageStore(tmp_path, cfg, clock=FakeClock(step=10)).open()
    try:
        verify_consistency(store)
        for i, phy in enumerate(phys):
            assert store.query_offsets_by_key("Crash", f"k{i}") == [phy]
            assert store.query_offsets_by_key("Crash", f"U{i:08d}") == [phy]
        for qid in (0, 1):
            got = store.get_messages("Crash", qid, 0, 400).messages
            assert [m.body for m in got] == [b"c%d" % i for i in range(qid, 300, 2)]
    finally:
        store.shutdown()


def test_started_store_inner_batches_match_a_store_that_is_not(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                taken: list[int]) -> None:
    """``put_inner_batch_fast`` on a started store: the same BatchCQ, index and commitlog bytes and answers
    as the general path on a store that is not started."""
    import test_put_inner_batch_fast as ib

    from broker_core.store.topic_config import TopicConfig

    items = ib.batches(300)
    clock = StepClock()

    def put_all(root: Path, start: bool) -> list[tuple]:
        store = MessageStore(root, ib.config(), clock=clock).open()
        for topic in {*ib.TOPICS, "BatchA"}:
            store.topic_table.put(TopicConfig(topic, 3, 3, attributes={"queue.type": "BatchCQ"}), 0)
        if start:
            store.start()
        answers: list[tuple] = []
        try:
            for i, (m, n) in enumerate(ib.copy_batches(items)):
                clock.now = BASE_TS + i * 1013
                r = store.put_inner_batch(m, n)
                answers.append((r.status, r.wrote_offset, r.wrote_bytes, r.msg_id, r.queue_offset, r.msg_num,
                                r.store_timestamp, dict(m.properties)))
                if i % 10 == 9:
                    # a starved reput thread (a loaded machine) must not leave a backlog beyond what a
                    # put catches up itself (fast_put.CATCH_UP_MAX): then no put would take the one call
                    assert store.wait_for_dispatch()
            assert store.wait_for_dispatch()
            answers.append(tuple(store.get_max_offset_in_queue(t, q) for t in ib.TOPICS for q in range(3)))
        finally:
            store.shutdown()
        return answers

    with monkeypatch.context() as m:
        m.setattr(message_store, "put_inner_batch_fast", lambda store, msg, inner_num: None)
        general = put_all(tmp_path / "general", False)
    taken[0] = 0
    started = put_all(tmp_path / "started", True)
    assert started == general
    # the one call ran (91-182 of 300 measured: how many depends on when the reput thread runs, e.g.
    # which thread dispatches a queue's first unit; a store that is not started: ~180). Only "it ran"
    # is asserted: a loaded CI machine may schedule the reput thread differently.
    assert taken[0] > 0

    def files(root: Path) -> list[tuple[str, bytes]]:
        return [(str(p.relative_to(root)) if sub != "index" else "index", p.read_bytes())
                for sub in ("commitlog", "batchconsumequeue", "index") for p in sorted((root / sub).rglob("*"))
                if p.is_file()]

    assert files(tmp_path / "general") == files(tmp_path / "started")
