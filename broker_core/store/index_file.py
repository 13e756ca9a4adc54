"""One RocketMQ IndexFile: a fixed-size, memory-mapped hash table from message keys to commitlog offsets.

Behaviour follows Apache RocketMQ's ``IndexFile``/``IndexHeader`` (spec §7) so files written here are
byte-identical to Java's and Java-written files read correctly:

* a new file is created at full size, zero-filled (sparse), and only the header fields that Java
  writes at construction time (begin/end timestamp and phy offset pre-set from the previous file,
  when > 0) are written before the first entry;
* ``put_key`` computes the entry's ``timeDiff`` against the header's *current* beginTimestamp before
  the first entry resets it. In a rolled-over file that is the previous file's endTimestamp, so the
  first entry may carry a non-zero timeDiff exactly like Java;
* header fields are written to the mapping as they change; ``flush`` rewrites the whole header from
  the live values (Java's ``updateByteBuffer``) and msyncs.

In read-only mode the file is mapped with ``ACCESS_READ``: any write attempt raises, nothing is ever
written (not even on ``close``).
"""

from __future__ import annotations

import errno
import mmap
import os
import sys
from array import array
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from broker_core.store.codec.hotpath import index_key_hash, index_put_keys
from broker_core.store.codec.index_format import (
    BEGIN_PHY_OFFSET_POS,
    BEGIN_TIMESTAMP_POS,
    END_PHY_OFFSET_POS,
    END_TIMESTAMP_POS,
    HASH_SLOT,
    HASH_SLOT_SIZE,
    I64,
    INDEX_ENTRY,
    INDEX_ENTRY_SIZE,
    INDEX_HEADER,
    INDEX_HEADER_SIZE,
    INVALID_INDEX,
    index_file_size,
    time_diff_seconds,
)
from broker_core.store.mapped_file import DiskFullError, data_end, no_read_around, release_mapping_fd

__all__ = ["IndexFile", "IndexFileError", "IndexRepair"]

# Bound methods of the precompiled structs: put_key runs twice per dispatched message.
_pack_entry = INDEX_ENTRY.pack_into
_pack_slot = HASH_SLOT.pack_into
_unpack_slot = HASH_SLOT.unpack_from
_pack_header = INDEX_HEADER.pack_into


@dataclass(frozen=True, slots=True)
class IndexRepair:
    """What ``IndexFile.repair_torn_tail`` did: the header's entry count before, the entries kept,
    the entries cut (zeroed) and the hash slots rewritten."""

    header_entries: int
    kept: int
    cut: int
    slots_fixed: int


class IndexFileError(Exception):
    """An index file cannot be opened as configured (wrong size, or writing a read-only file)."""


