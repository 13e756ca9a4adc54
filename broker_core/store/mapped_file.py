"""Fixed-size memory-mapped files named by their global start offset (DefaultMappedFile).

Files are created at full size (sparse, zero-filled) exactly as RocketMQ pre-allocates them, so a
store written here opens in Java and vice versa. Read-only mode maps with ACCESS_READ and can never
modify a byte, which is what makes inspection beside a running broker safe.
"""

from __future__ import annotations

import ctypes
import errno
import mmap
import os
import sys
import threading
from bisect import bisect_right
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from .errors import StoreClosedError

PAGE_SIZE = mmap.PAGESIZE
# MADV_POPULATE_WRITE (Linux 5.14+; Python 3.11's mmap module lacks the constant): fault a range of
# a mapping in, writable, with one system call. Set to None once the kernel says it is unsupported.
_MADV_POPULATE_WRITE: int | None = getattr(mmap, "MADV_POPULATE_WRITE", 23) if sys.platform == "linux" else None


def no_read_around(mm: mmap.mmap) -> None:
    """Turn off read-around for a mapping of a file that was just created (all holes).

    Why: the first fault in a mapping reads around the faulting page; in a sparse file that means
    allocating and zeroing up to megabytes of page cache nobody asked for. Measured here: the first
    write into a new 13.8 MB BatchCQ file took 2.2 ms, 0.1 ms with MADV_RANDOM, and sequential
    writes after it are no slower. Files opened from disk keep read-ahead (recovery reads them in order).
    """
    if sys.platform == "linux":
        try:
            mm.madvise(mmap.MADV_RANDOM)
        except OSError:  # advice only: a kernel that refuses it costs speed, not correctness
            pass


_ZERO_CHUNK = bytes(1 << 20)


def is_zero(mv: memoryview | bytes, start: int = 0, end: int | None = None, path: Path | None = None) -> bool:
    """Whether ``mv[start:end]`` holds nothing but zero bytes (``path``: the file ``mv`` maps).

    Why: every recovery asks this of each consume queue's unused tail (megabytes per queue).
    Stripping the zeros (``bytes.strip``) took ~17 ms per 3.5 MB tail, ~0.3 s of a 1M-message
    store's reopen for 8 queues; comparing a MiB at a time against a zero chunk (memcmp) takes well
    under 1 ms and stops at the first MiB holding data. With ``path``, a hole the filesystem reports
    (``SEEK_DATA``: no data after ``start``, as in a sparse file Java or a copy left) is not read at
    all; where the filesystem cannot say, the bytes are compared.
    """
    end = len(mv) if end is None else min(end, len(mv))
    if path is not None and start < end and hasattr(os, "SEEK_DATA"):
        try:
            fd = os.open(path, os.O_RDONLY)
        except OSError:
            fd = -1
        if fd >= 0:
            try:
                while start < end:  # compare the data extents only; holes read as zeros
                    try:
                        data = os.lseek(fd, start, os.SEEK_DATA)
                    except OSError as e:
                        if e.errno == errno.ENXIO:  # no data at or after start
                            return True
                        raise
                    if data >= end:
                        return True
                    hole = min(end, os.lseek(fd, data, os.SEEK_HOLE))
                    if not _zero_bytes(mv, data, hole):
                        return False
                    start = hole
                return True
            except OSError:
                pass  # the filesystem cannot say: compare every byte
            finally:
                os.close(fd)
    return _zero_bytes(mv, start, end)


def _zero_bytes(mv: memoryview | bytes, start: int, end: int) -> bool:
    chunk = len(_ZERO_CHUNK)
    while start < end:
        stop = min(end, start + chunk)
        if bytes(mv[start:stop]) != (_ZERO_CHUNK if stop - start == chunk else bytes(stop - start)):
            return False
        start = stop
    return True


