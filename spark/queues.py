"""Per-queue stage: write (or verify, or only measure) consume queues from packed dispatch records.

Input is ``(topic, queueId)`` with ``[(range_index, packed CQ_REC bytes), ...]`` read from the
decode stage's exchange files (``exchange``); one task owns whole queues. Writing goes through the store's own ``ConsumeQueue``/``BatchConsumeQueue``
classes into a staging directory (the driver swaps it into place afterwards), which keeps the
RocketMQ placement rules (units by stored queue offset, pre-blank fillers, BCQ file roll-over) in
the store. A plain queue's units are packed in one compiled call (``hotpath.cq_units_of``) and,
when they follow each other, copied into each file in one write after the store's class placed the
file's first unit (``_put_cq_units``). Verify reads the existing files through the same classes in
read-only mode.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from broker_core.store.batch_consume_queue import BatchConsumeQueue
from broker_core.store.codec.cq_unit import CQ_STORE_UNIT_SIZE, CQ_UNIT
from broker_core.store.codec.hotpath import cq_units_of
from broker_core.store.consume_queue import ConsumeQueue
from broker_core.store.topic_config import BATCH_CQ

from .scan import CQ_REC

CQ_DIR = "consumequeue"
BCQ_DIR = "batchconsumequeue"


@dataclass(frozen=True, slots=True)
class QueueJobConf:
    """Everything a queue task needs, as plain values (shipped inside the task closure)."""

    mode: str  # "write" | "verify" | "stats"
    staging_root: str  # write: where consumequeue/ and batchconsumequeue/ are created
    store_root: str  # verify: where the existing queues are read
    cq_file_size: int
    bcq_file_size: int
    queue_types: dict[str, str]
    time_granularity_ms: int
    # verify: where the commitlog scan ended; units pointing at or past it were written after the scan
    # (a broker writing beside the verify) and are not compared (-1: no limit)
    scan_end: int = -1
    # verify: the commitlog's min offset (StoreInput.min_phy_offset); units pointing below it are of records
    # retention deleted, expired as verifyStore counts them, and are not compared
    min_phy_offset: int = 0


@dataclass(slots=True)
class Mismatch:
    """One difference between what the commitlog implies and what is on disk."""

    kind: str  # wrong-unit | missing-unit | extra-unit | unreadable-queue | missing-index-entry | extra-index-entry
    # | unreadable-index | data-after-log-end
    where: str  # "topic/queueId", "index/FILE[ entry N]" or "commitlog/FILE"
    offset: int  # queue offset (CQ/BCQ) or commitlog offset (index)
    expected: tuple | None
    actual: tuple | None
    detail: str = ""


@dataclass(slots=True)
class QueueResult:
    topic: str
    queue_id: int
    cq_type: str
    units: int
    min_offset: int
    max_offset: int
    max_phy_offset: int
    files: int
    # (bucket start ms, first queue offset stored in that bucket), ascending by bucket
    time_table: list[tuple[int, int]] = field(default_factory=list)
    mismatches: list[Mismatch] = field(default_factory=list)
    # write: why the queue was not written (a record's queue offset is not the next slot); the driver
    # then refuses the whole rebuild, so nothing is swapped in
    refused: str = ""
    # verify: existing units pointing past the scanned log end (written after the scan), not compared
    after_scan: int = 0
    # verify: existing units pointing below the commitlog's min offset (their records expired), not compared
    expired: int = 0
    # verify: the queue offset of the last existing unit compared, and where its record ends (-1: none);
    # the driver takes the newest of the ends as the dispatched frontier (see not_yet_dispatched)
    existing_last_offset: int = -1
    existing_phy_end: int = -1


def _expected_units(chunks: Iterable[tuple[int, bytes]]) -> Iterator[tuple]:
    for _range_index, blob in sorted(chunks, key=lambda c: c[0]):
        yield from CQ_REC.iter_unpack(blob)




class QueueOrderError(ValueError):
    """A record's queue offset is not the slot the queue is at: writing it would put its unit at
    another offset (the store's writer appends where the queue is, whatever the offset says)."""


def _order_problem(topic: str, queue_id: int, at: int, offset: int, phy: int) -> str:
    return (f"queue {topic}/{queue_id}: the record at commitlog offset {phy} has queue offset {offset} but the "
            f"queue is at {at}; writing it would put its unit at the wrong offset")


def first_out_of_order(recs: bytes) -> tuple[int, int, int] | None:
    """``(expected offset, record's offset, its commitlog offset)`` of the first packed CQ_REC whose queue
    offset is not the previous one's + 1 (None: all follow each other)."""
    prev = None
    for off, _base, phy, _size, _tags, _ts, _batch in CQ_REC.iter_unpack(recs):
        if prev is not None and off != prev + 1:
            return prev + 1, off, phy
        prev = off
    return None


def _put_cq_units(writer: ConsumeQueue, first_offset: int, cq_units: bytes, contiguous: bool) -> None:
    """Append packed CQ units (queue offsets ``first_offset``, +1, ...) to a queue being written.

    The first unit of every file goes through the store's ``put_message_position_info`` (it creates
    the file, fills the pre-blank of a queue that starts past 0, and places the unit); the rest of
    the file's units are copied in one write when that unit landed at the file's end, which is what
    unit-by-unit appends would leave there.

    Only for units whose records' queue offsets do follow each other (``contiguous``, as
    ``cq_units_of`` says): unit k goes to offset ``first_offset + k``, so any other input would put
    units at offsets their records do not have; it is refused (QueueOrderError).
    """
    if not contiguous:
        raise QueueOrderError(f"queue {writer.topic}/{writer.queue_id}: units from offset {first_offset} are not "
                              f"contiguous; they must be written at their records' own offsets")
    n = len(cq_units) // CQ_STORE_UNIT_SIZE
    k = 0
    while k < n:
        phy, size, tags = CQ_UNIT.unpack_from(cq_units, k * CQ_STORE_UNIT_SIZE)
        writer.put_message_position_info(phy, size, tags, first_offset + k)
        k += 1
        files = writer.file_queue.files
        mf = files[-1] if files else None
        if mf is None or mf.file_from_offset + mf.wrote_position != (first_offset + k) * CQ_STORE_UNIT_SIZE:
            continue  # not simply the next slot of the last file: unit by unit
        take = min((mf.file_size - mf.wrote_position) // CQ_STORE_UNIT_SIZE, n - k)
        if take <= 0:
            continue
        a, b = k * CQ_STORE_UNIT_SIZE, (k + take) * CQ_STORE_UNIT_SIZE
        mf.write_at(mf.wrote_position, cq_units[a:b])
        mf.wrote_position += b - a
        k += take
        phy, size, _tags = CQ_UNIT.unpack_from(cq_units, b - CQ_STORE_UNIT_SIZE)
        writer.max_physic_offset = phy + size


def process_queue(conf: QueueJobConf, topic: str, queue_id: int, chunks: Iterable[tuple[int, bytes]]) -> QueueResult:
    batch = conf.queue_types.get(topic) == BATCH_CQ
    cq_type = "BatchCQ" if batch else "SimpleCQ"
    gran = conf.time_granularity_ms
    writer = None
    if conf.mode == "write":
        if batch:
            writer = BatchConsumeQueue(topic, queue_id, Path(conf.staging_root) / BCQ_DIR, conf.bcq_file_size)
        else:
            writer = ConsumeQueue(topic, queue_id, Path(conf.staging_root) / CQ_DIR, conf.cq_file_size)
    expected: list[tuple] | None = [] if conf.mode == "verify" else None
    units = 0
    min_off = -1
    max_off = 0
    max_phy = -1
    table: list[tuple[int, int]] = []
    last_bucket = None
    seen_buckets: set[int] = set()
    plain_units = not batch and expected is None
    refused = ""
    for cq_off, base_off, phy, size, tags, ts, batch_size in () if plain_units else _expected_units(chunks):
        off = base_off if batch else cq_off
        num = batch_size if batch else 1
        if writer is not None and not refused and units and off != max_off:
            # A BCQ unit carries its offset, but the queue would still have a hole (or go back).
            refused = _order_problem(topic, queue_id, max_off, off, phy)
        if writer is not None and not refused:
            if batch:
                writer.put_message_position_info(phy, size, tags, off, ts, num)
            else:
                writer.put_message_position_info(phy, size, tags, off)
        elif expected is not None:
            expected.append((off, phy, size, tags, num, ts) if batch else (off, phy, size, tags))
        if min_off < 0:
            min_off = off
        max_off = off + num
        max_phy = phy if batch else phy + size
        units += 1
        bucket = ts - ts % gran
        if bucket != last_bucket:
            last_bucket = bucket
            if bucket not in seen_buckets:
                seen_buckets.add(bucket)
                table.append((bucket, off))
    if plain_units:
        recs = b"".join(blob for _range_index, blob in sorted(chunks, key=lambda c: c[0]))
        if recs:
            cq_units, contiguous, table = cq_units_of(recs, gran)
            units = len(recs) // CQ_REC.size
            min_off = CQ_REC.unpack_from(recs, 0)[0]
            last = CQ_REC.unpack_from(recs, len(recs) - CQ_REC.size)
            max_off, max_phy = last[0] + 1, last[2] + last[3]
            if writer is not None:
                bad = None if contiguous else first_out_of_order(recs)
                if bad is not None:
                    refused = _order_problem(topic, queue_id, *bad)
                elif contiguous:
                    _put_cq_units(writer, min_off, cq_units, True)
                else:
                    # Offsets in order, but a commitlog offset that does not grow: the store's writer
                    # decides unit by unit (each record's own offset is min_off + k here).
                    for k, (phy, size, tags) in enumerate(CQ_UNIT.iter_unpack(cq_units)):
                        writer.put_message_position_info(phy, size, tags, min_off + k)
    files = 0
    if writer is not None:
        writer.flush()
        files = writer.file_count()
        writer.close()
    table.sort()
    # A later bucket can only start at a higher offset; keep the table monotonic for lookups.
    mono: list[tuple[int, int]] = []
    for b, o in reversed(table):
        if mono and o > mono[-1][1]:
            o = mono[-1][1]
        mono.append((b, o))
    mono.reverse()
    result = QueueResult(topic, queue_id, cq_type, units, max(min_off, 0), max_off, max_phy, files, mono,
                         refused=refused)
    if expected is not None:
        result.mismatches, result.expired, result.after_scan, last = verify_queue(conf, topic, queue_id, batch,
                                                                                  expected)
        if last is not None:
            result.existing_last_offset, result.existing_phy_end = last[0], last[1] + last[2]
        qdir = Path(conf.store_root) / (BCQ_DIR if batch else CQ_DIR) / topic / str(queue_id)
        result.files = sum(1 for p in qdir.iterdir() if p.is_file()) if qdir.is_dir() else 0
    return result


def read_existing_units(store_root: Path, topic: str, queue_id: int, batch: bool, file_size: int) -> list[tuple]:
    """Units a broker would see in an existing queue (loaded and recovered read-only)."""
    if batch:
        q = BatchConsumeQueue(topic, queue_id, store_root / BCQ_DIR, file_size, read_only=True)
    else:
        q = ConsumeQueue(topic, queue_id, store_root / CQ_DIR, file_size, read_only=True)
    try:
        q.load()
        q.recover()
        if batch:
            return [(u.queue_offset, u.phy_offset, u.size, u.tags_code, u.batch_num, u.store_time)
                    for u in q.iter_all_units()]
        return [(u.queue_offset, u.phy_offset, u.size, u.tags_code) for u in q.iter_all_units()]
    finally:
        q.close()


def units_in_log(units: list[tuple], min_phy_offset: int, scan_end: int) -> tuple[list[tuple], int, int]:
    """The units pointing into ``[min_phy_offset, scan_end)`` (no end when -1), how many point below it
    (expired) and how many at or past its end (after the scan).

    Why below: retention deletes whole commitlog files, then only the CQ/BCQ files whose every unit
    points below the new min (Apache's deleteExpiredFile; the queue's min offset moves past the rest),
    so a kept file still holds units of deleted records. verifyStore counts them as expired; they are
    no extra units. Why the end: beside a running broker the queues grow while the commitlog is
    scanned; a unit of a record the scan did not reach is not an extra unit either.
    """
    kept = [u for u in units if u[1] >= min_phy_offset and (scan_end < 0 or u[1] < scan_end)]
    expired = sum(1 for u in units if u[1] < min_phy_offset)
    return kept, expired, len(units) - len(kept) - expired


def verify_queue(conf: QueueJobConf, topic: str, queue_id: int, batch: bool, expected: list[tuple]
                 ) -> tuple[list[Mismatch], int, int, tuple | None]:
    """Mismatches of one existing queue, the numbers of its units of expired records and of its units
    written after the scan (neither compared), and its last unit compared (None: none)."""
    where = f"{topic}/{queue_id}"
    try:
        actual = read_existing_units(Path(conf.store_root), topic, queue_id, batch,
                                     conf.bcq_file_size if batch else conf.cq_file_size)
    except (ValueError, OSError) as e:
        return [Mismatch("unreadable-queue", where, -1, None, None, str(e))], 0, 0, None
    actual, expired, after_scan = units_in_log(actual, conf.min_phy_offset, conf.scan_end)
    return diff_units(where, expected, actual), expired, after_scan, (actual[-1] if actual else None)


def not_yet_dispatched(results: list[QueueResult]) -> tuple[int, int]:
    """Take out of each queue's mismatches the units not written yet because dispatch had not reached their
    records, as verifyStore counts them ("not yet dispatched"), and return (their number, the frontier).

    Why: dispatch runs in commitlog order, so every record before the newest dispatched one (the
    frontier: the end of the newest unit of any queue) has its unit. A record at or after it whose unit is
    missing at its queue's tail was not dispatched yet (a kill -9 while dispatch lagged, or a broker
    writing beside the verify); the broker dispatches it on start. Before the frontier it is damage.
    """
    frontier = max((q.existing_phy_end for q in results), default=-1)
    if frontier < 0:
        return 0, frontier
    pending = 0
    for q in results:
        kept = []
        for m in q.mismatches:
            if (m.kind == "missing-unit" and m.expected is not None and m.offset > q.existing_last_offset
                    and m.expected[1] >= frontier):
                pending += 1
            else:
                kept.append(m)
        q.mismatches = kept
    return pending, frontier


def diff_units(where: str, expected: list[tuple], actual: list[tuple]) -> list[Mismatch]:
    """Merge two unit lists ordered by queue offset; every difference becomes one Mismatch."""
    out: list[Mismatch] = []
    i = j = 0
    while i < len(expected) or j < len(actual):
        e = expected[i] if i < len(expected) else None
        a = actual[j] if j < len(actual) else None
        if e is not None and a is not None and e[0] == a[0]:
            if e != a:
                out.append(Mismatch("wrong-unit", where, e[0], e, a))
            i += 1
            j += 1
        elif a is None or (e is not None and e[0] < a[0]):
            out.append(Mismatch("missing-unit", where, e[0], e, None))
            i += 1
        else:
            out.append(Mismatch("extra-unit", where, a[0], None, a))
            j += 1
    return out


def existing_queues(store_root: Path) -> list[tuple[str, int, str]]:
    """(topic, queueId, cqType) of every queue directory present in the store (for verify)."""
    out: list[tuple[str, int, str]] = []
    for sub, kind in ((CQ_DIR, "SimpleCQ"), (BCQ_DIR, "BatchCQ")):
        d = store_root / sub
        if not d.is_dir():
            continue
        for tdir in sorted(d.iterdir()):
            if not tdir.is_dir():
                continue
            for qdir in sorted(tdir.iterdir()):
                if qdir.is_dir() and qdir.name.lstrip("-").isdigit():
                    out.append((tdir.name, int(qdir.name), kind))
    return out
