"""Consume queues: SimpleCQ (20-byte units, spec §5) and the shared queue machinery.

A consume queue is an index over the commitlog for one (topic, queueId). Units are appended by the
dispatcher, recovered by scanning, truncated when recovery cuts the commitlog, and searched by
queue offset or by store time. BatchConsumeQueue (46-byte units) subclasses the machinery here.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from .codec.cq_ext import MAX_ADDR, CqExtUnit
from .codec.cq_unit import CQ_FILLER, CQ_STORE_UNIT_SIZE, CQ_UNIT
from .codec.hotpath import put_cq_unit, valid_units_end
from .consume_queue_ext import ConsumeQueueExt
from .mapped_file import MappedFile, MappedFileQueue, data_end, is_zero, offset_to_file_name

log = logging.getLogger("rmqops.store")


# Read-only recovery beside a live writer: how often a queue that looks damaged is read again.
_LIVE_RETRIES = 4
_LIVE_PAUSE_S = 0.002

BOUNDARY_LOWER = "lower"
BOUNDARY_UPPER = "upper"


@dataclass(slots=True, frozen=True)
class CqUnit:
    """One consume queue entry. For BatchCQ units, ``queue_offset`` is the batch's base offset."""

    queue_offset: int
    phy_offset: int
    size: int
    tags_code: int
    batch_num: int = 1
    store_time: int = 0
    compacted_offset: int = -1
    # The ConsumeQueueExt unit the CQ unit points at (tags_code is then the ext unit's); None without one.
    ext: CqExtUnit | None = None


