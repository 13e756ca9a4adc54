"""The timer checkpoint (``<root>/config/timercheck``, 4,096 bytes, memory-mapped).

Why it exists: it records how far the timer service got — the read pointer of the wheel
(``lastReadTimeMs``), how much TimerLog is safely on disk (``lastTimerLogFlushPos``, recovery rescans
from one file before it) and how far ``rmq_sys_wheel_timer`` queue 0 has been consumed
(``lastTimerQueueOffset`` / ``masterTimerQueueOffset``) — plus a DataVersion used by HA sync. The
values live in memory and reach the file only on ``flush``, as with Java's ``TimerCheckpoint``.
"""

from __future__ import annotations

import mmap
import os
import time
from collections.abc import Callable
from pathlib import Path

from broker_core.store.codec.timer_format import (
    CHECKPOINT_FILE_SIZE,
    CHECKPOINT_LEGACY_SIZE,
    DEFAULT_SLOTS_TOTAL,
    TimerCheckpointData,
    decode_checkpoint,
    pack_checkpoint_into,
)
from broker_core.store.mapped_file import reserve_blocks

_DAY_MS = 86_400_000
#: How far ahead of the clock a read time is still believed, by default: one lap of the default wheel
#: (7 days at 1 s precision). The timer never moves its read pointer past its clock's slot, so a read
#: time ahead comes from a clock set back since the file was written (a few seconds after an NTP step,
#: hours for a wrong time zone at boot) or from damage; past a whole lap it names no slot of the wheel.
DEFAULT_MAX_READ_TIME_AHEAD_MS = DEFAULT_SLOTS_TOTAL * 1000


def _system_clock_ms() -> int:
    return time.time_ns() // 1_000_000


def _short_file_problem(size: int) -> str | None:
    if size == 0:
        return "empty"
    if size < CHECKPOINT_LEGACY_SIZE:  # not even the four fields every version writes
        return f"only {size} bytes long"
    return None


class TimerCheckpoint:
    """Fields of ``timercheck`` with Java ``TimerCheckpoint`` load / flush behaviour."""

    def __init__(self, path: str | os.PathLike[str], read_only: bool = False,
                 clock: Callable[[], int] = _system_clock_ms,
                 max_read_time_ahead_ms: int = DEFAULT_MAX_READ_TIME_AHEAD_MS) -> None:
        self.path = Path(path)
        self.read_only = read_only
        self._clock = clock
        #: a lastReadTimeMs further ahead of ``clock`` is damage (the wheel's span: slots x precision)
        self.max_read_time_ahead_ms = max_read_time_ahead_ms
        self.last_read_time_ms = 0
        self.last_timer_log_flush_pos = 0
        self.last_timer_queue_offset = 0
        self.master_timer_queue_offset = 0
        # DataVersion defaults: stateVersion 0, timestamp = now, counter 0
        self.state_version = 0
        self.data_version_timestamp = clock()
        self.data_version_counter = 0
        self._mm: mmap.mmap | None = None
        #: why the file's values cannot be trusted (missing, too short, zeroed...), else None; recovery
        #: then starts the timer from scratch as Java does, and says so when the store holds timers
        self.problem: str | None = None
        existed = self.path.is_file()
        if read_only:
            if not existed:
                raise FileNotFoundError(f"timer checkpoint {self.path} does not exist")
            with open(self.path, "rb") as f:
                data = f.read(CHECKPOINT_FILE_SIZE)
            self.problem = _short_file_problem(len(data))
            self._apply(decode_checkpoint(data.ljust(CHECKPOINT_FILE_SIZE, b"\0")))
            self.problem = self.problem or self._value_problem()
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            size = os.fstat(fd).st_size
            self.problem = _short_file_problem(size) if existed else "missing"
            if size < CHECKPOINT_FILE_SIZE:
                os.ftruncate(fd, CHECKPOINT_FILE_SIZE)
            reserve_blocks(fd, 0, CHECKPOINT_FILE_SIZE, self.path)  # its page written later must not be a hole
            self._mm = mmap.mmap(fd, CHECKPOINT_FILE_SIZE, access=mmap.ACCESS_WRITE)
        finally:
            os.close(fd)
        if existed:
            self._apply(decode_checkpoint(self._mm))
            self.problem = self.problem or self._value_problem()

    def _value_problem(self) -> str | None:
        """A read time no running timer writes (the service stamps "now" at its first flush, and never
        reads past its clock) or a negative offset: the file was zeroed or overwritten.

        A read time far ahead was believed: every slot up to it counted as delivered, so the timer never
        delivered a message again and nothing said why."""
        if self.last_read_time_ms == 0 and self.last_timer_queue_offset == 0 and self.master_timer_queue_offset == 0:
            return "zeroed"
        fields = (f"lastReadTimeMs={self.last_read_time_ms}, lastTimerLogFlushPos={self.last_timer_log_flush_pos}, "
                  f"lastTimerQueueOffset={self.last_timer_queue_offset}, "
                  f"masterTimerQueueOffset={self.master_timer_queue_offset}")
        if self.last_read_time_ms <= 0 or min(self.last_timer_log_flush_pos, self.last_timer_queue_offset,
                                              self.master_timer_queue_offset) < 0:
            return f"damaged ({fields})"
        ahead = self.last_read_time_ms - self._clock()
        if ahead > self.max_read_time_ahead_ms:
            return (f"damaged ({fields}): its read time is {ahead / _DAY_MS:,.0f} days ahead of the clock, more "
                    f"than the timer wheel's {self.max_read_time_ahead_ms / _DAY_MS:g} days")
        return None

    def _apply(self, cp: TimerCheckpointData) -> None:
        self.last_read_time_ms = cp.last_read_time_ms
        self.last_timer_log_flush_pos = cp.last_timer_log_flush_pos
        self.last_timer_queue_offset = cp.last_timer_queue_offset
        self.master_timer_queue_offset = cp.master_timer_queue_offset
        self.state_version = cp.state_version
        self.data_version_timestamp = cp.timestamp
        self.data_version_counter = cp.counter

    def snapshot(self) -> TimerCheckpointData:
        """The in-memory values as they would be written."""
        return TimerCheckpointData(self.last_read_time_ms, self.last_timer_log_flush_pos,
                                   self.last_timer_queue_offset, self.master_timer_queue_offset,
                                   self.state_version, self.data_version_timestamp, self.data_version_counter)

    def update_data_version(self, state_version: int) -> None:
        """Java ``DataVersion.nextVersion(stateVersion)``: new timestamp, counter + 1."""
        self.state_version = state_version
        self.data_version_timestamp = self._clock()
        self.data_version_counter += 1

    def flush(self) -> None:
        """Write the fields into the map and msync it."""
        if self._mm is None or self._mm.closed:
            return
        pack_checkpoint_into(self._mm, self.snapshot())
        try:
            self._mm.flush()
        except OSError as e:  # msync's own error names no file
            raise OSError(e.errno, f"cannot flush timer checkpoint {self.path}: {e.strerror}") from e

    def close(self, flush: bool = True) -> None:
        if self._mm is None or self._mm.closed:
            return
        if flush:
            self.flush()
        self._mm.close()

    shutdown = close

    def __enter__(self) -> TimerCheckpoint:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
