"""Timer messages of a deleted topic never come back into a topic made again under the name.

What a user saw: timer messages still in the wheel when their topic was deleted (deleteTopic) were
re-put into REAL_TOPIC when due, which made the deleted topic's queue again; a topic created again
under the name then served both old messages from offset 0. The re-put is a new record past the
deletion's cut, so the store's dispatch check let it through. Now a due message whose REAL_TOPIC was
deleted after it was stored is neither delivered nor rolled on: counted, logged, the wheel moves past
it. A topic that never existed and was never deleted still gets its messages (RocketMQ's behaviour).
"""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from test_timer_message_store import T0, FakeClock, _config, _put_timer, _read_all

from broker_core.store.deleted_topics import deleted_before_cut
from broker_core.store.message_store import MessageStore
from broker_core.store.timer.timer_message_store import TimerMessageStore


def _with_tombstones(ms: MessageStore) -> dict[str, int]:
    """The broker's tombstones as the store sees them (Broker installs TopicManager.dispatch_filter)."""
    tombstones: dict[str, int] = {}
    ms.dispatch_filter = lambda topic, offset: not deleted_before_cut(tombstones, topic, offset)
    return tombstones


def _delete_topic(ms: MessageStore, tombstones: dict[str, int], topic: str) -> None:
    """What TopicManager.delete does to the store: the queues go, the cut is tombstoned."""
    ms.delete_topics([topic], on_cut=lambda cut: tombstones.__setitem__(topic, cut))


def test_due_timer_messages_of_a_deleted_topic_are_not_delivered(tmp_path: Path,
                                                                   caplog: pytest.LogCaptureFixture) -> None:
    clock = FakeClock(T0)
    ms = MessageStore(tmp_path / "s", _config(), clock=clock).open()
    tombstones = _with_tombstones(ms)
    ts = TimerMessageStore(ms, clock=clock)
    try:
        _put_timer(ms, clock, "old-1", delay_ms=6_000, topic="TDEL")
        _put_timer(ms, clock, "never-deleted", delay_ms=6_000, topic="NeverMade")
        assert ts.tick().enqueued == 2
        _delete_topic(ms, tombstones, "TDEL")
        clock.now = T0 + 3_000
        assert ts.tick().delivered == 0
        _put_timer(ms, clock, "new-1", delay_ms=3_000, topic="TDEL")  # sent after the deletion
        clock.now = T0 + 8_000
        with caplog.at_level(logging.WARNING, "rmqops.store.timer"):
            result = ts.tick()
        assert [m.body for m in _read_all(ms, "TDEL")] == [b"body-new-1"]
        assert [m.body for m in _read_all(ms, "NeverMade")] == [b"body-never-deleted"]
        assert result.deleted_topic == 1 and result.delivered == 2 and not result.blocked
        assert ts.deleted_topic_dropped == 1
        lines = [r.getMessage() for r in caplog.records if "was deleted" in r.getMessage()]
        assert len(lines) == 1 and "old-1" in lines[0] and "TDEL" in lines[0], lines
        # the wheel moved past it: nothing pending, no retry, nothing more on later ticks
        assert ts.get_all_congest_num() == 0 and ts.curr_read_time_ms > T0 + 6_000
        clock.now = T0 + 20_000
        assert ts.tick().deleted_topic == 0
        assert [m.body for m in _read_all(ms, "TDEL")] == [b"body-new-1"]
        ts.flush()
    finally:
        ts.shutdown()
        ms.shutdown()
    # after a restart the checkpoint is past it too: not delivered, not counted again
    ms = MessageStore(tmp_path / "s", _config(), clock=clock).open()
    tombstones2 = _with_tombstones(ms)
    tombstones2.update(tombstones)
    ts = TimerMessageStore(ms, clock=clock)
    try:
        clock.now = T0 + 30_000
        assert ts.tick().deleted_topic == 0
        assert [m.body for m in _read_all(ms, "TDEL")] == [b"body-new-1"]
    finally:
        ts.shutdown()
        ms.shutdown()


def test_a_rolling_timer_message_of_a_deleted_topic_is_not_rolled_on(tmp_path: Path) -> None:
    """A long delay rolls through the timer topic (a new record each time): the roll after the deletion
    drops it, or the copy written past the cut would be delivered later."""
    clock = FakeClock(T0)
    ms = MessageStore(tmp_path / "s", _config(timer_roll_window_slot=10), clock=clock).open()
    tombstones = _with_tombstones(ms)
    ts = TimerMessageStore(ms, clock=clock)
    try:
        _put_timer(ms, clock, "far", delay_ms=25_000, topic="TDEL")
        assert ts.tick().enqueued == 1
        clock.now = T0 + 11_000
        assert ts.tick().rolled == 1  # rolled once while the topic existed
        _delete_topic(ms, tombstones, "TDEL")
        rolled = deleted = 0
        for t in range(12_000, 40_000, 1_000):
            clock.now = T0 + t
            r = ts.tick()
            rolled, deleted = rolled + r.rolled, deleted + r.deleted_topic
            assert r.delivered == 0
        assert (rolled, deleted) == (0, 1)
        assert ms.find_consume_queue("TDEL", 0) is None  # the old topic's queue was not made again
    finally:
        ts.shutdown()
        ms.shutdown()