def data_end(mv: memoryview | bytes, start: int, chunk: int = 1 << 20) -> int:
    """Position after the last non-zero byte at or after ``start`` (``start`` if there is none).

    Scans backwards a MiB at a time (zero MiBs by ``is_zero``): the discarded or torn part of a file
    is usually short and followed by zeros up to the file's end.
    """
    end = len(mv)
    while end > start:
        lo = max(start, end - chunk)
        if not is_zero(mv, lo, end):
            return lo + len(bytes(mv[lo:end]).rstrip(b"\0"))
        end = lo
    return start


# Where CPython 3.11-3.12 keep an mmap object's duplicated descriptor (``mmap_object.fd``, after
# PyObject_HEAD, data, size, pos, offset, exports on 64-bit Linux). Python 3.13 has ``trackfd=False``.
_MMAP_FD_OFFSET = 56


def release_mapping_fd(mm: mmap.mmap, path: Path) -> None:
    """Close the descriptor ``mmap`` duplicated for itself; the mapping stays valid without it.

    Why: every mapped file otherwise holds a descriptor for as long as it is mapped, and a store of
    ~10,000 small files runs out of them. Only done when the slot provably holds a descriptor of this
    very file (same device and inode); then it is set to -1 so close() never closes a reused number.
    """
    if sys.platform != "linux" or sys.implementation.name != "cpython" or sys.version_info >= (3, 13):
        return
    slot = ctypes.c_int.from_address(id(mm) + _MMAP_FD_OFFSET)
    fd = slot.value
    if fd < 0:
        return
    try:
        if not os.path.samestat(os.fstat(fd), os.stat(path)):
            return
    except OSError:
        return
    slot.value = -1
    os.close(fd)


def _map(fd: int, length: int, access: int, path: Path) -> mmap.mmap:
    if sys.version_info >= (3, 13):
        return mmap.mmap(fd, length, access=access, trackfd=False)  # type: ignore[call-arg]
    mm = mmap.mmap(fd, length, access=access)
    release_mapping_fd(mm, path)
    return mm


# How far ahead of a write ``MappedFile.reserve`` allocates disk blocks, in one posix_fallocate call.
RESERVE_AHEAD = 4 << 20


class DiskFullError(OSError):
    """No disk space for a file's blocks: the write is refused before anything is written."""


def _allocate(fd: int, offset: int, length: int, path: Path, created: bool = False) -> None:
    try:
        os.posix_fallocate(fd, offset, length)
    except OSError as e:
        if e.errno in (errno.EOPNOTSUPP, errno.EINVAL):  # a filesystem without fallocate: writes as before
            return
        if created:  # a file this call created and could not fill: do not leave it half there
            try:
                os.unlink(path)
            except OSError:
                pass
        if e.errno in (errno.ENOSPC, errno.EDQUOT):
            raise DiskFullError(e.errno, f"disk full: cannot allocate {length} bytes for {path}") from None
        raise


def reserve_blocks(fd: int, offset: int, length: int, path: Path) -> None:
    """Allocate the disk blocks of ``[offset, offset + length)`` before the mapping writes there (a
    write into a hole on a full disk is SIGBUS); DiskFullError when the disk has no room."""
    _allocate(fd, offset, length, path)


def offset_to_file_name(offset: int) -> str:
    return f"{offset:020d}"


def first_data_file_size(directory: Path) -> int:
    """Length of the first non-empty 20-digit file in ``directory`` (0 if none).

    An existing store's file sizes are unambiguous and win over the configuration.
    """
    if not directory.is_dir():
        return 0
    for p in sorted(directory.iterdir()):
        if p.is_file() and p.name.isdigit() and len(p.name) == 20:
            size = p.stat().st_size
            if size:
                return size
    return 0


