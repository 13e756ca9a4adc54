"""BatchConsumeQueue min offset after retention deletes whole BCQ files, on a store that stays open.

Retention deleted commitlog files and then every BCQ file whose units all pointed at them; when the
cut fell exactly between two BCQ files, the first file left started with a unit whose record is kept,
and the live min offset stayed where it was (0 on a fresh queue): pulls from there found nothing and
crawled forward one offset at a time, queryMsgByOffset said OFFSET_FOUND_NULL, retention's "not yet
consumed" report missed the queue and a by-time lookup clamped to the stale min. Only a reopen (which
reads the first file's first msgBaseOffset) moved it. As Apache's BatchConsumeQueue.correctMinOffset,
the min now starts from the first remaining file's first unit, so the live store answers as a reopened
one does: OFFSET_TOO_SMALL with the new min as the next offset.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from store_util import BASE_TS, FakeClock, make_msg, small_config

from broker_core.store.batch_consume_queue import BatchConsumeQueue
from broker_core.store.codec.batch import BatchItem, encode_batch
from broker_core.store.message_store import GetMessageStatus, MessageStore
from broker_core.store.topic_config import TopicConfig

HOUR = 3_600_000
TOPIC = "BatchRet"
BATCH = 5


def batch_store(root: Path, clock: FakeClock, records: int = 40) -> MessageStore:
    """A BatchCQ queue of ``records`` inner batches of 5 messages (3 records a commitlog file, 8 units a
    BCQ file), retention forced by the test."""
    store = MessageStore(root, small_config(), clock=clock).open()
    store.topic_table.put(TopicConfig(TOPIC, 1, 1, attributes={"queue.type": "BatchCQ"}), 0)
    for i in range(records):
        body = encode_batch([BatchItem(b"%d.%d-" % (i, j) + b"y" * 200) for j in range(BATCH)])
        assert store.put_inner_batch(make_msg(TOPIC, 0, body), BATCH).ok
    return store


def expire_first(store: MessageStore, n: int, now: int) -> None:
    """The first ``n`` commitlog files (as the store lists them now) are older than fileReservedTime."""
    old = {mf.path.name for mf in store.commit_log.file_queue.files[:n]}
    store.retention.mtime_of = lambda p: now - 100 * HOUR if p.name in old else now


def aligned_cut(cq: BatchConsumeQueue, commit_log_file_size: int) -> tuple[int, int]:
    """(commitlog files to delete, BCQ files they take along) such that the first BCQ file left starts
    exactly at a commitlog file: the case where no unit left points below the commitlog min."""
    for j, mf in enumerate(cq.file_queue.files[1:-1], 1):
        phy = cq._unit_at(mf.mv, 0).phy_offset
        if phy % commit_log_file_size == 0:
            return phy // commit_log_file_size, j
    raise AssertionError("no BCQ file starts at a commitlog file: the sizes of this test drifted")


def first_kept_base(cq: BatchConsumeQueue, commit_log_min: int) -> int:
    """What a reader may read from: the base of the first unit whose record is still in the commitlog."""
    return next(u.queue_offset for u in cq.iter_all_units() if u.phy_offset >= commit_log_min)


@pytest.mark.parametrize("steps", ["at once", "one file short, then the rest"])
def test_retention_moves_the_batch_cq_min_to_the_first_file_left(tmp_path: Path, steps: str) -> None:
    clock = FakeClock(BASE_TS + 10 * HOUR, step=1)
    store = batch_store(tmp_path, clock)
    try:
        cq = store.consume_queues[(TOPIC, 0)]
        assert isinstance(cq, BatchConsumeQueue)
        cut, bcq_files = aligned_cut(cq, store.commit_log.file_size)
        first_left = cq.file_queue.files[bcq_files]
        want = cq._unit_at(first_left.mv, 0).queue_offset
        assert want > 0 and store.get_min_offset_in_queue(TOPIC, 0) == 0
        if steps != "at once":
            # one commitlog file fewer: the last BCQ file to go stays, its units below the min raise it
            expire_first(store, cut - 1, clock.now)
            store.delete_expired_files(force=True)
            assert 0 < store.get_min_offset_in_queue(TOPIC, 0) < want
        gone = store.commit_log.file_queue.files[0].file_from_offset // store.commit_log.file_size
        expire_first(store, cut - gone, clock.now)
        before = store.get_min_offset_in_queue(TOPIC, 0)
        rep = store.delete_expired_files(force=True)
        cl_min = store.get_min_phy_offset()
        assert cl_min == cut * store.commit_log.file_size
        assert cq.file_queue.files[0] is first_left  # the BCQ files before it went
        assert first_kept_base(cq, cl_min) == want

        # the live store answers from the first message left
        assert store.get_min_offset_in_queue(TOPIC, 0) == want
        for offset in (0, before, want - 1):
            r = store.get_messages(TOPIC, 0, offset, 4)
            assert (r.status, r.next_begin_offset, r.min_offset) == (GetMessageStatus.OFFSET_TOO_SMALL, want, want)
        r = store.get_messages(TOPIC, 0, want, 4)
        assert r.status is GetMessageStatus.FOUND and [m.queue_offset for m in r.messages] == list(range(want,
                                                                                                          want + 4))
        assert store.get_offset_in_queue_by_time(TOPIC, 0, 0) == want
        assert [(d.topic, d.queue_id, d.from_offset, d.to_offset) for d in rep.dropped] == [(TOPIC, 0, before, want)]
        max_offset = store.get_max_offset_in_queue(TOPIC, 0)
    finally:
        store.shutdown()
    store = MessageStore(tmp_path, small_config(), clock=clock).open()  # a reopen reads the same min
    try:
        assert (store.get_min_offset_in_queue(TOPIC, 0), store.get_max_offset_in_queue(TOPIC, 0)) == (want,
                                                                                                     max_offset)
    finally:
        store.shutdown()
