"""What searchMessages / exportMessages / statsMessages evaluate per message: query, rows, buckets.

No byte walking here (that is ``scan.py``, shared with the rebuild): the query as plain values, the
compiled form a task evaluates (``Matcher``: the broker's SQL92 filter, judged once per distinct
values of the properties it reads, and the body needle), the export/search row of one message, and
the statsMessages bucket key. Plain values in and out, so the same code runs in a Spark task and in
the single-process scan the benchmark compares against.
"""

from __future__ import annotations

import dataclasses
import ipaddress
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from datetime import time as day_time
from functools import lru_cache

from broker_core.broker.filter.sql92 import compile_sql92
from broker_core.broker.filter.sql92.nodes import Node, Property
from broker_core.store.codec.compression import BodyDecompressError, compression_type, decompressed_body
from broker_core.store.codec.hosts import Host
from broker_core.store.codec.message import MessageExt
from broker_core.store.codec.properties import decode_properties
from broker_core.store.codec.sys_flag import COMPRESSED_FLAG

MODE_ROWS = "rows"  # keep every matching message (export)
MODE_TOP = "top"  # keep the earliest ``limit`` matching messages (search)
MODE_STATS = "stats"  # aggregate counts and bytes per bucket (statsMessages)

# Export/search columns, in order (``MessageRow`` tuples follow it).
COLUMNS = ("store", "topic", "queueId", "queueOffset", "commitLogOffset", "msgId", "uniqKey", "tags", "keys",
           "bornTimestamp", "storeTimestamp", "bornHost", "storeHost", "reconsumeTimes", "sysFlag", "flag",
           "storeSize", "properties", "body", "body_text", "body_compression")
MessageRow = tuple  # (store, topic, queueId, ..., body_text, body_compression) in COLUMNS order

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
class BodyFailures:
    """Bodies that could not be read as the producer sent them: how many, and the first by commitlog offset.

    Why kept: a compressed body that does not decompress is never matched by --body-contains and is
    shown as stored; an inner batch whose body does not unwrap is shown as its one stored record, its
    inner messages missing. The summary says so instead of messages silently missing or showing bytes
    as if they were the text.
    """

    count: int = 0
    first_offset: int = -1  # commitlog offset of the earliest
    first_reason: str = ""

    def add(self, offset: int, reason: str) -> None:
        self.count += 1
        if self.first_offset < 0 or offset < self.first_offset:
            self.first_offset, self.first_reason = offset, reason


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
    # search: (storeTimestamp, commitLogOffset, queueOffset, file position) of the earliest kept
    # single-message records, not decoded (the driver decodes the final answer)
    candidates: list[tuple[int, int, int, int]] = field(default_factory=list)
    body_failures: BodyFailures = field(default_factory=BodyFailures)
    batch_failures: BodyFailures = field(default_factory=BodyFailures)  # inner batches that did not unwrap


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


def inflated(body: bytes, sys_flag: int, offset: int, failures: BodyFailures | None) -> bytes | None:
    """The body as the producer sent it (a compressed one decompressed); None, noted in ``failures`` at
    commitlog ``offset``, for one that cannot be (damaged, or a compression type Apache has not)."""
    try:
        return decompressed_body(body, sys_flag)
    except BodyDecompressError as e:
        if failures is not None:
            failures.add(offset, str(e))
        return None


def message_body(m: MessageExt, failures: BodyFailures | None = None) -> tuple[bytes, bool]:
    """(the body as the producer sent it, whether that worked): one that cannot be stays as stored."""
    body = inflated(m.body, m.sys_flag, m.commit_log_offset, failures)
    return (body, True) if body is not None else (bytes(m.body), False)


def message_row(store: str, m: MessageExt, msg_id: str, failures: BodyFailures | None = None) -> MessageRow:
    """One message as the export/search row (COLUMNS order): the body decompressed when stored
    compressed (``body_compression`` names how it was stored), no text for one that did not inflate."""
    props = decode_properties(m.properties_string)
    body, ok = message_body(m, failures)
    return (store, m.topic, m.queue_id, m.queue_offset, m.commit_log_offset, msg_id, props.get("UNIQ_KEY"),
            props.get("TAGS"), props.get("KEYS"), m.born_timestamp, m.store_timestamp, java_host(m.born_host),
            java_host(m.store_host), m.reconsume_times, m.sys_flag, m.flag, m.store_size, props, body,
            _text(body) if ok else None, compression_type(m.sys_flag))


def row_sort_key(row: MessageRow) -> tuple[int, str, int, int]:
    """Store time, then store, commitlog offset and queue offset (inner messages of one record)."""
    return row[10], row[0], row[4], row[3]


def property_names(tree: Node) -> tuple[str, ...]:
    """Names of the properties a parsed selector reads, sorted (its verdict depends on nothing else)."""
    names: set[str] = set()
    stack: list[object] = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, Property):
            names.add(node.name)
        elif dataclasses.is_dataclass(node):
            stack.extend(getattr(node, f.name) for f in dataclasses.fields(node))
        elif isinstance(node, tuple):
            stack.extend(node)
    return tuple(sorted(names))


