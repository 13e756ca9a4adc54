"""The two passes over commitlog files that every rebuild/verify job starts with.

Pass 1 (``scan_boundaries``, one task per file) hops from TOTALSIZE to TOTALSIZE without decoding,
noting a record boundary every ``split_bytes``, so one large file can be decoded by several tasks.
Pass 2 (``decode_range``, one task per byte range) validates and decodes every record with the
store's reput decoder (``decode_dispatch_fields`` + ``body_crc_matches`` + ``dispatch_request_of``;
``check_record`` only gives the verdict on a record that decoder rejects), and packs what the
consume queues and the index need into compact per-queue byte strings: no per-record objects leave
the task. Files are read through a memoryview over a read-only mmap.

Validity follows recovery (spec §9.4/§9.5): a blank ends a file; the first invalid record ends the
log. Pass 1 finds structural ends (bad magic/size); pass 2 also finds CRC and length errors, and the
driver takes the earliest stop over both.
"""

from __future__ import annotations

import mmap
import os
import struct
from dataclasses import dataclass, field

from broker_core.store.codec.hotpath import index_key_hash
from broker_core.store.codec.message import (
    BLANK_MAGIC_CODE,
    MESSAGE_MAGIC_CODE_V1,
    MESSAGE_MAGIC_CODE_V2,
    RECORD_BLANK,
    RECORD_VALID,
    body_crc_matches,
    check_record,
    decode_dispatch_fields,
    read_magic,
    read_total_size,
)
from broker_core.store.codec.sys_flag import (
    INNER_BATCH_FLAG,
    TRANSACTION_ROLLBACK_TYPE,
    TRANSACTION_TYPE_MASK,
    is_dispatched_to_queue,
)
from broker_core.store.dispatch import build_dispatch_request, dispatch_request_of

# One packed consume-queue record per dispatched commitlog record:
# consumeQueueOffset, msgBaseOffset, phyOffset, size, tagsCode, storeTimestamp, batchSize
CQ_REC = struct.Struct(">qqqiqqh")
# One packed index key per (record, key): keyHash, phyOffset, storeTimestamp
IDX_REC = struct.Struct(">iqq")

STOP_NONE = "none"  # range ended at its planned end (a split point)
STOP_BLANK = "blank"  # end-of-file blank record
STOP_INVALID = "invalid"  # end of the valid log (zeros, torn record, CRC mismatch, ...)

ZERO_REASON_PREFIX = "no more data"


@dataclass(slots=True)
class FileScan:
    """Pass-1 result for one commitlog file."""

    file_index: int
    base: int
    splits: list[int]  # record-aligned start positions of the ranges (first is 0)
    struct_end: int  # position where hopping stopped (blank, invalid header or end of file)
    struct_stop: str  # STOP_BLANK or STOP_INVALID
    records: int


@dataclass(slots=True)
class DecodedRange:
    """Pass-2 result for one byte range: compact packed data, small per-range metadata."""

    range_index: int
    file_index: int
    base: int
    start: int
    end: int  # position after the last valid record decoded
    records: int
    stop: str
    stop_reason: str
    cq: dict[tuple[str, int], bytes] = field(default_factory=dict)  # (topic, queueId) -> CQ_REC*
    index: bytes = b""  # IDX_REC* in commitlog order
    batch_topics: set[str] = field(default_factory=set)

    @property
    def key_count(self) -> int:
        return len(self.index) // IDX_REC.size

    @property
    def global_start(self) -> int:
        return self.base + self.start

    @property
    def global_stop(self) -> int:
        return self.base + self.end


def _map(path: str) -> tuple[mmap.mmap | None, int]:
    fd = os.open(path, os.O_RDONLY)
    try:
        length = os.fstat(fd).st_size
        if length == 0:
            return None, 0
        mm = mmap.mmap(fd, length, access=mmap.ACCESS_READ)
    finally:
        os.close(fd)
    try:
        mm.madvise(mmap.MADV_SEQUENTIAL)
    except (AttributeError, OSError):
        pass
    return mm, length


def scan_boundaries(file_index: int, path: str, base: int, split_bytes: int) -> FileScan:
    """Hop over TOTALSIZE fields from the file start, recording a split every ``split_bytes``."""
    mm, length = _map(path)
    splits = [0]
    pos = 0
    records = 0
    stop = STOP_INVALID
    if mm is None:
        return FileScan(file_index, base, splits, 0, stop, 0)
    try:
        next_split = split_bytes
        magics = (MESSAGE_MAGIC_CODE_V1, MESSAGE_MAGIC_CODE_V2)
        while length - pos >= 8:
            total = read_total_size(mm, pos)
            magic = read_magic(mm, pos)
            if magic == BLANK_MAGIC_CODE:
                stop = STOP_BLANK
                break
            if magic not in magics or total <= 0 or total > length - pos:
                break
            pos += total
            records += 1
            if pos >= next_split and length - pos >= 8:
                splits.append(pos)
                next_split = pos + split_bytes
    finally:
        mm.close()
    return FileScan(file_index, base, splits, pos, stop, records)


def plan_ranges(scans: list[FileScan]) -> list[tuple[int, int, int, int, int]]:
    """(range_index, file_index, base, start, end) for every range up to the first structural stop.

    ``end`` of a file's last range is -1: decode until the blank/invalid record that ends it, so the
    terminating record is checked by the codec exactly as recovery checks it. Files after a file
    that ends with an invalid record are not planned (recovery would never read them).
    """
    ranges: list[tuple[int, int, int, int, int]] = []
    for scan in scans:
        starts = [s for s in scan.splits if s < scan.struct_end] or [0]
        for i, s in enumerate(starts):
            end = starts[i + 1] if i + 1 < len(starts) else -1
            ranges.append((len(ranges), scan.file_index, scan.base, s, end))
        if scan.struct_stop != STOP_BLANK:
            break
    return ranges


