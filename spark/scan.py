"""Walking commitlog files for every Spark job: plan record-aligned ranges, then decode or select.

One module for the rebuild (``decode_range``: consume queue units and index keys) and for
searchMessages / exportMessages / statsMessages (``scan_range``: records a query selects), so both
read the bytes the same way:

* **Mapping**: a task maps only its own byte range, read-only, and populates the page tables a
  chunk ahead of the walk (``MADV_POPULATE_READ``): touching pages one fault at a time costs about
  twice as much, and populating ahead never maps the zeros after a file's last record.
* **Planning without a pass over the data** (``plan_file``, on the driver): a range may start at
  any record. Every record carries its own commitlog offset (PHYSICALOFFSET), so the first record
  at or after a cut is found by looking, in a small ``pread`` window, for a magic code whose record
  says it starts exactly there. The store timestamp of each range's first record comes with it, so
  time bounds prune whole ranges and files before any task runs. A range is scanned until the next
  range's start; a walk that lands anywhere else (a body that imitates a header) is noticed
  (``STOP_OVERSHOOT``) and the file is scanned again as one range.
* **Validity follows recovery** (spec §9.4/§9.5): every record goes through the store's reput
  decoder checks and the body CRC when recovery checks it; ``check_record`` gives the verdict and
  reason on the first record that fails. A blank ends a file; the first invalid record ends the log
  (rebuild) or that file's scan (search).

The per-record loops run in the compiled hot path (``hotpath.select_records`` / ``hop_records``)
with identical pure-Python twins; a search's topic, time bounds, SQL92 verdict and body text are
evaluated there, so a record that does not match never becomes Python objects.
"""

from __future__ import annotations

import mmap
import os
import struct
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field

from broker_core.store.codec.hotpath import dispatch_range, hop_records, index_key_hash, select_records
from broker_core.store.codec.message import (
    MESSAGE_MAGIC_CODE_V1,
    MESSAGE_MAGIC_CODE_V2,
    RECORD_BLANK,
    RECORD_VALID,
    body_crc_matches,
    check_record,
    decode_dispatch_fields,
    decode_record,
    read_magic,
)
from broker_core.store.codec.message_id import create_offset_msg_id
from broker_core.store.codec.properties import get_property
from broker_core.store.codec.sys_flag import (
    INNER_BATCH_FLAG,
    TRANSACTION_ROLLBACK_TYPE,
    TRANSACTION_TYPE_MASK,
    is_dispatched_to_queue,
)
from broker_core.store.dispatch import build_dispatch_request, dispatch_request_of
from broker_core.store.message_store import unwrap_inner_batch

from .search_query import (
    MODE_STATS,
    MODE_TOP,
    TIME_BUCKETS_MS,
    BodyFailures,
    LocalBuckets,
    Matcher,
    MessageRow,
    RangeResult,
    ScanQuery,
    message_row,
    row_sort_key,
    stats_key,
)

# One packed consume-queue record per dispatched commitlog record:
# consumeQueueOffset, msgBaseOffset, phyOffset, size, tagsCode, storeTimestamp, batchSize
CQ_REC = struct.Struct(">qqqiqqh")
# One packed index key per (record, key): keyHash, phyOffset, storeTimestamp
IDX_REC = struct.Struct(">iqq")

STOP_NONE = "none"  # range ended at its planned end (the next range's start)
STOP_BLANK = "blank"  # end-of-file blank record
STOP_INVALID = "invalid"  # end of the valid log (zeros, torn record, CRC mismatch, ...)
STOP_OVERSHOOT = "overshoot"  # the walk stepped over the planned end: that start was not a record

ZERO_REASON_PREFIX = "no more data"

