"""searchMessages, exportMessages and statsMessages over commitlog files, with Spark (driver side).

Entry points: :func:`run_search`, :func:`run_export`, :func:`run_stats` (called by the mqadmin
commands in ``mqadmin/commands/search.py`` and by the ``spark-submit`` scripts ``spark/*_messages.py``).

Why straight from commitlog files: the IndexFile answers only "key or id, at most 64 per broker".
Questions like "every message of topic T with orderId=42 between 10:00 and 10:05" need a scan, and
the commitlog holds everything. The job never writes into a store (it maps files read-only and takes
no lock), so it runs beside a running broker and on a copy of any RocketMQ store directory.

Pipeline:
1. validate the query on the driver (the SQL92 text goes through the broker's parser, so a typo is
   one line naming the position, before any Spark start);
2. list each store's commitlog files; a file whose first record is stored after ``--end`` is
   skipped without reading further (store timestamps grow along the log);
3. the driver cuts the remaining files into ranges at record starts with a few small reads per
   range (``scan.plan_file``: every record names its own commitlog offset, so no pass over the data
   is needed) and prunes ranges whose first-record store times put them outside the time bounds;
4. Spark tasks scan the kept ranges (``scan.scan_range``): recovery's validity checks on every
   record, the query evaluated inside the compiled walk, BatchCQ inner batches exploded; a search
   sends back only the sort keys of each range's earliest matches, and the driver decodes the
   final answer;
5. per file, the earliest invalid record (or blank) ends that file's scan (where recovery would
   stop); ranges after it are dropped and the stop is reported, never silently skipped.
"""

from __future__ import annotations

import errno
import os
import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from broker_core.broker.filter.errors import FilterSyntaxError
from broker_core.broker.filter.sql92 import compile_sql92
from broker_core.common.java_numbers import ASCII_INTEGER_SYNTAX, JAVA_LONG_MAX
from broker_core.common.java_time import DateOutOfRange, local_wall_ms, parse_input_date
from broker_core.config_loader import ConfigError
from broker_core.store.store_config import StoreConfig
from broker_core.store.store_dir import is_store_dir, not_a_store_reason
from broker_core.store.store_lock import is_store_locked

from .failure import failure_cause
from .interrupt import InterruptGuard
from .progress import ProgressCallback, StatusPoller
from .scan import (
    STOP_BLANK,
    STOP_INVALID,
    STOP_OVERSHOOT,
    ZERO_REASON_PREFIX,
    candidate_sort_key,
    decode_rows,
    file_starts_with_record,
    last_store_timestamp,
    plan_file,
    scan_range,
)
from .search_query import (
    COLUMNS,
    KEY_DIMENSIONS,
    MODE_ROWS,
    MODE_STATS,
    MODE_TOP,
    TIME_BUCKETS_MS,
    BodyFailures,
    MessageRow,
    RangeResult,
    ScanQuery,
    row_sort_key,
)
from .session import SparkStartError, get_spark, is_local_master, stop_quietly
from .store_input import CommitLogFile, CommitLogGap, list_commitlog_files

if TYPE_CHECKING:
    from pyspark.sql import DataFrameWriter, SparkSession

T = TypeVar("T")
U = TypeVar("U")

DEFAULT_SPLIT_BYTES = 64 * 1024 * 1024
# The session a search job starts itself: the driver JVM only schedules tasks and moves small results
# (the bytes are read in Python workers), so its JIT stops at C1; C2 compiler threads otherwise take
# 5-10% of the job's CPU on 2 cores while compiling code this job barely runs.
SEARCH_SPARK_CONF = {"spark.driver.extraJavaOptions": "-XX:TieredStopAtLevel=1"}
# Spark tasks per core for the range scans. A task has a fixed cost (~20 ms of JVM and ~20 ms of
# Python worker CPU on a loaded 2-core machine, more than a 64 MiB range's scan costs per core and
# far more than a range's own mapping), so ranges are grouped into this many tasks per core, each
# with about the same number of bytes; ranges keep their own size, which is the pruning unit.
PARTITIONS_PER_CORE = 1
# ``master`` value that runs the same plan and the same range scans in this process, one after the
# other, without Spark: the single-process baseline of bench/search.py (and quick on tiny stores).
IN_PROCESS = "in-process"
DEFAULT_LIMIT = 1000
EXPORT_FORMATS = ("parquet", "jsonl")
PARTITION_COLUMNS = ("topic", "date")


def search_spark_conf() -> dict[str, str]:
    """The job's session settings; executors get the driver's TZ, as stats cut buckets in local time."""
    conf = dict(SEARCH_SPARK_CONF)
    if os.environ.get("TZ"):
        conf["spark.executorEnv.TZ"] = os.environ["TZ"]
    return conf


class SearchError(RuntimeError):
    """The query cannot run: bad SQL, bad options, missing store, existing output directory."""


class SearchUsageError(SearchError):
    """Options that cannot run together or at all (bad format, output exists, a store given twice).

    Why its own type: both front ends exit 2 for it, as for any other usage error, and 1 for a job
    that ran and failed.
    """


