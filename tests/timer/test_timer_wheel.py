"""TimerWheel file semantics (Java TimerWheel) including the §13.8 slot bytes."""

from __future__ import annotations

from pathlib import Path

import pytest

from broker_core.store.codec.timer_format import EMPTY_SLOT, Slot
from broker_core.store.timer.timer_wheel import IGNORE, TimerWheel, TimerWheelError

T = 1700000010000
LAP_MS = 2 * 604_800 * 1000  # one lap of the wheel file


@pytest.fixture
def wheel(tmp_path: Path):
    w = TimerWheel(tmp_path / "timerwheel")
    yield w
    w.close()


def test_new_wheel_is_full_size_and_empty(tmp_path: Path, wheel: TimerWheel) -> None:
    assert (tmp_path / "timerwheel").stat().st_size == 38_707_200
    assert wheel.get_slot(T) == EMPTY_SLOT
    assert wheel.get_all_num(T) == 0
    assert list(wheel.iter_slots()) == []


def test_vector_slot_lands_at_its_byte_offset(tmp_path: Path) -> None:
    path = tmp_path / "timerwheel"
    with TimerWheel(path) as w:
        assert w.get_slot_index(T) == 512010
        w.put_slot(T, 0, 0, 1, 0)
        assert w.get_slot(T) == Slot(T, 0, 0, 1, 0)
    data = path.read_bytes()
    assert data[16_384_320:16_384_352] == bytes.fromhex(
        "000000006553f10a" "0000000000000000" "0000000000000000" "00000001" "00000000")
    # nothing else was touched
    assert data[:16_384_320] == bytes(16_384_320) and data[16_384_352:] == bytes(len(data) - 16_384_352)


def test_slot_time_is_rounded_to_precision(wheel: TimerWheel) -> None:
    wheel.put_slot(T + 999, 52, 104, 2, 0)
    assert wheel.get_slot(T) == Slot(T, 52, 104, 2, 0)
    assert wheel.get_slot(T + 500) == Slot(T, 52, 104, 2, 0)
    assert wheel.get_slot(T + 1000) == EMPTY_SLOT


def test_other_lap_reads_empty(wheel: TimerWheel) -> None:
    wheel.put_slot(T, 0, 52, 2, 0)
    assert wheel.get_slot_index(T + LAP_MS) == wheel.get_slot_index(T)
    assert wheel.get_slot(T + LAP_MS) == EMPTY_SLOT
    assert wheel.get_slot(T - LAP_MS) == EMPTY_SLOT
    assert wheel.get_raw_slot(T + LAP_MS) == Slot(T, 0, 52, 2, 0)


def test_three_field_put_keeps_num_and_magic(wheel: TimerWheel) -> None:
    wheel.put_slot(T, 0, 52, 5, 3)
    wheel.put_slot(T, 10, 20)
    assert wheel.get_slot(T) == Slot(T, 10, 20, 5, 3)
    wheel.put_slot(T, 10, 30, num=6)
    assert wheel.get_slot(T) == Slot(T, 10, 30, 6, 3)


def test_revise_slot(wheel: TimerWheel) -> None:
    # different lap, not forced: untouched
    wheel.revise_slot(T, IGNORE, 104, force=False)
    assert wheel.get_slot(T) == EMPTY_SLOT
    # forced on an empty slot: first defaults to last, num stays 0
    wheel.revise_slot(T, IGNORE, 104, force=True)
    assert wheel.get_slot(T) == Slot(T, 104, 104, 0, 0)
    # same lap: only lastPos moves with IGNORE first
    wheel.revise_slot(T, IGNORE, 208, force=True)
    assert wheel.get_slot(T) == Slot(T, 104, 208, 0, 0)
    wheel.revise_slot(T, 52, IGNORE, force=False)
    assert wheel.get_slot(T) == Slot(T, 52, 208, 0, 0)
    # a forced revise over an older lap replaces the slot
    wheel.revise_slot(T + LAP_MS, 0, 0, force=True)
    assert wheel.get_slot(T) == EMPTY_SLOT
    assert wheel.get_slot(T + LAP_MS) == Slot(T + LAP_MS, 0, 0, 0, 0)


def test_window_counts_and_phy_pos(wheel: TimerWheel) -> None:
    wheel.put_slot(T, 0, 52, 2, 0)
    wheel.put_slot(T + 5_000, 104, 104, 1, 0)
    wheel.put_slot(T + 86_400_000, 156, 312, 3, 0)
    wheel.put_slot(T - 1000, 400, 400, 7, 0)  # before the window start
    assert wheel.get_all_num(T) == 6
    assert wheel.get_all_num(T - 1000) == 13
    assert wheel.get_all_num(T + 1000) == 4
    assert wheel.get_num(T + 5_000) == 1
    assert [s.time_ms for _, s in wheel.iter_slots(T)] == [T, T + 5_000, T + 86_400_000]
    assert wheel.check_phy_pos(T, 100) == 104  # slots with lastPos > 100: first positions 104, 156
    assert wheel.check_phy_pos(T, 1000) == (1 << 63) - 1


def test_clear(wheel: TimerWheel) -> None:
    wheel.put_slot(T, 0, 52, 2, 0)
    wheel.put_slot(T + 1000, 104, 104, 1, 0)
    wheel.clear_slot(T)
    assert wheel.get_slot(T) == EMPTY_SLOT and wheel.get_num(T + 1000) == 1
    wheel.clear()
    assert list(wheel.iter_slots()) == []


def test_precision_other_than_one_second(tmp_path: Path) -> None:
    with TimerWheel(tmp_path / "w", slots_total=100, precision_ms=100) as w:
        assert w.wheel_length == 6400
        assert w.get_slot_index(1_234) == 12
        assert w.get_slot_index(1_234 + 200 * 100) == 12
        w.put_slot(1_234, 0, 0, 1, 0)
        assert w.get_slot(1_200) == Slot(1_200, 0, 0, 1, 0)
        assert w.format_time_ms(1_299) == 1_200


def test_reopen_and_read_only(tmp_path: Path) -> None:
    path = tmp_path / "timerwheel"
    with TimerWheel(path) as w:
        w.put_slot(T, 0, 52, 2, 0)
    before = path.read_bytes()
    with TimerWheel(path, read_only=True) as ro:
        assert ro.get_slot(T) == Slot(T, 0, 52, 2, 0)
        with pytest.raises(PermissionError):
            ro.put_slot(T, 1, 1, 1, 0)
        with pytest.raises(PermissionError):
            ro.revise_slot(T, 1, 1, True)
        ro.flush()
    assert path.read_bytes() == before


def test_length_checks(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        TimerWheel(tmp_path / "missing", read_only=True)
    bad = tmp_path / "bad"
    bad.write_bytes(bytes(100))
    with pytest.raises(TimerWheelError):
        TimerWheel(bad)
    with pytest.raises(TimerWheelError):
        TimerWheel(bad, read_only=True)
    empty = tmp_path / "empty"
    empty.write_bytes(b"")
    with TimerWheel(empty, slots_total=10) as w:  # an empty file is sized like a new one
        assert w.wheel_length == 640
    assert empty.stat().st_size == 640