_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_MAGIC_BYTES = (struct.pack(">i", MESSAGE_MAGIC_CODE_V1), struct.pack(">i", MESSAGE_MAGIC_CODE_V2))
_MIN_RECORD = 80  # the smallest record header with IPv4 hosts
_SYNC_WINDOW = 64 * 1024
SYNC_DISTANCE = 16 * 1024 * 1024  # how far past a planned cut a record start is looked for
# Linux 5.14+: fill the page tables of a mapped range from the page cache in one call.
MADV_POPULATE_READ = getattr(mmap, "MADV_POPULATE_READ", 22)
POPULATE_CHUNK = 16 * 1024 * 1024


# ------------------------------------------------------------------------------------------ mapping

@dataclass(slots=True)
class Mapped:
    """A read-only mapping of ``[offset, offset + len(buf))`` of a file (``offset`` page-aligned)."""

    buf: memoryview
    offset: int
    file_length: int
    mm: mmap.mmap | None = None
    populate: bool = True

    @property
    def end(self) -> int:
        """File position just after the mapped bytes."""
        return self.offset + len(self.buf)

    def chunk_end(self, pos: int, stop: int) -> int:
        """Where the walk from buffer position ``pos`` pauses next (at most ``stop``), its pages populated."""
        end = min(stop, pos + POPULATE_CHUNK)
        if self.populate and self.mm is not None and end > pos:
            start = pos - pos % mmap.PAGESIZE
            try:
                self.mm.madvise(MADV_POPULATE_READ, start, min(len(self.buf), end + 4096) - start)
            except (OSError, ValueError):
                self.populate = False  # an older kernel: pages fault in as the walk touches them
        return end


@contextmanager
def map_range(path: str, start: int = 0, end: int = -1) -> Iterator[Mapped | None]:
    """Map ``[start, end)`` of ``path`` (``end`` -1: to the end of the file); None for no bytes."""
    fd = os.open(path, os.O_RDONLY)
    try:
        length = os.fstat(fd).st_size
        stop = length if end < 0 else min(end, length)
        offset = start - start % mmap.ALLOCATIONGRANULARITY
        if stop <= offset:
            yield None
            return
        mm = mmap.mmap(fd, stop - offset, flags=mmap.MAP_SHARED, prot=mmap.PROT_READ, offset=offset)
    finally:
        os.close(fd)
    mv = memoryview(mm)
    try:
        yield Mapped(mv, offset, length, mm)
    finally:
        mv.release()
        mm.close()


# ------------------------------------------------------------------------------------------ planning

def _read_at(fd: int, pos: int, n: int) -> bytes:
    return os.pread(fd, n, pos)


def _store_ts(head: bytes, at: int) -> int:
    born_len = 20 if head[at + 39] & 0x10 else 8  # SYSFLAG's low byte: BORNHOST_V6_FLAG
    return _I64.unpack_from(head, at + 48 + born_len)[0]


def find_record_start(fd: int, base: int, pos: int, length: int) -> tuple[int, int] | None:
    """First ``(position, store timestamp)`` at or after ``pos`` where a record says it starts.

    A record header there has a message magic code, a TOTALSIZE that fits the file, and a
    PHYSICALOFFSET equal to ``base + position`` (the broker writes each record's own offset). None
    when there is none within ``SYNC_DISTANCE`` or the bytes there are zeros: recovery ends a file's
    data at zeros, and a record longer than that only makes the range before it longer.
    """
    give_up = pos + SYNC_DISTANCE
    while pos + _MIN_RECORD <= length and pos < give_up:
        window = _read_at(fd, pos, min(_SYNC_WINDOW, length - pos))
        best = -1
        for magic in _MAGIC_BYTES:
            i = window.find(magic, 4)
            while i >= 0:
                q = i - 4
                if best >= 0 and q >= best:
                    break
                if q + _MIN_RECORD <= len(window):
                    total = _I32.unpack_from(window, q)[0]
                    phy = _I64.unpack_from(window, q + 28)[0]
                    if total >= _MIN_RECORD and pos + q + total <= length and phy == base + pos + q:
                        best = q
                        break
                elif q < len(window):
                    break  # the header runs past the window: the next window starts at it
                i = window.find(magic, i + 1)
        if best >= 0:
            return pos + best, _store_ts(window, best)
        if len(window) < _SYNC_WINDOW or window.count(0) == len(window):
            return None
        pos += len(window) - _MIN_RECORD
    return None


