"""Retention: delete expired commitlog files, then the consume queue and index files they orphan.

Why this module exists: a broker keeps writing forever, so old commitlog files must go, exactly when
RocketMQ's CleanCommitLogService / CleanConsumeQueueService would remove them (spec §12 defaults):

* A commitlog file is *expired* when its last-modified time is older than ``fileReservedTime`` hours.
* Expired files are deleted only at the hours listed in ``deleteWhen`` (``"04"``, ``"04;16"``, local
  time), or at any hour when the disk holding the commitlog is fuller than ``diskMaxUsedSpaceRatio``,
  or when an operator forces a run (``mqadmin deleteExpiredCommitLog``): that run and the next 19
  periodic ones (Java's manualDeleteFileSeveralTimes, 20), so a forced clean is not one batch only.
* Above ``diskSpaceCleanForciblyRatio`` files are deleted even if not expired (Java's cleanImmediately),
  at any hour, whatever ``diskMaxUsedSpaceRatio`` says (an operator who raised it to 95 still gets
  space back from 85 %, as Java's isSpaceToDelete gives) -- unless ``cleanFileForciblyEnable`` is
  false: then only expired files go, however full the disk (Java's cleanAtOnce needs both).
* Files go oldest first, at most ``deleteFileBatchMax`` per run, and never the file being written or
  a file the dispatcher has not finished reading; deletion stops at the first file that is kept.
* Afterwards consume queue files whose last unit points below the new commitlog min offset are
  deleted and min offsets corrected (spec §5.4, §6.2), and index files whose endPhyOffset is below
  it are deleted (spec §7.5).
* What a run made unreadable is reported per queue (``DroppedQueueRange``: the queue offsets between
  its min offset before and after) in the report and to every ``RetentionListener``. The store
  knows nothing of consumer offsets: the Broker, a listener, decides whether anyone had not yet
  consumed them and says so.

The clock, the file mtimes and the disk usage are injectable so tests need neither sleeping nor a
full disk.
"""

from __future__ import annotations

import logging
import os
import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:  # pragma: no cover
    from .message_store import MessageStore

log = logging.getLogger("rmqops.store")

HOUR_MS = 3_600_000

# Runs that count as manual after ``mqadmin deleteExpiredCommitLog`` (its own run included): Java's
# CleanCommitLogService.MAX_MANUAL_DELETE_FILE_TIMES.
MAX_MANUAL_DELETE_FILE_TIMES = 20

DiskUsage = Callable[[Path], float]
MtimeOf = Callable[[Path], int]


def disk_usage_ratio(path: Path) -> float:
    """Used fraction (0..1) of the file system holding ``path``; -1 when it cannot be read."""
    try:
        du = shutil.disk_usage(path)
    except OSError:
        return -1.0
    return du.used / du.total if du.total else -1.0


def file_mtime_ms(path: Path) -> int:
    return int(os.stat(path).st_mtime * 1000)


def parse_delete_when(spec: str) -> set[int]:
    """``deleteWhen`` hours ("04", "04;16"); tokens that are not hours are ignored as Java ignores them."""
    hours = set()
    for token in spec.split(";"):
        token = token.strip()
        if token.isdigit() and 0 <= int(token) <= 23:
            hours.add(int(token))
    return hours


def _clamp(value: int, lo: int, hi: int) -> int:
    return max(lo, min(hi, value))


@dataclass(frozen=True, slots=True)
class DroppedQueueRange:
    """Queue offsets ``[from_offset, to_offset)`` of one queue whose messages a retention run deleted."""

    topic: str
    queue_id: int
    from_offset: int
    to_offset: int


class RetentionListener(Protocol):
    """Told after a retention run that made messages unreadable (called on the store's flush thread)."""

    def __call__(self, trigger: str, dropped: Sequence[DroppedQueueRange]) -> None: ...


@dataclass(slots=True)
class RetentionReport:
    """What one retention run did; ``trigger`` is "" when nothing was due."""

    trigger: str = ""
    disk_usage_ratio: float = -1.0
    clean_at_once: bool = False
    deleted_commit_log_files: list[str] = field(default_factory=list)
    deleted_consume_queue_files: int = 0
    deleted_index_files: int = 0
    commit_log_min_offset: int = 0
    dropped: list[DroppedQueueRange] = field(default_factory=list)  # per queue, what became unreadable

    @property
    def deleted_any(self) -> bool:
        return bool(self.deleted_commit_log_files or self.deleted_consume_queue_files or self.deleted_index_files)


