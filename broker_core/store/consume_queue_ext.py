"""ConsumeQueueExt: the per-queue ext files (``consumequeue_ext/<topic>/<queueId>/``) beside a SimpleCQ.

Why: with ``enableConsumeQueueExt`` each consume queue unit points (through its tagsCode field) at an
ext unit holding the tags hash, the store time and the SQL92 filter bitmap computed at dispatch, so a
SQL92 pull can skip messages whose bitmap says "not for this consumer" without reading the commitlog.
Like RocketMQ's, the ext is weakly reliable, derived data: a unit that cannot be read makes the reader
fall back to reading and evaluating the message, never to dropping it. The consume queue decides how
far the ext is valid (``truncate_by_max_address``): its units are written before the CQ unit that
points at them, so everything after the last referenced unit belongs to records re-dispatched later.

Also defines ``FilterBitMapHook``, the typed hook the broker installs to compute a message's bitmap
(the store knows nothing about consumers or expressions).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Protocol

from .codec.cq_ext import (
    END_BLANK_DATA_LENGTH,
    END_MARKER,
    MAX_EXT_UNIT_SIZE,
    MAX_REAL_OFFSET,
    CqExtUnit,
    decorate,
    is_ext_addr,
    pack_cq_ext_unit,
    read_cq_ext_unit,
    undecorate,
    unit_size_at,
)
from .mapped_file import MappedFile, MappedFileQueue, first_data_file_size

log = logging.getLogger("rmqops.store")

_PUT_RETRIES = 3


class FilterBitMapHook(Protocol):
    """Computes a message's filter bitmap at dispatch (RocketMQ's CommitLogDispatcherCalcBitMap).

    Returns None when the message gets no bitmap (no SQL92 consumer of the topic, calculation off).
    Called on the dispatch thread, in commitlog order, before the CQ unit is written.
    """

    def calc_filter_bit_map(self, topic: str, properties_string: str) -> bytes | None: ...


class ConsumeQueueExt:
    def __init__(self, topic: str, queue_id: int, root_dir: Path, file_size: int, read_only: bool = False) -> None:
        self.topic = topic
        self.queue_id = queue_id
        self.file_size = file_size
        self.read_only = read_only
        self.file_queue = MappedFileQueue(root_dir / topic / str(queue_id), file_size, read_only)
        # New units go at or past this file offset (set when a consume queue points at ext units that are
        # not readable any more: new units must never land where an old address points).
        self.next_file_floor = 0

    # -- open / recover ----------------------------------------------------------------------------
    def load(self) -> None:
        """Open the files (an existing queue's file size wins over the configuration), then find where
        the units of the last file end (``recover``)."""
        size = first_data_file_size(self.file_queue.directory)
        if size:
            self.file_size = self.file_queue.file_size = size
        self.file_queue.load()
        self.recover()

    def recover(self) -> None:
        """The end of the units of the last file: the first size field that is not a whole unit ends them
        (zeros after the last unit, the -1 end marker, or a torn unit). Earlier files were left only
        when full. The consume queue then cuts further back to the last unit it references."""
        files = self.file_queue.files
        if not files:
            return
        mf = files[-1]
        pos = self._units_end(mf)
        self._set_end(mf.file_from_offset + pos)

    def _units_end(self, mf: MappedFile) -> int:
        mv = mf.mv
        limit = min(mf.length, self.file_size)
        pos = 0
        while pos < limit:
            size = unit_size_at(mv, pos)
            if size <= 0 or read_cq_ext_unit(mv, pos, limit) is None:
                break
            pos += size
        return pos

    # -- write -------------------------------------------------------------------------------------
    def put(self, unit: CqExtUnit) -> int | None:
        """Append ``unit``; its ext address, or None when it cannot be stored (the caller keeps the tags
        hash in the CQ unit then, as Java does)."""
        data = pack_cq_ext_unit(unit)
        size = len(data)
        if size > MAX_EXT_UNIT_SIZE or self.file_queue.max_offset() + size > MAX_REAL_OFFSET:
            log.warning("consume queue ext %s-%d: no room for a %d-byte unit", self.topic, self.queue_id, size)
            return None
        for _ in range(_PUT_RETRIES):
            mf = self.file_queue.last_file()
            if mf is None or mf.wrote_position >= self.file_size:
                start = mf.file_from_offset + self.file_size if mf is not None else 0
                floor = self.next_file_floor
                mf = self.file_queue.create_file(max(start, floor - floor % self.file_size))
            wrote = mf.wrote_position
            if size > self.file_size - wrote - END_BLANK_DATA_LENGTH:
                # as fullFillToEnd: the end marker, then the next unit goes to a new file
                if wrote + len(END_MARKER) <= self.file_size:
                    mf.reserve(wrote + len(END_MARKER))
                    mf.write_at(wrote, END_MARKER)
                mf.wrote_position = self.file_size
                continue
            mf.reserve(wrote + size)
            mf.write_at(wrote, data)
            mf.wrote_position = wrote + size
            return decorate(mf.file_from_offset + wrote)
        return None

    # -- read --------------------------------------------------------------------------------------
    def get(self, address: int) -> CqExtUnit | None:
        """The unit at ``address``; None for a non-address or where no whole unit is written."""
        if not is_ext_addr(address):
            return None
        real = undecorate(address)
        with self.file_queue.reading(real) as mf:  # the queue may be destroyed while a reader is here
            if mf is None:
                return None
            pos = real - mf.file_from_offset
            if pos >= mf.wrote_position:
                return None
            return read_cq_ext_unit(mf.mv, pos, mf.wrote_position)

    def max_address(self) -> int:
        return decorate(self.file_queue.max_offset())

    # -- truncation --------------------------------------------------------------------------------
    def truncate_by_max_address(self, address: int) -> None:
        """Keep the units up to and including the one at ``address`` (the last one a CQ unit points at);
        the bytes after it are zeroed so no later open reads them back as units."""
        if not is_ext_addr(address):
            return
        unit = self.get(address)
        if unit is None:
            # Lost ext pages (the queue kept its units): the messages whose ext unit cannot be read are read
            # and evaluated; new units start in a new file past every address the queue holds, so none
            # of those addresses can ever lead to another message's unit.
            real = undecorate(address)
            log.warning("consume queue ext %s-%d: the unit at offset %d a consume queue unit points at is not "
                        "readable; those messages are read and evaluated, new ext units start at a new file",
                        self.topic, self.queue_id, real)
            if not self.read_only:
                for mf in self.file_queue.files:
                    mf.wrote_position = self.file_size
                self.next_file_floor = max(self.next_file_floor, real - real % self.file_size + self.file_size)
            return
        end = undecorate(address) + unit.size
        if end < self.file_queue.max_offset():
            log.info("consume queue ext %s-%d: units after offset %d belong to no consume queue unit and are "
                     "cut (they are computed again when their records are dispatched)", self.topic, self.queue_id,
                     end)
        self._set_end(end)

    def truncate_by_min_address(self, address: int) -> int:
        """Delete the files wholly before ``address`` (the first unit the queue still points at)."""
        if not is_ext_addr(address) or self.read_only:
            return 0
        real = undecorate(address)
        deleted = 0
        while len(self.file_queue.files) > 1 and self.file_queue.files[0].file_from_offset + self.file_size < real:
            self.file_queue.delete_first_file()
            deleted += 1
        return deleted

    def _set_end(self, end: int) -> None:
        fq = self.file_queue
        for mf in fq.files:
            if mf.file_from_offset <= end < mf.file_from_offset + self.file_size:
                pos = end - mf.file_from_offset
                if not self.read_only and pos < mf.length and any(bytes(mf.mv[pos:]).strip(b"\0")):
                    mf.write_at(pos, bytes(mf.length - pos))
        if self.read_only:
            for mf in fq.files:
                start = mf.file_from_offset
                mf.wrote_position = self.file_size if start + self.file_size <= end else max(0, end - start)
            fq.files = [mf for mf in fq.files if mf.file_from_offset <= end]
        else:
            fq.set_max_offset(end)

    # -- lifecycle ---------------------------------------------------------------------------------
    def flush(self, least_pages: int = 0) -> None:
        self.file_queue.flush(least_pages)

    def close(self) -> None:
        self.file_queue.close()

    def destroy(self) -> None:
        self.file_queue.destroy()
        try:
            self.file_queue.directory.parent.rmdir()
        except OSError:
            pass