class StoreNotFoundError(SearchError):
    """A store directory given does not exist or holds no store (mqadmin: exit 3, as its other commands)."""


# ------------------------------------------------------------------------------------------ query

_TIME_FORMATS = ("%Y-%m-%dT%H:%M:%S.%f", "%Y-%m-%dT%H:%M:%S", "%Y-%m-%dT%H:%M",
                 "%Y-%m-%d %H:%M:%S.%f", "%Y-%m-%d %H:%M:%S", "%Y-%m-%d %H:%M", "%Y-%m-%d")


def parse_time(text: str | None, option: str) -> int | None:
    """``--begin``/``--end``: epoch millis, ``now``, mqadmin's ``yyyy-MM-dd#HH:mm:ss:SSS`` or ISO local time.

    Millis are Long.parseLong's syntax, not negative and within Java's long (the scan packs them as one;
    a larger number failed inside a Spark task with a worker traceback; ``--5`` ended in "unexpected
    failure"), as mqadmin's other time options take them. ``SSS`` is exactly three digits, as Java's
    pattern: Python's ``%f`` read ``:7`` as 700 ms, a window other than the operator's with no word said.
    A local time the daylight-saving change repeats or skips names the instant mqadmin's Java tools name
    (``local_wall_ms``), in either form."""
    if text is None or not text.strip():
        return None
    value = text.strip()
    if value.lower() == "now":
        return int(time.time() * 1000)
    if ASCII_INTEGER_SYNTAX.fullmatch(value) and int(value) >= 0:
        if int(value) > JAVA_LONG_MAX:
            raise SearchUsageError(f"bad {option} {text!r}: epoch millis outside Java's long range")
        return int(value)
    from datetime import datetime

    if "#" in value:
        try:
            stamp = parse_input_date(value)
        except DateOutOfRange:
            stamp = None
        if stamp is None:
            raise SearchUsageError(f"bad {option} {text!r}: expected yyyy-MM-dd#HH:mm:ss:SSS "
                                   "(three digits of milliseconds)")
        return stamp
    for fmt in _TIME_FORMATS:
        try:
            return local_wall_ms(datetime.strptime(value, fmt))
        except (ValueError, OverflowError, OSError):
            continue
    raise SearchUsageError(f"bad {option} {text!r}: expected epoch millis >= 0, now, yyyy-MM-dd#HH:mm:ss:SSS "
                           "or yyyy-MM-ddTHH:MM[:SS] (local time)")


def build_query(topic: str | None = None, begin_ms: int | None = None, end_ms: int | None = None,
                where: str | None = None, body_contains: str | None = None,
                stats_by: Sequence[str] | str = ("topic", "minute")) -> ScanQuery:
    """Check everything a query says before any Spark work; raises SearchError with one line."""
    if where is not None and not where.strip():
        where = None
    if where is not None:
        try:
            compile_sql92(where)
        except FilterSyntaxError as e:
            raise SearchUsageError(f"bad --where SQL92: {e}") from None
    if begin_ms is not None and end_ms is not None and begin_ms > end_ms:
        raise SearchUsageError(f"--begin {begin_ms} is after --end {end_ms}")
    by = tuple(p.strip().lower() for p in (stats_by.split(",") if isinstance(stats_by, str) else stats_by)
               if p.strip())
    times = [d for d in by if d in TIME_BUCKETS_MS]
    unknown = [d for d in by if d not in TIME_BUCKETS_MS and d not in KEY_DIMENSIONS]
    if unknown or len(times) > 1 or not by or len(set(by)) != len(by):
        raise SearchUsageError(f"bad --by {','.join(by)!r}: choose from topic,queue and one of "
                          f"{','.join(TIME_BUCKETS_MS)} (e.g. topic,minute)")
    return ScanQuery(topic or None, begin_ms, end_ms, where, body_contains or None, by)


# ------------------------------------------------------------------------------------------ results

@dataclass(frozen=True, slots=True)
class FileStop:
    """A commitlog file whose scan ended at torn or corrupt data (recovery would stop there too)."""

    store: str
    file: str
    offset: int  # global commitlog offset of the first invalid record
    reason: str


@dataclass
class ScanSummary:
    """What every mode reports: the exact scan figures, pruning, and where files' data ended early."""

    stores: list[str]
    master: str = ""
    files_total: int = 0
    files_scanned: int = 0
    files_pruned: int = 0
    ranges_scanned: int = 0
    bytes_scanned: int = 0
    records_scanned: int = 0
    messages_matched: int = 0
    bodies_not_decompressed: int = 0  # compressed bodies that could not be inflated (see warnings)
    batches_not_unwrapped: int = 0  # inner batch records shown as stored, their messages not listed (see warnings)
    stops: list[FileStop] = field(default_factory=list)
    # "store: gap" per gap between a store's commitlog files (a missing file): messages are missing
    gaps: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    phase_seconds: dict[str, float] = field(default_factory=dict)
    elapsed_seconds: float = 0.0

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class SearchResult:
    summary: ScanSummary
    query: ScanQuery
    limit: int
    messages: list[dict]  # sorted by store time; at most ``limit``

    @property
    def truncated(self) -> bool:
        return self.summary.messages_matched > len(self.messages)

    def to_dict(self) -> dict:
        return {"summary": self.summary.to_dict(), "query": asdict(self.query), "limit": self.limit,
                "truncated": self.truncated, "messages": self.messages}


