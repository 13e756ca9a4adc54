"""The timer wheel file (``<root>/timerwheel``): one 32-byte slot per tick, 2 × slotsTotal ticks.

Why it looks like this: Apache RocketMQ's ``TimerWheel`` keeps, per tick, the head (``lastPos``) and
tail (``firstPos``) of a chain of TimerLog units linked through ``prevPos``, plus a live count. The
file is memory-mapped and edited in place; a slot whose stored time is not the asked time belongs to
an older lap of the wheel and reads as empty (spec §8.2). Slot bytes are defined in
``codec.timer_format``.

The wheel is not thread-safe: the timer service serializes every access (one enqueue/dequeue loop).
"""

from __future__ import annotations

import mmap
import os
from collections.abc import Iterator
from pathlib import Path

from broker_core.store.codec.timer_format import (
    DEFAULT_PRECISION_MS,
    DEFAULT_SLOTS_TOTAL,
    EMPTY_SLOT,
    SLOT_SIZE,
    SLOT_STRUCT,
    Slot,
    java_div,
    pack_slot_head_into,
    pack_slot_into,
    pack_slot_pos_into,
    read_slot_time_div,
    wheel_length,
)
from broker_core.store.mapped_file import PAGE_SIZE, reserve_blocks

#: Marker values of Java's ``TimerWheel``: ``IGNORE`` leaves a position untouched in ``revise_slot``.
BLANK = -1
IGNORE = -2

# Slots are scanned in chunks; an all-zero chunk (the usual case: the file is sparse) is skipped with
# one memcmp instead of 1,024 unpacks.
_SCAN_CHUNK_SLOTS = 1024
_SCAN_CHUNK_BYTES = _SCAN_CHUNK_SLOTS * SLOT_SIZE
_ZERO_CHUNK = bytes(_SCAN_CHUNK_BYTES)


class TimerWheelError(ValueError):
    """The wheel file exists with a length that does not match the configured slot count.

    A ValueError because it is a bad value on disk: whoever opens a store (mqbroker, mqadmin) reports
    those as one line naming the file, and this was a traceback out of mqbroker.
    """


