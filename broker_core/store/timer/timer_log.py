"""The TimerLog (``<root>/timerlog/<20-digit offset>``): an append-only log of 52-byte timer units.

Why it looks like this: every timer message gets one unit that points at its copy in the commitlog
(``rmq_sys_wheel_timer``) and at the previous unit of the same wheel slot; the wheel only stores the
chain heads. Files are pre-sized (sparse) like every RocketMQ mapped file and named by the global
offset of their first byte. A unit never straddles two files: when ``52 + 16`` bytes no longer fit,
a 16-byte blank (``free | 0 | 0xCBD43194``) closes the file and writing moves to the next (§8.3).
Byte layouts live in ``codec.timer_format``.

Not thread-safe: the timer service serializes appends, reads and flushes.
"""

from __future__ import annotations

import mmap
import os
import re
from collections.abc import Callable, Iterator
from pathlib import Path

from broker_core.store.codec.timer_format import (
    BLANK_MAGIC_CODE,
    DEFAULT_TIMER_LOG_FILE_SIZE,
    MIN_BLANK_LEN,
    UNIT_HEAD_STRUCT,
    UNIT_SCAN_STRUCT,
    UNIT_SIZE,
    TimerLogUnit,
    decode_unit,
    encode_blank,
    is_magic_ok,
    offset_for_last_unit,
    pack_unit_into,
    read_offset_py,
    unpack_unit,
)
from broker_core.store.mapped_file import first_data_file_size, reserve_blocks

_FILE_NAME = re.compile(r"^\d{20}$")

#: Callback of ``recover``: ``(pos, magic, delivery_ms)`` for every valid unit found.
UnitVisitor = Callable[[int, int, int], None]


_RESERVE_STEP = 1024 * 1024  # disk blocks allocated ahead of the write position, per call


class TimerLogError(ValueError):
    """A TimerLog directory that Java would refuse to load (wrong file size, gap between files).

    A ValueError, as TimerWheelError: whoever opens a store reports those as one line naming the
    file ("cannot open store ..."); this was a traceback out of mqbroker.
    """


class _TimerLogFile:
    """One mapped TimerLog file; ``wrote`` is the in-file write position."""

    __slots__ = ("path", "from_offset", "size", "mm", "mv", "wrote", "dirty", "reserved_to")

    def __init__(self, path: Path, from_offset: int, size: int, read_only: bool, create: bool) -> None:
        self.path = path
        self.from_offset = from_offset
        self.size = size
        if create:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)
        else:
            fd = os.open(path, os.O_RDONLY if read_only else os.O_RDWR)
        try:
            if create:
                os.ftruncate(fd, size)  # pre-allocated, sparse, zero-filled
            self.mm = mmap.mmap(fd, size, access=mmap.ACCESS_READ if read_only else mmap.ACCESS_WRITE)
        finally:
            os.close(fd)
        self.mv = memoryview(self.mm)
        self.wrote = 0
        self.dirty = False
        self.reserved_to = 0  # disk blocks are allocated up to here (the file itself is sparse)

    def reserve(self, end: int) -> None:
        """Allocate the disk blocks up to ``end`` (and a step beyond) before they are written: a write
        into a hole of the mapping on a full disk is SIGBUS. DiskFullError, with nothing written, when
        the disk has no room."""
        if end <= self.reserved_to:
            return
        upto = min(self.size, max(end, self.reserved_to + _RESERVE_STEP))
        fd = os.open(self.path, os.O_RDWR)
        try:
            reserve_blocks(fd, self.reserved_to, upto - self.reserved_to, self.path)
        finally:
            os.close(fd)
        self.reserved_to = upto

    def close(self) -> None:
        if self.mm.closed:
            return
        self.mv.release()
        self.mm.close()


