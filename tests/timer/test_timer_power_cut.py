"""A delayed message delivered just before a power cut is not lost (page_cache_model.DiskImage).

Why: the timer's checkpoint says up to which time its slots are done; RocketMQ's TimerFlushService
writes it without waiting for the commitlog to hold the re-puts of those slots. With ASYNC_FLUSH a few
small re-puts wait in the page cache for up to flushCommitLogThoroughInterval, and a power cut then
lost delayed messages that had been on disk since they were sent: the checkpoint said delivered,
the real topic never got them.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from page_cache_model import DiskImage
from test_timer_message_store import T0, FakeClock, _config, _put_timer, _read_all

from broker_core.store.message_store import MessageStore
from broker_core.store.timer.timer_message_store import TimerMessageStore


def test_messages_delivered_before_a_power_cut_are_in_their_topic_after_it(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    image = DiskImage().install(monkeypatch)
    clock = FakeClock(T0)
    ms = MessageStore(tmp_path, _config(), clock=clock).open()
    timer = TimerMessageStore(ms, clock=clock)
    for i in range(5):
        _put_timer(ms, clock, f"u{i}", delay_ms=10_000)
    assert timer.tick().enqueued == 5
    ms.flush()
    timer.flush()  # sent, enqueued, all on disk
    clock.now += 11_000
    assert timer.tick().delivered == 5
    timer.flush()  # the timer flush service's next round; the commitlog's own flush has not run
    image.power_off(tmp_path)
    timer.shutdown()
    ms.shutdown()
    image.cut(tmp_path)
    ms = MessageStore(tmp_path, _config(), clock=clock).open()
    timer = TimerMessageStore(ms, clock=clock)
    try:
        for _ in range(3):
            clock.now += 1000
            timer.tick()
        assert sorted(m.properties["UNIQ_KEY"] for m in _read_all(ms, "RealTopic")) == [f"u{i}" for i in range(5)]
    finally:
        timer.shutdown()
        ms.shutdown()