class ConsumeQueueBase:
    """Machinery shared by SimpleCQ and BatchCQ: files, recovery, truncation."""

    unit_size = CQ_STORE_UNIT_SIZE
    cq_type = "SimpleCQ"
    is_batch = False  # BatchCQ units carry msgBaseOffset, store time and batch size besides the position
    ext: ConsumeQueueExt | None = None  # SimpleCQ with enableConsumeQueueExt only

    def __init__(self, topic: str, queue_id: int, root_dir: Path, file_size: int, read_only: bool = False) -> None:
        self.topic = topic
        self.queue_id = queue_id
        # This queue's key in the commitlog's queue offset table (QueueOffsetAssigner: ``topic-queueId``),
        # formatted once: the one-call put (fast_put) looks it up on every put.
        self.offset_key = f"{topic}-{queue_id}"
        self.file_size = file_size
        self.read_only = read_only
        self.file_queue = MappedFileQueue(root_dir / topic / str(queue_id), file_size, read_only, reserve_whole=True)
        self.max_physic_offset = -1  # end (SimpleCQ) or start (BatchCQ) of the last dispatched record
        # Set by recover(): what was found damaged, and from which commitlog offset this queue's
        # units must be re-dispatched (None when the files are whole).
        self.damage: list[str] = []
        self.repair_from_phy: int | None = None
        self.torn_unit_at: int | None = None  # logical offset of a torn newest unit (see recover)

    def load(self) -> None:
        self.file_queue.load()

    # -- unit validity and decoding; subclasses override -------------------------------------------
    def _unit_is_valid(self, mv: memoryview, pos: int) -> bool:
        phy, size, _ = CQ_UNIT.unpack_from(mv, pos)
        return phy >= 0 and size > 0

    def _unit_phy(self, mv: memoryview, pos: int) -> tuple[int, int]:
        phy, size, _ = CQ_UNIT.unpack_from(mv, pos)
        return phy, size

    def _after_recover(self) -> None:
        pass

    # -- recovery ----------------------------------------------------------------------------------
    def recover(self) -> None:
        """Find the end of the valid units (spec §5.5) and check the files around it for damage.

        Every file before the last must be full of units: its first and last unit say so cheaply,
        so the run of valid units ends in the first file where one of them is not valid, and only
        that file is scanned unit by unit. Valid units *after* that end (a zeroed or torn region in
        the middle) are damage: they are saved to ``lost+found/``, cut, and ``repair_from_phy`` tells
        recovery where to re-dispatch this queue from the commitlog. A last file without any unit
        (creation interrupted by a crash) also sets ``repair_from_phy``: its records, if any, are
        rebuilt from the end of the previous unit instead of being skipped.
        """
        self.damage = []
        self.repair_from_phy = None
        files = self.file_queue.files
        if not files:
            return
        unit = self.unit_size
        usable = self.file_size // unit * unit
        j = 0
        missing = None  # the first file missing from the run of files, if one is
        while j < len(files) - 1:
            mf = files[j]
            if mf.length < usable or not (self._unit_is_valid(mf.mv, 0) and self._unit_is_valid(mf.mv, usable - unit)):
                break
            # The oldest file is checked unit by unit too (compiled, ~1.5 ms for 300,000 units): the min
            # offset is searched in it, and one invalid unit among valid ones there (a negative
            # commitlog offset) used to move the min past the good units before it. Recovery then
            # treats it as any damage: saved to lost+found/, cut, rebuilt from the commitlog.
            if j == 0 and valid_units_end(mf.mv, 0, usable, self.is_batch) < usable:
                break
            if files[j + 1].file_from_offset != mf.file_from_offset + self.file_size:
                # A file is missing after this one (deleted by hand, or lost with its directory
                # entry): the units after the gap are damage like those after a zeroed region, and
                # the whole queue from here is rebuilt from the commitlog.
                missing = offset_to_file_name(mf.file_from_offset + self.file_size)
                break
            j += 1
        mf = files[j]
        limit = min(mf.length, usable) // unit * unit
        torn = False
        for attempt in range(_LIVE_RETRIES if self.read_only else 1):
            # Exactly the unit-by-unit rule (compiled): a torn unit inside the written run ends it, and
            # the valid units after it are then damage, never served.
            pos = valid_units_end(mf.mv, 0, limit, self.is_batch)
            later = any(f.length and not is_zero(f.mv, path=f.path) for f in files[j + 1:])
            damaged = later or not is_zero(mf.mv, pos, limit, mf.path)
            # Only the unit at the end holds bytes: the newest unit, torn while it was written (a
            # kill -9 between its fields). Not damage: recovery writes it again from its record.
            torn = damaged and not later and pos + unit <= limit and is_zero(mf.mv, pos + unit, limit, mf.path)
            if torn:
                damaged = False
            if not damaged:
                break
            # Read-only beside a live writer: a unit being written (its phyOffset in, its size not
            # yet) reads as a torn unit followed by data. Read again; real damage stays.
            if attempt + 1 < _LIVE_RETRIES:
                time.sleep(_LIVE_PAUSE_S * (attempt + 1))
        process_offset = mf.file_from_offset + pos
        last_end = self._unit_end_before(process_offset)
        if damaged:
            why = f"file {missing} is missing, units after logical offset {process_offset} are cut" \
                if missing is not None else \
                f"units after logical offset {process_offset} follow an invalid (zeroed or torn) unit " \
                f"(file {mf.path}, unit at byte {pos}" + \
                ("" if self.is_batch else f", queue offset {process_offset // unit}") + ")"
            self.damage.append(f"{self.cq_type} {self.topic}/{self.queue_id}: {why}")
            self.repair_from_phy = max(last_end, 0)
        elif pos == 0:
            self.repair_from_phy = max(last_end, 0)
        if last_end >= 0:
            self.max_physic_offset = last_end if self.cq_type == "SimpleCQ" else self._last_unit_phy(process_offset)
        if damaged and not self.read_only:
            self._save_aside_from(process_offset)
        # A torn newest unit is left in place (past the queue's end, never served): the re-dispatch
        # of its record writes the whole unit over it (``settle_torn_unit`` checks it did).
        self.torn_unit_at = process_offset if torn else None
        # Nothing to zero unless damaged: the bytes after the end were just found to be zeros.
        self._truncate_to_logic(process_offset, clear=damaged)
        self._after_recover()

    def settle_torn_unit(self, store_root: Path) -> str | None:
        """After recovery's re-dispatch: what became of the torn newest unit ``recover`` found.

        Why: a kill -9 in the middle of a unit write leaves its first bytes only; the record it
        describes is in the commitlog and re-dispatch rewrites the unit at the same place. Zeroing
        the file from there (what a cut does) wrote megabytes of zeros per queue for 20 bytes. If the
        record did not survive (the commitlog was cut before it), the torn bytes describe nothing: they
        are kept in ``lost+found/`` and zeroed. Returns a line for the log, None when there was none.

        A read-only open rewrites nothing, so it has nothing to say: beside a running broker the torn
        unit is the one the broker was writing as the open read the queue (it is whole by now, and
        the open reads it once the other queues show the writer went past it); on a crashed store its
        message is read from the commitlog and the broker's next start rewrites it. "rewritten" told
        the operator of ``mqadmin topicStatus --store`` that a recovery had repaired their live store.
        """
        logic, self.torn_unit_at = self.torn_unit_at, None
        if logic is None or self.read_only:
            return None
        if self.file_queue.max_offset() > logic:
            return f"{self.cq_type} {self.topic}/{self.queue_id}: torn unit at logical offset {logic} rewritten"
        mf = self.file_queue.find_mapped_file_by_offset(logic)
        if mf is None:
            mf = next((f for f in self.file_queue.files if f.file_from_offset <= logic < f.file_from_offset
                       + self.file_size), None)
        if mf is None:
            return None
        pos = logic - mf.file_from_offset
        data = bytes(mf.mv[pos:pos + self.unit_size])
        if any(data):
            from .lost_found import save_aside

            where = save_aside(store_root, mf.path, pos, data)
            mf.write_at(pos, bytes(len(data)))
            return (f"{self.cq_type} {self.topic}/{self.queue_id}: torn unit at logical offset {logic} has no "
                    f"record left in the commitlog; saved to {where} and cleared")
        return None

    def extend_read_only_to(self, phy_end: int) -> None:
        """Read-only: take in the units a live writer added after ``recover`` read this queue, up to
        those of records ending by ``phy_end`` (files it created since are mapped too)."""
        if not self.read_only or self.damage or self.repair_from_phy is not None:
            return
        fq = self.file_queue
        unit = self.unit_size
        grew = False
        while True:
            mf = fq.files[-1] if fq.files else None
            if mf is None:
                return
            usable = min(mf.length, self.file_size) // unit * unit
            pos = mf.wrote_position
            while pos < usable and self._unit_is_valid(mf.mv, pos):
                phy, size = self._unit_phy(mf.mv, pos)
                if phy + size > phy_end:
                    break
                pos += unit
            if pos > mf.wrote_position:
                mf.wrote_position = pos
                grew = True
            if pos < usable or pos < self.file_size // unit * unit:
                break
            nxt = fq.directory / offset_to_file_name(mf.file_from_offset + self.file_size)
            try:
                if nxt.stat().st_size != self.file_size:
                    break
                new = MappedFile(nxt, self.file_size, read_only=True)
            except OSError:
                break
            fq.files.append(new)
        if grew:
            self._recompute_max_physic_offset()
            self._after_recover()

    def _unit_end_before(self, logic_offset: int) -> int:
        """End (phy + size) of the unit just before ``logic_offset`` (-1 when there is none)."""
        for mf in reversed(self.file_queue.files):
            if mf.file_from_offset >= logic_offset:
                continue
            pos = min(logic_offset - mf.file_from_offset, mf.length) // self.unit_size * self.unit_size
            if pos >= self.unit_size and self._unit_is_valid(mf.mv, pos - self.unit_size):
                phy, size = self._unit_phy(mf.mv, pos - self.unit_size)
                return phy + size
            return -1
        return -1

    def _last_unit_phy(self, logic_offset: int) -> int:
        for mf in reversed(self.file_queue.files):
            if mf.file_from_offset < logic_offset:
                pos = min(logic_offset - mf.file_from_offset, mf.length) // self.unit_size * self.unit_size
                return self._unit_phy(mf.mv, pos - self.unit_size)[0] if pos >= self.unit_size else -1
        return -1

    def _save_aside_from(self, logic_offset: int) -> None:
        """Copy every non-zero byte range from ``logic_offset`` on to ``lost+found/`` (before a cut)."""
        from .lost_found import save_aside

        store_root = self.file_queue.directory.parent.parent.parent
        for mf in self.file_queue.files:
            if mf.file_from_offset + mf.length <= logic_offset:
                continue
            start = max(0, logic_offset - mf.file_from_offset)
            data = bytes(mf.mv[start:data_end(mf.mv, start)])
            if data:
                where = save_aside(store_root, mf.path, start, data)
                log.warning("consume queue %s-%d: damaged units from logical offset %d saved to %s",
                            self.topic, self.queue_id, mf.file_from_offset + start, where)

    def _clear_from(self, mf: MappedFile, pos: int) -> None:
        """Zero a writable file from ``pos`` on: units cut off must not be read back as valid later.

        Only up to the last non-zero byte: the rest is zero already, and writing it would dirty (and
        on a sparse file allocate) megabytes for a cut of a few units.
        """
        if self.read_only or pos >= mf.length or is_zero(mf.mv, pos, mf.length, mf.path):
            return
        end = data_end(mf.mv, pos)
        if end > pos:
            mf.write_at(pos, bytes(end - pos))

    def _truncate_to_logic(self, logic_offset: int, clear: bool = True) -> None:
        if self.read_only:
            for mf in self.file_queue.files:
                if mf.file_from_offset <= logic_offset < mf.file_from_offset + self.file_size:
                    mf.wrote_position = logic_offset - mf.file_from_offset
                elif mf.file_from_offset > logic_offset:
                    mf.wrote_position = 0
            self.file_queue.files = [f for f in self.file_queue.files
                                     if f.file_from_offset <= logic_offset or f.wrote_position > 0]
            return
        for mf in self.file_queue.files:
            if clear and mf.file_from_offset <= logic_offset < mf.file_from_offset + self.file_size:
                self._clear_from(mf, logic_offset - mf.file_from_offset)
        self.file_queue.set_max_offset(logic_offset)

    def truncate_dirty_logic_files(self, phy_offset: int) -> None:
        """Drop every unit pointing at or beyond ``phy_offset`` (recovery cut the commitlog there).

        Trailing files without units (a creation the crash interrupted) are skipped first, so the
        units before them are checked too; cut units are zeroed so no later open reads them back.
        """
        unit = self.unit_size
        files = self.file_queue.files
        new_logic_end: int | None = None
        while len(files) > 1 and files[-1].wrote_position == 0:
            mf = files.pop()
            if not self.read_only:
                mf.destroy()
        while files:
            mf = files[-1]
            mv = mf.mv
            # Units are in commitlog order: the first one at or past the cut is found by binary search
            # (usually the last unit is before it and nothing is cut; a linear scan cost O(file)).
            lo, hi = 0, mf.wrote_position // unit
            while lo < hi:
                mid = (lo + hi) // 2
                if self._unit_phy(mv, mid * unit)[0] >= phy_offset:
                    hi = mid
                else:
                    lo = mid + 1
            cut_at = lo * unit if lo < mf.wrote_position // unit else None
            if cut_at is None:
                break
            new_logic_end = mf.file_from_offset + cut_at
            if cut_at == 0 and len(files) > 1:
                if self.read_only:
                    files.pop()
                else:
                    files.pop().destroy()
                continue
            self._clear_from(mf, cut_at)
            mf.wrote_position = cut_at
            mf.flushed_position = min(mf.flushed_position, cut_at)
            break
        if new_logic_end is not None:
            self._recompute_max_physic_offset()
            self._after_recover()

    def _logic_of_queue_offset(self, queue_offset: int) -> int | None:
        return queue_offset * self.unit_size

    def cut_from_queue_offset(self, queue_offset: int, reason: str) -> None:
        """Recovery found the unit at ``queue_offset`` pointing at the wrong record: save it and every
        later unit to ``lost+found/`` and cut them, so re-dispatch writes them again from the commitlog.
        """
        logic = self._logic_of_queue_offset(queue_offset)
        if logic is None:
            return
        self.damage.append(f"{self.cq_type} {self.topic}/{self.queue_id}: unit at queue offset {queue_offset} "
                           f"{reason}")
        log.warning("recovery: %s; rebuilding it from the commitlog", self.damage[-1])
        if not self.read_only:
            self._save_aside_from(logic)
        self._truncate_to_logic(logic)
        self._recompute_max_physic_offset()
        self._after_recover()

    def _recompute_max_physic_offset(self) -> None:
        last = self.file_queue.last_file()
        self.max_physic_offset = -1
        if last is None:
            return
        files = self.file_queue.files
        for mf in reversed(files):
            if mf.wrote_position >= self.unit_size:
                phy, size = self._unit_phy(mf.mv, mf.wrote_position - self.unit_size)
                self.max_physic_offset = phy + size if self.cq_type == "SimpleCQ" else phy
                return

    def first_unit_phy_offset(self) -> int | None:
        """The commitlog offset the oldest file's first unit points at; None when there is no such unit.
        Read from the files as they are (no recovery needed): it says whether the queue holds data."""
        files = self.file_queue.files
        if not files or files[0].length < self.unit_size:
            return None
        phy, size = self._unit_phy(files[0].mv, 0)
        return phy if phy >= 0 and size > 0 else None

    def max_physic_end(self) -> int:
        """End offset of the last dispatched record (-1 when empty): where re-dispatch resumes."""
        for mf in reversed(self.file_queue.files):
            if mf.wrote_position >= self.unit_size:
                phy, size = self._unit_phy(mf.mv, mf.wrote_position - self.unit_size)
                return phy + size
        return -1

    def flush(self, least_pages: int = 0) -> None:
        self.file_queue.flush(least_pages)

    def close(self) -> None:
        self.file_queue.close()

    def destroy(self) -> None:
        self.file_queue.destroy()
        parent = self.file_queue.directory.parent
        try:
            parent.rmdir()
        except OSError:
            pass

    def file_count(self) -> int:
        return len(self.file_queue.files)

    # -- offsets and reads; subclasses implement ---------------------------------------------------
    def get_min_offset_in_queue(self) -> int:
        raise NotImplementedError

    def get_max_offset_in_queue(self) -> int:
        raise NotImplementedError

    def get_units(self, start_offset: int, max_units: int) -> list[CqUnit]:
        raise NotImplementedError

    def iterate_from(self, start_offset: int, max_units: int) -> list[CqUnit] | None:
        """Up to ``max_units`` units from the one at ``start_offset`` (within its file), or None when
        the queue holds no unit there: below its min offset (expired) or at/after its max.

        Why apart from ``get_units``: that one moves a start below the min up to the min, which the
        read path wants (it reads on from wherever the queue now begins), but a caller that numbers the
        units by the offset it asked for (queryCq) would then label the min's unit with that offset.
        This is RocketMQ's ``iterateFrom`` (getIndexBuffer gives null below minLogicOffset and past
        the written end), which QUERY_CONSUME_QUEUE answers "Index N of Q@T is not exist!" for.
        """
        if not self.get_min_offset_in_queue() <= start_offset < self.get_max_offset_in_queue():
            return None
        return self.get_units(start_offset, max_units)