class TimerLog:
    """Append-only TimerLog over a queue of mapped files, with Java ``TimerLog`` semantics.

    On open the write position is found by scanning the last file for its valid units (so a plain
    open can append right away); the timer service's recovery may then move it with ``recover``.
    """

    @classmethod
    def of_store(cls, directory: Path, configured_file_size: int, read_only: bool = False) -> TimerLog:
        """A store's timer log, at the size of the files it already has (an existing store's file
        sizes win over the config: mappedFileSizeTimerLog only sizes a new one)."""
        return cls(directory, first_data_file_size(directory) or configured_file_size, read_only=read_only)

    def __init__(self, directory: str | os.PathLike[str], file_size: int = DEFAULT_TIMER_LOG_FILE_SIZE,
                 read_only: bool = False) -> None:
        if file_size < UNIT_SIZE + MIN_BLANK_LEN:
            raise ValueError(f"timer log file size {file_size} too small for one unit")
        self.directory = Path(directory)
        self.file_size = file_size
        self.read_only = read_only
        self._files: list[_TimerLogFile] = []
        self._flushed_where = 0
        # bytes of a file that can hold units: a unit needs 52 + 16 free bytes (room for the blank)
        self._unit_area = (file_size - MIN_BLANK_LEN) // UNIT_SIZE * UNIT_SIZE
        if not read_only:
            self.directory.mkdir(parents=True, exist_ok=True)
        self._load()
        if self._files:
            last = self._files[-1]
            last.wrote = self._scan_file_end(last)
            self._flushed_where = last.from_offset + last.wrote

    # ---- loading ----------------------------------------------------------------------------

    def _load(self) -> None:
        if not self.directory.is_dir():
            return
        names = sorted(p.name for p in self.directory.iterdir() if p.is_file() and _FILE_NAME.match(p.name))
        try:
            for i, name in enumerate(names):
                path = self.directory / name
                length = path.stat().st_size
                if length == 0 and i == len(names) - 1:
                    if not self.read_only:
                        path.unlink()  # Java deletes an empty last file silently
                    continue
                if length != self.file_size:
                    if i > 0 and (self.directory / names[0]).stat().st_size == self.file_size:
                        # the size came from the first file (an existing store's sizes win over the config)
                        raise TimerLogError(
                            f"{path}: length {length} differs from the {self.file_size} bytes of {names[0]}, the "
                            "first file of the timer log (its files are all one size): one of them was truncated "
                            "or extended")
                    raise TimerLogError(f"{path} length {length} != mappedFileSizeTimerLog {self.file_size}")
                from_offset = int(name)
                if self._files and from_offset != self._files[-1].from_offset + self.file_size:
                    raise TimerLogError(f"{path} does not follow {self._files[-1].path.name}")
                if from_offset % self.file_size:
                    raise TimerLogError(f"{path} name is not a multiple of the file size {self.file_size}")
                f = _TimerLogFile(path, from_offset, self.file_size, self.read_only, create=False)
                f.wrote = self.file_size  # as MappedFileQueue.load: earlier files count as full
                self._files.append(f)
        except BaseException:
            self.close()
            raise

    def _scan_file_end(self, f: _TimerLogFile, start: int = 0) -> int:
        """In-file end of the valid units from ``start`` on (a blank marks the file full)."""
        pos = start
        for size, _prev, magic, _cw, _dt in UNIT_SCAN_STRUCT.iter_unpack(f.mv[start:self._unit_area]):
            if magic == BLANK_MAGIC_CODE:
                return self.file_size
            if size != UNIT_SIZE or not is_magic_ok(magic):
                return pos
            pos += UNIT_SIZE
        # every unit slot is used: the blank, if written yet, follows the last unit
        if pos + MIN_BLANK_LEN <= self.file_size:
            _size, _prev, magic = UNIT_HEAD_STRUCT.unpack_from(f.mv, pos)
            if magic == BLANK_MAGIC_CODE:
                return self.file_size
        return pos

    def follow_writer(self) -> bool:
        """Read-only: take in the units a live writer appended since this log was scanned (and the
        files it created since); True when the log grew.

        Why: a read-only open beside a running broker scans the log once, then reads the timer wheel,
        which the broker keeps moving on: its newer slots link to units after that scan. Read again
        from where the scan stopped, they are there (the broker writes a unit before its slot).
        """
        if not self.read_only:
            return False
        if not self._files:
            self._load()
            if not self._files:
                return False
            last = self._files[-1]
            last.wrote = self._scan_file_end(last)
            return True
        grew = False
        while True:
            last = self._files[-1]
            if last.wrote < self.file_size:
                end = self._scan_file_end(last, last.wrote)
                if end > last.wrote:
                    last.wrote = end
                    grew = True
                if end < self.file_size:
                    return grew
            nxt = self.directory / f"{last.from_offset + self.file_size:020d}"
            try:
                if nxt.stat().st_size != self.file_size:
                    return grew
                f = _TimerLogFile(nxt, last.from_offset + self.file_size, self.file_size, True, create=False)
            except OSError:
                return grew
            self._files.append(f)
            grew = True

    # ---- positions --------------------------------------------------------------------------

    @property
    def min_offset(self) -> int:
        """Offset of the first byte still on disk (0 when empty)."""
        return self._files[0].from_offset if self._files else 0

    @property
    def max_offset(self) -> int:
        """Global write position: where the next unit (or blank) goes."""
        if not self._files:
            return 0
        last = self._files[-1]
        return last.from_offset + last.wrote

    @property
    def flushed_where(self) -> int:
        """Offset up to which data has been flushed (the checkpoint's lastTimerLogFlushPos)."""
        return self._flushed_where

    @flushed_where.setter
    def flushed_where(self, value: int) -> None:
        self._flushed_where = value

    @property
    def file_offsets(self) -> list[int]:
        """Start offsets of the files, ascending."""
        return [f.from_offset for f in self._files]

    def _file_for(self, pos: int) -> _TimerLogFile | None:
        if not self._files:
            return None
        idx = (pos - self._files[0].from_offset) // self.file_size
        if 0 <= idx < len(self._files):
            return self._files[idx]
        return None

    # ---- append -----------------------------------------------------------------------------

    def _new_file(self, from_offset: int) -> _TimerLogFile:
        f = _TimerLogFile(self.directory / f"{from_offset:020d}", from_offset, self.file_size,
                          read_only=False, create=True)
        self._files.append(f)
        return f

    def _writable_file(self, length: int) -> _TimerLogFile:
        """Last file with room for ``length`` bytes plus a blank, closing the current one if needed."""
        if self.read_only:
            raise PermissionError(f"timer log {self.directory} is open read-only")
        if not self._files:
            return self._new_file(0)
        f = self._files[-1]
        if f.wrote >= self.file_size:
            return self._new_file(f.from_offset + self.file_size)
        free = self.file_size - f.wrote
        if length + MIN_BLANK_LEN > free:
            f.reserve(f.wrote + MIN_BLANK_LEN)
            f.mv[f.wrote:f.wrote + MIN_BLANK_LEN] = encode_blank(free)
            f.wrote = self.file_size
            f.dirty = True
            return self._new_file(f.from_offset + self.file_size)
        return f

    def append(self, data: bytes | bytearray | memoryview) -> int:
        """Append raw bytes (one or more whole units); returns their global offset."""
        length = len(data)
        if length + MIN_BLANK_LEN > self.file_size:
            raise ValueError(f"{length} bytes never fit a timer log file of {self.file_size}")
        f = self._writable_file(length)
        pos = f.wrote
        f.reserve(pos + length)
        f.mv[pos:pos + length] = data
        f.wrote = pos + length
        f.dirty = True
        return f.from_offset + pos

    def append_unit(self, prev_pos: int, magic: int, curr_write_time_ms: int, delayed_time: int,
                    offset_py: int, size_py: int, topic_hash: int, reserved: int = 0) -> int:
        """Append one 52-byte unit (written in place into the map); returns its global offset."""
        f = self._writable_file(UNIT_SIZE)
        pos = f.wrote
        f.reserve(pos + UNIT_SIZE)
        pack_unit_into(f.mv, pos, prev_pos, magic, curr_write_time_ms, delayed_time, offset_py, size_py,
                       topic_hash, reserved)
        f.wrote = pos + UNIT_SIZE
        f.dirty = True
        return f.from_offset + pos

    # ---- reads ------------------------------------------------------------------------------

    def read_unit(self, pos: int) -> TimerLogUnit:
        """Decode the unit at global offset ``pos`` (must be below ``max_offset``)."""
        f = self._file_for(pos)
        in_file = pos - f.from_offset if f is not None else -1
        if f is None or in_file + UNIT_SIZE > f.wrote:
            raise IndexError(f"no timer log unit at {pos} (range {self.min_offset}..{self.max_offset})")
        return decode_unit(f.mv, in_file)

    def read_unit_fields(self, pos: int) -> tuple[int, int, int, int, int, int, int, int, int]:
        """``read_unit`` as a plain tuple in ``TimerLogUnit`` field order (size, prevPos, magic,
        currWriteTimeMs, delayedTime, offsetPy, sizePy, topicHash, reserved): the dequeue walks every
        unit of a slot, and skipping the named-tuple build is a measurable share of that walk."""
        files = self._files
        if files:
            idx = (pos - files[0].from_offset) // self.file_size
            if 0 <= idx < len(files):
                f = files[idx]
                in_file = pos - f.from_offset
                if in_file + UNIT_SIZE <= f.wrote:
                    return unpack_unit(f.mv, in_file)
        raise IndexError(f"no timer log unit at {pos} (range {self.min_offset}..{self.max_offset})")

    def read_offset_py(self, pos: int) -> tuple[int, int]:
        """``(offsetPy, sizePy)`` of the unit at ``pos``."""
        f = self._file_for(pos)
        if f is None or pos - f.from_offset + UNIT_SIZE > f.wrote:
            raise IndexError(f"no timer log unit at {pos}")
        return read_offset_py(f.mv, pos - f.from_offset)

    def iterate(self, start: int | None = None, end: int | None = None) -> Iterator[tuple[int, TimerLogUnit]]:
        """``(pos, unit)`` in log order from ``start`` (default: first file) to ``end`` (default: the
        write position). A blank sends the walk to the next file; a damaged record stops it."""
        if not self._files:
            return
        pos = self.min_offset if start is None else max(start, self.min_offset)
        stop = self.max_offset if end is None else min(end, self.max_offset)
        while pos < stop:
            f = self._file_for(pos)
            if f is None:
                return
            in_file = pos - f.from_offset
            if in_file + MIN_BLANK_LEN > f.wrote:
                pos = f.from_offset + self.file_size
                continue
            size, _prev, magic = UNIT_HEAD_STRUCT.unpack_from(f.mv, in_file)
            if magic == BLANK_MAGIC_CODE:
                pos = f.from_offset + self.file_size
                continue
            if size != UNIT_SIZE or not is_magic_ok(magic) or in_file + UNIT_SIZE > f.wrote:
                return
            yield pos, decode_unit(f.mv, in_file)
            pos += UNIT_SIZE

    # ---- recovery ---------------------------------------------------------------------------

    def recover(self, begin_offset: int, visit: UnitVisitor | None = None, check: bool = True) -> int:
        """Rescan from the file holding ``begin_offset`` to the end; returns the end of valid data.

        Java ``recoverAndRevise``: each valid unit is reported to ``visit(pos, magic, delivery_ms)``
        (the timer service re-links wheel slots from it). With ``check`` the scan stops at the first
        damaged record and everything after it is truncated (files beyond it deleted); without it the
        scan covers only written data and nothing is truncated.
        """
        if not self._files:
            return 0
        idx = len(self._files) - 1
        while idx > 0 and begin_offset < self._files[idx].from_offset:
            idx -= 1
        check_offset = self._files[idx].from_offset
        for f in self._files[idx:]:
            usable = self._unit_area if check else min(self._unit_area, f.wrote - f.wrote % UNIT_SIZE)
            position = 0
            stop = False
            for size, _prev, magic, curr_write, delayed in UNIT_SCAN_STRUCT.iter_unpack(f.mv[:usable]):
                if magic == BLANK_MAGIC_CODE:
                    break
                if check and (size != UNIT_SIZE or not is_magic_ok(magic)):
                    stop = True
                    break
                if size == UNIT_SIZE and is_magic_ok(magic) and visit is not None:
                    visit(f.from_offset + position, magic, curr_write + delayed)
                position += UNIT_SIZE
            else:
                # every unit slot was valid: what follows must be the blank (or the file is damaged)
                if check and position + MIN_BLANK_LEN <= self.file_size:
                    magic = UNIT_HEAD_STRUCT.unpack_from(f.mv, position)[2]
                    if magic != BLANK_MAGIC_CODE:
                        stop = True
            check_offset = f.from_offset + position
            if stop:
                break
        if check:
            self.truncate_dirty(check_offset)
        return check_offset

    def truncate_dirty(self, offset: int) -> None:
        """Make ``offset`` the write position: files starting after it are deleted (Java
        ``truncateDirtyFiles``). Bytes after the position are left as they are; they get overwritten."""
        if self.read_only:
            raise PermissionError(f"timer log {self.directory} is open read-only")
        keep: list[_TimerLogFile] = []
        for f in self._files:
            if f.from_offset + self.file_size > offset:
                if offset >= f.from_offset:
                    f.wrote = offset - f.from_offset
                    keep.append(f)
                else:
                    f.close()
                    f.path.unlink(missing_ok=True)
            else:
                keep.append(f)
        self._files = keep
        self._flushed_where = min(self._flushed_where, offset)

    # ---- retention --------------------------------------------------------------------------

    def delete_expired_files(self, min_commitlog_offset: int) -> int:
        """Delete leading files whose last unit points below the commitlog's min offset (never the
        last file); Java ``deleteExpiredFileByOffsetForTimerLog``. Returns how many were deleted."""
        if self.read_only:
            raise PermissionError(f"timer log {self.directory} is open read-only")
        check_offset = offset_for_last_unit(self.file_size)
        deleted = 0
        while len(self._files) > 1:
            f = self._files[0]
            size, _prev, magic = UNIT_HEAD_STRUCT.unpack_from(f.mv, check_offset)
            if size != UNIT_SIZE or not is_magic_ok(magic):
                break
            max_offset_py, _ = read_offset_py(f.mv, check_offset)
            if max_offset_py >= min_commitlog_offset:
                break
            f.close()
            f.path.unlink(missing_ok=True)
            self._files.pop(0)
            deleted += 1
        return deleted

    # ---- lifecycle --------------------------------------------------------------------------

    def flush(self) -> int:
        """msync every dirty file; returns the new flushed position (= write position)."""
        if not self.read_only:
            for f in self._files:
                if f.dirty and not f.mm.closed:
                    f.dirty = False  # before the msync: a write during it marks the file dirty again
                    try:
                        f.mm.flush()
                    except OSError as e:  # still dirty: the next flush tries its pages again
                        f.dirty = True
                        raise OSError(e.errno, f"cannot flush timer log file {f.path}: {e.strerror}") from e
        self._flushed_where = self.max_offset
        return self._flushed_where

    def close(self, flush: bool = True) -> None:
        if flush and not self.read_only:
            self.flush()
        for f in self._files:
            f.close()

    shutdown = close

    def __enter__(self) -> TimerLog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
