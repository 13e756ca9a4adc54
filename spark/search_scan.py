"""Executor-side byte work of searchMessages / exportMessages / statsMessages: hop and scan ranges.

Two steps per commitlog file, as the rebuild has them, with what a search needs added:

* ``hop_file`` hops TOTALSIZE to TOTALSIZE (no decoding) to cut a file into ranges of about
  ``split_bytes`` and notes the store timestamp of the first and the last record of every range, so
  the driver can skip ranges (and whole files) outside the time bounds without decoding them.
* ``scan_range`` validates every record of one range exactly as recovery does (the store's reput
  decoder ``decode_dispatch_fields`` + ``body_crc_matches``; ``check_record`` gives the verdict on a
  record that decoder rejects) and evaluates the query on it: time bounds and topic first (header
  fields only), then the broker's SQL92 filter over the properties, then the body text. Only a
  matching record is fully decoded (``decode_record``); BatchCQ inner batches are exploded into
  their messages with the store's own ``unwrap_inner_batch``, so a search sees what a consumer sees.

Everything here is a pure function of its arguments (plain tuples in, slotted dataclasses out), so
the same code runs in a Spark task and in the single-process scan the benchmark compares against.
"""

from __future__ import annotations

import ipaddress
import mmap
import os
import struct
from dataclasses import dataclass, field

from broker_core.broker.filter.sql92 import compile_sql92
from broker_core.store.codec.hosts import Host
from broker_core.store.codec.message import (
    MESSAGE_MAGIC_CODE_V1,
    MESSAGE_MAGIC_CODE_V2,
    RECORD_BLANK,
    RECORD_VALID,
    SYS_FLAG_POS,
    MessageExt,
    body_crc_matches,
    check_record,
    decode_dispatch_fields,
    decode_record,
    read_magic,
    read_total_size,
    store_timestamp_pos,
)
from broker_core.store.codec.message_id import create_offset_msg_id
from broker_core.store.codec.properties import decode_properties, get_property
from broker_core.store.codec.sys_flag import INNER_BATCH_FLAG
from broker_core.store.message_store import unwrap_inner_batch

from .scan import STOP_BLANK, STOP_INVALID, STOP_NONE

_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_HEAD = struct.Struct(">ii")
_MAGICS = (MESSAGE_MAGIC_CODE_V1, MESSAGE_MAGIC_CODE_V2)

MODE_ROWS = "rows"  # keep every matching message (export)
MODE_TOP = "top"  # keep the earliest ``limit`` matching messages (search)
MODE_STATS = "stats"  # aggregate counts and bytes per bucket (statsMessages)

# Export/search columns, in order (``MessageRow`` tuples follow it).
COLUMNS = ("store", "topic", "queueId", "queueOffset", "commitLogOffset", "msgId", "uniqKey", "tags", "keys",
           "bornTimestamp", "storeTimestamp", "bornHost", "storeHost", "reconsumeTimes", "sysFlag", "flag",
           "storeSize", "properties", "body", "body_text")
MessageRow = tuple  # (store, topic, queueId, ..., body_text) in COLUMNS order

# Stats dimensions: which fields make the bucket key, and the time granularities.
TIME_BUCKETS_MS = {"minute": 60_000, "hour": 3_600_000, "day": 86_400_000}
KEY_DIMENSIONS = ("topic", "queue")


@dataclass(frozen=True, slots=True)
class ScanQuery:
    """What a task evaluates per record (plain values only: it is shipped to executors).

    ``where`` is the SQL92 text; each task compiles it with the broker's compiler (cached per
    process), which is cheaper and safer than pickling closures.
    """

    topic: str | None = None
    begin_ms: int | None = None  # inclusive
    end_ms: int | None = None  # inclusive
    where: str | None = None
    body_contains: str | None = None
    stats_by: tuple[str, ...] = ("topic", "minute")

    def in_time(self, ts: int) -> bool:
        return (self.begin_ms is None or ts >= self.begin_ms) and (self.end_ms is None or ts <= self.end_ms)

    def overlaps(self, first_ts: int, last_ts: int) -> bool:
        """Whether records stored between ``first_ts`` and ``last_ts`` can fall inside the bounds."""
        lo, hi = min(first_ts, last_ts), max(first_ts, last_ts)
        return (self.begin_ms is None or hi >= self.begin_ms) and (self.end_ms is None or lo <= self.end_ms)


@dataclass(slots=True)
class FileBounds:
    """``hop_file`` result: record-aligned range starts and each range's first/last store timestamp."""

    store_index: int
    file_index: int
    splits: list[int]
    first_ts: list[int]  # per range; -1 when the range holds no record header
    last_ts: list[int]
    struct_end: int
    records: int


