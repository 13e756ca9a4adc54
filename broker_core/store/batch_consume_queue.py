"""BatchConsumeQueue (spec §6): one 46-byte unit per commitlog record, covering ``batchSize`` offsets.

Queue offsets count messages, not units, so lookups binary-search the unit's msgBaseOffset; an
offset inside an inner batch resolves to the unit that covers it (RocketMQ issue #5445 depends on
landing on the exact message).
"""

from __future__ import annotations

import logging
import struct
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from .codec.cq_unit import (
    BCQ_MAX_BATCH_SIZE,
    BCQ_MSG_BASE_OFFSET_POS,
    BCQ_STORE_TIME_POS,
    BCQ_STORE_UNIT_SIZE,
    BCQ_UNIT,
)
from .codec.hotpath import put_bcq_unit
from .consume_queue import BOUNDARY_UPPER, ConsumeQueueBase, CqUnit
from .mapped_file import MappedFile

_I64 = struct.Struct(">q")
_U = BCQ_STORE_UNIT_SIZE
log = logging.getLogger("rmqops.store")


class BatchConsumeQueue(ConsumeQueueBase):
    unit_size = BCQ_STORE_UNIT_SIZE
    cq_type = "BatchCQ"
    is_batch = True

    def __init__(self, topic: str, queue_id: int, root_dir: Path, file_size: int, read_only: bool = False) -> None:
        super().__init__(topic, queue_id, root_dir, file_size, read_only)
        self.min_offset = 0
        self.max_offset = 0

    def _unit_is_valid(self, mv: memoryview, pos: int) -> bool:
        phy, size, _tags, _t, base, num, _c, _r = BCQ_UNIT.unpack_from(mv, pos)
        return phy >= 0 and size > 0 and base >= 0 and num > 0

    def _unit_phy(self, mv: memoryview, pos: int) -> tuple[int, int]:
        phy, size = BCQ_UNIT.unpack_from(mv, pos)[:2]
        return phy, size

    def _after_recover(self) -> None:
        files = self.file_queue.files
        self.max_offset = 0
        self.min_offset = 0
        for mf in reversed(files):
            if mf.wrote_position >= _U:
                u = BCQ_UNIT.unpack_from(mf.mv, mf.wrote_position - _U)
                self.max_offset = u[4] + u[5]
                self.max_physic_offset = u[0]
                break
        if files and files[0].wrote_position >= _U:
            self.min_offset = _I64.unpack_from(files[0].mv, BCQ_MSG_BASE_OFFSET_POS)[0]
        else:
            self.min_offset = self.max_offset

    def _logic_of_queue_offset(self, queue_offset: int) -> int | None:
        with self._reading(queue_offset) as mf:
            return None if mf is None else mf.file_from_offset + self._search_unit_pos(mf, queue_offset)

    def get_max_offset_in_queue(self) -> int:
        return self.max_offset

    def get_min_offset_in_queue(self) -> int:
        return self.min_offset

    def put_message_position_info(self, phy_offset: int, size: int, tags_code: int, cq_offset: int,
                                  store_time: int = 0, batch_num: int = 1) -> bool:
        """Append a unit; ``cq_offset`` is the msgBaseOffset (INNER_BASE or the record's QUEUEOFFSET)."""
        if phy_offset <= self.max_physic_offset:
            return True
        if not 0 < batch_num <= BCQ_MAX_BATCH_SIZE:
            # written before the store refused such batches (or by another writer): no unit can hold it,
            # and one that raised here stopped every dispatch and every reopen of the store
            log.error("BatchCQ %s-%d: the record at commitlog offset %d holds %d messages, beyond a unit's "
                      "batchSize (1..%d): left out of the queue (the record stays in the commitlog)",
                      self.topic, self.queue_id, phy_offset, batch_num, BCQ_MAX_BATCH_SIZE)
            self.max_physic_offset = phy_offset
            return True
        mf = self.file_queue.get_last_mapped_file(0)
        if mf is None:
            return False
        if mf.free < _U:
            mf.wrote_position = self.file_size
            mf = self.file_queue.get_last_mapped_file(0)
            assert mf is not None
        if self.max_offset == 0 and len(self.file_queue.files) == 1 and mf.wrote_position == 0:
            self.min_offset = cq_offset
        pos = mf.wrote_position
        put_bcq_unit(mf.mv, pos, phy_offset, size, tags_code, store_time, cq_offset, batch_num)
        mf.wrote_position = pos + _U
        if mf.free < _U:
            mf.wrote_position = self.file_size if mf.free == 0 else mf.wrote_position
        self.max_physic_offset = phy_offset
        self.max_offset = cq_offset + batch_num
        return True

    # -- lookup ------------------------------------------------------------------------------------
    @contextmanager
    def _reading(self, offset: int) -> Iterator[MappedFile | None]:
        """The file whose units cover queue offset ``offset``, held while the caller reads it (retention
        may destroy the oldest file meanwhile); None when no file covers it."""
        found = None
        for mf in reversed(self.file_queue.files):
            if mf.wrote_position < _U or not mf.hold():
                continue
            if _I64.unpack_from(mf.mv, BCQ_MSG_BASE_OFFSET_POS)[0] <= offset:
                found = mf
                break
            mf.release()
        try:
            yield found
        finally:
            if found is not None:
                found.release()

    def _search_unit_pos(self, mf: MappedFile, offset: int) -> int:
        """Position of the greatest unit with msgBaseOffset <= offset (binary search, §6.3)."""
        lo, hi = 0, mf.wrote_position // _U - 1
        mv = mf.mv
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if _I64.unpack_from(mv, mid * _U + BCQ_MSG_BASE_OFFSET_POS)[0] <= offset:
                lo = mid
            else:
                hi = mid - 1
        return lo * _U

    @staticmethod
    def _unit_at(mv: memoryview, pos: int) -> CqUnit:
        phy, size, tags, store_time, base, num, compacted, _ = BCQ_UNIT.unpack_from(mv, pos)
        return CqUnit(base, phy, size, tags, num, store_time, compacted)

    def get_unit(self, offset: int) -> CqUnit | None:
        """The unit covering queue offset ``offset`` (its queue_offset is the batch base)."""
        if offset < self.min_offset or offset >= self.max_offset:
            return None
        with self._reading(offset) as mf:
            if mf is None:
                return None
            unit = self._unit_at(mf.mv, self._search_unit_pos(mf, offset))
        if unit.queue_offset <= offset < unit.queue_offset + unit.batch_num:
            return unit
        return None

    def get_units(self, start_offset: int, max_units: int) -> list[CqUnit]:
        """Units from the one covering ``start_offset`` on, within one file."""
        if start_offset < self.min_offset:
            start_offset = self.min_offset
        if start_offset >= self.max_offset:
            return []
        out: list[CqUnit] = []
        with self._reading(start_offset) as mf:
            if mf is None:
                return out
            pos = self._search_unit_pos(mf, start_offset)
            mv = mf.mv
            while pos < mf.wrote_position and len(out) < max_units:
                if not self._unit_is_valid(mv, pos):
                    break
                out.append(self._unit_at(mv, pos))
                pos += _U
            file_done = pos >= mf.wrote_position
        if not out:
            return out
        # A unit may end the file; continue in the next file when asked for more.
        if len(out) < max_units and file_done:
            nxt = out[-1].queue_offset + out[-1].batch_num
            if nxt < self.max_offset and nxt > start_offset:
                more = self.get_units(nxt, max_units - len(out))
                out.extend(u for u in more if u.queue_offset >= nxt)
        return out

    def iter_all_units(self):
        for mf in self.file_queue.files:
            pos = 0
            while pos + _U <= mf.wrote_position:
                if not self._unit_is_valid(mf.mv, pos):
                    break
                yield self._unit_at(mf.mv, pos)
                pos += _U

    def correct_min_offset(self, commit_log_min_offset: int) -> None:
        """Raise the min offset past what retention deleted (spec §6; BatchConsumeQueue.correctMinOffset).

        As SimpleCQ's min never lies before its first file, the min starts from the first file's first
        msgBaseOffset: the offsets before it went with the files retention deleted, and it is what a
        reopen reads (``_after_recover``). Raising it only past units still on disk left it where it was
        when the cut fell between two files (the first unit left points at a kept record): pulls found
        nothing below the first file and crawled on one offset at a time. Then it moves past the units
        whose records lie below the commitlog min (the end of the last of them). It never goes down.
        """
        files = self.file_queue.files
        if not files:
            return
        first = files[0]
        if first.wrote_position >= _U:
            new_min = max(self.min_offset, _I64.unpack_from(first.mv, BCQ_MSG_BASE_OFFSET_POS)[0])
        else:
            new_min = max(self.min_offset, self.max_offset)  # no unit at all: the queue is empty
        for unit in self.iter_all_units():
            if unit.phy_offset >= commit_log_min_offset:
                break
            new_min = max(new_min, unit.queue_offset + unit.batch_num)
        self.min_offset = new_min

    def delete_expired_files(self, commit_log_min_offset: int) -> int:
        """Delete leading files whose last unit points below the commitlog min (never the last file), then
        correct the min offset: with those files gone it is at least the first file's first msgBaseOffset."""
        deleted = 0
        files = self.file_queue.files
        while len(files) > 1:
            mf = files[0]
            last_pos = (mf.wrote_position // _U - 1) * _U
            if last_pos < 0 or BCQ_UNIT.unpack_from(mf.mv, last_pos)[0] >= commit_log_min_offset:
                break
            self.file_queue.delete_first_file()
            deleted += 1
        self.correct_min_offset(commit_log_min_offset)
        return deleted

    def get_offset_in_queue_by_time(self, timestamp: int, store_time_of: Callable[[int, int], int] | None = None,
                                    boundary: str = "lower") -> int:
        """Exact message offset by store time (§6.3 searches units by their store time).

        LOWER: the first message stored at/after ``timestamp`` — the base of the first unit with
        ``storeTime >= timestamp`` (every item of an inner batch shares the record's time), or the max
        offset when nothing is that new. UPPER: the last message stored at/before ``timestamp`` — the
        *last item* of the last unit with ``storeTime <= timestamp``, not its base (Java answers the
        base, which would replay the rest of the batch). Never below the min offset.
        """
        units = [u for u in self.iter_all_units() if u.queue_offset + u.batch_num > self.min_offset]
        if not units:
            return self.min_offset
        if boundary == BOUNDARY_UPPER:
            if units[0].store_time > timestamp:
                return self.min_offset
            lo, hi = 0, len(units) - 1
            while lo < hi:
                mid = (lo + hi + 1) // 2
                if units[mid].store_time <= timestamp:
                    lo = mid
                else:
                    hi = mid - 1
            return max(units[lo].queue_offset + units[lo].batch_num - 1, self.min_offset)
        if timestamp > units[-1].store_time:
            return self.max_offset
        lo, hi = 0, len(units) - 1
        while lo < hi:
            mid = (lo + hi) // 2
            if units[mid].store_time >= timestamp:
                hi = mid
            else:
                lo = mid + 1
        return max(units[lo].queue_offset, self.min_offset)


def read_store_time(mv: memoryview, pos: int) -> int:
    return _I64.unpack_from(mv, pos + BCQ_STORE_TIME_POS)[0]
