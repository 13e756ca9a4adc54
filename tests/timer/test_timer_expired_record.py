"""Timer messages whose commitlog record retention deleted before they were due: said once, and counted.

What a user saw: nothing. The wheel fired the slots, found no record, added 1 to TickResult.missing (which
nothing read) and went on; 1,600 timer messages could vanish without one log line. Apache logs WARN "Fail
to read msg from commitLog offsetPy:{} sizePy:{}" and counts dequeue_get_msg_miss. Here one WARN per tick
gives the count and the first offset/size, and the broker's runtime info has timerDequeueGetMsgMiss.
"""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from broker_core.broker.broker import Broker
from broker_core.broker.broker_config import BrokerConfig
from mqadmin.figures import timer_backlog_from

SIZES = {"mappedFileSizeCommitLog": str(64 * 1024), "mappedFileSizeConsumeQueue": str(20 * 16),
         "maxHashSlotNum": "16", "maxIndexNum": "24"}


class Clock:
    def __init__(self) -> None:
        self.now = 1_700_000_000_000

    def __call__(self) -> int:
        return self.now


def test_timer_messages_lost_to_retention_are_warned_once_per_tick_and_counted(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    clock = Clock()
    b = Broker(tmp_path / "store", BrokerConfig.from_properties(dict(SIZES)), clock=clock)
    try:
        b.create_or_update_topic("T", 1, 1)
        b.create_or_update_topic("Fill", 1, 1)
        for i in range(5):
            b.send_message("T", f"t{i}".encode(), {"TIMER_DELAY_SEC": "60"}, queue_id=0)
        assert b.tick().timer.enqueued == 5  # in the wheel, due in 60 s
        while b.store.commit_log.min_offset() == 0:
            for _ in range(20):
                b.send_message("Fill", b"f" * 1000, queue_id=0)
            b.store.retention.mtime_of = lambda path: 0  # every full file expired
            b.delete_expired_commit_log()
        clock.now += 60_000
        with caplog.at_level(logging.WARNING, logger="rmqops.store.timer"):
            tick = b.tick().timer
        assert tick.missing == 5 and tick.delivered == 0
        warned = [r.getMessage() for r in caplog.records if "Fail to read msg from commitLog" in r.getMessage()]
        assert len(warned) == 1, warned
        assert "5 timer message(s)" in warned[0] and "offsetPy:" in warned[0] and "sizePy:" in warned[0]
        assert b.timer_backlog().missing == 5
        assert b.broker_runtime_info()["timerDequeueGetMsgMiss"] == "5"
        # what brokerStatus and the dashboard's Timers screen read
        backlog = timer_backlog_from(b.broker_runtime_info())
        assert backlog is not None and backlog.lost_to_retention == 5
    finally:
        b.shutdown()