@dataclass(slots=True)
class RangeResult:
    """``scan_range`` result: where and why the range stopped, counts, and what the mode keeps."""

    store_index: int
    file_index: int
    range_index: int
    base: int
    start: int
    end: int  # position after the last valid record
    stop: str
    stop_reason: str
    records: int = 0  # commitlog records validated
    messages_matched: int = 0  # messages (inner batches exploded) matching the query
    rows: list[MessageRow] = field(default_factory=list)
    stats: dict[tuple, list[int]] = field(default_factory=dict)  # key -> [messages, records, bytes]


def _map(path: str) -> tuple[mmap.mmap | None, int]:
    fd = os.open(path, os.O_RDONLY)
    try:
        length = os.fstat(fd).st_size
        if length == 0:
            return None, 0
        mm = mmap.mmap(fd, length, access=mmap.ACCESS_READ)
    finally:
        os.close(fd)
    return mm, length


def _store_ts_at(buf, pos: int) -> int:
    sys_flag = _I32.unpack_from(buf, pos + SYS_FLAG_POS)[0]
    return _I64.unpack_from(buf, pos + store_timestamp_pos(sys_flag))[0]


def read_first_store_timestamp(path: str) -> int | None:
    """Store timestamp of a file's first record (one small read), or None if it starts with no record."""
    try:
        with open(path, "rb") as f:
            head = f.read(96)
    except OSError:
        return None
    if len(head) < 80 or read_magic(head, 0) not in _MAGICS or read_total_size(head, 0) <= 0:
        return None
    return _store_ts_at(head, 0)


def hop_file(store_index: int, file_index: int, path: str, split_bytes: int) -> FileBounds:
    """Hop over the records of one file (headers only), cutting it every ``split_bytes``."""
    mm, length = _map(path)
    out = FileBounds(store_index, file_index, [0], [], [], 0, 0)
    if mm is None:
        return out
    pos = 0
    prev = -1
    records = 0
    next_split = split_bytes
    range_open = False
    head = _HEAD.unpack_from  # TOTALSIZE and MAGICCODE in one unpack: this loop runs once per record
    v1, v2 = _MAGICS
    try:
        while length - pos >= 8:
            total, magic = head(mm, pos)
            if (magic != v1 and magic != v2) or total < 80 or total > length - pos:
                break
            if not range_open:
                out.first_ts.append(_store_ts_at(mm, pos))
                range_open = True
            prev = pos
            pos += total
            records += 1
            if pos >= next_split and length - pos >= 8:
                out.last_ts.append(_store_ts_at(mm, prev))
                range_open = False
                out.splits.append(pos)
                next_split = pos + split_bytes
        if range_open:
            out.last_ts.append(_store_ts_at(mm, prev))
    finally:
        mm.close()
    # A trailing split whose start held no record (blank or end of data) has no times.
    while len(out.first_ts) < len(out.splits):
        out.first_ts.append(-1)
        out.last_ts.append(-1)
    out.struct_end = pos
    out.records = records
    return out


# ---------------------------------------------------------------------------------------- rows

def _text(body: bytes) -> str | None:
    try:
        return body.decode("utf-8")
    except UnicodeDecodeError:
        return None


def java_host(host: Host) -> str:
    """``ip:port`` as Java's InetSocketAddress prints it (IPv6 as eight groups, no ``::`` compression).

    Why not ``codec.hosts.format_host``: that compresses IPv6 (``::1``), while RocketMQ's tools (and
    the golden manifests) show ``0:0:0:0:0:0:0:1``; exported data should read like RocketMQ's.
    """
    ip, port = host
    if ":" in ip:
        ip = ":".join(f"{int(g, 16):x}" for g in ipaddress.IPv6Address(ip).exploded.split(":"))
    return f"{ip}:{port}"


def message_row(store: str, m: MessageExt, msg_id: str) -> MessageRow:
    """One message as the export/search row (COLUMNS order)."""
    props = decode_properties(m.properties_string)
    body = bytes(m.body)
    return (store, m.topic, m.queue_id, m.queue_offset, m.commit_log_offset, msg_id, props.get("UNIQ_KEY"),
            props.get("TAGS"), props.get("KEYS"), m.born_timestamp, m.store_timestamp, java_host(m.born_host),
            java_host(m.store_host), m.reconsume_times, m.sys_flag, m.flag, m.store_size, props, body,
            _text(body))


def row_sort_key(row: MessageRow) -> tuple[int, str, int, int]:
    """Store time, then store, commitlog offset and queue offset (inner messages of one record)."""
    return row[10], row[0], row[4], row[3]


class _Matcher:
    """The query compiled once per task: SQL92 through the broker's compiler, the body needle as bytes."""

    __slots__ = ("sql", "needle")

    def __init__(self, query: ScanQuery) -> None:
        self.sql = compile_sql92(query.where) if query.where else None
        self.needle = query.body_contains.encode("utf-8") if query.body_contains else None

    @property
    def needs_message(self) -> bool:
        return self.sql is not None or self.needle is not None

    def matches(self, properties_string: str, body: bytes) -> bool:
        if self.sql is not None and not self.sql.is_matched_by_commit_log(decode_properties(properties_string)):
            return False
        return self.needle is None or self.needle in body


