"""A transaction committed after its topic was deleted does not put the message into a topic made again.

What a user would see: a half message prepared for a topic, the topic deleted, made again, then the
transaction committed (by the producer or answering a check-back): the commit re-puts the half into
REAL_TOPIC, and the new topic served the deleted topic's message from offset 0. Now such a commit is
answered SYSTEM_ERROR naming the topic, the half is marked done (an op marker, no more check-backs),
counted and logged; the check scan does the same instead of renewing the half (its renewed copy would
be written past the deletion's cut). A half whose topic was never deleted commits as before.
"""

from __future__ import annotations

import dataclasses
import logging
from pathlib import Path

import pytest
from hooked_store import FakeClock, open_store
from test_transactions import COMMIT, TOPIC, FakeProducer, end, make_service, op_offsets, tx_msg, visible

from broker_core.broker.transaction import EndTransactionStatus
from broker_core.store.deleted_topics import deleted_before_cut
from broker_core.store.message_store import MessageStore


def _with_tombstones(store: MessageStore) -> dict[str, int]:
    tombstones: dict[str, int] = {}
    store.dispatch_filter = lambda topic, offset: not deleted_before_cut(tombstones, topic, offset)
    return tombstones


def test_commit_after_the_topic_was_deleted_does_not_deliver(tmp_path: Path, clock: FakeClock,
                                                              caplog: pytest.LogCaptureFixture) -> None:
    store = open_store(tmp_path / "s", clock)
    tombstones = _with_tombstones(store)
    svc = make_service(store, clock)
    try:
        old = svc.prepare_message(tx_msg("old"))
        store.delete_topics([TOPIC], on_cut=lambda cut: tombstones.__setitem__(TOPIC, cut))
        new = svc.prepare_message(tx_msg("new"))
        clock.advance(50)
        with caplog.at_level(logging.WARNING):
            refused = end(svc, old, COMMIT)
        assert refused.status is EndTransactionStatus.SYSTEM_ERROR
        assert refused.remark == (f"topic {TOPIC} was deleted after the half message at commit log offset "
                                  f"{old.wrote_offset} was stored; the message is not delivered")
        assert end(svc, new, COMMIT).ok
        assert [m.body for m in visible(store)] == [b"new"]
        svc.batch_send_op_message(force=True)
        assert sorted(op_offsets(store)) == [old.queue_offset, new.queue_offset]  # both done: no check-back
        assert svc.metrics.counters.deleted_topic == 1 and svc.metrics.counters.commits == 1
        assert svc.half_messages_pending(TOPIC) == 0
        lines = [r.getMessage() for r in caplog.records if "was deleted" in r.getMessage()]
        assert len(lines) == 1 and "old" in lines[0] and TOPIC in lines[0], lines
    finally:
        store.shutdown()


def test_the_check_scan_does_not_renew_a_half_of_a_deleted_topic(tmp_path: Path, clock: FakeClock) -> None:
    """Renewed, the half is a new record past the cut: a COMMIT answering its check-back would deliver it."""
    store = open_store(tmp_path / "s", clock)
    tombstones = _with_tombstones(store)
    producer = FakeProducer([COMMIT])
    svc = make_service(store, clock, producer, transaction_timeout=1_000)
    try:
        old = svc.prepare_message(tx_msg("old"))
        kept = svc.prepare_message(dataclasses.replace(tx_msg("kept"), topic="OtherTx"))
        store.delete_topics([TOPIC], on_cut=lambda cut: tombstones.__setitem__(TOPIC, cut))
        assert old.ok and kept.ok
        clock.advance(5_000)
        report = svc.check()
        assert [h.uniq_key for h in producer.checks] == [h.uniq_key for h in report.checked] == ["kept"]
        assert svc.metrics.counters.deleted_topic == 1
        assert store.find_consume_queue(TOPIC, 1) is None  # the deleted topic's queue was not made again
        assert [m.body for m in visible(store, "OtherTx")] == [b"kept"]  # never deleted: checked, committed
        clock.advance(5_000)
        assert svc.check().checked == [] and svc.metrics.counters.deleted_topic == 1  # moved past it
    finally:
        store.shutdown()
