"""A refused timer re-put is logged once a minute, and once more when re-puts work again.

Why: on a full disk every re-put comes back SERVICE_NOT_AVAILABLE (a put status, not an exception)
and the timer retries it every tick, ten times a second; each retry logged a WARNING, so a full disk
buried the broker's log (345 lines in 35 s). The delivery itself must still resume where it stopped.
"""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from test_timer_message_store import T0, FakeClock, _config, _put_timer, _read_all

from broker_core.store.codec.message import MessageInner
from broker_core.store.commit_log import PutMessageResult, PutMessageStatus
from broker_core.store.message_store import MessageStore
from broker_core.store.timer.timer_message_store import TimerMessageStore

_DISK_FULL = "disk full: /store/commitlog is 100% used (diskSpaceWarningLevelRatio 90%)"


class _Disk:
    """A put_message_hook refusing every re-put as a full disk does while ``full`` is set."""

    def __init__(self, ms: MessageStore) -> None:
        self.ms = ms
        self.full = False
        self.refused = 0

    def put(self, msg: MessageInner) -> PutMessageResult:
        if self.full:
            self.refused += 1
            return PutMessageResult(PutMessageStatus.SERVICE_NOT_AVAILABLE, remark=_DISK_FULL)
        return self.ms.put_message(msg)


def _reput_lines(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == "rmqops.store.timer" and "re-put" in r.getMessage()]


def _tick_for(ts: TimerMessageStore, clock: FakeClock, ms_total: int, step_ms: int = 100) -> None:
    """Tick every ``step_ms`` for ``ms_total`` of clock time, as the background thread does."""
    for _ in range(ms_total // step_ms):
        clock.now += step_ms
        ts.tick()


def test_refused_reput_is_said_once_a_minute_and_when_it_works_again(tmp_path: Path,
                                                                    caplog: pytest.LogCaptureFixture) -> None:
    clock = FakeClock(T0)
    ms = MessageStore(tmp_path / "s", _config(), clock=clock).open()
    disk = _Disk(ms)
    ts = TimerMessageStore(ms, clock=clock, put_message_hook=disk.put)
    caplog.set_level(logging.INFO, logger="rmqops.store.timer")
    try:
        for i in range(3):
            _put_timer(ms, clock, f"D{i}", delay_ms=2_000)
        assert ts.tick().enqueued == 3
        disk.full = True
        _tick_for(ts, clock, 35_000)  # the tester's 35 s: 350 ticks, each retrying the first message
        assert disk.refused > 300
        lines = _reput_lines(caplog)
        assert len(lines) == 1, [r.getMessage() for r in lines]
        assert "SERVICE_NOT_AVAILABLE" in lines[0].getMessage() and _DISK_FULL in lines[0].getMessage()
        assert _read_all(ms, "RealTopic") == []

        _tick_for(ts, clock, 30_000)  # past the minute: said again, with how often it was retried
        lines = _reput_lines(caplog)
        assert len(lines) == 2 and "more time(s)" in lines[1].getMessage()

        disk.full = False
        clock.now += 100
        assert ts.tick().delivered == 3  # resumes where it stopped: nothing lost, nothing twice
        assert [m.properties["UNIQ_KEY"] for m in _read_all(ms, "RealTopic")] == ["D0", "D1", "D2"]
        again = [r for r in _reput_lines(caplog) if "works again" in r.getMessage()]
        assert [r.levelname for r in again] == ["WARNING"]
        assert _DISK_FULL in again[0].getMessage()
        _tick_for(ts, clock, 5_000)
        assert len(_reput_lines(caplog)) == 3  # nothing more once it works
    finally:
        ts.shutdown()
        ms.shutdown()


def test_a_put_that_raises_is_rate_limited_too(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """An exception from the put (a bug, not a status) keeps its traceback, but once a minute too."""
    clock = FakeClock(T0)
    ms = MessageStore(tmp_path / "s", _config(), clock=clock).open()
    failing = [True]

    def put(msg: MessageInner) -> PutMessageResult:
        if failing[0]:
            raise RuntimeError("put exploded")
        return ms.put_message(msg)

    ts = TimerMessageStore(ms, clock=clock, put_message_hook=put)
    caplog.set_level(logging.INFO, logger="rmqops.store.timer")
    try:
        _put_timer(ms, clock, "E0", delay_ms=1_000)
        ts.tick()
        _tick_for(ts, clock, 10_000)
        lines = _reput_lines(caplog)
        assert len(lines) == 1 and lines[0].exc_info is not None
        failing[0] = False
        clock.now += 100
        assert ts.tick().delivered == 1
        assert any("works again" in r.getMessage() for r in _reput_lines(caplog))
    finally:
        ts.shutdown()
        ms.shutdown()