def _stats_key(by: tuple[str, ...], topic: str, queue_id: int, ts: int) -> tuple:
    key: list = []
    for dim in by:
        if dim == "topic":
            key.append(topic)
        elif dim == "queue":
            key.append(queue_id)
        else:
            width = TIME_BUCKETS_MS[dim]
            key.append(ts - ts % width)
    return tuple(key)


# ---------------------------------------------------------------------------------------- scan

def scan_range(task: tuple, query: ScanQuery, mode: str, limit: int = 0) -> RangeResult:
    """Validate and match the records of one range.

    ``task`` is ``(store_index, store_name, file_index, range_index, path, base, start, end, check_crc)``;
    ``end`` -1 means "to the record that ends the file's data" (blank, zeros or an invalid record),
    which is then checked by the codec exactly as recovery checks it.
    """
    store_index, store_name, file_index, range_index, path, base, start, end, check_crc = task
    out = RangeResult(store_index, file_index, range_index, base, start, start, STOP_INVALID, "empty file")
    mm, length = _map(path)
    if mm is None:
        return out
    mv = memoryview(mm)
    stop_at = length if end < 0 else end
    matcher = _Matcher(query)
    want_topic = query.topic
    timed = query.begin_ms is not None or query.end_ms is not None
    in_time = query.in_time
    stats_by = query.stats_by
    rows = out.rows
    stats = out.stats
    keep_rows = mode != MODE_STATS
    trim_at = 2 * limit if mode == MODE_TOP and limit > 0 else 0
    decode = decode_dispatch_fields
    crc_matches = body_crc_matches
    pos = start
    records = 0
    matched = 0
    stop = STOP_NONE
    reason = ""
    try:
        while pos < stop_at:
            fields = decode(mv, pos, length)
            if fields is not None and (not check_crc or crc_matches(mv, pos, fields[5])):
                size, topic, queue_id, queue_offset, _phy, sys_flag, ts, _prepared, props = fields
            else:
                chk = check_record(mv, pos, length, check_crc, False)
                if chk.kind != RECORD_VALID:
                    stop = STOP_BLANK if chk.kind == RECORD_BLANK else STOP_INVALID
                    reason = chk.reason
                    break
                m = chk.message
                size, topic, queue_id, queue_offset, sys_flag, ts, props = (
                    chk.size, m.topic, m.queue_id, m.queue_offset, m.sys_flag, m.store_timestamp, m.properties_string)
            records += 1
            rec_pos = pos
            pos += size
            if (want_topic is not None and topic != want_topic) or (timed and not in_time(ts)):
                continue
            inner = sys_flag & INNER_BATCH_FLAG and "INNER_NUM\x01" in props
            if not keep_rows and not inner and not matcher.needs_message:
                # statsMessages without a filter: header fields are enough.
                key = _stats_key(stats_by, topic, queue_id, ts)
                acc = stats.get(key)
                if acc is None:
                    stats[key] = [1, 1, size]
                else:
                    acc[0] += 1
                    acc[1] += 1
                    acc[2] += size
                matched += 1
                continue
            if not inner and matcher.sql is not None and not matcher.sql.is_matched_by_commit_log(
                    decode_properties(props)):
                continue  # most selective step first: no body copy for a non-matching record
            msg = decode_record(mv, rec_pos, read_body=True)
            if inner:
                inner_base = get_property(props, "INNER_BASE")
                base_q = int(inner_base) if inner_base and inner_base.lstrip("-").isdigit() else queue_offset
                try:
                    messages = unwrap_inner_batch(msg, base_q)
                except ValueError:
                    messages = [msg]  # a body that is not a packed batch: the record as stored
            else:
                messages = [msg]
            hits = 0
            for m in messages:
                if inner and not matcher.matches(m.properties_string, m.body):
                    continue
                if not inner and matcher.needle is not None and matcher.needle not in m.body:
                    continue
                hits += 1
                if keep_rows:
                    rows.append(message_row(store_name, m, create_offset_msg_id(m.store_host, m.commit_log_offset)))
            if hits == 0:
                continue
            matched += hits
            if not keep_rows:
                key = _stats_key(stats_by, topic, queue_id, ts)
                acc = stats.get(key)
                if acc is None:
                    stats[key] = [hits, 1, size]
                else:
                    acc[0] += hits
                    acc[1] += 1
                    acc[2] += size
            elif trim_at and len(rows) > trim_at:
                rows.sort(key=row_sort_key)
                del rows[limit:]
        else:
            if end < 0:  # ran into the physical end of the file without a terminator
                stop, reason = STOP_INVALID, "end of file data"
    finally:
        mv.release()
        mm.close()
    if mode == MODE_TOP and limit > 0 and len(rows) > limit:
        rows.sort(key=row_sort_key)
        del rows[limit:]
    out.end = pos
    out.records = records
    out.messages_matched = matched
    out.stop = stop
    out.stop_reason = reason
    return out
