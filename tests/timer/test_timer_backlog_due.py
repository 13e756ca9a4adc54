"""The timer's due-in histogram (brokerStatus timerDueIn_*) counts each message at its own due time.

Why: a message further away than timerRollWindowSlot gets a ROLL unit that only parks it in a slot
one window ahead; when that slot fires it is re-put into the timer topic and wheeled again. Bucketing
by the slot's firing time counted messages hours or days away as due within seconds (window 30: 5,000
messages 1 h..3 days away showed as timerDueIn_10s / timerDueIn_1m, none "later").
"""

from __future__ import annotations

from pathlib import Path

from test_timer_message_store import T0, FakeClock, _config, _put_timer

from broker_core.store.codec.timer_format import MAGIC_ROLL
from broker_core.store.message_store import MessageStore
from broker_core.store.timer.timer_message_store import TimerMessageStore

HOUR = 3_600_000
NO_DUE = {"10s": 0, "1m": 0, "10m": 0, "1h": 0, "later": 0}


def _open(root: Path, clock: FakeClock, window: int) -> tuple[MessageStore, TimerMessageStore]:
    ms = MessageStore(root, _config(timer_roll_window_slot=window), clock=clock).open()
    return ms, TimerMessageStore(ms, clock=clock)


def _count_reads(ts: TimerMessageStore) -> list[int]:
    """Count the commitlog reads backlog() makes for ROLL units' own due times."""
    reads = [0]
    get_data = ts._get_data

    def counting(offset: int, size: int | None = None) -> bytes | None:
        reads[0] += 1
        return get_data(offset, size)

    ts._get_data = counting
    return reads


def test_far_messages_parked_by_a_small_roll_window_are_later(tmp_path: Path) -> None:
    clock = FakeClock(T0)
    ms, ts = _open(tmp_path / "s", clock, window=30)
    try:
        for i in range(50):  # 2 h .. 3 days away: all parked 15 or 30 s ahead
            _put_timer(ms, clock, f"F{i}", delay_ms=2 * HOUR + i * (70 * HOUR // 50))
        _put_timer(ms, clock, "N5", delay_ms=5_000)  # a plain unit: 10s
        _put_timer(ms, clock, "R45", delay_ms=45_000)  # a ROLL unit itself due within the minute
        ts.tick()
        units = [u for _, u in ts.timer_log.iterate()]
        assert sum(1 for u in units if u.magic & MAGIC_ROLL) == 51
        assert max(u.delivery_ms for u in units) <= T0 + 30_000  # every unit's slot fires within 31 s
        b = ts.backlog()
        assert b.pending == 52
        assert b.due == {**NO_DUE, "10s": 1, "1m": 1, "later": 50}
        for _ in range(45):  # rolled again meanwhile: the figures follow each message, not slots
            clock.now += 1_000
            ts.tick()
        assert sum(1 for u in ts.timer_log.iterate()) > 52 + 50  # rolled again
        b = ts.backlog()
        assert b.pending == 50 and b.due == {**NO_DUE, "later": 50}
    finally:
        ts.shutdown()
        ms.shutdown()


def test_a_slot_with_a_parked_and_a_due_message_splits(tmp_path: Path) -> None:
    clock = FakeClock(T0)
    ms, ts = _open(tmp_path / "s", clock, window=30)
    try:
        _put_timer(ms, clock, "FAR", delay_ms=2 * HOUR)  # parked at T0 + 30 s
        ts.tick()
        clock.now = T0 + 1_000
        ts.tick()  # the write pointer at T0 + 1 s: 29 s ahead is inside the window
        _put_timer(ms, clock, "NEAR", deliver_ms=T0 + 30_500)  # due at T0 + 30 s: the same slot
        ts.tick()
        slot = ts.timer_wheel.get_slot(T0 + 30_000)
        assert slot.num == 2
        assert ts.backlog().due == {**NO_DUE, "1m": 1, "later": 1}
    finally:
        ts.shutdown()
        ms.shutdown()


def test_units_are_read_once_and_far_slots_never(tmp_path: Path) -> None:
    """brokerStatus on a large backlog: a slot firing past the last bucket (1 h) is "later" without a
    look at its units, and a near slot's ROLL units are read once, not on every call."""
    clock = FakeClock(T0)
    ms, ts = _open(tmp_path / "s", clock, window=7_200)  # 2 h: far messages park 1 h or 2 h ahead
    try:
        for i in range(20):
            _put_timer(ms, clock, f"P{i}", delay_ms=3 * HOUR + i * 60_000)  # parked at T0 + 2 h
        ts.tick()
        reads = _count_reads(ts)
        assert ts.backlog().due == {**NO_DUE, "later": 20}
        assert reads[0] == 0
        clock.now = T0 + 2 * HOUR - 30 * 60_000  # the parking slot now fires within the hour
        assert ts.backlog().due == {**NO_DUE, "later": 20}
        assert reads[0] == 20
        assert ts.backlog().due == {**NO_DUE, "later": 20}
        assert reads[0] == 20
    finally:
        ts.shutdown()
        ms.shutdown()