@dataclass
class ExportResult:
    summary: ScanSummary
    out: str
    format: str
    partition_by: list[str]
    rows_written: int

    def to_dict(self) -> dict:
        return {"summary": self.summary.to_dict(), "out": self.out, "format": self.format,
                "partitionBy": self.partition_by, "rowsWritten": self.rows_written}


@dataclass
class StatsResult:
    summary: ScanSummary
    by: list[str]
    buckets: list[dict]  # {dims..., "messages", "records", "bytes"} sorted by time then key

    def to_dict(self) -> dict:
        return {"summary": self.summary.to_dict(), "by": self.by, "buckets": self.buckets}


def row_to_dict(row: MessageRow) -> dict:
    return dict(zip(COLUMNS, row, strict=True))


# ------------------------------------------------------------------------------------------ planning

@dataclass
class _Store:
    index: int
    root: Path
    name: str
    check_crc: bool
    files: list[CommitLogFile]
    locked: bool


def _load_store(index: int, store_dir: str | os.PathLike[str], config_file: str | os.PathLike[str] | None,
                warnings: list[str], gap_lines: list[str]) -> _Store:
    root = Path(store_dir).resolve()
    if not is_store_dir(root):
        raise StoreNotFoundError(not_a_store_reason(root))
    try:
        config = StoreConfig.load(config_file, root=root)
    except ConfigError as e:  # a missing or bad --config: one line naming the file, exit 1 (was a traceback)
        raise SearchError(str(e)) from None
    commitlog_dir = config.commit_log_dir
    if not commitlog_dir.is_dir():
        raise SearchError(f"no commitlog directory at {commitlog_dir}")
    # Without a config, the files' own size is the mapped file size (real stores are often not 1 GiB).
    size = config.mapped_file_size_commit_log
    if config_file is None:
        sizes = sorted({p.stat().st_size for p in commitlog_dir.iterdir() if p.is_file() and p.stat().st_size})
        if sizes:
            size = sizes[-1]
    gaps: list[CommitLogGap] = []
    files = list_commitlog_files(commitlog_dir, size, warnings, gaps)
    gap_lines.extend(f"{root}: {g.describe()}" for g in gaps)
    locked = is_store_locked(root)
    if locked:
        warnings.append(f"{root}: a broker holds this store; the newest file is read as it is being written")
    return _Store(index, root, str(root), config.check_crc_on_recover, files, locked)


def _file_stop_offsets(stores: list[_Store], results: list[RangeResult], summary: ScanSummary
                       ) -> dict[tuple[int, int], int]:
    """Per (store, file): the in-file position where its valid data ends (earliest invalid stop).

    A stop at zero bytes in the newest file holding data is the log's normal end; any other invalid
    stop is torn or corrupt data and is reported.
    """
    ends: dict[tuple[int, int], int] = {}
    for r in sorted(results, key=lambda r: (r.store_index, r.file_index, r.start)):
        key = (r.store_index, r.file_index)
        if key in ends:
            continue
        if r.stop == STOP_BLANK:
            ends[key] = r.end + 1  # the blank ends the file's data: a range after it holds none
            continue
        if r.stop != STOP_INVALID:
            continue
        ends[key] = r.end
        store = stores[r.store_index]
        later_data = any(file_starts_with_record(f.path) for f in store.files[r.file_index + 1:])
        f = store.files[r.file_index]
        if not later_data and r.stop_reason.startswith(ZERO_REASON_PREFIX):
            continue  # the log's normal end
        if not later_data and store.locked:
            # The newest file of a store a broker holds: a record being written right now reads as
            # torn. That is the write frontier, not damage.
            summary.warnings.append(f"{store.name}: read {Path(f.path).name} up to offset {f.base + r.end}, "
                                    f"where the broker is writing ({r.stop_reason})")
            continue
        summary.stops.append(FileStop(store.name, Path(f.path).name, f.base + r.end, r.stop_reason))
    return ends


def _valid_ranges(results: list[RangeResult], ends: dict[tuple[int, int], int]) -> list[RangeResult]:
    """Ranges that start before their file's stop (a range after an invalid record is not data)."""
    return [r for r in results if r.start < ends.get((r.store_index, r.file_index), 1 << 62)]