class TimerWheel:
    """Memory-mapped ``timerwheel`` file with Java ``TimerWheel`` semantics."""

    def __init__(self, path: str | os.PathLike[str], slots_total: int = DEFAULT_SLOTS_TOTAL,
                 precision_ms: int = DEFAULT_PRECISION_MS, read_only: bool = False) -> None:
        if slots_total <= 0 or precision_ms <= 0:
            raise ValueError("slots_total and precision_ms must be positive")
        self.path = Path(path)
        self.slots_total = slots_total
        self.precision_ms = precision_ms
        self.read_only = read_only
        self.wheel_slots = slots_total * 2
        self.wheel_length = wheel_length(slots_total)
        self._dirty = False
        if read_only:
            if not self.path.is_file():
                raise FileNotFoundError(f"timer wheel {self.path} does not exist")
            fd = os.open(self.path, os.O_RDONLY)
        else:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            length = os.fstat(fd).st_size
            # Java accepts a missing or empty file (and sizes it) but refuses any other length.
            if length not in (0, self.wheel_length) or (read_only and length != self.wheel_length):
                raise TimerWheelError(
                    f"timer wheel {self.path} length {length} != expected {self.wheel_length} "
                    f"(slots_total={slots_total})")
            if length == 0:
                os.ftruncate(fd, self.wheel_length)  # sparse, reads as zero = all slots empty
            access = mmap.ACCESS_READ if read_only else mmap.ACCESS_WRITE
            self._mm = mmap.mmap(fd, self.wheel_length, access=access)
        except BaseException:
            os.close(fd)
            raise
        # The wheel stays sparse (38 MB by default, mostly empty), so a page gets its disk block just
        # before its first write, and pages never written are read with pread: touching a hole through
        # the mapping on a full disk (or a full tmpfs, where even a read fault allocates) is SIGBUS.
        self._fd = fd
        self._reserved = bytearray(-(-self.wheel_length // PAGE_SIZE))
        self._mv = memoryview(self._mm)

    def _reserve(self, pos: int) -> None:
        """Give the page holding the slot at ``pos`` its disk block (DiskFullError when there is none)."""
        page = pos // PAGE_SIZE
        if not self._reserved[page]:
            reserve_blocks(self._fd, page * PAGE_SIZE, PAGE_SIZE, self.path)
            self._reserved[page] = 1

    def reserve_slot(self, time_ms: int) -> None:
        """Make sure ``time_ms``'s slot can be written, before anything else of an enqueue is written."""
        self._check_writable()
        self._reserve(self.get_slot_index(time_ms) * SLOT_SIZE)

    def _chunk(self, start: int, end: int) -> bytes:
        """Wheel bytes for a scan, read with pread: never a fault on a page without a disk block."""
        return os.pread(self._fd, end - start, start)

    def _slot_bytes(self, pos: int) -> bytes | memoryview:
        """The slot at ``pos``: from the mapping where its page is backed, else by pread (no fault)."""
        if self._reserved[pos // PAGE_SIZE]:
            return self._mv[pos:pos + SLOT_SIZE]
        return os.pread(self._fd, SLOT_SIZE, pos)

    # ---- addressing -------------------------------------------------------------------------

    def get_slot_index(self, time_ms: int) -> int:
        """``time / precision mod 2·slotsTotal`` (Java long arithmetic)."""
        return java_div(time_ms, self.precision_ms) % self.wheel_slots

    def format_time_ms(self, time_ms: int) -> int:
        """``time_ms`` rounded down to its slot start."""
        return java_div(time_ms, self.precision_ms) * self.precision_ms

    # ---- reads ------------------------------------------------------------------------------

    def get_raw_slot(self, time_ms: int) -> Slot:
        """The slot bytes at ``time_ms``'s index, whatever lap of the wheel they belong to."""
        time_div, first, last, num, magic = SLOT_STRUCT.unpack_from(
            self._slot_bytes(self.get_slot_index(time_ms) * SLOT_SIZE))
        return Slot(time_div * self.precision_ms, first, last, num, magic)

    def get_slot(self, time_ms: int) -> Slot:
        """The slot for ``time_ms``, or ``EMPTY_SLOT`` if the stored time is another lap (or never set)."""
        time_div, first, last, num, magic = SLOT_STRUCT.unpack_from(
            self._slot_bytes(self.get_slot_index(time_ms) * SLOT_SIZE))
        if time_div != java_div(time_ms, self.precision_ms):
            return EMPTY_SLOT
        return Slot(time_div * self.precision_ms, first, last, num, magic)

    def get_num(self, time_ms: int) -> int:
        """Live message count of ``time_ms``'s slot (congestion check)."""
        return self.get_slot(time_ms).num

    def iter_slots(self, time_start_ms: int | None = None) -> Iterator[tuple[int, Slot]]:
        """``(index, slot)`` of every non-zero slot, in file order.

        With ``time_start_ms``, only slots of the current wheel window are yielded: stored time in
        ``[start, start + 2·slotsTotal)`` ticks, which is exactly the set Java's ``getAllNum`` and
        ``checkPhyPos`` visit. Zero chunks are skipped wholesale, so a mostly empty wheel scans fast.
        """
        start_div = None if time_start_ms is None else java_div(time_start_ms, self.precision_ms)
        window = self.wheel_slots
        prec = self.precision_ms
        unpack_from = SLOT_STRUCT.unpack_from
        for chunk_start in range(0, self.wheel_length, _SCAN_CHUNK_BYTES):
            chunk_end = min(chunk_start + _SCAN_CHUNK_BYTES, self.wheel_length)
            chunk = self._chunk(chunk_start, chunk_end)
            if chunk == _ZERO_CHUNK:
                continue
            for pos in range(chunk_start, chunk_end, SLOT_SIZE):
                time_div, first, last, num, magic = unpack_from(chunk, pos - chunk_start)
                if time_div == 0 and first == 0 and last == 0 and num == 0 and magic == 0:
                    continue
                if start_div is not None and not (0 <= time_div - start_div < window):
                    continue
                yield pos // SLOT_SIZE, Slot(time_div * prec, first, last, num, magic)

    def next_slot_time(self, from_ms: int, until_ms: int) -> int | None:
        """Earliest slot time in ``[from_ms, until_ms)`` whose slot holds that lap, else None.

        Lets the timer service jump over empty ticks instead of visiting them one by one (an empty
        slot does nothing when it fires). At most one lap (2·slotsTotal ticks) is looked at.
        """
        prec = self.precision_ms
        start_div = java_div(from_ms, prec)
        if from_ms != start_div * prec:
            start_div += 1  # only slot starts at or after from_ms count
        end_div = -(-until_ms // prec) if until_ms > 0 else java_div(until_ms, prec)
        count = min(end_div - start_div, self.wheel_slots)
        if count <= 0:
            return None
        first_index = start_div % self.wheel_slots
        unpack_from = SLOT_STRUCT.unpack_from
        # a busy wheel has content in the very next slot: answer that without copying a chunk
        if read_slot_time_div(self._slot_bytes(first_index * SLOT_SIZE), 0) == start_div:
            return start_div * prec
        done = 0
        while done < count:
            index = (first_index + done) % self.wheel_slots
            # stay inside one scan chunk and before the file end
            chunk_end_index = min((index // _SCAN_CHUNK_SLOTS + 1) * _SCAN_CHUNK_SLOTS, self.wheel_slots,
                                  index + (count - done))
            a = index * SLOT_SIZE
            b = chunk_end_index * SLOT_SIZE
            chunk = self._chunk(a, b)
            if chunk != (_ZERO_CHUNK if b - a == _SCAN_CHUNK_BYTES else bytes(b - a)):
                for i in range(index, chunk_end_index):
                    want = start_div + done + (i - index)
                    if unpack_from(chunk, i * SLOT_SIZE - a)[0] == want:
                        return want * prec
            done += chunk_end_index - index
        return None

    def get_all_num(self, time_start_ms: int) -> int:
        """Sum of ``num`` over the wheel window starting at ``time_start_ms`` (Java ``getAllNum``)."""
        return sum(slot.num for _, slot in self.iter_slots(time_start_ms))

    def check_phy_pos(self, time_start_ms: int, max_offset: int) -> int:
        """Smallest ``firstPos`` of window slots whose ``lastPos`` lies beyond ``max_offset``.

        Java ``checkPhyPos``: after a damaged TimerLog is truncated, slots may point past its end; the
        caller re-links from the returned position. ``2**63 - 1`` when nothing is beyond.
        """
        min_first = (1 << 63) - 1
        for _, slot in self.iter_slots(time_start_ms):
            if slot.last_pos > max_offset and slot.first_pos < min_first:
                min_first = slot.first_pos
        return min_first

    # ---- writes -----------------------------------------------------------------------------

    def _check_writable(self) -> None:
        if self.read_only:
            raise PermissionError(f"timer wheel {self.path} is open read-only")

    def put_slot(self, time_ms: int, first_pos: int, last_pos: int, num: int | None = None,
                 magic: int | None = None) -> None:
        """Store a slot. With ``num``/``magic`` omitted only time, firstPos and lastPos are written
        (Java's 3-argument ``putSlot``, kept for files written by older brokers)."""
        self._check_writable()
        pos = self.get_slot_index(time_ms) * SLOT_SIZE
        self._reserve(pos)
        time_div = java_div(time_ms, self.precision_ms)
        if num is None and magic is None:
            pack_slot_head_into(self._mv, pos, time_div, first_pos, last_pos)
        else:
            if num is None or magic is None:
                _, _, _, old_num, old_magic = SLOT_STRUCT.unpack_from(self._mv, pos)
                num = old_num if num is None else num
                magic = old_magic if magic is None else magic
            pack_slot_into(self._mv, pos, time_div, first_pos, last_pos, num, magic)
        self._dirty = True

    def revise_slot(self, time_ms: int, first_pos: int, last_pos: int, force: bool) -> None:
        """Re-link a slot during recovery (Java ``reviseSlot``).

        If the slot holds ``time_ms``'s lap, overwrite firstPos / lastPos unless passed ``IGNORE``.
        Otherwise, with ``force``, start the slot fresh (``firstPos`` defaults to ``lastPos``). The
        count is left alone: recovery only repairs the chain, exactly as Java does.
        """
        self._check_writable()
        pos = self.get_slot_index(time_ms) * SLOT_SIZE
        self._reserve(pos)
        time_div = java_div(time_ms, self.precision_ms)
        stored_div = SLOT_STRUCT.unpack_from(self._mv, pos)[0]
        if stored_div != time_div:
            if force:
                pack_slot_head_into(self._mv, pos, time_div, first_pos if first_pos != IGNORE else last_pos,
                                    last_pos)
                self._dirty = True
            return
        if first_pos != IGNORE:
            pack_slot_pos_into(self._mv, pos + 8, first_pos)
        if last_pos != IGNORE:
            pack_slot_pos_into(self._mv, pos + 16, last_pos)
        self._dirty = True

    def clear_slot(self, time_ms: int) -> None:
        """Zero ``time_ms``'s slot (it then reads as empty for every lap)."""
        self._clear_at(self.get_slot_index(time_ms) * SLOT_SIZE)

    def _clear_at(self, pos: int) -> None:
        self._check_writable()
        if not self._reserved[pos // PAGE_SIZE] and not any(self._slot_bytes(pos)):
            return  # a hole is already zero: writing it would allocate the page
        self._reserve(pos)
        self._mv[pos:pos + SLOT_SIZE] = bytes(SLOT_SIZE)
        self._dirty = True

    def clear_slots_from(self, time_start_ms: int, end: int) -> int:
        """Clear the window's slots whose whole chain lies at or past ``end`` (the valid end of a timer
        log recovery cut); returns how many.

        Why: Java's recovery re-links only slots with a unit before the cut. A slot whose units all lay
        past it kept pointing there, and the units appended next took those positions: the slot then
        delivered other messages' units, at the wrong time and again (a message came 6 times).
        """
        stale = [index for index, slot in self.iter_slots(time_start_ms) if slot.first_pos >= end]
        for index in stale:
            self._clear_at(index * SLOT_SIZE)
        return len(stale)

    def clear(self) -> None:
        """Zero the whole wheel (used when the TimerLog is discarded and rebuilt from scratch)."""
        self._check_writable()
        for start in range(0, self.wheel_length, _SCAN_CHUNK_BYTES):
            end = min(start + _SCAN_CHUNK_BYTES, self.wheel_length)
            if self._chunk(start, end) != _ZERO_CHUNK[: end - start]:  # data there: its pages are backed
                self._mv[start:end] = _ZERO_CHUNK[: end - start]
        self._dirty = True

    # ---- lifecycle --------------------------------------------------------------------------

    def flush(self) -> None:
        """msync the mapping (only dirty pages reach the disk)."""
        if self.read_only or not self._dirty or self._mm.closed:
            return
        self._dirty = False  # before the msync: a write during it marks the wheel dirty again
        try:
            self._mm.flush()
        except OSError as e:  # still dirty: the next flush tries again (msync's error names no file)
            self._dirty = True
            raise OSError(e.errno, f"cannot flush timer wheel {self.path}: {e.strerror}") from e

    def close(self, flush: bool = True) -> None:
        if self._mm.closed:
            return
        if flush:
            self.flush()
        self._mv.release()
        self._mm.close()
        os.close(self._fd)

    shutdown = close

    @property
    def closed(self) -> bool:
        return self._mm.closed

    def __enter__(self) -> TimerWheel:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