@dataclass(frozen=True, slots=True)
class PlannedRange:
    """``[start, end)`` of one file (``end`` -1: to the record that ends the file's data)."""

    start: int
    end: int
    first_ts: int  # store timestamp of the range's first record; -1 when it starts with no record


def plan_file(path: str, base: int, split_bytes: int) -> list[PlannedRange]:
    """Cut one commitlog file into ranges of about ``split_bytes`` at record starts (a few small reads)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        length = os.fstat(fd).st_size
        head = _read_at(fd, 0, 96)
        first = _store_ts(head, 0) if len(head) >= _MIN_RECORD and read_magic(head, 0) in (
            MESSAGE_MAGIC_CODE_V1, MESSAGE_MAGIC_CODE_V2) else -1
        starts = [(0, first)]
        target = max(1, split_bytes)
        while target < length:
            found = find_record_start(fd, base, max(target, starts[-1][0] + 1), length)
            if found is None:
                break
            starts.append(found)
            target = found[0] + split_bytes
    finally:
        os.close(fd)
    return [PlannedRange(s, starts[i + 1][0] if i + 1 < len(starts) else -1, ts) for i, (s, ts) in enumerate(starts)]


def last_store_timestamp(path: str, start: int, end: int) -> int | None:
    """Store timestamp of the last record a hop from ``start`` reaches before ``end`` (-1: file end).

    Headers only (``hop_records``); used for the one range per file that may straddle a time bound.
    """
    with map_range(path, start, end) as m:
        if m is None:
            return None
        _splits, _first, last, _end, records = hop_records(m.buf, start - m.offset, len(m.buf), 1 << 62)
    return last[0] if records else None


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


def _final_verdict(path: str, pos: int, check_crc: bool, m: Mapped) -> tuple[str, str, object]:
    """(stop kind, reason, CheckResult) of the record at file position ``pos`` that the walk rejected.

    The range's mapping may end at the next range's start; a record reaching past it is judged over
    the rest of the file, and if valid there the walk overshot the planned end.
    """
    chk = check_record(m.buf, pos - m.offset, len(m.buf), check_crc, False)
    if chk.kind == RECORD_VALID:
        return STOP_NONE, "", chk
    if m.end < m.file_length:
        with map_range(path, pos, -1) as whole:
            assert whole is not None
            far = check_record(whole.buf, pos - whole.offset, len(whole.buf), check_crc, False)
        if far.kind == RECORD_VALID:
            return STOP_OVERSHOOT, f"record at {pos} runs past the planned range end {m.end}", far
        chk = far
    return (STOP_BLANK if chk.kind == RECORD_BLANK else STOP_INVALID), chk.reason, chk


# ------------------------------------------------------------------------------------------ rebuild

@dataclass(slots=True)
class DecodedRange:
    """``decode_range`` result for one byte range: compact packed data, small per-range metadata."""

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


def decode_range(range_index: int, file_index: int, path: str, base: int, start: int, end: int,
                 check_crc: bool, delay_levels_ms: list[int], want_index: bool,
                 deleted_topics: Mapping[str, int] | None = None) -> DecodedRange:
    """Validate and decode the records of ``[start, end)`` (or to the end of the file's data).

    Records of a deleted topic written before its deletion (``deleted_topics``, the store's tombstones)
    get no unit and no index entry, as recovery leaves them out: a topic made again under the same name
    starts its queues at 0 and must not see the old messages.

    Runs of plain records are dispatched by ``hotpath.dispatch_range`` (compiled: no Python objects
    per record); any other record goes through the store's reput decoder (``decode_dispatch_fields``, plus the body
    CRC when recovery would check it) and ``dispatch_request_of``; only a record that decoder rejects
    is handed to ``check_record``, whose verdict (blank, invalid and why) ends the range.
    """
    out = DecodedRange(range_index, file_index, base, start, start, 0, STOP_INVALID, "empty file")
    with map_range(path, start, end) as m:
        if m is None:
            return out
        mv, off = m.buf, m.offset
        limit = len(mv)
        stop_at = limit if end < 0 else end - off
        cq: dict[tuple[str, int], bytearray] = {}
        index = bytearray()
        batch_topics: set[str] = set()
        pack_cq = CQ_REC.pack
        pack_idx = IDX_REC.pack
        decode = decode_dispatch_fields
        fast = dispatch_range
        crc_matches = body_crc_matches
        request_of = dispatch_request_of
        key_hash = index_key_hash
        pos = start - off
        records = 0
        stop = STOP_NONE
        reason = ""
        while pos < stop_at:
            # Plain records in one compiled call; the first other one goes through the full path.
            pos, n = fast(mv, pos, stop_at, limit, check_crc, want_index, cq, index)
            records += n
            if pos >= stop_at:
                continue
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
        out.end = pos + off
    out.records = records
    out.stop = stop
    out.stop_reason = reason
    out.cq = {k: bytes(v) for k, v in cq.items()}
    out.index = bytes(index)
    if deleted_topics and any(topic in deleted_topics for topic, _ in out.cq):
        _drop_deleted_topic_records(out, deleted_topics)
    out.batch_topics = batch_topics
    return out


def _drop_deleted_topic_records(out: DecodedRange, deleted_topics: Mapping[str, int]) -> None:
    """Take the units of records below their deleted topic's cut out of ``out``, and their index keys.

    Done on the packed output, after the compiled walk (which knows no tombstones): a deletion is rare
    and touches few queues. A record's index keys are found by its commitlog offset, which only the
    record itself has: every key of a dropped record goes.
    """
    dropped: set[int] = set()
    for (topic, queue_id), blob in list(out.cq.items()):
        cut = deleted_topics.get(topic)
        if cut is None:
            continue
        kept = bytearray()
        for unit in CQ_REC.iter_unpack(blob):
            if unit[2] < cut:
                dropped.add(unit[2])
            else:
                kept += CQ_REC.pack(*unit)
        if kept:
            out.cq[(topic, queue_id)] = bytes(kept)
        else:
            del out.cq[(topic, queue_id)]
    if dropped and out.index:
        out.index = b"".join(IDX_REC.pack(*e) for e in IDX_REC.iter_unpack(out.index) if e[1] not in dropped)


@dataclass(frozen=True, slots=True)
class LogEnd:
    """Where the valid log ends, as recovery would find it."""

    offset: int  # global commitlog offset after the last valid record
    clean: bool  # True: ended by zeros/blank in the last data file; False: torn/corrupt data
    reason: str
    file_index: int


def find_log_end(ranges: list[DecodedRange], files_after_have_data: dict[int, bool],
                 gaps: dict[int, str] | None = None) -> LogEnd:
    """The first invalid stop over all decoded ranges in log order (spec §9.5 step 3).

    ``files_after_have_data[file_index]`` tells whether any later commitlog file starts with a
    record: if recovery stops before such data, records are being dropped, which is not clean.
    ``gaps[file_index]`` (the reason) marks a file that does not follow the one before it: the log
    ends where that one's data ends, as at a corrupt record (the records in between are gone).
    """
    ordered = sorted(ranges, key=lambda r: (r.file_index, r.start))
    gaps = gaps or {}
    last = None
    for r in ordered:
        if r.file_index in gaps and last is not None and last.file_index < r.file_index:
            return LogEnd(last.global_stop, False, gaps[r.file_index], last.file_index)
        last = r
        if r.stop == STOP_INVALID:
            clean = r.stop_reason.startswith(ZERO_REASON_PREFIX) and not files_after_have_data.get(r.file_index, False)
            return LogEnd(r.global_stop, clean, r.stop_reason, r.file_index)
    if last is None:
        return LogEnd(0, True, "no commitlog data", -1)
    # Every file ended with a blank: the log ends at the end of the last file.
    return LogEnd(last.base + last.end, True, "end of last file", last.file_index)


_ZERO_CHUNK = 8 * 1024 * 1024


def _last_nonzero(fd: int, start: int, end: int) -> int:
    """Position after the last non-zero byte of ``[start, end)`` of the file, or ``start`` if all zeros.

    Holes (a preallocated sparse file) are skipped with SEEK_DATA; the rest is read in chunks.
    """
    last = start
    pos = start
    while pos < end:
        try:
            pos = os.lseek(fd, pos, os.SEEK_DATA)
        except OSError:  # ENXIO: only a hole is left (or no SEEK_DATA): read on as zeros
            break
        if pos >= end:
            break
        chunk = os.pread(fd, min(_ZERO_CHUNK, end - pos), pos)
        if not chunk:
            break
        kept = len(chunk.rstrip(b"\0"))
        if kept:
            last = pos + kept
        pos += len(chunk)
    return last


def data_after_stop(path: str, pos: int, end: int = -1) -> int:
    """Bytes from ``pos`` (where the valid log stops) to the last non-zero byte before ``end`` (-1: EOF).

    Why: a torn tail (a crash mid-append) is one partial record followed by zeros, and recovery
    rightly drops it; a corrupt record with intact data after it is damage, and cutting the log
    there loses the later messages. The stopped record's own bytes do not count when its TOTALSIZE
    fits the file (a torn record keeps its header): 0 means "only a torn tail of zeros follows".
    """
    fd = os.open(path, os.O_RDONLY)
    try:
        length = os.fstat(fd).st_size
        stop = length if end < 0 else min(end, length)
        head = os.pread(fd, 4, pos)
        total = _I32.unpack(head)[0] if len(head) == 4 else 0
        skip = pos + total if _MIN_RECORD <= total and pos + total <= stop else pos
        last = _last_nonzero(fd, skip, stop)
    finally:
        os.close(fd)
    return last - pos if last > skip else 0


# ------------------------------------------------------------------------------------------ search

Candidate = tuple  # (storeTimestamp, commitLogOffset, queueOffset, file position): a record kept, not decoded


def _candidate(buf, pos: int, file_pos: int) -> Candidate:
    """Sort key of a kept single-message record from its header, without decoding it."""
    born_len = 20 if buf[pos + 39] & 0x10 else 8
    ts = _I64.unpack_from(buf, pos + 48 + born_len)[0]
    return ts, _I64.unpack_from(buf, pos + 28)[0], _I64.unpack_from(buf, pos + 20)[0], file_pos


def candidate_sort_key(store_name: str, c: Candidate) -> tuple[int, str, int, int]:
    """``row_sort_key`` of the row the candidate becomes."""
    return c[0], store_name, c[1], c[2]


def decode_rows(path: str, store_name: str, positions: list[int], failures: BodyFailures | None = None
                ) -> list[MessageRow]:
    """Rows of the single-message records at ``positions`` of one file (a search's final matches)."""
    rows = []
    with map_range(path) as m:
        assert m is not None
        for p in positions:
            msg = decode_record(m.buf, p, read_body=True)
            rows.append(message_row(store_name, msg, create_offset_msg_id(msg.store_host, msg.commit_log_offset),
                                    failures))
    return rows


class _RangeSink:
    """What a range keeps of its selected records: rows (export), candidates (search) or buckets (stats)."""

    def __init__(self, out: RangeResult, store_name: str, mode: str, limit: int, query: ScanQuery) -> None:
        self.out = out
        self.store_name = store_name
        self.mode = mode
        self.limit = limit
        self.stats_by = query.stats_by
        time_dim = next((d for d in query.stats_by if d in TIME_BUCKETS_MS), None)
        self.buckets = LocalBuckets(time_dim) if time_dim else None
        self.candidates: list[Candidate] = []

    def count(self, buf, pos: int, messages: int) -> None:
        fields = decode_dispatch_fields(buf, pos, len(buf))
        assert fields is not None
        size, topic, queue_id, _qoff, _phy, _flag, ts, _prep, _props = fields
        key = stats_key(self.stats_by, topic, queue_id, ts, self.buckets)
        acc = self.out.stats.get(key)
        if acc is None:
            self.out.stats[key] = [messages, 1, size]
        else:
            acc[0] += messages
            acc[1] += 1
            acc[2] += size

    def single(self, buf, pos: int, file_pos: int) -> None:
        """A kept record holding one message."""
        if self.mode == MODE_STATS:
            self.count(buf, pos, 1)
        elif self.mode == MODE_TOP:
            self.candidates.append(_candidate(buf, pos, file_pos))
            if self.limit and len(self.candidates) > 2 * self.limit:
                self.candidates.sort()
                del self.candidates[self.limit:]
        else:
            msg = decode_record(buf, pos, read_body=True)
            self.out.rows.append(message_row(self.store_name, msg,
                                             create_offset_msg_id(msg.store_host, msg.commit_log_offset),
                                             self.out.body_failures))

    def rows(self, buf, pos: int, rows: list[MessageRow]) -> None:
        """Messages of a BatchCQ inner batch record that matched (already decoded)."""
        if self.mode == MODE_STATS:
            self.count(buf, pos, len(rows))
        else:
            self.out.rows.extend(rows)

    def finish(self) -> None:
        out = self.out
        if self.mode == MODE_TOP:
            self.candidates.sort()
            if self.limit:
                del self.candidates[self.limit:]
                if len(out.rows) > self.limit:
                    out.rows.sort(key=row_sort_key)
                    del out.rows[self.limit:]
            out.candidates = self.candidates


def _python_record(buf, pos: int, matcher: Matcher, query: ScanQuery, store_name: str,
                   message: object | None = None, failures: BodyFailures | None = None,
                   batch_failures: BodyFailures | None = None) -> tuple[bool, list[MessageRow]]:
    """Evaluate one record in Python: BatchCQ inner batches, compressed bodies with a body needle,
    and records the compiled decoder rejects.

    Returns (whether it is a single-message record that matched as a whole, rows of matching inner
    messages). Topic and time are header facts; the SQL and body text apply per message; a body
    that does not decompress never matches and is noted in ``failures``. An inner batch whose body
    does not unwrap is judged and shown as the one record it is stored as, and noted in
    ``batch_failures``: its inner messages cannot be listed, and the summary must say so.
    """
    msg = message if message is not None else decode_record(buf, pos, read_body=True)
    if (query.topic is not None and msg.topic != query.topic) or not query.in_time(msg.store_timestamp):  # type: ignore[attr-defined]
        return False, []
    props = msg.properties_string  # type: ignore[attr-defined]
    inner = msg.sys_flag & INNER_BATCH_FLAG and "INNER_NUM\x01" in props  # type: ignore[attr-defined]
    if not inner:
        if matcher.constant is False:
            return False, []
        return matcher.matches(props, msg.body, msg.sys_flag, msg.commit_log_offset, failures), []  # type: ignore[attr-defined]
    inner_base = get_property(props, "INNER_BASE")
    base_q = int(inner_base) if inner_base and inner_base.lstrip("-").isdigit() else msg.queue_offset  # type: ignore[attr-defined]
    try:
        messages = unwrap_inner_batch(msg, base_q)
    except ValueError as e:
        messages = [msg]  # a body that is not a packed batch: the record as stored
        if batch_failures is not None:
            batch_failures.add(msg.commit_log_offset, f"inner batch body: {e}")  # type: ignore[attr-defined]
    rows = [message_row(store_name, m, create_offset_msg_id(m.store_host, m.commit_log_offset), failures)
            for m in messages if matcher.constant is not False
            and matcher.matches(m.properties_string, m.body, m.sys_flag, m.commit_log_offset, failures)]
    return False, rows


def scan_range(task: tuple, query: ScanQuery, mode: str, limit: int = 0) -> RangeResult:
    """Validate the records of one range and keep what the query selects.

    ``task`` is ``(store_index, store_name, file_index, range_index, path, base, start, end, check_crc)``;
    ``end`` -1 means "to the record that ends the file's data" (blank, zeros or an invalid record),
    which is then checked by the codec exactly as recovery checks it.

    The walk is ``select_records`` (compiled): topic, time bounds, the SQL verdict (by the values of
    the properties it reads) and the body text are evaluated there for single-message records. A
    search (``MODE_TOP``) keeps only the sort keys of the earliest ``limit`` of them (``candidates``;
    the driver decodes the final answer), an export decodes every kept record, stats count them.
    BatchCQ inner batches, compressed bodies a needle must look into (decompressed) and records the
    compiled decoder rejects are evaluated in Python.
    """
    store_index, store_name, file_index, range_index, path, base, start, end, check_crc = task
    out = RangeResult(store_index, file_index, range_index, base, start, start, STOP_INVALID, "empty file")
    matcher = Matcher.of(query)
    names = matcher.names if matcher.constant is None else ()
    judge = matcher.judge if names else None
    verdicts = matcher.verdicts
    needle = matcher.needle
    with map_range(path, start, end) as m:
        if m is None:
            return out
        buf, off = m.buf, m.offset
        sink = _RangeSink(out, store_name, mode, limit, query)
        limit_pos = len(buf)
        stop_at = limit_pos if end < 0 else end - off
        pos = start - off
        records = 0
        matched = 0
        stop, reason = STOP_NONE, ""
        while True:
            pause = m.chunk_end(pos, stop_at)
            pos, n, hits, deferred, stopped = select_records(
                buf, pos, pause, limit_pos, check_crc, query.topic, query.begin_ms, query.end_ms, names, verdicts,
                judge, needle)
            records += n
            if matcher.constant is not False:
                for p in hits:
                    sink.single(buf, p, p + off)
                matched += len(hits)
            for p in deferred:  # inner batches, and compressed bodies when a needle is asked for
                whole, rows = _python_record(buf, p, matcher, query, store_name, failures=out.body_failures,
                                             batch_failures=out.batch_failures)
                if whole:
                    sink.single(buf, p, p + off)
                    matched += 1
                elif rows:
                    sink.rows(buf, p, rows)
                    matched += len(rows)
            if not stopped:
                if pos < stop_at:
                    continue  # a chunk done
                if end < 0:  # ran into the physical end of the file without a terminator
                    stop, reason = STOP_INVALID, "end of file data"
                break
            stop, reason, chk = _final_verdict(path, pos + off, check_crc, m)
            if stop != STOP_NONE:
                break
            # Valid by check_record although the compiled decoder refused it: judge it in Python.
            whole, rows = _python_record(buf, pos, matcher, query, store_name, chk.message,  # type: ignore[attr-defined]
                                         out.body_failures, out.batch_failures)
            if whole:
                sink.single(buf, pos, pos + off)
                matched += 1
            elif rows:
                sink.rows(buf, pos, rows)
                matched += len(rows)
            records += 1
            pos += chk.size  # type: ignore[attr-defined]
        sink.finish()
        out.end = pos + off
    out.records = records
    out.messages_matched = matched
    out.stop = stop
    out.stop_reason = reason
    return out