class RetentionService:
    """CleanCommitLogService + CleanConsumeQueueService for one MessageStore."""

    def __init__(self, store: MessageStore, disk_usage: DiskUsage | None = None,
                 mtime_of: MtimeOf | None = None) -> None:
        self.store = store
        self.disk_usage = disk_usage or disk_usage_ratio
        self.mtime_of = mtime_of or file_mtime_ms
        self.listeners: list[RetentionListener] = []
        self.manual_runs_left = 0  # periodic runs still to count as manual (a forced run sets it)

    def is_time_to_delete(self, now_ms: int) -> bool:
        hour = time.localtime(now_ms / 1000).tm_hour
        return hour in parse_delete_when(self.store.config.delete_when)

    def run(self, force: bool = False) -> RetentionReport:
        cfg = self.store.config
        cl = self.store.commit_log
        now = self.store.clock()
        ratio = self.disk_usage(cl.file_queue.directory if cl.file_queue.directory.exists() else self.store.root)
        max_used = _clamp(cfg.disk_max_used_space_ratio, 10, 95) / 100
        forcibly = _clamp(cfg.disk_space_clean_forcibly_ratio, 30, 85) / 100
        report = RetentionReport(disk_usage_ratio=ratio, commit_log_min_offset=cl.min_offset())
        manual = force or self.manual_runs_left > 0
        self.manual_runs_left = MAX_MANUAL_DELETE_FILE_TIMES - 1 if force else max(0, self.manual_runs_left - 1)
        if force:
            report.trigger = "manual"
        elif ratio < 0 or ratio > max_used or ratio > forcibly:
            report.trigger = "disk"
        elif manual:
            report.trigger = "manual"
        elif self.is_time_to_delete(now):
            report.trigger = "time"
        else:
            return report
        # Java's cleanAtOnce: unexpired files too, only while cleanFileForciblyEnable (read at every run, so
        # updateBrokerConfig changes it live); with it false an operator keeps every unexpired message
        clean_immediately = ratio > forcibly
        report.clean_at_once = cfg.clean_file_forcibly_enable and clean_immediately
        if report.trigger == "disk":
            limit = ("diskSpaceCleanForciblyRatio", forcibly) if clean_immediately else \
                ("diskMaxUsedSpaceRatio", max_used)
            log.warning("disk usage %.1f%% of %s exceeds %s %d%%; deleting %s commitlog files",
                        ratio * 100, cl.file_queue.directory, limit[0], round(limit[1] * 100),
                        "the oldest" if report.clean_at_once else
                        "only the expired (cleanFileForciblyEnable=false)" if clean_immediately else "expired")
        min_before = self._queue_min_offsets()
        report.deleted_commit_log_files = self._delete_commit_log_files(now, report.clean_at_once)
        min_phy = cl.min_offset()
        report.commit_log_min_offset = min_phy
        if report.deleted_commit_log_files:
            report.deleted_consume_queue_files, report.deleted_index_files = self._delete_orphans(min_phy)
            log.info("retention (%s): deleted commitlog files %s, %d consume queue file(s), %d index file(s); "
                     "commitlog now starts at %d", report.trigger, ", ".join(report.deleted_commit_log_files),
                     report.deleted_consume_queue_files, report.deleted_index_files, min_phy)
            min_after = self._queue_min_offsets()
            report.dropped = [DroppedQueueRange(topic, qid, before, min_after[(topic, qid)])
                              for (topic, qid), before in sorted(min_before.items())
                              if min_after.get((topic, qid), before) > before]
            if report.dropped:
                for listener in list(self.listeners):
                    try:
                        listener(report.trigger, report.dropped)
                    except Exception:  # a listener's failure must not stop retention
                        log.exception("retention listener failed")
        return report

    def _queue_min_offsets(self) -> dict[tuple[str, int], int]:
        with self.store._cq_guard:
            queues = list(self.store.consume_queues.items())
        return {key: cq.get_min_offset_in_queue() for key, cq in queues}

    def _delete_commit_log_files(self, now: int, clean_at_once: bool) -> list[str]:
        cfg = self.store.config
        cl = self.store.commit_log
        reserved_ms = cfg.file_reserved_time * HOUR_MS
        dispatched_to = self.store.reput.reput_from_offset if self.store.reput is not None else cl.max_offset()
        deleted: list[str] = []
        with cl.put_lock:
            files = cl.file_queue.files
            while len(files) > 1 and len(deleted) < cfg.delete_file_batch_max:
                mf = files[0]
                if mf.file_from_offset + cl.file_size > dispatched_to:
                    break  # the dispatcher still has to read this file
                expired = now >= self.mtime_of(mf.path) + reserved_ms
                if not (expired or clean_at_once):
                    break
                deleted.append(mf.path.name)
                cl.file_queue.delete_first_file()
        return deleted

    def _delete_orphans(self, min_phy: int) -> tuple[int, int]:
        store = self.store
        cq_deleted = store.delete_expired_queue_files(min_phy)
        idx_deleted = 0
        if store.index_service is not None:
            idx_deleted = store.index_service.delete_expired_file(min_phy)
        return cq_deleted, idx_deleted