class _Job:
    """One search/export/stats run: stores, Spark session, progress phases and the summary."""

    def __init__(self, store_dirs: Sequence[str | os.PathLike[str]], config_file: str | os.PathLike[str] | None,
                 master: str, spark: SparkSession | None, progress: ProgressCallback | None,
                 split_bytes: int) -> None:
        if not store_dirs:
            raise SearchUsageError("no store directory given (--store DIR or --stores DIR,DIR)")
        warnings: list[str] = []
        gaps: list[str] = []
        self.stores = [_load_store(i, d, config_file, warnings, gaps) for i, d in enumerate(store_dirs)]
        names = [s.name for s in self.stores]
        dup = next((n for i, n in enumerate(names) if n in names[:i]), None)
        if dup is not None:
            raise SearchUsageError(f"the same store directory is given twice: {dup}")
        self.summary = ScanSummary(names, warnings=warnings, gaps=gaps)
        self.summary.files_total = sum(len(s.files) for s in self.stores)
        self.master = master
        self.spark = spark
        self.own_spark = spark is None
        self.progress = progress
        if split_bytes < 1:
            raise SearchUsageError(f"--split-mb must be at least 1, got {split_bytes >> 20}")
        self.split_bytes = int(split_bytes)
        self.plan_split = self.split_bytes
        self.t0 = time.monotonic()
        self.poller: StatusPoller | None = None
        self.guard: InterruptGuard | None = None
        # (store index, file index, failures) of scanned ranges and of the driver's own decoding
        self.body_failures: list[tuple[int, int, BodyFailures]] = []
        self.batch_failures: list[tuple[int, int, BodyFailures]] = []  # inner batches that did not unwrap
        self._phase = ""
        self._phase_t = 0.0

    def __enter__(self) -> _Job:
        self._phase_t = time.monotonic()
        if self.in_process:
            self.summary.master = IN_PROCESS
            return self
        # Ctrl-C: cancel the jobs and stop at the next phase, without PySpark's tracebacks (interrupt.py).
        self.guard = InterruptGuard().__enter__()
        try:
            if self.own_spark:
                try:
                    self.spark = get_spark(self.master, "rmqops-searchMessages", search_spark_conf(),
                                           interrupted=self.guard.is_requested)
                except SparkStartError as e:
                    raise SearchError(str(e)) from None
            self.sc = self.spark.sparkContext
            self.guard.attach(self.sc)
            self.summary.master = self.sc.master
            self.poller = StatusPoller(self.sc, self.progress).__enter__()
        except BaseException:
            self.guard.__exit__(None, None, None)
            raise
        return self

    @property
    def in_process(self) -> bool:
        return self.master == IN_PROCESS and self.spark is None

    def map_collect(self, fn: Callable[[T], U], items: list[T], weights: list[int] | None = None) -> list[U]:
        """``[fn(x) for x in items]``: in a few Spark tasks of about equal weight, or here for IN_PROCESS."""
        if not items:
            return []
        if self.in_process:
            return [fn(x) for x in items]
        groups = balanced_groups(items, weights or [1] * len(items),
                                 max(1, self.sc.defaultParallelism * PARTITIONS_PER_CORE))
        return self.sc.parallelize(groups, len(groups)).mapPartitions(
            lambda it: [fn(x) for group in it for x in group]).collect()

    def __exit__(self, *exc: object) -> None:
        guard = self.guard
        try:
            if self.poller is not None:
                self.poller.__exit__(*exc)
            self.phase("")
        finally:
            if self.own_spark and self.spark is not None:
                if guard is not None and guard.requested:
                    stop_quietly(self.spark)
                else:
                    self.spark.stop()
            if guard is not None:
                guard.__exit__(*exc)
        if guard is not None and guard.requested and exc[0] is not None:
            # A job cancelled by Ctrl-C fails with Spark's "cancelled" error: the command was interrupted.
            raise KeyboardInterrupt from None
        self.summary.phase_seconds.pop("", None)
        self.summary.elapsed_seconds = round(time.monotonic() - self.t0, 3)
        if not is_local_master(self.summary.master) and self.summary.master != IN_PROCESS:
            self.summary.warnings.append("cluster mode: executors read the store paths directly; "
                                         "they must be the same paths on every worker (and stats buckets "
                                         "are cut in the workers' time zone: set TZ)")

    def phase(self, name: str) -> None:
        if self.guard is not None:
            self.guard.check()  # Ctrl-C: stop between phases
        now = time.monotonic()
        if self._phase:
            self.summary.phase_seconds[self._phase] = round(now - self._phase_t, 3)
        self._phase_t = now
        self._phase = name
        if self.poller is not None:
            self.poller.set_phase(name)

    def plan(self, query: ScanQuery) -> list[tuple]:
        """Prune by time and cut the kept files into ranges; returns ``scan_range`` tasks.

        A range's records were stored between its first record's time and the next range's (the
        next file's) first record's time, so a range is skipped when that span misses the bounds.
        One process reads the files one after the other anyway: without time bounds it scans each
        file as one range.
        """
        self.phase("plan ranges")
        timed = query.begin_ms is not None or query.end_ms is not None
        split = self.split_bytes
        if not timed and not self.in_process:
            # Ranges are then only units of parallel work: a few per task suffice to balance them.
            tasks_n = self.sc.defaultParallelism * PARTITIONS_PER_CORE
            total = sum(f.length for s in self.stores for f in s.files)
            split = max(split, -(-total // (4 * tasks_n)))
        self.plan_split = split
        tasks: list[tuple] = []
        scanned_files: set[tuple[int, int]] = set()
        for s in self.stores:
            firsts = [_first_store_timestamp(f.path) for f in s.files]
            for fi, f in enumerate(s.files):
                first = firsts[fi]
                if first is None and not file_starts_with_record(f.path):
                    # No record at the start: either empty (newest pre-created file) or damage; the
                    # scan reports the latter, so only a truly empty file is skipped here.
                    if fi == len(s.files) - 1 and _starts_with_zeros(f.path):
                        continue
                if first is not None and query.end_ms is not None and first > query.end_ms:
                    continue  # stored after the window, and so is everything after it in this file
                if self.in_process and not timed:
                    tasks.append((s.index, s.name, fi, 0, f.path, f.base, 0, -1, s.check_crc))
                    scanned_files.add((s.index, fi))
                    continue
                ranges = plan_file(f.path, f.base, split)
                next_first = next((t for t in firsts[fi + 1:] if t is not None), None)
                for i, r in enumerate(ranges):
                    upper = ranges[i + 1].first_ts if i + 1 < len(ranges) else next_first
                    # A range with no readable record header is always scanned: its verdict may be damage.
                    if r.first_ts >= 0 and query.end_ms is not None and r.first_ts > query.end_ms:
                        continue
                    if r.first_ts >= 0 and query.begin_ms is not None and r.first_ts < query.begin_ms:
                        if upper is None or upper >= query.begin_ms:
                            # The range that may straddle --begin (one per file): its last record's time.
                            upper = last_store_timestamp(f.path, r.start, r.end)
                        if upper is not None and upper < query.begin_ms:
                            continue
                    scanned_files.add((s.index, fi))
                    tasks.append((s.index, s.name, fi, i, f.path, f.base, r.start, r.end, s.check_crc))
        self.summary.files_scanned = len(scanned_files)
        self.summary.files_pruned = self.summary.files_total - len(scanned_files)
        self.summary.ranges_scanned = len(tasks)
        return tasks

    def scan(self, tasks: list[tuple], fn: Callable[[tuple], RangeResult]) -> list[RangeResult]:
        """Scan the ranges; a file where a walk overshot a planned start is scanned again as one range."""
        results: list[RangeResult] = self.map_collect(fn, tasks, [self.range_bytes(t) for t in tasks])
        again = self.rescan_tasks(results, tasks)
        if again:
            redo = {(t[0], t[2]) for t in again}
            results = [r for r in results if (r.store_index, r.file_index) not in redo] + self.map_collect(fn, again)
        return results

    def range_bytes(self, task: tuple) -> int:
        """About how many bytes a range task reads (a file's last range: at most one split of data)."""
        length = self.stores[task[0]].files[task[2]].length
        return (task[7] if task[7] >= 0 else min(length, task[6] + self.plan_split)) - task[6]

    @staticmethod
    def rescan_tasks(results: list[RangeResult], tasks: list[tuple]) -> list[tuple]:
        """One whole-file task per file in which a range walked past the next range's planned start.

        That start was not a record (a message body that imitates a record header): the file's
        ranges cannot be trusted, the walk from the file start can.
        """
        files = {(r.store_index, r.file_index) for r in results if r.stop == STOP_OVERSHOOT}
        out = {}
        for t in tasks:
            if (t[0], t[2]) in files and (t[0], t[2]) not in out:
                out[(t[0], t[2])] = (t[0], t[1], t[2], -1, t[4], t[5], 0, -1, t[8])
        return list(out.values())

    def finish_ranges(self, metas: list[RangeResult]) -> tuple[dict[tuple[int, int], int], set[tuple]]:
        ends = _file_stop_offsets(self.stores, metas, self.summary)
        valid = _valid_ranges(metas, ends)
        self.summary.records_scanned = sum(r.records for r in valid)
        self.summary.messages_matched = sum(r.messages_matched for r in valid)
        self.summary.bytes_scanned = sum(r.end - r.start for r in valid)
        self.body_failures.extend((r.store_index, r.file_index, r.body_failures) for r in valid)
        self.batch_failures.extend((r.store_index, r.file_index, r.batch_failures) for r in valid)
        return ends, {(r.store_index, r.file_index, r.range_index) for r in valid}

    def report_body_failures(self) -> None:
        """One summary line each for the compressed bodies that could not be decompressed and the inner
        batches that could not be unwrapped, naming the first; the scan itself completed (exit 0)."""
        count = self._report_first(self.body_failures, "compressed bodies could not be decompressed",
                                   "--body-contains does not match them and they are shown as stored")
        self.summary.bodies_not_decompressed = count
        count = self._report_first(self.batch_failures, "inner batch records could not be unwrapped",
                                   "each is shown and counted as one message as stored; its inner messages "
                                   "are not listed")
        self.summary.batches_not_unwrapped = count

    def _report_first(self, noted: list[tuple[int, int, BodyFailures]], what: str, effect: str) -> int:
        """How many ``noted`` failures there are; a warning naming the first (file, commitlog offset)."""
        found = [f for f in noted if f[2].count]
        if not found:
            return 0
        si, fi, first = min(found, key=lambda f: (f[0], f[1], f[2].first_offset))
        count = sum(f[2].count for f in found)
        self.summary.warnings.append(
            f"{count} {what} (first at {self.stores[si].files[fi].path} offset {first.first_offset}: "
            f"{first.first_reason}); {effect}")
        return count


def balanced_groups(items: list[T], weights: list[int], n: int) -> list[list[T]]:
    """``items`` cut into at most ``n`` consecutive groups of about equal total weight."""
    total = sum(weights) or 1
    groups: list[list[T]] = [[]]
    acc = 0
    for item, w in zip(items, weights, strict=True):
        if groups[-1] and len(groups) < n and acc + w / 2 > total * len(groups) / n:
            groups.append([])
        groups[-1].append(item)
        acc += w
    return groups


def _first_store_timestamp(path: str) -> int | None:
    """Store timestamp of a file's first record, or None if it starts with no record."""
    ranges = plan_file(path, 0, 1 << 62)
    return ranges[0].first_ts if ranges and ranges[0].first_ts >= 0 else None


def _starts_with_zeros(path: str) -> bool:
    with open(path, "rb") as fh:
        return not any(fh.read(8))


def _meta(r: RangeResult) -> RangeResult:
    """The range result without its rows (what the driver needs to decide validity)."""
    return RangeResult(r.store_index, r.file_index, r.range_index, r.base, r.start, r.end, r.stop, r.stop_reason,
                       r.records, r.messages_matched, body_failures=r.body_failures,
                       batch_failures=r.batch_failures)


# ------------------------------------------------------------------------------------------ modes

def run_search(store_dirs: Sequence[str | os.PathLike[str]], query: ScanQuery, *, limit: int = DEFAULT_LIMIT,
               config_file: str | os.PathLike[str] | None = None, master: str = "local[*]", spark: SparkSession | None = None,
               progress: ProgressCallback | None = None, split_bytes: int = DEFAULT_SPLIT_BYTES) -> SearchResult:
    """Messages matching ``query`` in all ``store_dirs``, sorted by store time (earliest ``limit``; 0 = all)."""
    if limit < 0:
        raise SearchUsageError(f"--limit must be >= 0, got {limit}")
    with _Job(store_dirs, config_file, master, spark, progress, split_bytes) as job:
        tasks = job.plan(query)
        job.phase("scan records")
        results = job.scan(tasks, lambda t: scan_range(t, query, MODE_TOP, limit))
        _ends, valid = job.finish_ranges(results)
        job.phase("decode matches")
        rows = _top_rows(job.stores, [r for r in results if (r.store_index, r.file_index, r.range_index) in valid],
                         limit, job.body_failures)
        job.report_body_failures()
    return SearchResult(job.summary, query, limit, [row_to_dict(r) for r in rows])


def _top_rows(stores: list[_Store], results: list[RangeResult], limit: int,
              failures: list[tuple[int, int, BodyFailures]]) -> list[MessageRow]:
    """The earliest ``limit`` (0: all) matches over the ranges' candidates and inner-batch rows.

    Candidates are sort keys of single-message records; only the ones in the answer are decoded.
    """
    keyed: list[tuple[tuple, int, object]] = []
    for r in results:
        name = stores[r.store_index].name
        keyed.extend((candidate_sort_key(name, c), 0, (r.store_index, r.file_index, c[3])) for c in r.candidates)
        keyed.extend((row_sort_key(row), 1, row) for row in r.rows)
    keyed.sort(key=lambda k: k[0])
    if limit:
        del keyed[limit:]
    wanted: dict[tuple[int, int], list[int]] = {}
    for _key, kind, item in keyed:
        if kind == 0:
            si, fi, pos = item  # type: ignore[misc]
            wanted.setdefault((si, fi), []).append(pos)
    decoded: dict[tuple[int, int, int], MessageRow] = {}
    for (si, fi), positions in wanted.items():
        store = stores[si]
        noted = BodyFailures()
        failures.append((si, fi, noted))
        for pos, row in zip(positions, decode_rows(store.files[fi].path, store.name, positions, noted), strict=True):
            decoded[(si, fi, pos)] = row
    return [decoded[item] if kind == 0 else item for _key, kind, item in keyed]  # type: ignore[index,misc]


def run_stats(store_dirs: Sequence[str | os.PathLike[str]], query: ScanQuery, *,
              config_file: str | os.PathLike[str] | None = None, master: str = "local[*]", spark: SparkSession | None = None,
              progress: ProgressCallback | None = None, split_bytes: int = DEFAULT_SPLIT_BYTES) -> StatsResult:
    """Messages, records and commitlog bytes per bucket of ``query.stats_by`` (e.g. topic, minute).

    A record counts once with its full size in ``bytes``; ``messages`` counts BatchCQ inner messages.
    """
    with _Job(store_dirs, config_file, master, spark, progress, split_bytes) as job:
        tasks = job.plan(query)
        job.phase("scan records")
        results = job.scan(tasks, lambda t: scan_range(t, query, MODE_STATS))
        _ends, valid = job.finish_ranges(results)
        merged: dict[tuple, list[int]] = {}
        for r in results:
            if (r.store_index, r.file_index, r.range_index) not in valid:
                continue
            for key, (msgs, recs, nbytes) in r.stats.items():
                acc = merged.setdefault(key, [0, 0, 0])
                acc[0] += msgs
                acc[1] += recs
                acc[2] += nbytes
        job.report_body_failures()
    by = list(query.stats_by)
    time_dim = next((d for d in by if d in TIME_BUCKETS_MS), None)

    def order(item: tuple[tuple, list[int]]) -> tuple:
        key = item[0]
        t = key[by.index(time_dim)] if time_dim else 0
        return (t, tuple(str(k) for k in key))

    buckets = []
    for key, (msgs, recs, nbytes) in sorted(merged.items(), key=order):
        d: dict = dict(zip(by, key, strict=True))
        d.update(messages=msgs, records=recs, bytes=nbytes)
        buckets.append(d)
    return StatsResult(job.summary, by, buckets)


def _message_schema(with_date: bool):
    from pyspark.sql.types import (
        BinaryType,
        IntegerType,
        LongType,
        MapType,
        StringType,
        StructField,
        StructType,
    )

    types = {"store": StringType(), "topic": StringType(), "queueId": IntegerType(), "queueOffset": LongType(),
             "commitLogOffset": LongType(), "msgId": StringType(), "uniqKey": StringType(), "tags": StringType(),
             "keys": StringType(), "bornTimestamp": LongType(), "storeTimestamp": LongType(),
             "bornHost": StringType(), "storeHost": StringType(), "reconsumeTimes": IntegerType(),
             "sysFlag": IntegerType(), "flag": IntegerType(), "storeSize": IntegerType(),
             "properties": MapType(StringType(), StringType()), "body": BinaryType(), "body_text": StringType(),
             "body_compression": StringType()}
    fields = [StructField(c, types[c], c not in ("topic", "queueId", "queueOffset", "commitLogOffset"))
              for c in COLUMNS]
    if with_date:
        fields.append(StructField("date", StringType(), False))
    return StructType(fields)


def _utc_date(ms: int) -> str:
    return time.strftime("%Y-%m-%d", time.gmtime(ms / 1000))


def run_export(store_dirs: Sequence[str | os.PathLike[str]], query: ScanQuery, out_dir: str | os.PathLike[str], *,
               fmt: str = "parquet", partition_by: Sequence[str] | str = (),
               config_file: str | os.PathLike[str] | None = None, master: str = "local[*]", spark: SparkSession | None = None,
               progress: ProgressCallback | None = None, split_bytes: int = DEFAULT_SPLIT_BYTES) -> ExportResult:
    """Write every matching message to ``out_dir`` (Parquet or JSON lines) with Spark's writer.

    Atomic: Spark writes into a staging directory beside ``out_dir``, which is renamed to ``out_dir``
    only when the job succeeded; on failure the staging directory is removed and nothing else changed.
    BatchCQ inner batches are one row per inner message. ``date`` (UTC, of the store timestamp) is
    added as a column when partitioning by it.
    """
    fmt = fmt.lower()
    if master == IN_PROCESS and spark is None:
        raise SearchUsageError("exportMessages needs Spark's writer: give --master local[*] or spark://host:port")
    if fmt not in EXPORT_FORMATS:
        raise SearchUsageError(f"bad --format {fmt!r}: choose parquet or jsonl")
    parts = [p.strip() for p in (partition_by.split(",") if isinstance(partition_by, str) else partition_by)
             if p.strip()]
    bad = [p for p in parts if p not in PARTITION_COLUMNS]
    if bad or len(set(parts)) != len(parts):
        raise SearchUsageError(f"bad --partition-by {','.join(parts)!r}: choose from topic,date")
    out = Path(out_dir).resolve()
    if out.exists():
        raise SearchUsageError(f"output directory {out} already exists; choose a new --out")
    check_out_parent(out)
    staging = out.parent / f".{out.name}.staging-{os.getpid()}-{int(time.time() * 1000)}"
    with_date = "date" in parts
    rows_written = 0
    try:
        with _Job(store_dirs, config_file, master, spark, progress, split_bytes) as job:
            tasks = job.plan(query)
            job.phase("scan records")
            from pyspark import StorageLevel

            scanned = None
            metas: list[RangeResult] = []
            persisted = []
            if tasks:
                scanned = (job.sc.parallelize(tasks, len(tasks))
                           .map(lambda t: scan_range(t, query, MODE_ROWS))
                           .persist(StorageLevel.MEMORY_AND_DISK))
                persisted.append(scanned)
                metas = scanned.map(_meta).collect()
                again = job.rescan_tasks(metas, tasks)
                if again:  # files where a planned range start was not a record: scanned whole
                    redo = {(t[0], t[2]) for t in again}
                    rescanned = (job.sc.parallelize(again, len(again))
                                 .map(lambda t: scan_range(t, query, MODE_ROWS))
                                 .persist(StorageLevel.MEMORY_AND_DISK))
                    persisted.append(rescanned)
                    metas = [m for m in metas if (m.store_index, m.file_index) not in redo] + \
                        rescanned.map(_meta).collect()
                    scanned = scanned.filter(lambda r: (r.store_index, r.file_index) not in redo).union(rescanned)
            _ends, valid = job.finish_ranges(metas)
            job.phase("write " + fmt)
            schema = _message_schema(with_date)
            if scanned is not None:
                rows = scanned.filter(lambda r: (r.store_index, r.file_index, r.range_index) in valid) \
                    .flatMap(lambda r: r.rows)
                if with_date:
                    rows = rows.map(lambda row: row + (_utc_date(row[10]),))
            else:
                rows = job.sc.emptyRDD()
            df = job.spark.createDataFrame(rows, schema, verifySchema=False)
            writer = df.write.mode("errorifexists")
            if parts:
                writer = writer.partitionBy(*parts)
            _write_export(job.spark, writer, fmt, staging, out)
            rows_written = job.summary.messages_matched
            job.report_body_failures()
            for rdd in persisted:
                rdd.unpersist()
        os.rename(staging, out)
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)
    return ExportResult(job.summary, str(out), fmt, parts, rows_written)


FULL_DISK_PROBE_BYTES = 64 << 10  # written beside --out after a failed write to learn whether the disk is full


def _probe_write(parent: Path, nbytes: int) -> OSError | None:
    """Create (and write ``nbytes`` to) a probe file in ``parent``, then remove it; the error, if any."""
    probe = parent / f".rmqops-export-probe-{os.getpid()}-{time.monotonic_ns()}"
    try:
        fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except OSError as e:
        return e
    try:
        written = 0
        while written < nbytes:
            written += os.write(fd, bytes(min(nbytes - written, 1 << 16)))
        return None
    except OSError as e:
        return e
    finally:
        os.close(fd)
        probe.unlink(missing_ok=True)


def check_out_parent(out: Path) -> None:
    """``--out``'s parent exists, is a directory and takes a new file, before any Spark work.

    Why a probe file: only creating one tells (read-only mounts, /proc, permissions, ACLs); Spark
    found out after minutes, as Java stacks and a Python BrokenPipeError. One line, the real errno.
    """
    parent = out.parent
    if not parent.exists():
        raise SearchError(f"cannot write the export to {out}: {parent}: {os.strerror(errno.ENOENT)}")
    if not parent.is_dir():
        raise SearchError(f"cannot write the export to {out}: {parent}: {os.strerror(errno.ENOTDIR)}")
    failed = _probe_write(parent, 0)
    if failed is not None:
        raise SearchError(f"cannot write the export to {out}: {parent}: "
                          f"{os.strerror(failed.errno) if failed.errno else failed}")


def _write_export(spark: SparkSession, writer: DataFrameWriter, fmt: str, staging: Path, out: Path) -> None:
    """Spark's writer into ``staging``. A failed write (a full disk, a directory it may not write) is
    the SearchError of its Java cause: Spark's own answer was the py4j error with every stack of the
    job in one line, after its task failures logged with their stacks, for one "No space left on
    device". Its log is quiet while the write runs, as every failure of it is told here."""
    spark.sparkContext.setLogLevel("FATAL")
    try:
        if fmt == "parquet":
            writer.parquet(str(staging))
        else:
            # every column in every line, null ones too (Spark leaves them out by default): a reader
            # of the export (spark.read.json, jq) must get the documented columns, not per-row keys
            writer.option("compression", "none").option("ignoreNullFields", "false").json(str(staging))
    except Exception as e:  # noqa: BLE001 - py4j and pyspark raise several types for one failed job
        cause = failure_cause(e)
        if "No space left" not in cause:
            # Hadoop says "Mkdirs failed to create <attempt dir>" for a full disk: ask the disk itself.
            probe = _probe_write(out.parent, FULL_DISK_PROBE_BYTES)
            if probe is not None and probe.errno == errno.ENOSPC:
                cause = os.strerror(errno.ENOSPC)
        raise SearchError(f"cannot write the export to {out}: {cause}; nothing was written") from None
    finally:
        spark.sparkContext.setLogLevel("ERROR")


# ------------------------------------------------------------------------------------------ output

def render_summary(summary: ScanSummary, title: str):
    """The scan figures as a rich Table (files scanned/pruned, records, matches, stops)."""
    from rich.table import Table

    t = Table(title=title, show_header=True, header_style="bold")
    t.add_column("item")
    t.add_column("value", justify="right")
    t.add_row("stores", ", ".join(summary.stores))
    t.add_row("master", summary.master)
    t.add_row("commitlog files", str(summary.files_total))
    t.add_row("files scanned", str(summary.files_scanned))
    t.add_row("files pruned by time", str(summary.files_pruned))
    t.add_row("records scanned", f"{summary.records_scanned:,}")
    t.add_row("messages matched", f"{summary.messages_matched:,}")
    t.add_row("MB scanned", f"{summary.bytes_scanned / 1e6:,.1f}")
    t.add_row("time (s)", f"{summary.elapsed_seconds:.2f}")
    for g in summary.gaps:
        t.add_row("GAP", g)
    for s in summary.stops:
        t.add_row("STOPPED", f"{s.store}/commitlog/{s.file} at offset {s.offset}: {s.reason}")
    for w in summary.warnings:
        t.add_row("warning", w)
    return t
