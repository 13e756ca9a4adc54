"""IndexService: the ordered list of index files under ``<root>/index`` (spec §7), as RocketMQ keeps it.

Dispatch calls ``build_index`` once per commitlog record; ``query_offset`` serves queryMessage by key
and by UNIQ_KEY. Rules follow Apache RocketMQ's ``IndexService`` so a store shared with Java behaves
identically:

* the last file is fetched (or created, when there is none or it is full) *before* any skip check,
  so even a skipped record can roll a full file;
* a record whose commitlog offset is ``<`` that file's endPhyOffset is taken as already indexed
  (re-dispatch after recovery is idempotent); ROLLBACK records are not indexed;
* keys are ``topic#UNIQ_KEY`` then ``topic#token`` per non-empty KEYS token split on single spaces;
* a rolled-over file is pre-set from the previous file's end values and the previous (full) file is
  flushed; its endTimestamp is what the checkpoint's ``indexMsgTimestamp`` may advance to.

Recovery hooks: ``destroy_files_newer_than`` (abnormal restart, Java's ``load(lastExitOK=false)``),
and ``truncate_beyond`` (commitlog cut), which Java does not have; see its docstring.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from broker_core.store.codec.hot_py import index_keys
from broker_core.store.codec.index_format import (
    DEFAULT_MAX_HASH_SLOT_NUM,
    DEFAULT_MAX_INDEX_NUM,
    DEFAULT_MAX_MSGS_NUM_BATCH,
    INDEX_ENTRY_SIZE,
    INDEX_HEADER_SIZE,
    entries_base,
    index_file_name,
    index_file_name_to_ms,
    index_file_size,
    is_index_file_name,
)
from broker_core.store.codec.sys_flag import TRANSACTION_ROLLBACK_TYPE, TRANSACTION_TYPE_MASK
from broker_core.store.index_file import IndexFile, IndexFileError

__all__ = ["IndexService", "IndexStats", "ms_now"]

# Read-only load of a file whose header trails its entries: how often to re-read it (live writer).
_RELOAD_TRIES = 10
_RELOAD_PAUSE_S = 0.002
# Free entries a last index file keeps before the next file is reserved (capped at a quarter file).
_ROOM_MARGIN = 4096

KEY_SEPARATOR = " "


def ms_now() -> int:
    """Wall clock in epoch milliseconds (index file names are creation times)."""
    return time.time_ns() // 1_000_000


def build_key(topic: str, key: str) -> str:
    return f"{topic}#{key}"


@dataclass(frozen=True, slots=True)
class IndexStats:
    file_count: int
    entry_count: int
    total_size: int
    last_end_phy_offset: int
    last_end_timestamp: int


class IndexService:
    """All index files of one store, oldest first. Thread-safe (one lock around files and list)."""

    def __init__(self, index_dir: str | os.PathLike[str], hash_slot_num: int = DEFAULT_MAX_HASH_SLOT_NUM,
                 index_num: int = DEFAULT_MAX_INDEX_NUM, clock: Callable[[], int] = ms_now,
                 read_only: bool = False, max_msgs_num_batch: int = DEFAULT_MAX_MSGS_NUM_BATCH,
                 on_full_file_flushed: Callable[[int], None] | None = None, beside_live_writer: bool = False) -> None:
        """Load every ``yyyyMMddHHmmssSSS`` file in ``index_dir`` in name order.

        ``beside_live_writer``: a read-only load while another process holds the store and writes
        (the store knows it from the lock): its newest file's entries may then run ahead of the header.

        ``on_full_file_flushed(end_timestamp)`` is called after a full file has been flushed, so the
        store can set checkpoint.indexMsgTimestamp (also readable as ``last_full_file_end_timestamp``).
        """
        self.index_dir = Path(index_dir)
        self.hash_slot_num = hash_slot_num
        self.index_num = index_num
        self.clock = clock
        self.read_only = read_only
        self.beside_live_writer = read_only and beside_live_writer
        self.max_msgs_num_batch = max_msgs_num_batch
        self.on_full_file_flushed = on_full_file_flushed
        self._lock = threading.RLock()
        self._files: list[IndexFile] = []
        # The file the next roll will use, created (and its blocks reserved) before the put that
        # needs it was accepted: a full disk then refuses that put instead of leaving it unindexed.
        self._spare: IndexFile | None = None
        # Entries kept free in the last file before a spare is made: dispatch may trail the puts.
        self._margin = max(1, min(_ROOM_MARGIN, index_num // 4))
        self._last_full_file_end_timestamp = 0
        self.damaged_files: list[str] = []  # found on load (verifyStore reports them)
        # Read-only: keys of records the files do not have yet (the writer died before indexing
        # them), ``topic#key`` -> [(phyOffset, storeTimestamp)] in commitlog order; see index_in_memory.
        self._in_memory: dict[str, list[tuple[int, int]]] = {}
        self.repaired_files: list[str] = []  # torn by a crash, repaired in place on a writable load
        if not read_only:
            self.index_dir.mkdir(parents=True, exist_ok=True)
        self._load()

    def _load(self) -> None:
        if not self.index_dir.is_dir():
            return
        names = sorted(p.name for p in self.index_dir.iterdir() if is_index_file_name(p.name) and p.is_file())
        sizes = {name: (self.index_dir / name).stat().st_size for name in names}
        expected = index_file_size(self.hash_slot_num, self.index_num)
        # Files of another size beside files of the configured one: those are cut short (a truncated
        # copy, a damaged disk), not another geometry (which IndexFile refuses, naming the keys to set).
        geometry_found = expected in sizes.values()
        for i, name in enumerate(names):
            path = self.index_dir / name
            if self.read_only and sizes[name] == 0:
                continue  # an interrupted creation; cannot be mapped without writing
            if geometry_found and sizes[name] not in (0, expected):
                self._damaged_from(names, i, f"{sizes[name]} bytes, expected {expected} like the others")
                break
            f = IndexFile(path, self.hash_slot_num, self.index_num, read_only=self.read_only)
            if self._files and i == len(names) - 1 and f.is_blank():
                # Reserved ahead of a roll that did not happen before the process stopped: nothing in
                # it. Writable: the next roll uses it; read-only: not part of the index.
                if self.read_only:
                    f.close(flush=False)
                else:
                    self._spare = f
                break
            # Read-only beside a live writer, the file it fills has entries past the header (written
            # just before it); its header is the snapshot taken. Without a live writer (a crash) the
            # same state stays "header and entries disagree", as any other file's.
            ahead = self.beside_live_writer and self._is_newest_data_file(names, i)
            if not self._whole(f, ahead) and self.read_only:
                # A header read while the writer rewrites it: read again before calling it damaged.
                for _ in range(_RELOAD_TRIES):
                    time.sleep(_RELOAD_PAUSE_S)
                    f.load()
                    if self._whole(f, ahead):
                        break
            if not self._whole(f) and not self.read_only and self._is_newest_data_file(names, i):
                self._repair(f)
            if not self._whole(f, ahead):
                # Garbage or torn: neither this file nor any newer one can be trusted (they continue
                # it). Read-only: left alone and reported; writable: moved to lost+found/ and rebuilt
                # from the commitlog by recovery (which re-indexes from the last whole file's end).
                f.close(flush=False)
                self._damaged_from(names, i, "header and entries disagree")
                break
            self._files.append(f)
            if f.is_full():
                self._last_full_file_end_timestamp = f.end_timestamp

    def _damaged_from(self, names: list[str], i: int, reason: str) -> None:
        """``names[i]`` is damaged: neither it nor any newer file can be trusted (they continue it).
        Read-only: left alone and reported (their keys are read from the commitlog); writable: moved
        to lost+found/ and rebuilt from the commitlog by recovery (from the last whole file's end)."""
        self.damaged_files = [f"{n}: {reason}" if n == names[i] else f"{n}: follows damaged index file {names[i]}"
                              for n in names[i:]]
        if not self.read_only:
            self._move_aside(names[i:])

    def _is_newest_data_file(self, names: list[str], i: int) -> bool:
        """Whether ``names[i]`` is the file being written when the store stopped: the last one, or
        the last but a blank one reserved ahead of a roll."""
        if i == len(names) - 1:
            return True
        if i != len(names) - 2:
            return False
        nxt = self.index_dir / names[-1]
        try:
            with open(nxt, "rb") as fh:
                header = fh.read(INDEX_HEADER_SIZE)
                fh.seek(entries_base(self.hash_slot_num) + INDEX_ENTRY_SIZE)
                first_entry = fh.read(INDEX_ENTRY_SIZE)
        except OSError:
            return False
        return not any(header) and not any(first_entry)

    def _repair(self, f: IndexFile) -> None:
        """Repair the newest index file in place after a crash (``IndexFile.repair_torn_tail``); the
        entries it cuts go to ``lost+found/index/``. Recovery re-indexes from the file's new end.

        Why not delete it and rebuild, as before: for 1M messages that re-dispatched every record
        (20 s against 7 s for a clean open), when a kill -9 tears only the last record's entries.
        """
        import logging

        from .lost_found import save_aside

        def keep_aside(pos: int, data: bytes) -> None:
            save_aside(self.index_dir.parent, f.path, pos, data)

        try:
            rep = f.repair_torn_tail(keep_aside=keep_aside)
        except (IndexFileError, OSError) as e:
            logging.getLogger("rmqops.store").warning("index file %s could not be repaired: %s", f.file_name, e)
            return
        self.repaired_files.append(f"{f.file_name}: header counted {rep.header_entries} entries, {rep.kept} kept, "
                                   f"{rep.cut} cut, {rep.slots_fixed} hash slot(s) re-pointed")
        logging.getLogger("rmqops.store").warning("index file %s was torn by a crash and repaired in place: %s",
                                                  f.file_name, self.repaired_files[-1])

    def _whole(self, f: IndexFile, entries_may_run_ahead: bool = False) -> bool:
        """Header and entries agree, and the file continues where the previous one ends."""
        return (f.is_consistent(entries_may_run_ahead=entries_may_run_ahead)
                and not (self._files and f.begin_phy_offset < self._files[-1].end_phy_offset))

    def _move_aside(self, names: list[str]) -> None:
        import logging

        from .lost_found import lost_found_dir

        dest = lost_found_dir(self.index_dir.parent) / "index"
        dest.mkdir(parents=True, exist_ok=True)
        for n in names:
            os.replace(self.index_dir / n, dest / n)
        logging.getLogger("rmqops.store").warning(
            "index file(s) %s are damaged: moved to %s, their keys are re-indexed from the commitlog",
            ", ".join(names), dest)

    # ------------------------------------------------------------------ properties

    @property
    def files(self) -> list[IndexFile]:
        with self._lock:
            return list(self._files)

    @property
    def last_index_file_end_phy_offset(self) -> int:
        """endPhyOffset of the newest file (0 if none): where index dispatch has got to."""
        files = self._files  # no lock: one list read and one int read (dispatch asks once per record)
        return files[-1].end_phy_offset if files else 0

    @property
    def last_index_file_end_timestamp(self) -> int:
        """endTimestamp of the newest file (QueryOffsetResult.indexLastUpdateTimestamp)."""
        with self._lock:
            return self._files[-1].end_timestamp if self._files else 0

    @property
    def last_full_file_end_timestamp(self) -> int:
        """endTimestamp of the newest full file known flushed: the checkpoint's indexMsgTimestamp."""
        return self._last_full_file_end_timestamp

    def stats(self) -> IndexStats:
        with self._lock:
            last = self._files[-1] if self._files else None
            return IndexStats(
                file_count=len(self._files),
                entry_count=sum(f.entry_count for f in self._files),
                total_size=len(self._files) * index_file_size(self.hash_slot_num, self.index_num),
                last_end_phy_offset=last.end_phy_offset if last else 0,
                last_end_timestamp=last.end_timestamp if last else 0,
            )

    # ------------------------------------------------------------------ write

    def _check_writable(self) -> None:
        if self.read_only:
            raise IndexFileError(f"index service on {self.index_dir} is read-only")

    def _get_and_create_last_file(self) -> IndexFile:
        """The last file if not full; otherwise a new one pre-set from the last, flushing the full one."""
        prev: IndexFile | None = None
        if self._files:
            last = self._files[-1]
            if not last.is_full():
                return last
            prev = last
        f, self._spare = self._spare, None
        if f is None:
            f = self._create_file()  # DiskFullError: the record stays unindexed until dispatch retries
        if prev is not None:
            f.preset(prev.end_phy_offset, prev.end_timestamp)
        self._files.append(f)
        if prev is not None:
            self._flush_file(prev)
        return f

    def _create_file(self) -> IndexFile:
        """A new, empty, fully reserved file named after the newest one (DiskFullError when the disk
        cannot hold it; nothing is left behind then)."""
        ms = self.clock()
        name = index_file_name(ms)
        # Two files created in one millisecond would share a name (Java would reopen the full file),
        # and a clock behind the newest name would sort the new file first on the next load. Move
        # just past the newest name so names stay unique and in creation order.
        if self._files and name <= self._files[-1].file_name:
            ms = index_file_name_to_ms(self._files[-1].file_name) + 1
            name = index_file_name(ms)
        while (self.index_dir / name).exists():
            ms += 1
            name = index_file_name(ms)
        return IndexFile(self.index_dir / name, self.hash_slot_num, self.index_num)

    def has_room(self, key_count: int) -> bool:
        """Whether ``key_count`` more keys are sure to be indexable without creating a file now.

        Why: a put is acknowledged before it is indexed; the index file a roll creates must exist
        (blocks reserved) before the put is accepted, or a full disk would leave an acknowledged
        message unfindable by key. Lock-free and cheap (the per-put check); ``make_room`` does the work.
        """
        files = self._files
        last = files[-1] if files else None
        if last is not None and not last.reserved:
            return False
        return self._spare is not None or (
            last is not None and last.index_num - last.index_count >= key_count + self._margin)

    def make_room(self, key_count: int) -> None:
        """Reserve what the next ``key_count`` keys may need: the blocks of the last file (one found
        on disk may be sparse) and, when it is nearly full, the next file. Raises DiskFullError when
        the disk cannot hold them; nothing is indexed or changed then."""
        self._check_writable()
        with self._lock:
            last = self._files[-1] if self._files else None
            if last is not None:
                last.reserve()
            if self._spare is None and (last is None or last.index_num - last.index_count < key_count + self._margin):
                self._spare = self._create_file()

    def _flush_file(self, f: IndexFile) -> None:
        """Flush one file; a full file's endTimestamp becomes the new safe indexMsgTimestamp."""
        full_ts = f.end_timestamp if f.is_full() else 0
        f.flush()
        if full_ts > self._last_full_file_end_timestamp:
            self._last_full_file_end_timestamp = full_ts
            if self.on_full_file_flushed is not None:
                self.on_full_file_flushed(full_ts)

    def build_index(self, topic: str, phy_offset: int, store_timestamp: int, uniq_key: str | None,
                    keys: str | None, tran_type: int) -> int:
        """Index one dispatched record; returns the number of entries written (0 if skipped).

        ``tran_type`` is ``sysFlag & 0xC`` (a full sysFlag is masked here too). The UNIQ_KEY entry
        comes first, then each KEYS token, as in Java; hashing and writing is one hot-path call per
        file (``IndexFile.put_keys``), a record's keys straddling a full file continue in the next.
        """
        if self.read_only:
            self._check_writable()
        with self._lock:
            files = self._files
            f = files[-1] if files else None
            if f is None or f.is_full():
                f = self._get_and_create_last_file()
            if phy_offset < f.end_phy_offset or tran_type & TRANSACTION_TYPE_MASK == TRANSACTION_ROLLBACK_TYPE:
                return 0
            written, key_count = f.put_keys(topic, uniq_key, keys, phy_offset, store_timestamp)
            while written < key_count:
                f = self._get_and_create_last_file()
                written += f.put_keys(topic, uniq_key, keys, phy_offset, store_timestamp, written)[0]
            return written

    def unindexed_keys(self, topic: str, phy_offset: int, uniq_key: str | None, keys: str | None
                       ) -> tuple[str | None, str | None] | None:
        """The ``(uniq_key, keys)`` of a record that the index files lack, or None when they have them all.

        Records below the newest file's endPhyOffset are complete in the files (when they hold any
        entry: a new store's first file says 0); a record past it has none there. The record *at* it
        may be only partly there: its keys can straddle a full file and a next one that a crash
        lost, so only the keys the files lack are returned. Re-dispatch after recovery (writable
        or read-only) must not add a record's keys twice."""
        files = self._files
        if not files or phy_offset > files[-1].end_phy_offset or not any(f.entry_count for f in files):
            return uniq_key, keys
        if phy_offset < files[-1].end_phy_offset:
            return None
        max_ts = 2 ** 63 - 1

        def in_files(key: str) -> bool:
            return phy_offset in self._select_in_files(build_key(topic, key), self.max_msgs_num_batch, 0, max_ts, [])

        if uniq_key is not None and in_files(uniq_key):
            uniq_key = None
        if keys:
            keys = KEY_SEPARATOR.join(k for k in keys.split(KEY_SEPARATOR) if k and not in_files(k)) or None
        return None if uniq_key is None and not keys else (uniq_key, keys)

    def index_in_memory(self, topic: str, phy_offset: int, store_timestamp: int, uniq_key: str | None,
                        keys: str | None, tran_type: int) -> None:
        """Read-only recovery's ``build_index``: a record the index files lack is findable by key all the
        same, from memory, as the writer's recovery will index it (same keys, same ROLLBACK rule).

        Why: a read-only reader of a crashed store (mqadmin's inspection commands) shows such a record
        by queue; by key it would be missing until a writer reopened the store."""
        if tran_type & TRANSACTION_TYPE_MASK == TRANSACTION_ROLLBACK_TYPE:
            return
        missing = self.unindexed_keys(topic, phy_offset, uniq_key, keys)
        if missing is None:
            return
        for full_key in index_keys(topic, *missing):
            self._in_memory.setdefault(full_key, []).append((phy_offset, store_timestamp))

    # ------------------------------------------------------------------ read

    def query_offset(self, topic: str, key: str, max_num: int, begin: int, end: int) -> list[int]:
        """Candidate offsets of ``topic``/``key`` stored in ``[begin, end]``, newest file first.

        ``max_num`` is capped at maxMsgsNumBatch. Candidates may include hash collisions.
        """
        max_num = min(max_num, self.max_msgs_num_batch)
        out: list[int] = []
        if max_num <= 0:
            return out
        full_key = build_key(topic, key)
        for phy, ts in reversed(self._in_memory.get(full_key, ())):  # the newest records: first
            if len(out) >= max_num:
                return out
            if begin <= ts <= end:
                out.append(phy)
        return self._select_in_files(full_key, max_num, begin, end, out)

    def _select_in_files(self, full_key: str, max_num: int, begin: int, end: int, out: list[int]) -> list[int]:
        with self._lock:
            for f in reversed(self._files):
                if f.is_time_matched(begin, end):
                    f.select_phy_offsets(full_key, max_num, begin, end, out)
                if f.begin_timestamp < begin or len(out) >= max_num:
                    break
        return out

    # ------------------------------------------------------------------ lifecycle

    def delete_expired_file(self, commit_log_min_offset: int) -> int:
        """Delete leading files whose endPhyOffset < the commitlog min offset; never the last file."""
        self._check_writable()
        with self._lock:
            if not self._files or self._files[0].end_phy_offset >= commit_log_min_offset:
                return 0
            doomed: list[IndexFile] = []
            for f in self._files[:-1]:
                if f.end_phy_offset < commit_log_min_offset:
                    doomed.append(f)
                else:
                    break
            for f in doomed:
                f.destroy()
                self._files.remove(f)
            return len(doomed)

    def destroy_files_newer_than(self, index_msg_timestamp: int) -> int:
        """Abnormal restart: delete every file with endTimestamp > checkpoint.indexMsgTimestamp.

        Same test as Java's ``load(lastExitOK=false)``; the deleted range is rebuilt by re-dispatch.
        """
        self._check_writable()
        with self._lock:
            doomed = [f for f in self._files if f.end_timestamp > index_msg_timestamp]
            for f in doomed:
                f.destroy()
                self._files.remove(f)
            return len(doomed)

    def drop_incomplete_files(self, index_msg_timestamp: int) -> list[str]:
        """Abnormal restart: keep the newest files if they are whole, drop them from the first that is not.

        Java deletes every file newer than checkpoint.indexMsgTimestamp and re-indexes only from the
        checkpoint, which loses the keys in between for good. Here a file newer than that stamp is kept
        when ``IndexFile.is_consistent`` (a kill -9 loses no mapped write); from the first one that is
        not, it and every newer file are deleted (derived data: the commitlog rebuilds it). Recovery
        then re-indexes from ``last_index_file_end_phy_offset``. Returns the names deleted.
        """
        self._check_writable()
        with self._lock:
            newer = [f for f in self._files if f.end_timestamp > index_msg_timestamp or not f.is_full()]
            bad = next((i for i, f in enumerate(self._files) if f in newer and not f.is_consistent()), None)
            if bad is None:
                return []
            doomed = self._files[bad:]
            del self._files[bad:]
            for f in doomed:
                f.destroy()
            return [f.file_name for f in doomed]

    def truncate_beyond(self, phy_offset: int) -> int:
        """Forget everything indexed at commitlog offsets >= ``phy_offset`` (recovery cut the log).

        Java has no equivalent: it never trims index files when the commitlog is truncated and relies
        on abnormal recovery deleting every non-full file. Left alone, the last file's endPhyOffset
        would make dispatch skip the new records written from the cut onwards, and queries would
        return offsets of records that no longer exist. So: files whose beginPhyOffset >= cut are
        deleted (newest first), and the tail entries of the new last file that point at or beyond the
        cut are removed (``IndexFile.truncate_from``). Afterwards no query returns an offset >= cut.
        Returns the number of entries removed from the surviving last file plus deleted files' entries.
        """
        self._check_writable()
        removed = 0
        with self._lock:
            while self._files and self._files[-1].begin_phy_offset >= phy_offset:
                f = self._files.pop()
                removed += f.entry_count
                f.destroy()
            if self._files:
                removed += self._files[-1].truncate_from(phy_offset)
        return removed

    def flush(self) -> None:
        """Flush the file being written (header rewrite + msync).

        Older files are full and were flushed when the service rolled past them (or were loaded from
        disk), as in Java. If the last file is full its endTimestamp advances the checkpoint value.
        """
        if self.read_only:
            return
        with self._lock:
            if self._files:
                self._flush_file(self._files[-1])

    def shutdown(self) -> None:
        """Flush (writable) and unmap all files; the service holds no files afterwards."""
        with self._lock:
            for f in self._files:
                f.close(flush=not self.read_only)
            self._files.clear()
            self._drop_spare()

    def _drop_spare(self) -> None:
        """A reserved file no roll used holds nothing: give its blocks back."""
        if self._spare is not None:
            self._spare.destroy()
            self._spare = None

    def destroy(self) -> None:
        """Delete every index file (used when the whole index must be rebuilt)."""
        self._check_writable()
        with self._lock:
            for f in self._files:
                f.destroy()
            self._files.clear()
            self._drop_spare()

    def __enter__(self) -> IndexService:
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()
