"""A read-only open beside a running broker tells the operator of no recovery and no damage that is
only the broker being ahead of the open's snapshot (probe J).

Why: ``mqadmin topicStatus / brokerStatus / dashboard --store S`` beside a live ``mqbroker --store S``
under load printed, in ~3% of the runs, "recovery: SimpleCQ TopicA/0: torn unit at logical offset
273840 rewritten" (the unit the broker was writing at that moment: the inspection rewrote nothing),
and its timer figures "slot ... links to 538876, outside the TimerLog" / "timer queue offset 7335
beyond the queue's max 7273" (the live wheel and timer checkpoint read against a timer log and a
consume queue fixed earlier in the open; the dashboard logged ~185 of them in one run). The races
are built here deterministically: a real writer (MessageStore + TimerMessageStore, holding the store
lock as mqbroker does) moves on between the steps of the read-only open. The same states on a store
nobody holds are damage, and are still reported.
"""

from __future__ import annotations

import logging
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from store_util import FakeClock, make_msg, small_config

from broker_core.store.codec.message import MessageInner
from broker_core.store.consume_queue import ConsumeQueue
from broker_core.store.message_store import MessageStore
from broker_core.store.store_config import StoreConfig
from broker_core.store.timer import TIMER_TOPIC, convert_to_timer_message
from broker_core.store.timer.timer_message_store import TimerMessageStore

T0 = 1_800_000_000_000
FALSE_ALARMS = ("rewritten", "outside the TimerLog", "beyond the queue's max")


def _alarms(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING
            and any(a in r.getMessage() for a in FALSE_ALARMS)]


# -- a torn consume queue unit the broker completes while the read-only open reads -----------------------

def _tear_newest_unit(root: Path, topic: str, queue_id: int) -> tuple[Path, int, bytes]:
    """Zero the size and tags code of the queue's newest unit, as a unit half-written looks."""
    last = sorted((root / "consumequeue" / topic / str(queue_id)).iterdir())[-1]
    data = bytearray(last.read_bytes())
    end = len(data.rstrip(b"\0"))
    end += -end % 20
    whole = bytes(data[end - 20:end])
    with open(last, "r+b") as f:
        f.seek(end - 20 + 8)
        f.write(bytes(12))
    return last, end - 20, whole


def _complete_after_recover(monkeypatch: pytest.MonkeyPatch, last: Path, pos: int, whole: bytes,
                            then: Callable[[], None]) -> None:
    """The broker finishes writing the unit right after the open's recovery read the queue, then goes
    on (``then``: its next put, into a queue the open reads later)."""
    original = ConsumeQueue.recover

    def recover(self: ConsumeQueue) -> None:
        original(self)
        if self.file_queue.directory == last.parent:
            assert self.torn_unit_at == (int(last.name) + pos)  # the open saw it half-written
            with open(last, "r+b") as f:
                f.seek(pos)
                f.write(whole)
            then()

    monkeypatch.setattr(ConsumeQueue, "recover", recover)