class Matcher:
    """The query compiled once per task: SQL92 through the broker's compiler, the body needle as bytes.

    Why ``names`` and ``judge``: a selector's verdict is a function of the values of the properties
    it reads, so the compiled scan (``hotpath.select_records``) extracts just those values from each
    record's properties and asks ``judge`` once per distinct combination; the other properties and
    the record never become Python objects. A selector that reads no property has one verdict for
    every message (``constant``).
    """

    __slots__ = ("sql", "needle", "names", "constant", "verdicts")

    def __init__(self, query: ScanQuery) -> None:
        self.sql = compile_sql92(query.where) if query.where else None
        self.needle = query.body_contains.encode("utf-8") if query.body_contains else None
        self.names = property_names(self.sql.tree) if self.sql is not None else ()
        self.constant: bool | None = None
        if self.sql is not None and not self.names:
            self.constant = self.sql.is_matched_by_commit_log({})
        # Verdicts by property values, kept for every range this process scans with this query.
        self.verdicts: dict = {}

    @staticmethod
    @lru_cache(maxsize=8)
    def of(query: ScanQuery) -> Matcher:
        """The process's matcher for ``query``: a Spark worker scans many ranges with the same one."""
        return Matcher(query)

    @property
    def needs_message(self) -> bool:
        return self.sql is not None or self.needle is not None

    def judge(self, values: str | None | tuple[str | None, ...]) -> bool:
        """The SQL verdict for the values of ``names`` (one value for one name, else a tuple)."""
        assert self.sql is not None
        if len(self.names) == 1:
            values = (values,)  # type: ignore[assignment]
        props = {n: v for n, v in zip(self.names, values, strict=True) if v is not None}  # type: ignore[arg-type]
        return self.sql.is_matched_by_commit_log(props)

    def matches(self, properties_string: str, body: bytes, sys_flag: int = 0, offset: int = -1,
                failures: BodyFailures | None = None) -> bool:
        """SQL over the properties, then the needle in the body as sent (a compressed one inflated;
        one that does not inflate never matches and is noted in ``failures`` at ``offset``)."""
        if self.sql is not None and not self.sql.is_matched_by_commit_log(decode_properties(properties_string)):
            return False
        if self.needle is None:
            return True
        if sys_flag & COMPRESSED_FLAG:
            inflated_body = inflated(body, sys_flag, offset, failures)
            if inflated_body is None:
                return False
            body = inflated_body
        return self.needle in body


def _epoch_ms(t: datetime) -> int:
    return int(t.timestamp()) * 1000


def local_bucket_span(dim: str, ts: int) -> tuple[int, int]:
    """``[start, end)`` in epoch ms of the local-time minute/hour/day holding store time ``ts``.

    Why local and from the local datetime: the buckets are labelled in local time (as --begin/--end
    are read), so they must be cut there too; a UTC cut put 10:00 IST's hour at 10:30. A day is 23
    or 25 hours across a DST change, and a fall-back hour occurs twice (``fold``): a fixed offset
    gets both wrong. A time the platform cannot convert is cut in UTC.
    """
    width = TIME_BUCKETS_MS[dim]
    try:
        t = datetime.fromtimestamp(ts // 1000)  # sets fold for the second pass of a repeated hour
        if dim == "day":
            first = t.replace(hour=0, minute=0, second=0, microsecond=0, fold=0)
            return _epoch_ms(first), _epoch_ms(datetime.combine(first.date() + timedelta(days=1), day_time()))
        first = t.replace(second=0, microsecond=0) if dim == "minute" else t.replace(minute=0, second=0,
                                                                                      microsecond=0)
        start = _epoch_ms(first)
        # the next local boundary, but never past one width: a repeated hour's first pass ends after 1 h
        return start, min(_epoch_ms(first.replace(fold=0) + timedelta(milliseconds=width)), start + width)
    except (OverflowError, OSError, ValueError):
        start = ts - ts % width
        return start, start + width


class LocalBuckets:
    """Start of the local-time bucket of a store time, the last bucket's span cached.

    Why cached: stats bucket every record, and consecutive records mostly share a bucket; a
    datetime conversion per record would cost more than the record's decoding.
    """

    __slots__ = ("dim", "start", "end")

    def __init__(self, dim: str) -> None:
        self.dim = dim
        self.start = 0
        self.end = 0

    def of(self, ts: int) -> int:
        if not self.start <= ts < self.end:
            self.start, self.end = local_bucket_span(self.dim, ts)
        return self.start


def stats_key(by: tuple[str, ...], topic: str, queue_id: int, ts: int, buckets: LocalBuckets | None = None) -> tuple:
    """The bucket key of one record: topic, queue and the local-time bucket start, in ``by`` order."""
    key: list = []
    for dim in by:
        if dim == "topic":
            key.append(topic)
        elif dim == "queue":
            key.append(queue_id)
        else:
            key.append((buckets if buckets is not None and buckets.dim == dim else LocalBuckets(dim)).of(ts))
    return tuple(key)