class MappedFile:
    __slots__ = ("path", "file_size", "file_from_offset", "read_only", "_fd", "_mm", "mv", "wrote_position",
                 "flushed_position", "_lock", "populated_to", "reserved_to", "_ref_lock", "_readers", "_retired")

    def __init__(self, path: Path, file_size: int, read_only: bool = False, create: bool = True,
                 reserve_whole: bool = False) -> None:
        self.path = path
        self.file_size = file_size
        self.file_from_offset = int(path.name)
        self.read_only = read_only
        self.wrote_position = 0
        self.flushed_position = 0
        self.populated_to = 0
        self.reserved_to = 0  # disk blocks are allocated (posix_fallocate) up to here, see ``reserve``
        self._lock = threading.Lock()
        # Readers hold the mapping (RocketMQ's ReferenceResource): a file retention or cleanExpiredCQ
        # destroys while a pull reads it is unmapped by the last reader, not under it.
        self._ref_lock = threading.Lock()
        self._readers = 0
        self._retired = False
        # The descriptor is closed as soon as the file is mapped (the mapping keeps the file): a store of
        # ~10,000 small files used to hold two descriptors per file and die with EMFILE. The file
        # being written reopens one for pwritev (``_write_fd``), closed when the queue moves on.
        self._fd = -1
        try:
            if read_only:
                fd = os.open(path, os.O_RDONLY)
                try:
                    length = os.fstat(fd).st_size
                    self._mm = _map(fd, length, mmap.ACCESS_READ, path) if length else None
                finally:
                    os.close(fd)
            else:
                exists = path.exists()
                if not exists and not create:
                    raise FileNotFoundError(path)
                fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
                try:
                    fresh = os.fstat(fd).st_size != file_size
                    if fresh:
                        os.ftruncate(fd, file_size)
                    if reserve_whole:
                        _allocate(fd, 0, file_size, path, created=fresh)
                        self.reserved_to = file_size
                    self._mm = _map(fd, file_size, mmap.ACCESS_WRITE, path)
                finally:
                    os.close(fd)
                if fresh:
                    no_read_around(self._mm)
        except OSError as e:
            if e.errno in (errno.EMFILE, errno.ENFILE, errno.ENOMEM):
                raise OSError(e.errno, f"cannot map {path}: {e.strerror} (the store has too many files mapped "
                                       f"for this process's limits; raise `ulimit -n` / vm.max_map_count)") from None
            raise
        self.mv = memoryview(self._mm) if self._mm is not None else memoryview(b"")

    @property
    def length(self) -> int:
        return len(self.mv)

    @property
    def free(self) -> int:
        return self.file_size - self.wrote_position

    def is_full(self) -> bool:
        return self.wrote_position >= self.file_size

    def append(self, data: bytes | bytearray | memoryview) -> int:
        """Copy ``data`` at the write position; returns the position it was written at."""
        pos = self.wrote_position
        n = len(data)
        self.mv[pos:pos + n] = data
        self.wrote_position = pos + n
        return pos

    def write_vectored(self, pos: int, parts: tuple[bytes | bytearray | memoryview, ...]) -> None:
        """Write ``parts`` back to back at ``pos`` through the file descriptor (no write position change).

        Why: for a large record ``pwritev`` costs what a plain file write does, while a copy into the
        mapping pays for pages zero-filled first (MADV_POPULATE_WRITE or a fault each) and then overwritten:
        RocketMQ's transientStorePool goes through FileChannel.write for the same reason. The mapping
        sees the bytes at once (one page cache).
        """
        if self._fd < 0:
            self._fd = os.open(self.path, os.O_WRONLY)
        written = os.pwritev(self._fd, parts, pos)
        total = sum(map(len, parts))
        while 0 < written < total:  # a short write (a signal): go on from where it stopped, by fd
            rest = b"".join(parts)[written:]
            n = os.pwrite(self._fd, rest, pos + written)
            if n <= 0:
                break
            written += n
        if written < total:  # never through the mapping: on a full disk that is SIGBUS
            raise OSError(errno.ENOSPC, f"short write to {self.path} ({written} of {total} bytes)")

    def reserve(self, end: int) -> None:
        """Allocate disk blocks up to ``end`` (plus RESERVE_AHEAD), so no write below it can fault.

        Why: a write into a mapped page that has no disk block on a full filesystem is SIGBUS, which
        kills the process. RocketMQ pre-touches whole files; here blocks are allocated ahead of the
        write position in chunks, with posix_fallocate, and a full disk is an OSError (ENOSPC) the
        append path turns into a refused put, before anything is written.
        """
        if end <= self.reserved_to or self.read_only:
            return
        start = max(self.reserved_to, self.wrote_position - self.wrote_position % PAGE_SIZE)
        stop = min(self.file_size, -(-(end + RESERVE_AHEAD) // PAGE_SIZE) * PAGE_SIZE)
        if stop <= start:
            return
        fd = os.open(self.path, os.O_RDWR)
        try:
            _allocate(fd, start, stop - start, self.path)
        finally:
            os.close(fd)
        self.reserved_to = stop

    def populate(self, end: int) -> None:
        """Fault pages in, writable, from the write position's page (or ``populated_to``, if past it) up
        to ``end`` (page-aligned, capped at the file size). No byte of the file changes.

        Why: the first write to each page of a fresh (sparse) file takes a page fault inside the append
        path; one MADV_POPULATE_WRITE per MiB takes them in bulk, ahead of the writes (what RocketMQ's
        warmMappedFile achieves by touching every page). Measured: BatchCQ puts of 64 KiB ~15% faster.
        The bytes stay zero; only their page-cache pages exist earlier. Does nothing where unsupported.
        """
        global _MADV_POPULATE_WRITE
        self.reserve(end)  # blocks first: populating (or writing) pages without them is SIGBUS on a full disk
        start = max(self.populated_to, self.wrote_position - self.wrote_position % PAGE_SIZE)
        end = min(self.file_size, -(-end // PAGE_SIZE) * PAGE_SIZE)
        if end <= start or self.read_only or self._mm is None or _MADV_POPULATE_WRITE is None:
            return
        if self.populated_to == 0:
            # A fresh file's mapping has read-around off (no_read_around); populated ahead, it needs no
            # such protection, and MADV_POPULATE_WRITE under MADV_RANDOM costs ~3.5x a page (measured
            # 5.9 against 1.6 us: ~20% of a 1 KiB put+dispatch). Normal advice before the first populate.
            try:
                self._mm.madvise(mmap.MADV_NORMAL)
            except OSError:
                pass
        self.populated_to = end  # also on failure: one try per range, the writes then fault as usual
        try:
            self._mm.madvise(_MADV_POPULATE_WRITE, start, end - start)
        except OSError as e:
            if e.errno == errno.EINVAL:  # kernel without MADV_POPULATE_WRITE: stop asking
                _MADV_POPULATE_WRITE = None

    def write_at(self, pos: int, data: bytes | bytearray | memoryview) -> None:
        self.mv[pos:pos + len(data)] = data

    def flush(self, least_pages: int = 0) -> int:
        """msync the dirty range; returns the new flushed position.

        ``least_pages`` does not hold back a full file (RocketMQ's ``isAbleToFlush``): it gets no more
        writes, and left with a few dirty pages until the thorough flush while the next file reached
        the disk, a power cut left a hole that recovery stops at, discarding every record after it.
        """
        if self.read_only or self._mm is None:
            return self.flushed_position
        with self._lock:
            end = self.wrote_position
            start = self.flushed_position
            if end <= start:
                return start
            if least_pages > 0 and end < self.file_size and (end // PAGE_SIZE - start // PAGE_SIZE) < least_pages:
                return start
            aligned = start - start % PAGE_SIZE
            try:
                self._mm.flush(aligned, end - aligned)
            except OSError as e:
                raise self._flush_error(e) from e
            self.flushed_position = end
            return end

    def flush_all(self) -> None:
        if not self.read_only and self._mm is not None:
            try:
                self._mm.flush()
            except OSError as e:
                raise self._flush_error(e) from e
            self.flushed_position = self.wrote_position

    def _flush_error(self, e: OSError) -> OSError:
        """A failed msync naming the file: mmap's own error says only the errno (EIO: the storage
        failed), and the operator must know which file's pages did not reach the disk."""
        return OSError(e.errno, f"cannot flush {self.path}: {e.strerror}")

    def hold(self) -> bool:
        """Keep the mapping while the caller reads; False once the file is closed or destroyed."""
        with self._ref_lock:
            if self._retired:
                return False
            self._readers += 1
            return True

    def release(self) -> None:
        """End a ``hold``; the last reader of a retired file unmaps it."""
        with self._ref_lock:
            self._readers -= 1
            unmap = self._retired and self._readers == 0
        if unmap:
            self._unmap()

    def close(self) -> None:
        """No new reader from now on; unmapped now, or by the last reader still holding the file."""
        with self._ref_lock:
            self._retired = True
            unmap = self._readers == 0
        if unmap:
            self._unmap()
        self.release_fd()

    def _unmap(self) -> None:
        try:
            self.mv.release()
        except Exception:  # a slice still exported somewhere: the mmap is freed when it goes
            pass
        if self._mm is not None:
            try:
                self._mm.close()
            except BufferError:
                pass
            self._mm = None

    def release_fd(self) -> None:
        """Close the descriptor reopened for vectored writes (the mapping stays usable)."""
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def destroy(self) -> None:
        """Unlink the file at once; its mapping stays valid for readers still holding it (an unlinked
        file's pages live as long as they are mapped) and goes with the last of them."""
        self.close()
        try:
            self.path.unlink()
        except FileNotFoundError:
            pass

    def __repr__(self) -> str:
        return f"MappedFile({self.path.name}, wrote={self.wrote_position})"


class MappedFileQueue:
    """An ordered, contiguous run of MappedFiles forming one logical log (MappedFileQueue)."""

    def __init__(self, directory: Path, file_size: int, read_only: bool = False, reserve_whole: bool = False) -> None:
        self.directory = directory
        # Consume queue files are small and written unit by unit: their blocks are allocated whole
        # when created. The commitlog reserves ahead of its write position instead (``reserve``).
        self.reserve_whole = reserve_whole
        self.file_size = file_size
        self.read_only = read_only
        self.closed = False
        self.files: list[MappedFile] = []
        self.flushed_where = 0

    def load(self) -> None:
        """Open every data file; an empty last file is dropped, a wrongly sized one is an error."""
        self.closed = False  # (an object opened again after a close)
        if not self.directory.is_dir():
            return
        names = sorted(p for p in self.directory.iterdir() if p.is_file() and p.name.isdigit() and len(p.name) == 20)
        for i, p in enumerate(names):
            size = p.stat().st_size
            if size != self.file_size:
                if size == 0 and i == len(names) - 1:
                    # A creation interrupted before the file got its size: it holds nothing. A
                    # writable open removes it; a read-only one leaves it and skips it.
                    if not self.read_only:
                        p.unlink()
                    continue
                if i > 0 and names[0].stat().st_size == self.file_size:
                    # the size came from the first file (an existing store's sizes win over the config)
                    raise ValueError(f"{p}: length {size} differs from the {self.file_size} bytes of {names[0].name}, "
                                     "the first file of this log (its files are all one size): one of them was "
                                     "truncated or extended, or they were written with different mappedFileSize*")
                raise ValueError(f"{p}: length {size} differs from the configured file size {self.file_size}; "
                                 f"check the store config (mappedFileSize*) for this store")
            mf = MappedFile(p, self.file_size, self.read_only)
            mf.wrote_position = self.file_size
            mf.flushed_position = self.file_size
            self.files.append(mf)

    def create_file(self, start_offset: int) -> MappedFile:
        mf = self.new_file(start_offset)
        self.add_file(mf)
        return mf

    def new_file(self, start_offset: int) -> MappedFile:
        """The file starting at ``start_offset``, created and mapped but not yet part of the queue.

        Why apart from ``add_file``: a roll must be able to prepare the next file (reserve its disk
        blocks) and, when the disk cannot hold it, destroy it again before anything else changed; a
        file in ``files`` is seen at once by dispatch, flush and retention.
        """
        if self.read_only:
            raise PermissionError("store is open read-only")
        if self.closed:
            raise StoreClosedError(self.directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        path = self.directory / offset_to_file_name(start_offset)
        existed = path.exists()
        try:
            return MappedFile(path, self.file_size, reserve_whole=self.reserve_whole)
        except OSError:
            if not existed:  # a file that could not be mapped must not stay behind as the log's last file
                path.unlink(missing_ok=True)
            raise

    def add_file(self, mf: MappedFile) -> None:
        """Append a file made by ``new_file`` as the queue's last (the one being written)."""
        if self.files:
            self.files[-1].release_fd()  # full now: only the file being written keeps a descriptor
        self.files.append(mf)

    def last_file(self) -> MappedFile | None:
        return self.files[-1] if self.files else None

    def get_last_mapped_file(self, start_offset: int = 0, need_create: bool = True) -> MappedFile | None:
        last = self.files[-1] if self.files else None
        if last is None:
            if not need_create:
                return None
            start = start_offset - start_offset % self.file_size
            return self.create_file(start)
        if last.is_full() and need_create:
            return self.create_file(last.file_from_offset + self.file_size)
        return last

    def find_mapped_file_by_offset(self, offset: int) -> MappedFile | None:
        if not self.files:
            return None
        first = self.files[0].file_from_offset
        idx = (offset - first) // self.file_size
        if 0 <= idx < len(self.files):
            mf = self.files[idx]
            if mf.file_from_offset <= offset < mf.file_from_offset + self.file_size:
                return mf
        for mf in self.files:
            if mf.file_from_offset <= offset < mf.file_from_offset + self.file_size:
                return mf
        return None

    def index_at(self, offset: int) -> int:
        """Index in ``files`` of the file holding ``offset``, or of the last one before it (0 before the
        first). Looked up by the files' own offsets, not by arithmetic from the first: a file missing
        from the middle (deleted by hand) must not shift every index after it."""
        return max(bisect_right(self.files, offset, key=lambda mf: mf.file_from_offset) - 1, 0)

    @contextmanager
    def reading(self, offset: int) -> Iterator[MappedFile | None]:
        """The file holding ``offset``, kept mapped while the caller reads it; None where there is no
        such file, or it is being destroyed (retention or cleanExpiredCQ got there first)."""
        mf = self.find_mapped_file_by_offset(offset)
        if mf is None or not mf.hold():
            yield None
            return
        try:
            yield mf
        finally:
            mf.release()

    def min_offset(self) -> int:
        return self.files[0].file_from_offset if self.files else 0

    def max_offset(self) -> int:
        last = self.last_file()
        return last.file_from_offset + last.wrote_position if last else 0

    def set_max_offset(self, offset: int) -> None:
        """Truncate the logical end to ``offset`` (truncateDirtyFiles): later files are deleted."""
        keep: list[MappedFile] = []
        for mf in self.files:
            tail = mf.file_from_offset + self.file_size
            if tail > offset:
                if offset >= mf.file_from_offset:
                    pos = offset - mf.file_from_offset
                    mf.wrote_position = pos
                    mf.flushed_position = min(mf.flushed_position, pos)
                else:
                    mf.destroy()
                    continue
            keep.append(mf)
        self.files = keep

    def delete_first_file(self) -> None:
        if self.files:
            self.files.pop(0).destroy()

    def flush(self, least_pages: int = 0) -> None:
        for mf in self.files:
            if mf.flushed_position < mf.wrote_position:
                mf.flush(least_pages)

    def close(self) -> None:
        self.closed = True  # for good: a writer still running must not make a first file again
        for mf in self.files:
            mf.close()
        self.files = []

    def destroy(self) -> None:
        for mf in self.files:
            mf.destroy()
        self.files = []
        try:
            self.directory.rmdir()
        except OSError:
            pass