def decode_range(range_index: int, file_index: int, path: str, base: int, start: int, end: int,
                 check_crc: bool, delay_levels_ms: list[int], want_index: bool) -> DecodedRange:
    """Validate and decode the records of ``[start, end)`` (or to the end of the file's data).

    Every record goes through the store's reput decoder (``decode_dispatch_fields``, plus the body
    CRC when recovery would check it) and ``dispatch_request_of``; only a record that decoder rejects
    is handed to ``check_record``, whose verdict (blank, invalid and why) ends the range.
    """
    mm, length = _map(path)
    out = DecodedRange(range_index, file_index, base, start, start, 0, STOP_INVALID, "empty file")
    if mm is None:
        return out
    mv = memoryview(mm)
    limit = length
    stop_at = length if end < 0 else end
    cq: dict[tuple[str, int], bytearray] = {}
    index = bytearray()
    batch_topics: set[str] = set()
    pack_cq = CQ_REC.pack
    pack_idx = IDX_REC.pack
    decode = decode_dispatch_fields
    crc_matches = body_crc_matches
    request_of = dispatch_request_of
    key_hash = index_key_hash
    pos = start
    records = 0
    stop = STOP_NONE
    reason = ""
    try:
        while pos < stop_at:
            fields = decode(mv, pos, limit)
            if fields is not None and (not check_crc or crc_matches(mv, pos, fields[5])):
                size, topic, queue_id, queue_offset, phy, sys_flag, ts, prepared, props = fields
                req = request_of(topic, queue_id, phy, size, sys_flag, ts, queue_offset, prepared, props,
                                 delay_levels_ms)
            else:
                chk = check_record(mv, pos, limit, check_crc, False)
                if chk.kind != RECORD_VALID:
                    stop = STOP_BLANK if chk.kind == RECORD_BLANK else STOP_INVALID
                    reason = chk.reason
                    break
                req = build_dispatch_request(chk.message, delay_levels_ms)
                size, topic, phy, sys_flag, ts = chk.size, req.topic, req.commit_log_offset, req.sys_flag, \
                    req.store_timestamp
            if is_dispatched_to_queue(sys_flag):
                qkey = (topic, req.queue_id)
                buf = cq.get(qkey)
                if buf is None:
                    buf = cq[qkey] = bytearray()
                buf += pack_cq(req.consume_queue_offset, req.msg_base_offset, phy, size, req.tags_code, ts,
                               req.batch_size)
                if sys_flag & INNER_BATCH_FLAG:
                    batch_topics.add(topic)
            if want_index and sys_flag & TRANSACTION_TYPE_MASK != TRANSACTION_ROLLBACK_TYPE:
                prefix = topic + "#"
                uniq_key = req.uniq_key
                if uniq_key is not None:
                    index += pack_idx(key_hash(prefix + uniq_key), phy, ts)
                keys = req.keys
                if keys:
                    for token in keys.split(" "):
                        if token:
                            index += pack_idx(key_hash(prefix + token), phy, ts)
            pos += size
            records += 1
        else:
            if end < 0:  # ran into the physical end of the file without a terminator
                stop, reason = STOP_INVALID, "end of file data"
    finally:
        mv.release()
        mm.close()
    out.end = pos
    out.records = records
    out.stop = stop
    out.stop_reason = reason
    out.cq = {k: bytes(v) for k, v in cq.items()}
    out.index = bytes(index)
    out.batch_topics = batch_topics
    return out


@dataclass(frozen=True, slots=True)
class LogEnd:
    """Where the valid log ends, as recovery would find it."""

    offset: int  # global commitlog offset after the last valid record
    clean: bool  # True: ended by zeros/blank in the last data file; False: torn/corrupt data
    reason: str
    file_index: int


def find_log_end(ranges: list[DecodedRange], files_after_have_data: dict[int, bool]) -> LogEnd:
    """The first invalid stop over all decoded ranges in log order (spec §9.5 step 3).

    ``files_after_have_data[file_index]`` tells whether any later commitlog file starts with a
    record: if recovery stops before such data, records are being dropped, which is not clean.
    """
    ordered = sorted(ranges, key=lambda r: (r.file_index, r.start))
    last = None
    for r in ordered:
        last = r
        if r.stop == STOP_INVALID:
            clean = r.stop_reason.startswith(ZERO_REASON_PREFIX) and not files_after_have_data.get(r.file_index, False)
            return LogEnd(r.global_stop, clean, r.stop_reason, r.file_index)
    if last is None:
        return LogEnd(0, True, "no commitlog data", -1)
    # Every file ended with a blank: the log ends at the end of the last file.
    return LogEnd(last.base + last.end, True, "end of last file", last.file_index)


def file_starts_with_record(path: str) -> bool:
    """Whether a commitlog file's first 8 bytes look like a record header (magic V1/V2)."""
    try:
        with open(path, "rb") as f:
            head = f.read(8)
    except OSError:
        return False
    if len(head) < 8:
        return False
    return read_magic(head, 0) in (MESSAGE_MAGIC_CODE_V1, MESSAGE_MAGIC_CODE_V2)