def test_unit_the_live_broker_was_writing_is_not_reported_rewritten(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    root = tmp_path / "store"
    writer = MessageStore(root, small_config(), clock=FakeClock(step=10)).open()  # holds the lock, as mqbroker
    try:
        for i in range(41):
            assert writer.put_message(make_msg("TopicA", i % 2, b"body-%d" % i)).ok
        last, pos, whole = _tear_newest_unit(root, "TopicA", 0)
        _complete_after_recover(monkeypatch, last, pos, whole,
                                lambda: writer.put_message(make_msg("TopicA", 1, b"body-41")))
        with caplog.at_level(logging.INFO):
            ro = MessageStore(root, small_config(), read_only=True).open()
            try:
                got = ro.get_messages("TopicA", 0, 0, 100).messages
                got1 = ro.get_messages("TopicA", 1, 0, 100).messages
            finally:
                ro.shutdown()
        assert [m.body for m in got] == [b"body-%d" % i for i in range(0, 41, 2)]
        assert [m.body for m in got1] == [b"body-%d" % i for i in range(1, 42, 2)]
        assert _alarms(caplog) == []
    finally:
        writer.shutdown()


def test_torn_unit_of_a_crashed_store_opened_read_only_is_not_reported_rewritten(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Nobody holds the store: the read-only open serves the message from the commitlog, writes
    nothing, and says nothing was rewritten; the next broker start rewrites it (as before)."""
    root = tmp_path / "store"
    store = MessageStore(root, small_config(), clock=FakeClock(step=10)).open()
    for i in range(41):
        assert store.put_message(make_msg("TopicA", i % 2, b"body-%d" % i)).ok
    store.shutdown()
    (root / "abort").write_text("4242")  # as a broker killed there leaves it
    last, pos, whole = _tear_newest_unit(root, "TopicA", 0)
    torn = last.read_bytes()
    with caplog.at_level(logging.INFO):
        ro = MessageStore(root, small_config(), read_only=True).open()
        try:
            got = ro.get_messages("TopicA", 0, 0, 100).messages
        finally:
            ro.shutdown()
    assert [m.body for m in got] == [b"body-%d" % i for i in range(0, 41, 2)]
    assert _alarms(caplog) == []
    assert last.read_bytes() == torn  # left as it is


# -- the timer wheel and checkpoint the broker moves on while the read-only open reads --------------------

def _timer_config() -> StoreConfig:
    return StoreConfig(mapped_file_size_commit_log=1 << 20, mapped_file_size_consume_queue=20 * 300,
                       message_index_enable=False, mapped_file_size_timer_log=64 * 1024,
                       timer_roll_window_slot=30)


def _put_timers(ms: MessageStore, clock: FakeClock, first: int, n: int) -> None:
    """``n`` timer messages, due from 5 s to hours away (ROLL units for the far ones)."""
    for i in range(first, first + n):
        msg = MessageInner(topic="RealTopic", body=b"t%d" % i, queue_id=0,
                           properties={"UNIQ_KEY": f"U{i:06d}", "TIMER_DELAY_MS": str(5_000 + (i % 7) * 1_900_000)},
                           born_timestamp=clock(), born_host=("10.0.0.7", 40000))
        converted = convert_to_timer_message(msg, clock(), 1000)
        assert converted is not None and ms.put_message(converted).ok


def _live_timer_writer(root: Path, clock: FakeClock) -> tuple[MessageStore, TimerMessageStore]:
    ms = MessageStore(root, _timer_config(), clock=clock).open()  # not started: dispatch is synchronous
    ts = TimerMessageStore(ms, clock=clock)
    _put_timers(ms, clock, 0, 40)
    ts.tick()
    ts.flush()
    return ms, ts


def test_wheel_slots_past_the_read_only_timer_log_are_the_writers_lag(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """The wheel is read live; the timer log as far as the open scanned it. The broker wheels more
    messages after that scan: their slots link past it. No damage, and the figures are the broker's."""
    root = tmp_path / "store"
    clock = FakeClock(T0)
    ms, ts = _live_timer_writer(root, clock)
    try:
        ro_ms = MessageStore(root, _timer_config(), clock=clock, read_only=True).open()
        ro = TimerMessageStore(ro_ms, clock=clock)  # its timer log snapshot: 40 units
        try:
            before = ts.backlog()
            _put_timers(ms, clock, 40, 40)
            ts.tick()  # 40 more units, every slot's chain head now past the snapshot
            with caplog.at_level(logging.INFO):
                got = ro.backlog()
            want = ts.backlog()
        finally:
            ro.shutdown()
            ro_ms.shutdown()
        assert _alarms(caplog) == []
        assert got.pending == want.pending == 80 == sum(got.due.values())
        assert got.timer_log_max_offset == want.timer_log_max_offset  # the units written since, read
        # The 40 messages the open's commitlog holds are counted by their own due time, as the broker
        # counts them; of the 40 after it, the 6 due in 5 s by their slot, and the 34 parked (ROLL)
        # ones by the slot they are parked in too: their records are past the open's commitlog.
        assert got.due["10s"] == want.due["10s"] == 12
        assert (got.due["1h"], got.due["later"]) == (before.due["1h"], before.due["later"]) == (6, 28)
        assert got.due["1m"] == 34
    finally:
        ts.shutdown()
        ms.shutdown()


def test_timer_checkpoint_newer_than_the_read_only_queue_is_the_writers_lag(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """The open reads the timer topic's queue, then the timer checkpoint, which the broker has moved on
    past that queue meanwhile: not "beyond the queue's max", and nothing shown behind."""
    root = tmp_path / "store"
    clock = FakeClock(T0)
    ms, ts = _live_timer_writer(root, clock)
    try:
        ro_ms = MessageStore(root, _timer_config(), clock=clock, read_only=True).open()
        try:
            _put_timers(ms, clock, 40, 30)
            ts.tick()
            ts.flush()  # the checkpoint now names queue offset 70; the read-only queue ends at 40
            with caplog.at_level(logging.INFO):
                ro = TimerMessageStore(ro_ms, clock=clock)
                b = ro.backlog()
                ro.shutdown()
            assert ro_ms.get_max_offset_in_queue(TIMER_TOPIC, 0) == 40
        finally:
            ro_ms.shutdown()
        assert _alarms(caplog) == []
        assert b.enqueue_behind_messages == 0 and b.queue_offset == 40
    finally:
        ts.shutdown()
        ms.shutdown()


def _lagging_copy(tmp_path: Path) -> Path:
    """A copy of a store whose timer log and timer-topic queue end before its wheel and checkpoint:
    what the read-only open sees of a broker that moved on, frozen."""
    root = tmp_path / "store"
    clock = FakeClock(T0)
    ms, ts = _live_timer_writer(root, clock)
    ts.shutdown()
    ms.shutdown()
    snap = tmp_path / "snap"
    shutil.copytree(root, snap)
    ms = MessageStore(root, _timer_config(), clock=clock).open()
    ts = TimerMessageStore(ms, clock=clock)
    _put_timers(ms, clock, 40, 30)
    ts.tick()
    ts.shutdown()
    ms.shutdown()
    # the newer wheel and checkpoint over the older timer log and queue
    shutil.copy2(root / "timerwheel", snap / "timerwheel")
    shutil.copy2(root / "config" / "timercheck", snap / "config" / "timercheck")
    (snap / "abort").write_text("4242")  # as a running (or killed) broker leaves it
    return snap


_HOLD = ("import sys; from pathlib import Path; from broker_core.store.store_lock import StoreLock; "
         "lock = StoreLock(Path(sys.argv[1])); lock.acquire(); print('ready', flush=True); sys.stdin.read(); "
         "lock.release()")


def test_the_same_lag_on_a_store_a_live_process_holds_is_quiet(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    snap = _lagging_copy(tmp_path)
    holder = subprocess.Popen([sys.executable, "-c", _HOLD, str(snap)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)  # the running broker: its lock, nothing else
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "ready"
        with caplog.at_level(logging.INFO):
            ro_ms = MessageStore(snap, _timer_config(), clock=FakeClock(T0), read_only=True).open()
            ro = TimerMessageStore(ro_ms, clock=FakeClock(T0))
            try:
                b = ro.backlog()
            finally:
                ro.shutdown()
                ro_ms.shutdown()
    finally:
        if holder.stdin is not None:
            holder.stdin.close()
        holder.wait(20)
    assert _alarms(caplog) == []
    assert b.enqueue_behind_messages == 0


def test_the_same_state_on_a_store_nobody_holds_is_still_reported(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    snap = _lagging_copy(tmp_path)
    with caplog.at_level(logging.INFO):
        ro_ms = MessageStore(snap, _timer_config(), clock=FakeClock(T0), read_only=True).open()
        ro = TimerMessageStore(ro_ms, clock=FakeClock(T0))
        try:
            ro.backlog()
        finally:
            ro.shutdown()
            ro_ms.shutdown()
    alarms = _alarms(caplog)
    assert any("timer queue offset 70 beyond the queue's max 40" in a for a in alarms), alarms
    assert any("outside the TimerLog" in a for a in alarms), alarms
