"""Delay-level messages of a deleted topic never come back into a topic made again under the name.

What a user saw: a DELAY=n message still in SCHEDULE_TOPIC_XXXX when its topic was deleted was re-put
into REAL_TOPIC when due, which made the deleted topic's queue again; a topic created again under the
name served it from offset 0. Now it is passed over (counted, logged, the level's offset moves past
it); a topic that was never deleted still gets its messages, existing or not (RocketMQ's behaviour).
"""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from hooked_store import T0, FakeClock, broker_put, open_store

from broker_core.store.codec.message import MessageInner
from broker_core.store.deleted_topics import deleted_before_cut
from broker_core.store.message_store import MessageStore
from broker_core.store.schedule import ScheduleMessageService

LEVEL_6_MS = 120_000  # the default table: 1s 5s 10s 30s 1m 2m ...


def _delay(topic: str, body: bytes) -> MessageInner:
    return MessageInner(topic=topic, body=body, properties={"DELAY": "6", "UNIQ_KEY": body.decode()}, queue_id=0,
                        born_timestamp=T0)


def _bodies(store: MessageStore, topic: str) -> list[bytes]:
    return [m.body for m in store.get_messages(topic, 0, 0, 100).messages]


def test_due_delay_messages_of_a_deleted_topic_are_not_delivered(tmp_path: Path, clock: FakeClock,
                                                                    caplog: pytest.LogCaptureFixture) -> None:
    store = open_store(tmp_path / "s", clock)
    tombstones: dict[str, int] = {}  # the broker's tombstones, as TopicManager.dispatch_filter reads them
    store.dispatch_filter = lambda topic, offset: not deleted_before_cut(tombstones, topic, offset)
    put = broker_put(store, clock)
    svc = ScheduleMessageService(store, put, clock=clock)
    try:
        assert put(_delay("TDEL", b"old-1")).ok
        assert put(_delay("NeverMade", b"kept")).ok
        store.delete_topics(["TDEL"], on_cut=lambda cut: tombstones.__setitem__("TDEL", cut))
        clock.advance(1_000)
        assert put(_delay("TDEL", b"new-1")).ok  # sent to the topic made again
        clock.now = T0 + 1_000 + LEVEL_6_MS
        with caplog.at_level(logging.WARNING, "rmqops.schedule"):
            assert svc.tick() == 2
        assert _bodies(store, "TDEL") == [b"new-1"]
        assert _bodies(store, "NeverMade") == [b"kept"]
        assert svc.deleted_topic_dropped == 1
        lines = [r.getMessage() for r in caplog.records if "was deleted" in r.getMessage()]
        assert len(lines) == 1 and "old-1" in lines[0] and "TDEL" in lines[0], lines
        [level6] = [s for s in svc.stats() if s.level == 6]
        assert level6.pending == 0 and level6.offset == 3  # moved past it, no retry
        assert svc.tick() == 0 and svc.deleted_topic_dropped == 1
        assert _bodies(store, "TDEL") == [b"new-1"]
    finally:
        svc.shutdown()
        store.shutdown()