class IndexFile:
    """A single index file. Not thread-safe by itself; ``IndexService`` serialises access."""

    __slots__ = (
        "path", "hash_slot_num", "index_num", "read_only", "created", "file_size", "reserved",
        "_mm", "_buf", "_entries_base",
        "_begin_timestamp", "_end_timestamp", "_begin_phy_offset", "_end_phy_offset",
        "_hash_slot_count", "_index_count",
    )

    def __init__(self, path: str | os.PathLike[str], hash_slot_num: int, index_num: int,
                 end_phy_offset: int = 0, end_timestamp: int = 0, *, read_only: bool = False) -> None:
        """Open ``path``, creating it (full size, sparse) when it does not exist.

        ``end_phy_offset``/``end_timestamp`` are the previous file's end values; like Java they are
        written into a *newly created* file's begin and end header fields when > 0. They are ignored
        for an existing file, whose header is loaded from disk.
        """
        if hash_slot_num <= 0 or index_num <= 1:
            raise ValueError(f"hash_slot_num must be > 0 and index_num > 1 (got {hash_slot_num}, {index_num})")
        self.path = Path(path)
        self.hash_slot_num = hash_slot_num
        self.index_num = index_num
        self.read_only = read_only
        self.file_size = index_file_size(hash_slot_num, index_num)
        self._entries_base = INDEX_HEADER_SIZE + hash_slot_num * HASH_SLOT_SIZE

        exists = self.path.exists()
        if read_only and not exists:
            raise FileNotFoundError(f"index file {self.path} does not exist (read-only open)")
        self.created = not exists
        fd = os.open(self.path, os.O_RDONLY if read_only else os.O_RDWR | os.O_CREAT, 0o644)
        try:
            size = os.fstat(fd).st_size
            if size != self.file_size:
                # A 0-byte file is a creation interrupted before pre-allocation: extend it, as Java's
                # mapping of a fresh file does. Any other size means a different maxHashSlotNum /
                # maxIndexNum; reading it with this geometry would give garbage, so refuse.
                if size == 0 and not read_only:
                    os.ftruncate(fd, self.file_size)
                    self.created = True
                else:
                    raise IndexFileError(
                        f"index file {self.path} is {size} bytes, expected {self.file_size} "
                        f"(maxHashSlotNum={hash_slot_num}, maxIndexNum={index_num})")
            # Entries and slots land anywhere in the file: all its blocks are reserved when it is
            # created (the default geometry's 420 MB too), so a full disk refuses the new file instead
            # of killing the writer with SIGBUS on a later page. A file found on disk is reserved by
            # ``reserve`` before it is written (IndexService does it before a put is accepted).
            self.reserved = False
            if self.created:
                self._allocate(fd, unlink_on_failure=True)
            self._mm = mmap.mmap(fd, self.file_size, access=mmap.ACCESS_READ if read_only else mmap.ACCESS_WRITE)
            release_mapping_fd(self._mm, self.path)
        finally:
            os.close(fd)
        # Slots are hit at random and entries are appended: read-around only fills page cache with
        # neighbours nobody asked for (in a new, sparse file ~2 ms of zeroing on the first fault).
        no_read_around(self._mm)
        self._buf = memoryview(self._mm)

        # In-memory header, as IndexHeader keeps it: a fresh file starts at indexCount 1 even though
        # the bytes still read 0 until the first entry.
        self._begin_timestamp = 0
        self._end_timestamp = 0
        self._begin_phy_offset = 0
        self._end_phy_offset = 0
        self._hash_slot_count = 0
        self._index_count = 1
        if self.created:
            self.preset(end_phy_offset, end_timestamp)
        else:
            self.load()

    def preset(self, end_phy_offset: int, end_timestamp: int) -> None:
        """Write the previous file's end values into a new file's begin and end fields (when > 0), as
        Java's IndexFile constructor does. Separate from creation: a file reserved ahead of a roll gets
        them only when the roll happens."""
        if end_phy_offset > 0:
            self._begin_phy_offset = self._end_phy_offset = end_phy_offset
            I64.pack_into(self._buf, BEGIN_PHY_OFFSET_POS, end_phy_offset)
            I64.pack_into(self._buf, END_PHY_OFFSET_POS, end_phy_offset)
        if end_timestamp > 0:
            self._begin_timestamp = self._end_timestamp = end_timestamp
            I64.pack_into(self._buf, BEGIN_TIMESTAMP_POS, end_timestamp)
            I64.pack_into(self._buf, END_TIMESTAMP_POS, end_timestamp)

    def _allocate(self, fd: int, unlink_on_failure: bool) -> None:
        try:
            os.posix_fallocate(fd, 0, self.file_size)
        except OSError as e:
            if e.errno in (errno.EOPNOTSUPP, errno.EINVAL):  # a filesystem that cannot reserve: as before
                return
            if unlink_on_failure:  # a file this call created and could not fill: leave nothing behind
                self.path.unlink(missing_ok=True)
            raise DiskFullError(e.errno, f"disk full: cannot allocate index file {self.path}: {e.strerror}") from None
        self.reserved = True

    def reserve(self) -> None:
        """Give a file found on disk (maybe sparse: Java and older versions leave it so) all its blocks
        before it is written; DiskFullError when the disk cannot, and nothing is changed then."""
        if self.reserved or self.read_only:
            return
        fd = os.open(self.path, os.O_RDWR)
        try:
            self._allocate(fd, unlink_on_failure=False)
        finally:
            os.close(fd)

    def is_blank(self) -> bool:
        """Nothing was ever written: the header and the first entry are zeros (a file reserved ahead
        of a roll that did not happen before the process stopped)."""
        return (self._index_count <= 1 and not any(self._buf[:INDEX_HEADER_SIZE])
                and not any(self._buf[self._entries_base + INDEX_ENTRY_SIZE:self._entries_base + 2 * INDEX_ENTRY_SIZE]))

    # ------------------------------------------------------------------ header

    def load(self) -> None:
        """Re-read the header from the mapping (a stored indexCount <= 0 reads as 1)."""
        (self._begin_timestamp, self._end_timestamp, self._begin_phy_offset, self._end_phy_offset,
         self._hash_slot_count, ic) = INDEX_HEADER.unpack_from(self._buf, 0)
        self._index_count = ic if ic > 0 else 1

    def _write_header(self) -> None:
        INDEX_HEADER.pack_into(self._buf, 0, self._begin_timestamp, self._end_timestamp,
                               self._begin_phy_offset, self._end_phy_offset,
                               self._hash_slot_count, self._index_count)

    @property
    def file_name(self) -> str:
        return self.path.name

    @property
    def begin_timestamp(self) -> int:
        return self._begin_timestamp

    @property
    def end_timestamp(self) -> int:
        return self._end_timestamp

    @property
    def begin_phy_offset(self) -> int:
        return self._begin_phy_offset

    @property
    def end_phy_offset(self) -> int:
        return self._end_phy_offset

    @property
    def hash_slot_count(self) -> int:
        return self._hash_slot_count

    @property
    def index_count(self) -> int:
        """Next entry number to use (1 in an empty file)."""
        return self._index_count

    @property
    def entry_count(self) -> int:
        return self._index_count - 1

    @property
    def closed(self) -> bool:
        return self._mm.closed

    def is_full(self) -> bool:
        """Java ``isWriteFull``: at most ``index_num - 1`` entries fit (entry 0 is never used)."""
        return self._index_count >= self.index_num

    def is_time_matched(self, begin: int, end: int) -> bool:
        """Whether ``[begin, end]`` overlaps the file's ``[beginTimestamp, endTimestamp]`` (Java's test)."""
        bt = self._begin_timestamp
        et = self._end_timestamp
        return (begin < bt and end > et) or (bt <= begin <= et) or (bt <= end <= et)

    # ------------------------------------------------------------------ write

    def put_key(self, key: str, phy_offset: int, store_timestamp: int) -> bool:
        """Append one entry for ``key``; False when the file is full (the caller rolls to a new file)."""
        return self.put_key_hash(index_key_hash(key), phy_offset, store_timestamp)

    def put_keys(self, topic: str, uniq_key: str | None, keys: str | None, phy_offset: int, store_timestamp: int,
                 skip: int = 0) -> tuple[int, int]:
        """Append the entries of one record's keys (``topic#UNIQ_KEY``, then ``topic#token`` per KEYS
        token), leaving out the first ``skip``; returns (entries written, keys of the record).

        Why: this is the per-put path; hashing, slot and entry writes and the header update are one
        call to the hot path (``hotpath.index_put_keys``, same bytes as ``put_key_hashes``). The
        caller rolls to a new file when fewer than ``key_count - skip`` fit.
        """
        if self.read_only:
            raise IndexFileError(f"index file {self.path} is open read-only")
        written, key_count, begin_ts, begin_phy, slot_count, n = index_put_keys(
            self._buf, self.hash_slot_num, self.index_num, self._index_count, self._begin_timestamp,
            self._begin_phy_offset, self._hash_slot_count, topic, uniq_key, keys, phy_offset, store_timestamp, skip)
        if written:
            self._begin_timestamp = begin_ts
            self._begin_phy_offset = begin_phy
            self._hash_slot_count = slot_count
            self._index_count = n
            self._end_phy_offset = phy_offset
            self._end_timestamp = store_timestamp
        return written, key_count

    def put_key_hash(self, key_hash: int, phy_offset: int, store_timestamp: int) -> bool:
        """``put_key`` for a key whose ``index_key_hash`` is already known.

        Why: a bulk rebuild hashes keys in parallel while decoding and only links them here, in order.
        """
        return self.put_key_hashes((key_hash,), phy_offset, store_timestamp) == 1

    def put_key_hashes(self, key_hashes: tuple[int, ...] | list[int], phy_offset: int, store_timestamp: int) -> int:
        """Append one entry per hash, all for the record at ``phy_offset``; returns how many fit.

        One record's keys go in one call (dispatch indexes a UNIQ_KEY and its KEYS together): the
        in-memory header is updated once and written once, which gives the same bytes as Java's
        entry-by-entry header updates. The caller rolls to a new file for the rest when the count
        is short.
        """
        if self.read_only:
            raise IndexFileError(f"index file {self.path} is open read-only")
        n = self._index_count
        room = self.index_num - n
        if room <= 0:
            return 0
        buf = self._buf
        slot_num = self.hash_slot_num
        entries_base = self._entries_base
        begin_ts = self._begin_timestamp
        new_slots = 0
        written = 0
        for key_hash in key_hashes:
            if written == room:
                break
            spos = INDEX_HEADER_SIZE + (key_hash % slot_num) * HASH_SLOT_SIZE
            slot_value = _unpack_slot(buf, spos)[0]
            if slot_value <= INVALID_INDEX or slot_value > n:
                slot_value = INVALID_INDEX
                new_slots += 1
            # timeDiff is taken against the begin time *before* the first entry resets it (as Java).
            time_diff = time_diff_seconds(store_timestamp, begin_ts)
            if n <= 1:
                self._begin_phy_offset = phy_offset
                begin_ts = store_timestamp
            _pack_entry(buf, entries_base + n * INDEX_ENTRY_SIZE, key_hash, phy_offset, time_diff, slot_value)
            _pack_slot(buf, spos, n)
            n += 1
            written += 1
        if written:
            self._begin_timestamp = begin_ts
            self._hash_slot_count += new_slots
            self._index_count = n
            self._end_phy_offset = phy_offset
            self._end_timestamp = store_timestamp
            # Every header field has been written by Java once the first entry is in, so writing the
            # whole header in one pack gives the same bytes as Java's field-by-field setters.
            _pack_header(buf, 0, begin_ts, store_timestamp, self._begin_phy_offset, phy_offset,
                         self._hash_slot_count, n)
        return written

    def truncate_from(self, phy_offset: int) -> int:
        """Remove the trailing entries whose commitlog offset is >= ``phy_offset``; return how many.

        Java has no such operation (its abnormal recovery deletes every non-full file instead). It is
        needed when recovery cuts the commitlog: otherwise dispatch would skip re-written offsets
        (they are < endPhyOffset) and queries would return offsets of records that no longer exist.
        Entries are appended in commitlog order, so the ones to drop are the newest; each is the head
        of its slot chain when removed newest-first, so the slot goes back to its prevIndex.

        The restored endTimestamp is ``beginTimestamp + timeDiff*1000`` of the new last entry: the
        exact value is not stored, and this lower bound is precisely the time queries match against.
        Returns the number of entries removed. The caller deletes the file if no entry is left.
        """
        if self.read_only:
            raise IndexFileError(f"index file {self.path} is open read-only")
        buf = self._buf
        base = self._entries_base
        removed = 0
        n = self._index_count - 1
        zero_entry = bytes(INDEX_ENTRY_SIZE)
        while n >= 1:
            pos = base + n * INDEX_ENTRY_SIZE
            key_hash, phy, _td, prev = INDEX_ENTRY.unpack_from(buf, pos)
            if phy < phy_offset:
                break
            spos = INDEX_HEADER_SIZE + (key_hash % self.hash_slot_num) * HASH_SLOT_SIZE
            if HASH_SLOT.unpack_from(buf, spos)[0] == n:
                HASH_SLOT.pack_into(buf, spos, prev)
            if prev == INVALID_INDEX:
                # put_key counted a new slot exactly when it stored prevIndex 0.
                self._hash_slot_count -= 1
            buf[pos:pos + INDEX_ENTRY_SIZE] = zero_entry
            removed += 1
            n -= 1
        if removed:
            self._index_count = n + 1
            if n >= 1:
                _kh, phy, td, _prev = INDEX_ENTRY.unpack_from(buf, base + n * INDEX_ENTRY_SIZE)
                self._end_phy_offset = phy
                self._end_timestamp = max(self._begin_timestamp, self._begin_timestamp + td * 1000)
            else:
                self._end_phy_offset = self._begin_phy_offset
                self._end_timestamp = self._begin_timestamp
            self._write_header()
        return removed

    def _entry_plausible(self, n: int) -> bool:
        """Entry ``n`` (1..) looks like one ``put_key`` wrote in commitlog order: a key hash
        (non-negative, as Java's), a non-negative timeDiff, a chain link backwards, an offset no lower
        than the previous entry's."""
        kh, phy, td, prev = INDEX_ENTRY.unpack_from(self._buf, self._entries_base + n * INDEX_ENTRY_SIZE)
        if kh < 0 or td < 0 or not 0 <= prev < n or phy < 0:
            return False
        if n > 1:
            return phy >= INDEX_ENTRY.unpack_from(self._buf, self._entries_base + (n - 1) * INDEX_ENTRY_SIZE)[1]
        return True

    def repair_torn_tail(self, safe_phy: int | None = None,
                         keep_aside: Callable[[int, bytes], object] | None = None) -> IndexRepair:
        """Make a file a crash left torn whole again, in place, keeping every entry it can trust.

        Why: ``put_keys`` writes a record's entries, then their hash slots, then the header; a kill -9
        in between leaves entries (and slots pointing at them) past the header's indexCount, a power
        cut may leave a header ahead of its entries. Deleting the file and re-dispatching every record
        into a new one cost 20 s for 1M messages. Here:

        * the entries kept are those up to the header's count that were really written (a header
          ahead of its entries is taken back to the last written one), down to the newest plausible
          entry (``_entry_plausible``) pointing below ``safe_phy`` (the commitlog's recovered end,
          when known); everything after it is cut: zeroed, after ``keep_aside(pos, bytes)`` was given
          the cut bytes (the store puts them in ``lost+found/``);
        * every hash slot that points at a cut entry is set to the newest surviving entry of its chain
          (the first link at or below the last kept entry), or 0 when none survives. Slots are found
          from the cut entries' hashes (a kill -9 writes a slot only after its entry). Where pages may
          have been lost (a header ahead of its entries, a torn cut entry) all slots are checked too
          (one max over the array), and any other slot pointing past the end gets its chain's
          survivor from one backward pass over the entries;
        * the header gets the kept count, the last kept entry's offset and time (the lower bound the
          entry stores, as ``truncate_from``), and the slot count less the cut chain heads.

        The caller re-dispatches the records after ``end_phy_offset``. Raises IndexFileError (nothing
        changed) when even the header's geometry is not this file's.
        """
        if self.read_only:
            raise IndexFileError(f"index file {self.path} is open read-only")
        buf = self._buf
        base = self._entries_base
        slot_num = self.hash_slot_num
        n_hdr = self._index_count - 1
        if n_hdr >= self.index_num or self._hash_slot_count < 0:
            raise IndexFileError(f"index file {self.path}: header indexCount {self._index_count} / hashSlotCount "
                                 f"{self._hash_slot_count} do not fit maxIndexNum {self.index_num}")
        # The highest entry holding any byte: past the header (torn put) or below it (header ahead).
        top = n_hdr
        while top + 1 < self.index_num and any(buf[base + (top + 1) * INDEX_ENTRY_SIZE:
                                                   base + (top + 2) * INDEX_ENTRY_SIZE]):
            top += 1
        keep = n_hdr
        if keep >= 1 and not any(buf[base + keep * INDEX_ENTRY_SIZE:base + (keep + 1) * INDEX_ENTRY_SIZE]):
            end = data_end(buf[:base + (keep + 1) * INDEX_ENTRY_SIZE], base + INDEX_ENTRY_SIZE)
            keep = max(0, -(-(end - base) // INDEX_ENTRY_SIZE) - 1)
        written = max(top, keep)  # entries past it are zeros: nothing to cut there
        header_ahead = keep < n_hdr
        while keep >= 1 and not (self._entry_plausible(keep) and (
                safe_phy is None or INDEX_ENTRY.unpack_from(buf, base + keep * INDEX_ENTRY_SIZE)[1] < safe_phy)):
            keep -= 1
        cut_lo, cut_hi = keep + 1, written  # entries cut_lo..cut_hi go
        if cut_hi < cut_lo and self._is_header_whole(keep):
            return IndexRepair(n_hdr, keep, 0, 0)
        cut_bytes = bytes(buf[base + cut_lo * INDEX_ENTRY_SIZE:base + (cut_hi + 1) * INDEX_ENTRY_SIZE])
        if keep_aside is not None and any(cut_bytes):
            keep_aside(base + cut_lo * INDEX_ENTRY_SIZE, cut_bytes)
        # Slots pointing at cut entries, and where each must point now (its chain's first survivor).
        fixes: dict[int, int] = {}
        unknown: set[int] = set()
        cut = {n: INDEX_ENTRY.unpack_from(buf, base + n * INDEX_ENTRY_SIZE) for n in range(cut_lo, cut_hi + 1)}
        # A kill -9 writes an entry before the slot that points at it: every slot past the kept end is
        # one of the cut entries' slots. Lost pages (a header ahead of its entries) or a torn entry
        # may leave any slot pointing anywhere: then all slots are checked.
        check_all = header_ahead
        for n, (kh, _phy, _td, prev) in cut.items():
            if kh < 0 or not 0 <= prev < n:
                check_all = True
            if kh < 0:
                continue
            slot = kh % slot_num
            if slot in fixes or slot in unknown:
                continue
            target = _unpack_slot(buf, INDEX_HEADER_SIZE + slot * HASH_SLOT_SIZE)[0]
            if target <= keep:
                continue
            while target > keep and target in cut and 0 <= cut[target][3] < target:
                target = cut[target][3]
            if target > keep:
                unknown.add(slot)
            else:
                fixes[slot] = target
        if check_all:
            slots = array("i")
            slots.frombytes(buf[INDEX_HEADER_SIZE:base])
            if sys.byteorder == "little":
                slots.byteswap()
            for slot, target in fixes.items():
                slots[slot] = target
            if slots and max(slots) > keep:
                unknown.update(i for i, v in enumerate(slots) if v > keep and i not in fixes)
        if unknown:
            pending = set(unknown)
            n = keep
            while pending and n >= 1:
                kh = INDEX_ENTRY.unpack_from(buf, base + n * INDEX_ENTRY_SIZE)[0]
                slot = kh % slot_num if kh >= 0 else -1
                if slot in pending:
                    fixes[slot] = n
                    pending.discard(slot)
                n -= 1
            for slot in pending:
                fixes[slot] = INVALID_INDEX
        # Each cut entry that started a chain (prevIndex 0) was counted in hashSlotCount, if the header
        # counted it at all (entries past the header's count were not).
        heads_cut = sum(1 for n, e in cut.items() if n <= n_hdr and e[3] == INVALID_INDEX and any(e))
        # -- from here on the file changes
        for slot, target in fixes.items():
            _pack_slot(buf, INDEX_HEADER_SIZE + slot * HASH_SLOT_SIZE, target)
        if cut_bytes:
            buf[base + cut_lo * INDEX_ENTRY_SIZE:base + (cut_hi + 1) * INDEX_ENTRY_SIZE] = bytes(len(cut_bytes))
        self._index_count = keep + 1
        self._hash_slot_count = max(0, min(keep, self._hash_slot_count - heads_cut))
        if keep >= 1:
            _kh, phy, td, _prev = INDEX_ENTRY.unpack_from(buf, base + keep * INDEX_ENTRY_SIZE)
            if phy != self._end_phy_offset:
                self._end_phy_offset = phy
                self._end_timestamp = max(self._begin_timestamp, self._begin_timestamp + td * 1000)
        else:
            self._end_phy_offset = self._begin_phy_offset
            self._end_timestamp = self._begin_timestamp
        self._write_header()
        return IndexRepair(n_hdr, keep, max(0, cut_hi - keep), len(fixes))

    def _is_header_whole(self, keep: int) -> bool:
        """Header and kept entries agree already (nothing to write)."""
        return keep == self._index_count - 1 and self.is_consistent()

    def is_consistent(self, *, entries_may_run_ahead: bool = False) -> bool:
        """Whether header and entries agree, so the file can be trusted up to its endPhyOffset.

        Why: after a crash the newest index files are kept only if they are whole. Entries are written
        in commitlog order and the header after them, so a whole file has: its last entry at
        ``indexCount - 1`` pointing at endPhyOffset, nothing written past
        the last entry, and a hash slot count no larger than the entries. Checked in O(1); a damaged
        entry further back is verifyStore's to find (it names the entry).

        ``entries_may_run_ahead``: a read-only look at the file a live writer is filling. Its entries
        run ahead of the header between the two writes of every put (for as long as the writer is
        descheduled there), so only the header's own snapshot is checked: the entry it names last is
        written before the header and never changes afterwards.
        """
        n = self._index_count - 1
        if n < 0 or n >= self.index_num or self._hash_slot_count < 0 or self._hash_slot_count > n:
            return False
        base = self._entries_base
        if not entries_may_run_ahead and n < self.index_num - 1 and any(
                bytes(self._buf[base + (n + 1) * INDEX_ENTRY_SIZE:base + (n + 2) * INDEX_ENTRY_SIZE])):
            return False
        if n == 0:
            return True
        _h, last_phy, last_td, last_prev = INDEX_ENTRY.unpack_from(self._buf, base + n * INDEX_ENTRY_SIZE)
        return (last_phy == self._end_phy_offset and 0 <= last_prev < n and last_td >= 0
                and self._begin_phy_offset <= self._end_phy_offset)

    def flush(self) -> None:
        """Rewrite the header from the live values (Java ``updateByteBuffer``) and msync."""
        if self.read_only or self._mm.closed:
            return
        self._write_header()
        self._mm.flush()

    def close(self, flush: bool = True) -> None:
        """Flush (writable files, unless told not to) and unmap. Safe to call twice."""
        if self._mm.closed:
            return
        if flush and not self.read_only:
            self.flush()
        self._buf.release()
        self._mm.close()

    def destroy(self) -> None:
        """Unmap without flushing and delete the file."""
        self.close(flush=False)
        self.path.unlink(missing_ok=True)

    # ------------------------------------------------------------------ read

    def select_phy_offsets(self, key: str, max_num: int, begin: int, end: int,
                           out: list[int] | None = None) -> list[int]:
        """Candidate commitlog offsets for ``key`` stored in ``[begin, end]`` (spec §7.4), newest first.

        Appends to ``out`` (stopping when it holds ``max_num``) so the service can gather across files.
        Results are hash matches only; callers must compare the real keys.
        """
        result: list[int] = [] if out is None else out
        n_max = self._index_count
        if n_max <= 1 or len(result) >= max_num:
            return result
        buf = self._buf
        key_hash = index_key_hash(key)
        spos = INDEX_HEADER_SIZE + (key_hash % self.hash_slot_num) * HASH_SLOT_SIZE
        n = HASH_SLOT.unpack_from(buf, spos)[0]
        if n <= INVALID_INDEX or n > n_max:
            return result
        base = self._entries_base
        bt = self._begin_timestamp
        unpack = INDEX_ENTRY.unpack_from
        while len(result) < max_num:
            kh, phy, time_diff, prev = unpack(buf, base + n * INDEX_ENTRY_SIZE)
            if time_diff < 0:
                break
            t = bt + time_diff * 1000
            if kh == key_hash and begin <= t <= end:
                result.append(phy)
            if prev <= INVALID_INDEX or prev > n_max or prev == n or t < begin:
                break
            n = prev
        return result

    def reachable_entries(self, follow_newer: bool = False) -> set[int]:
        """Entry numbers a key query can reach: walking each used slot's chain (as ``select_phy_offsets``
        does), keeping the entries whose hash belongs to that slot.

        Why: verifyStore must see what queries see. A flipped slot or prevIndex leaves entries in the
        file that no query will ever return; comparing entries alone called such a store OK.

        ``follow_newer``: the file is mapped beside a live writer that keeps appending after this
        object read the header. A slot (or a link) may then name an entry past the header's count:
        the writer's newer entry, whose chain leads back to the older ones (entries are written
        before the slot that points at them). Without following it, every older entry of that slot
        read as unreachable (26 false alarms in 15 verifyStore runs beside a writer). Newer entries
        are walked but not returned: they are past the snapshot being checked.
        """
        buf = self._buf
        slot_num = self.hash_slot_num
        n_max = self._index_count
        n_walk = self.index_num if follow_newer else n_max
        base = self._entries_base
        slots = {kh % slot_num for _n, kh, _p, _t, _prev in self.iter_entries()}
        reach: set[int] = set()
        for slot in slots:
            n = _unpack_slot(buf, INDEX_HEADER_SIZE + slot * HASH_SLOT_SIZE)[0]
            while INVALID_INDEX < n < n_walk:
                kh, _phy, time_diff, prev = INDEX_ENTRY.unpack_from(buf, base + n * INDEX_ENTRY_SIZE)
                if time_diff < 0:
                    break
                if kh % slot_num == slot and n < n_max:
                    reach.add(n)
                if prev >= n:  # chains run strictly backwards; anything else is damage
                    break
                n = prev
        return reach

    def iter_entries(self) -> Iterator[tuple[int, int, int, int, int]]:
        """Yield ``(n, keyHash, phyOffset, timeDiff, prevIndex)`` for every written entry (tools, tests)."""
        buf = self._buf
        base = self._entries_base
        for n in range(1, self._index_count):
            yield (n, *INDEX_ENTRY.unpack_from(buf, base + n * INDEX_ENTRY_SIZE))

    def __repr__(self) -> str:
        return (f"IndexFile({self.path.name}, entries={self.entry_count}, "
                f"ts=[{self._begin_timestamp},{self._end_timestamp}], "
                f"phy=[{self._begin_phy_offset},{self._end_phy_offset}], ro={self.read_only})")
