"""config/timercheck: 4,096 bytes, seven big-endian i64 fields, values reach disk on flush."""

from __future__ import annotations

from pathlib import Path

import pytest

from broker_core.store.timer.timer_checkpoint import TimerCheckpoint


class FakeClock:
    def __init__(self, now: int) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


def test_new_checkpoint(tmp_path: Path) -> None:
    path = tmp_path / "config" / "timercheck"
    cp = TimerCheckpoint(path, clock=FakeClock(1700000000000))
    assert path.stat().st_size == 4096
    assert (cp.last_read_time_ms, cp.last_timer_log_flush_pos, cp.last_timer_queue_offset,
            cp.master_timer_queue_offset) == (0, 0, 0, 0)
    assert (cp.state_version, cp.data_version_timestamp, cp.data_version_counter) == (0, 1700000000000, 0)
    cp.close(flush=False)
    assert path.read_bytes() == bytes(4096)


def test_flush_layout_and_reload(tmp_path: Path) -> None:
    path = tmp_path / "timercheck"
    clock = FakeClock(1700000000000)
    cp = TimerCheckpoint(path, clock=clock)
    cp.last_read_time_ms = 1795318704000
    cp.last_timer_log_flush_pos = 520
    cp.last_timer_queue_offset = 10
    cp.master_timer_queue_offset = 11
    assert path.read_bytes() == bytes(4096)  # nothing written before flush
    clock.now = 1700000000555
    cp.update_data_version(3)
    cp.update_data_version(4)
    cp.flush()
    data = path.read_bytes()
    expect = b"".join(v.to_bytes(8, "big", signed=True)
                      for v in (1795318704000, 520, 10, 11, 4, 1700000000555, 2))
    assert data[:56] == expect and data[56:] == bytes(4040)
    cp.close()
    again = TimerCheckpoint(path, clock=FakeClock(1))
    assert again.snapshot() == (1795318704000, 520, 10, 11, 4, 1700000000555, 2)
    again.close(flush=False)
    ro = TimerCheckpoint(path, read_only=True)
    assert ro.snapshot() == (1795318704000, 520, 10, 11, 4, 1700000000555, 2)
    ro.last_read_time_ms = 5
    ro.flush()
    ro.close()
    assert path.read_bytes() == data


def test_read_only_missing(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        TimerCheckpoint(tmp_path / "nope", read_only=True)