class ConsumeQueue(ConsumeQueueBase):
    """SimpleCQ: unit ``q`` lives at logical byte ``q * 20``.

    With an ``ext`` (enableConsumeQueueExt) each new unit's tagsCode field holds the address of its
    ConsumeQueueExt unit; readers get the real tagsCode, the store time and the bitmap from there.
    """

    def __init__(self, topic: str, queue_id: int, root_dir: Path, file_size: int, read_only: bool = False,
                 ext: ConsumeQueueExt | None = None) -> None:
        super().__init__(topic, queue_id, root_dir, file_size, read_only)
        self.min_logic_offset = 0
        self.ext = ext

    def load(self) -> None:
        super().load()
        if self.ext is not None:
            self.ext.load()

    def flush(self, least_pages: int = 0) -> None:
        super().flush(least_pages)
        if self.ext is not None:
            self.ext.flush(least_pages)

    def close(self) -> None:
        super().close()
        if self.ext is not None:
            self.ext.close()

    def destroy(self) -> None:
        super().destroy()
        if self.ext is not None:
            self.ext.destroy()

    def _last_ext_addr(self) -> int | None:
        """The ext address in the newest unit that has one (ext units are written in queue order)."""
        for mf in reversed(self.file_queue.files):
            last = None
            for _phy, _size, tags in CQ_UNIT.iter_unpack(mf.mv[:mf.wrote_position // CQ_STORE_UNIT_SIZE
                                                                 * CQ_STORE_UNIT_SIZE]):
                if tags <= MAX_ADDR:
                    last = tags
            if last is not None:
                return last
        return None

    def _after_recover(self) -> None:
        if self.ext is not None:
            # the ext is valid up to the unit the newest CQ unit points at (ConsumeQueue#recover and
            # #truncateDirtyLogicFiles: truncateByMaxAddress)
            addr = self._last_ext_addr()
            if addr is not None:
                self.ext.truncate_by_max_address(addr)
        files = self.file_queue.files
        if files and self.min_logic_offset < files[0].file_from_offset:
            self.min_logic_offset = files[0].file_from_offset
        # Skip pre-blank fillers of a queue that started at a non-zero offset.
        if files:
            mf = files[0]
            pos = max(0, self.min_logic_offset - mf.file_from_offset)
            while pos < mf.wrote_position:
                phy, size, _ = CQ_UNIT.unpack_from(mf.mv, pos)
                if not (phy == 0 and size == 0x7FFFFFFF):
                    break
                pos += CQ_STORE_UNIT_SIZE
            self.min_logic_offset = max(self.min_logic_offset, mf.file_from_offset + pos)

    # -- offsets -----------------------------------------------------------------------------------
    def get_max_offset_in_queue(self) -> int:
        return self.file_queue.max_offset() // CQ_STORE_UNIT_SIZE

    def get_min_offset_in_queue(self) -> int:
        return self.min_logic_offset // CQ_STORE_UNIT_SIZE

    # -- write -------------------------------------------------------------------------------------
    def put_message_position_info(self, phy_offset: int, size: int, tags_code: int, cq_offset: int,
                                  store_time: int = 0, batch_num: int = 1, ext_unit: CqExtUnit | None = None) -> bool:
        """Append one unit at queue offset ``cq_offset`` (idempotent for units already present).

        With ``ext_unit`` and an ext, the ext unit is written first and the CQ unit's tagsCode is its
        address (putMessagePositionInfoWrapper); if the ext cannot take it, the tags hash stays.
        """
        if phy_offset + size <= self.max_physic_offset:
            return True
        expect = cq_offset * CQ_STORE_UNIT_SIZE
        files = self.file_queue.files
        mf = files[-1] if files else None
        if mf is None or mf.file_from_offset + mf.wrote_position != expect or mf.wrote_position >= mf.file_size:
            # Not simply the next unit of the file being written (what almost every dispatch is): a new
            # file, a queue starting past 0, a unit already there or a gap.
            mf = self.file_queue.get_last_mapped_file(expect)
            if mf is None:
                return False
            pos = mf.wrote_position
            if pos == 0 and cq_offset != 0 and len(self.file_queue.files) == 1 and mf.file_from_offset <= expect:
                self.min_logic_offset = expect
                self._fill_pre_blank(mf, expect)
                pos = mf.wrote_position
            current = mf.file_from_offset + pos
            if expect < current:
                return True  # already dispatched
            if expect != current:
                log.warning("consume queue %s-%d: expected logic offset %d but the queue is at %d",
                            self.topic, self.queue_id, expect, current)
        pos = mf.wrote_position
        if ext_unit is not None and self.ext is not None:
            addr = self.ext.put(ext_unit)
            if addr is not None:
                tags_code = addr
        # Packed straight into the mapping (what MappedFile.append does, minus a temporary bytes).
        put_cq_unit(mf.mv, pos, phy_offset, size, tags_code)
        mf.wrote_position = pos + CQ_STORE_UNIT_SIZE
        self.max_physic_offset = phy_offset + size
        return True

    def _fill_pre_blank(self, mf: MappedFile, until_where: int) -> None:
        end = until_where % self.file_size
        if end:
            mf.write_at(0, CQ_FILLER * (end // CQ_STORE_UNIT_SIZE))
            mf.wrote_position = end

    # -- read --------------------------------------------------------------------------------------
    def get_units(self, start_offset: int, max_units: int) -> list[CqUnit]:
        """Units from ``start_offset`` on, within one file. A start below the min offset reads from the
        min (the read path's choice: it goes on from where the queue now begins); ``iterate_from``
        is RocketMQ's getIndexBuffer, which has nothing there."""
        min_off = self.get_min_offset_in_queue()
        if start_offset < min_off:
            start_offset = min_off
        logic = start_offset * CQ_STORE_UNIT_SIZE
        with self.file_queue.reading(logic) as mf:  # retention may destroy the file while it is read
            return [] if mf is None else self._units_in(mf, logic, start_offset, max_units)

    def _units_in(self, mf: MappedFile, logic: int, start_offset: int, max_units: int) -> list[CqUnit]:
        pos = logic - mf.file_from_offset
        end = min(mf.wrote_position, pos + max_units * CQ_STORE_UNIT_SIZE)
        out = []
        q = start_offset
        ext = self.ext
        for phy, size, tags in CQ_UNIT.iter_unpack(mf.mv[pos:end]):
            if phy < 0 or size <= 0:
                break
            if tags <= MAX_ADDR and ext is not None:
                unit = ext.get(tags)
                if unit is not None:
                    out.append(CqUnit(q, phy, size, unit.tags_code, 1, unit.msg_store_time, -1, unit))
                    q += 1
                    continue
                log.warning("consume queue %s-%d: ext unit at %d of queue offset %d not readable; the message is "
                            "read and evaluated instead", self.topic, self.queue_id, tags, q)
            out.append(CqUnit(q, phy, size, tags))
            q += 1
        return out

    def get_unit(self, offset: int) -> CqUnit | None:
        units = self.get_units(offset, 1)
        return units[0] if units and units[0].queue_offset == offset else None

    def iter_all_units(self):
        """Every valid unit from the min offset on (verifyStore, Spark verify)."""
        q = self.get_min_offset_in_queue()
        max_q = self.get_max_offset_in_queue()
        while q < max_q:
            units = self.get_units(q, 4096)
            if not units:
                break
            yield from units
            q = units[-1].queue_offset + 1

    def correct_min_offset(self, commit_log_min_offset: int) -> None:
        """Raise the min offset past units whose records were deleted (spec §5.4).

        As RocketMQ's correctMinOffset: when every unit points below the commitlog min, the min is the
        queue's end; when the current min is in the first file and its unit still points at a kept
        record, nothing changes; otherwise the first unit at or past the commitlog min is binary
        searched in the first file. The search assumes offsets only go up: a damaged unit (negative, or
        out of order) it lands on would move the min past good units before it, and their messages
        would be unreachable. What it finds is checked (the unit before the answer must be a valid
        unit, in order with its neighbours); when it is not consistent, a linear scan decides.
        """
        files = self.file_queue.files
        if not files:
            return
        mf = files[0]
        unit = CQ_STORE_UNIT_SIZE
        start = max(0, self.min_logic_offset - mf.file_from_offset) // unit
        lo, hi = start, mf.wrote_position // unit
        if hi == 0:
            return
        mv = mf.mv
        last_phy = CQ_UNIT.unpack_from(mv, (hi - 1) * unit)[0]
        if last_phy < commit_log_min_offset:
            if len(files) == 1:
                self.min_logic_offset = mf.file_from_offset + mf.wrote_position
            else:
                self.min_logic_offset = files[1].file_from_offset
            return
        if lo >= hi:
            return
        first_phy, first_size, _ = CQ_UNIT.unpack_from(mv, lo * unit)
        if self.min_logic_offset >= mf.file_from_offset and first_phy >= commit_log_min_offset and first_size > 0:
            return  # the min still points at a kept record (RocketMQ aborts the correction here too)
        while lo < hi:
            mid = (lo + hi) // 2
            phy = CQ_UNIT.unpack_from(mv, mid * unit)[0]
            if phy >= commit_log_min_offset:
                hi = mid
            else:
                lo = mid + 1
        if lo > start and not self._min_search_consistent(mv, start, lo, commit_log_min_offset):
            lo = self._first_kept_unit(mf, start, commit_log_min_offset)
        self.min_logic_offset = max(self.min_logic_offset, mf.file_from_offset + lo * unit)

    @staticmethod
    def _min_search_consistent(mv: memoryview, start: int, found: int, commit_log_min_offset: int) -> bool:
        """Whether the binary search's answer ``found`` (> ``start``) agrees with its neighbours: the unit
        before it is valid and below the commitlog min, and in order with the unit before it."""
        unit = CQ_STORE_UNIT_SIZE
        phy, size, _ = CQ_UNIT.unpack_from(mv, (found - 1) * unit)
        if phy < 0 or size <= 0 or phy >= commit_log_min_offset:
            return False
        if found - 2 >= start:
            prev_phy, prev_size, _ = CQ_UNIT.unpack_from(mv, (found - 2) * unit)
            if prev_phy < 0 or prev_size <= 0 or prev_phy > phy:
                return False
        return True

    def _first_kept_unit(self, mf: MappedFile, start: int, commit_log_min_offset: int) -> int:
        """Linear fallback of ``correct_min_offset``: the first valid unit (from ``start``) whose record is
        at or past the commitlog min; damaged units are skipped, never taken as proof of expiry."""
        unit = CQ_STORE_UNIT_SIZE
        end = mf.wrote_position // unit
        found = end
        damaged = []
        for i, (phy, size, _) in enumerate(CQ_UNIT.iter_unpack(mf.mv[start * unit:end * unit]), start):
            if phy < 0 or size <= 0:
                damaged.append(i)
                continue
            if phy >= commit_log_min_offset:
                found = i
                break
        for i in damaged[:3]:
            log.warning("consume queue %s-%d: damaged unit at byte %d of %s (queue offset %d) is not taken as "
                        "expired; the min offset stays at the first unit whose record is kept", self.topic,
                        self.queue_id, i * unit, mf.path, (mf.file_from_offset // unit) + i)
        if not damaged:
            log.warning("consume queue %s-%d: units of %s are out of commitlog order before byte %d; the min "
                        "offset was found by a linear scan (verifyStore names the damaged unit)", self.topic,
                        self.queue_id, mf.path, found * unit)
        return found

    def delete_expired_files(self, commit_log_min_offset: int) -> int:
        """Delete leading files whose last unit points below the commitlog min (never the last file)."""
        deleted = 0
        files = self.file_queue.files
        while len(files) > 1:
            mf = files[0]
            last_phy = CQ_UNIT.unpack_from(mf.mv, self.file_size - CQ_STORE_UNIT_SIZE)[0]
            if last_phy >= commit_log_min_offset:
                break
            self.file_queue.delete_first_file()
            deleted += 1
        self.correct_min_offset(commit_log_min_offset)
        if self.ext is not None and files:
            # the ext files wholly before the first unit still served go too (truncateByMinAddress)
            mf = files[0]
            pos = max(0, self.min_logic_offset - mf.file_from_offset)
            if pos + CQ_STORE_UNIT_SIZE <= mf.wrote_position:
                self.ext.truncate_by_min_address(CQ_UNIT.unpack_from(mf.mv, pos)[2])
        return deleted

    def get_offset_in_queue_by_time(self, timestamp: int, store_time_of: Callable[[int, int], int],
                                    boundary: str = BOUNDARY_LOWER) -> int:
        """Binary search over units by the store time of their records (read via ``store_time_of``)."""
        lo = self.get_min_offset_in_queue()
        hi = self.get_max_offset_in_queue() - 1
        if hi < lo:
            return lo
        first_unit = self.get_unit(lo)
        last_unit = self.get_unit(hi)
        if first_unit is None or last_unit is None:
            return lo
        first_time = store_time_of(first_unit.phy_offset, first_unit.size)
        last_time = store_time_of(last_unit.phy_offset, last_unit.size)
        # first offset whose store time >= timestamp (LOWER); UPPER: last offset whose time <= timestamp
        if boundary == BOUNDARY_UPPER:
            # As Java: a time at/after the last message answers the last offset (not max), and
            # several messages sharing the first store time answer the last of them.
            if last_time <= timestamp:
                return hi
            if first_time > timestamp:
                return lo
            a, b = lo, hi
            while a < b:
                mid = (a + b + 1) // 2
                u = self.get_unit(mid)
                if u is not None and store_time_of(u.phy_offset, u.size) <= timestamp:
                    a = mid
                else:
                    b = mid - 1
            return a
        if first_time >= timestamp:
            return lo
        if last_time < timestamp:
            return hi + 1
        a, b = lo, hi
        while a < b:
            mid = (a + b) // 2
            u = self.get_unit(mid)
            if u is not None and store_time_of(u.phy_offset, u.size) >= timestamp:
                b = mid
            else:
                a = mid + 1
        return a
