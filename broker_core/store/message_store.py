"""MessageStore: the facade over commitlog, consume queues, index, checkpoint and recovery.

This is what the Broker, the admin tools and the tests talk to. It owns the store directory's
layout (spec §4.3), takes the ``lock`` file unless opened read-only, recovers on open (normal or
abnormal, spec §9.5/§9.6), runs the reput (dispatch) and flush services, and answers reads by queue
offset, by physical offset, by key and by time. Read-only opening computes the same valid tail in
memory and writes nothing, so it is safe beside a running broker, even a Java one.
"""

from __future__ import annotations

import functools
import logging
import os
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from time import monotonic as _monotonic
from typing import Protocol

from ..common.round_failures import RoundFailures, is_operating_condition
from .batch_consume_queue import BatchConsumeQueue
from .buffered_put import put_inner_batch_buffered
from .checkpoint import StoreCheckpoint
from .codec.batch import iter_batch_raw
from .codec.cq_ext import MAX_ADDR, CqExtUnit
from .codec.cq_unit import BCQ_MAX_BATCH_SIZE, BCQ_STORE_UNIT_SIZE, CQ_STORE_UNIT_SIZE
from .codec.hotpath import first_record_stored_after, tags_code
from .codec.message import (
    RECORD_BLANK,
    RECORD_VALID,
    MessageExt,
    MessageInner,
    body_crc_matches,
    check_record,
    decode_dispatch_fields,
)
from .codec.salvage import iter_intact_records
from .codec.sys_flag import (
    INNER_BATCH_FLAG,
    NEED_UNWRAP_FLAG,
    TRANSACTION_PREPARED_TYPE,
    is_dispatched_to_queue,
)
from .commit_log import (
    PUT_OK,
    AppendedRecord,
    CommitLog,
    PutMessageResult,
    PutMessageStatus,
    disk_refusal,
    now_ms,
)
from .consume_queue import BOUNDARY_LOWER, ConsumeQueue, ConsumeQueueBase, CqUnit
from .consume_queue_ext import ConsumeQueueExt, FilterBitMapHook
from .dispatch import (
    SCHEDULE_TOPIC,
    DispatchRequest,
    build_dispatch_request,
    dispatch_request_of,
    dispatch_request_of_appended,
    inner_batch_position,
)
from .errors import CommitLogMissingError, CorruptDataError
from .fast_put import CHEAP_KEYS, put_fast, put_inner_batch_fast
from .index_service import IndexService
from .lost_found import LOST_FOUND_DIR, save_aside
from .mapped_file import data_end, first_data_file_size, is_zero, offset_to_file_name
from .retention import RetentionReport, RetentionService
from .store_config import StoreConfig, parse_delay_levels
from .store_lock import StoreLock, is_store_locked
from .topic_config import BATCH_CQ, SIMPLE_CQ, TopicConfigTable

log = logging.getLogger("rmqops.store")

# Read-only recovery beside a live writer: how often an unreadable tail is read again, and the pause.
_LIVE_RETRIES = 5
_LIVE_PAUSE_S = 0.002

CONSUME_QUEUE_DIR = "consumequeue"
CONSUME_QUEUE_EXT_DIR = "consumequeue_ext"  # StorePathConfigHelper.getStorePathConsumeQueueExt
DISK_CHECK_INTERVAL_S = 0.5
# DefaultMessageStore.MAX_PULL_MSG_SIZE: the most bytes one read hands out whatever the caller asks.
MAX_PULL_MSG_SIZE = 128 * 1024 * 1024
BATCH_CONSUME_QUEUE_DIR = "batchconsumequeue"


class GetMessageStatus(StrEnum):
    FOUND = "FOUND"
    NO_MATCHED_MESSAGE = "NO_MATCHED_MESSAGE"
    MESSAGE_WAS_REMOVING = "MESSAGE_WAS_REMOVING"
    OFFSET_FOUND_NULL = "OFFSET_FOUND_NULL"
    OFFSET_OVERFLOW_BADLY = "OFFSET_OVERFLOW_BADLY"
    OFFSET_OVERFLOW_ONE = "OFFSET_OVERFLOW_ONE"
    OFFSET_TOO_SMALL = "OFFSET_TOO_SMALL"
    NO_MATCHED_LOGIC_QUEUE = "NO_MATCHED_LOGIC_QUEUE"
    NO_MESSAGE_IN_QUEUE = "NO_MESSAGE_IN_QUEUE"


@dataclass(slots=True)
class GetMessageResult:
    status: GetMessageStatus
    next_begin_offset: int
    min_offset: int
    max_offset: int
    messages: list[MessageExt] = field(default_factory=list)
    # Messages read from the commitlog and then refused by the filter (Java's filterMessageCount): what
    # the consume-queue step (tags hash, SQL92 bitmap) could not rule out without reading them.
    filter_message_count: int = 0
    # The stored size of the units handed out (Java's bufferTotalSize): what the batch limits count.
    buffer_total_size: int = 0


@dataclass(slots=True)
class RecoveryReport:
    abnormal: bool
    start_offset: int
    process_offset: int
    truncated_bytes: int
    stop_reason: str
    dispatched: int
    discarded_records: int = 0  # record starts in the discarded tail (the broken one included)
    intact_records: int = 0  # of them, records that validate (kept in lost+found/)
    same_boot: bool = False  # abnormal, but the kernel did not restart: no page-cache write was lost


class MessageFilterLike(Protocol):
    """What get_messages needs from a filter (the broker's tag/SQL filters provide it).

    ``tags_code`` is None where the unit's is unknown (an ext address without a readable ext unit);
    ``cq_ext_unit`` is the unit's ConsumeQueueExt unit (store time, filter bitmap) when it has one.
    """

    def is_matched_by_consume_queue(self, tags_code: int | None, cq_ext_unit: CqExtUnit | None = None) -> bool: ...

    def is_matched_by_commit_log(self, properties: dict[str, str]) -> bool: ...


class RecordFilter(Protocol):
    """Whether a commitlog record may reach its consume queue and the index."""

    def __call__(self, topic: str, commit_log_offset: int) -> bool: ...


class MessageStore:
    def __init__(self, root: str | Path, config: StoreConfig | None = None, clock: Callable[[], int] = now_ms,
                 read_only: bool = False) -> None:
        self.root = Path(root)
        self.config = config or StoreConfig()
        self.config.validate()  # values set after construction are checked here
        self.config.store_path_root_dir = str(self.root)
        self.clock = clock
        self.read_only = read_only
        self.delay_levels_ms = parse_delay_levels(self.config.message_delay_level)
        self.config_dir = self.root / "config"
        self._lock_file = StoreLock(self.root, [self.config.commit_log_dir])
        self.commit_log = CommitLog(self.config, clock, read_only)
        self.consume_queues: dict[tuple[str, int], ConsumeQueueBase] = {}
        self._cq_guard = threading.RLock()
        self.topic_table = TopicConfigTable(self.config_dir)
        self.index_service: IndexService | None = None
        self.checkpoint: StoreCheckpoint | None = None
        self.reput = None
        self.recovery_report: RecoveryReport | None = None
        self.arrival_listeners: list[Callable[[str, int, int, int, int, str], None]] = []
        self.dispatchers: list[Callable[[DispatchRequest], None]] = []
        # False for a record that must not reach any queue or index (the broker uses it so a
        # deleted topic's old records are not re-dispatched into a new consume queue on recovery).
        # It gets the record's fields, not a DispatchRequest: the per-put path builds none.
        self.dispatch_filter: RecordFilter | None = None
        # enableConsumeQueueExt: computes each message's filter bitmap for its ext unit (the broker's).
        self.filter_bit_map_hook: FilterBitMapHook | None = None
        self._flush_thread: threading.Thread | None = None
        self._stopping = False
        self._started = False
        # The reput thread's wake among the commitlog's append listeners (set by start): a put that
        # dispatched its record itself (fast_put) does not call it.
        self.reput_wake: Callable[[], None] | None = None
        self._opened = False
        # Read-only recovery cannot write consume queue units; records the queues lack are kept here.
        self._ro_pending: dict[tuple[str, int], list[DispatchRequest]] = {}
        self.dispatched_frontier = -1
        self._disk_checked_at = -1e9
        self._disk_used_pct = 0.0
        # put_message's sampled check: until this monotonic time the store was found open, writable and
        # its disk below diskSpaceWarningLevelRatio (-1e9: check at the next put).
        self._put_checked_until = -1e9
        self._disk_warned = False
        # Retention (CleanCommitLogService); tests swap in fake ``disk_usage`` / ``mtime_of``.
        self.retention = RetentionService(self)
        self._last_clean_ms: int | None = None

    # -- lifecycle ---------------------------------------------------------------------------------
    def open(self) -> MessageStore:
        """Load and recover. Writable opening takes the lock and marks the store running (abort)."""
        from .reput import ReputMessageService

        if not self.read_only:
            self.root.mkdir(parents=True, exist_ok=True)
            self._lock_file.acquire()
        elif not self.root.is_dir():
            raise FileNotFoundError(f"store directory {self.root} does not exist")
        try:
            self._infer_file_sizes()
            self.topic_table.load()
            abnormal = (self.root / "abort").exists()
            self.checkpoint = StoreCheckpoint(self.root / "checkpoint", self.read_only)
            self.commit_log.load()
            self._load_consume_queues()
            self._refuse_missing_commit_log()
            if not self.read_only:
                self._lock_file.lock_data_dirs()
            self.index_service = IndexService(
                self.root / "index", self.config.max_hash_slot_num, self.config.max_index_num, self.clock,
                read_only=self.read_only, max_msgs_num_batch=self.config.max_msgs_num_batch,
                on_full_file_flushed=self._on_full_index_file_flushed,
                beside_live_writer=self.read_only and abnormal and is_store_locked(self.root))
            if self.config.enable_build_consume_queue_concurrently and not self.read_only:
                from .concurrent_reput import ConcurrentReputMessageService

                self.reput = ConcurrentReputMessageService(self)
            else:
                self.reput = ReputMessageService(self)
            self.recovery_report = self._recover(abnormal)
            if not self.read_only:
                _mark_running(self.root / "abort")
            self._opened = True
        except BaseException:
            self._close_files()
            if not self.read_only:
                self._lock_file.release()
            raise
        return self

    def start(self) -> MessageStore:
        """Start background services (flush, dispatch). Read-only stores have none."""
        if not self._opened:
            self.open()
        if self.read_only or self._started:
            return self
        self._started = True
        self._stopping = False
        self.reput_wake = self.reput.wake
        self.commit_log.append_listeners.append(self.reput_wake)
        self.commit_log.start()
        self.reput.start()
        self._flush_thread = threading.Thread(target=self._flush_service, name="FlushConsumeQueue", daemon=True)
        self._flush_thread.start()
        return self

    def __enter__(self) -> MessageStore:
        return self.start() if not self.read_only else self.open()

    def __exit__(self, *exc: object) -> None:
        self.shutdown()

    def announce_holder(self, **fields: str) -> None:
        """Say more about this writer in ``lock.holder`` (e.g. ``namesrv``) for refused openers' messages."""
        self._lock_file.announce(**fields)

    def shutdown(self, keep_abort: bool = False) -> None:
        """Dispatch and flush everything, persist the checkpoint, remove ``abort``, release the lock.

        ``keep_abort``: the owner could not save its own files (a full disk), so the shutdown was not
        clean: ``abort`` stays and the next start recovers as after a crash (it re-checks the
        commitlog: time only). Kept here, under the lock, so no other opener can come in between."""
        if not self._opened:
            return
        self._stopping = True
        if self._flush_thread is not None:
            self._flush_thread.join(timeout=10)
            self._flush_thread = None
        failed: OSError | None = None
        if not self.read_only:
            try:
                self.commit_log.shutdown()
                self.reput.shutdown()
                self.flush()
            except OSError as e:  # storage failing (EIO, a read-only remount): not saved, still closed
                failed = e
        self._opened = False  # puts that have not begun are refused by the open check
        self._put_checked_until = -1e9
        try:
            self._close_files()
        finally:
            # The files closed and the lock released even when saving failed, so that this process
            # (an embedding application, a test) can open the store again; ``abort`` then stays and
            # that open recovers as after a crash.
            if not self.read_only:
                if self.reput.behind() == 0 and not keep_abort and failed is None:
                    try:
                        (self.root / "abort").unlink()
                    except FileNotFoundError:
                        pass
                self._lock_file.release()
            self._started = False
        if failed is not None:
            raise failed

    def _close_files(self) -> None:
        # The commitlog first: its close waits for a put still writing (a request the server had not
        # finished) and refuses every later one, so nothing dispatches into the files closed below.
        self.commit_log.close()
        for cq in self.consume_queues.values():
            cq.close()
        if self.index_service is not None:
            self.index_service.shutdown()
        if self.checkpoint is not None:
            self.checkpoint.shutdown()

    def flush(self) -> None:
        if self.read_only:
            return
        self._flush_and_checkpoint(thorough=True)
        if self.index_service is not None:
            self.index_service.flush()

    def flush_commit_log(self) -> None:
        """msync the commitlog to its end now: run before writing a file that names records by offset
        (the timer checkpoint, consumer and delay offsets, FIFO order info), so that after a power cut
        it never names records that were only in the page cache."""
        if not self.read_only:
            self.commit_log.flush()

    def _flush_and_checkpoint(self, thorough: bool) -> None:
        """Flush the commitlog (``thorough``) and the consume queues, then write the checkpoint.

        The checkpoint's logics time is the dispatch time read *before* a thorough flush (every queue
        to its last unit) began: units dispatched during it may be missing from a queue already
        flushed, and after a power cut recovery re-dispatches only records stored after the written
        time. A flush that leaves units behind (fewer dirty pages than flushConsumeQueueLeastPages)
        writes no new logics time: a queue written rarely kept its newest unit only in the page
        cache while the checkpoint claimed it, and a power cut lost that message for good (its record
        was in the commitlog, recovery never looked at it again). RocketMQ's FlushConsumeQueueService
        does the same, once every flushConsumeQueueThoroughInterval.
        """
        cp = self.checkpoint
        logics_ts = cp.logics_msg_timestamp if cp is not None and thorough else 0  # 0: the written one stays
        if thorough:
            self.commit_log.flush()
        least = 0 if thorough else self.config.flush_consume_queue_least_pages
        with self._cq_guard:
            queues = list(self.consume_queues.values())
        for cq in queues:  # (a failed flush names its file: MappedFile's and the checkpoint's errors)
            cq.flush(least)
        if cp is not None:
            cp.flush(self.commit_log.flushed_store_timestamp, logics_ts)

    def _flush_service(self) -> None:
        import time

        interval = self.config.flush_interval_consume_queue / 1000
        thorough_every = self.config.flush_consume_queue_thorough_interval / 1000
        last_thorough = time.monotonic()
        # a failing disk (EIO, a read-only remount) fails every pass (200 ms): said once a minute as
        # one line naming the file, and when a pass works again
        failures = RoundFailures(log, "consume queue flush")
        outage: str | None = None  # its first failure, said for all of it (the file failing varies by pass)
        while not self._stopping:
            time.sleep(min(interval, 0.2))
            if self._stopping:
                break
            try:
                thorough = time.monotonic() - last_thorough >= thorough_every
                if thorough:
                    last_thorough = time.monotonic()
                self._flush_and_checkpoint(thorough)
            except Exception as e:
                if is_operating_condition(e):
                    outage = outage or str(e) or type(e).__name__
                    failures.failed_with(outage)
                else:
                    failures.failed(e)  # a bug: its traceback
            else:
                outage = None
                failures.succeeded()
            try:
                now = self.clock()
                if self._last_clean_ms is None:
                    self._last_clean_ms = now
                elif now - self._last_clean_ms >= self.config.clean_resource_interval:
                    self._last_clean_ms = now
                    self.delete_expired_files()
            except Exception:
                log.exception("deleting expired files failed")

    def delete_expired_files(self, force: bool = False) -> RetentionReport:
        """Run retention now (spec §12 fileReservedTime/deleteWhen/diskMaxUsedSpaceRatio).

        ``force`` deletes expired files whatever the hour (mqadmin deleteExpiredCommitLog); the flush
        thread calls this every cleanResourceInterval with ``force=False``.
        """
        if self.read_only:
            raise PermissionError("store is open read-only")
        return self.retention.run(force)

    def _on_full_index_file_flushed(self, end_timestamp: int) -> None:
        if self.checkpoint is not None:
            self.checkpoint.index_msg_timestamp = end_timestamp

    # -- layout ------------------------------------------------------------------------------------
    def _infer_file_sizes(self) -> None:
        if infer_file_sizes(self.config, self.root):
            self.commit_log.file_size = self.config.mapped_file_size_commit_log
            self.commit_log.file_queue.file_size = self.config.mapped_file_size_commit_log

    def queue_type_of(self, topic: str) -> str:
        tc = self.topic_table.get(topic)
        if tc is not None and tc.attributes.get("queue.type"):
            return tc.queue_type
        if (self.root / BATCH_CONSUME_QUEUE_DIR / topic).is_dir():
            return BATCH_CQ
        return SIMPLE_CQ

    def _new_queue(self, topic: str, queue_id: int, queue_type: str) -> ConsumeQueueBase:
        if queue_type == BATCH_CQ:
            return BatchConsumeQueue(topic, queue_id, self.root / BATCH_CONSUME_QUEUE_DIR,
                                     self.config.batch_consume_queue_file_size, self.read_only)
        ext = ConsumeQueueExt(topic, queue_id, self.root / CONSUME_QUEUE_EXT_DIR,
                              self.config.mapped_file_size_consume_queue_ext, self.read_only) \
            if self.config.enable_consume_queue_ext else None
        return ConsumeQueue(topic, queue_id, self.root / CONSUME_QUEUE_DIR, self.config.consume_queue_file_size,
                            self.read_only, ext)

    def _load_consume_queues(self) -> None:
        for dirname, qtype in ((CONSUME_QUEUE_DIR, SIMPLE_CQ), (BATCH_CONSUME_QUEUE_DIR, BATCH_CQ)):
            base = self.root / dirname
            if not base.is_dir():
                continue
            for topic_dir in sorted(base.iterdir()):
                if not topic_dir.is_dir():
                    continue
                for qdir in sorted(topic_dir.iterdir()):
                    if not (qdir.is_dir() and qdir.name.lstrip("-").isdigit()):
                        continue
                    cq = self._new_queue(topic_dir.name, int(qdir.name), qtype)
                    cq.load()
                    self.consume_queues[(topic_dir.name, int(qdir.name))] = cq

    def _refuse_missing_commit_log(self) -> None:
        """No commitlog file, while consume queues point into one: refuse to open.

        Why: the commitlog directory is configured apart from the store (``storePathCommitLog``), so a
        typo, an unmounted disk or a relative path from another working directory shows an empty
        log. Recovery would then cut every queue to offset 0 and the next put would start a new log
        there, the queues' units pointing at the wrong records; a read-only open showed empty queues.
        Retention never deletes the last commitlog file, so no store in use looks like this."""
        if self.commit_log.file_queue.files:
            return
        for (topic, queue_id), cq in self.consume_queues.items():
            phy = cq.first_unit_phy_offset()
            if phy is not None:
                raise CommitLogMissingError(
                    f"the commitlog directory {self.commit_log.file_queue.directory} holds no commitlog file, but "
                    f"the consume queues point into one (queue {topic}/{queue_id} at commitlog offset {phy}): "
                    "is storePathCommitLog right and its disk mounted? Nothing was changed")

    def find_consume_queue(self, topic: str, queue_id: int, create: bool = False,
                           queue_type: str | None = None) -> ConsumeQueueBase | None:
        key = (topic, queue_id)
        cq = self.consume_queues.get(key)
        if cq is not None or not create or self.read_only:
            return cq
        with self._cq_guard:
            cq = self.consume_queues.get(key)
            if cq is None:
                cq = self._new_queue(topic, queue_id, queue_type or self.queue_type_of(topic))
                self.consume_queues[key] = cq
            return cq

    # -- recovery ----------------------------------------------------------------------------------
    def _recover(self, abnormal: bool) -> RecoveryReport:
        for cq in self.consume_queues.values():
            cq.recover()
            for problem in cq.damage:
                log.warning("recovery: %s; rebuilding it from the commitlog", problem)
        dispatch_from = max((cq.max_physic_end() for cq in self.consume_queues.values()), default=-1)
        if self.read_only and abnormal:
            # Beside a live writer the queues were read one after another while it kept dispatching:
            # bring each up to the same point, so they form one snapshot (dispatch runs in commitlog
            # order, so every unit before dispatch_from is in its file by now).
            for cq in self.consume_queues.values():
                cq.extend_read_only_to(dispatch_from)
        # Dispatch runs in commitlog order: every record before this offset had its unit written.
        self.dispatched_frontier = dispatch_from
        # Queues whose files were damaged or end in an empty file are re-dispatched from their own
        # last good unit (records before the common start would otherwise never reach them).
        repairs = {key: cq.repair_from_phy for key, cq in self.consume_queues.items()
                   if cq.repair_from_phy is not None}
        damaged_queues = bool(repairs)
        # A queue whose newest unit is torn gets that unit again from its record (at or after the
        # queue's end); ``settle_torn_unit`` checks afterwards that it was rewritten.
        for key, cq in self.consume_queues.items():
            if cq.torn_unit_at is not None and key not in repairs:
                repairs[key] = max(cq.max_physic_end(), 0)
        files = self.commit_log.file_queue.files
        cp = self.checkpoint
        assert cp is not None and self.index_service is not None
        index_from = None
        if not self.read_only and self.config.message_index_enable:
            if abnormal:
                dropped = self.index_service.drop_incomplete_files(cp.index_msg_timestamp)
                if dropped:
                    log.warning("abnormal recovery: index file(s) %s were not whole and are rebuilt from the "
                                "commitlog", ", ".join(dropped))
            # Re-index from where the (whole) index ends, whatever messageIndexSafe says: records
            # between that and the checkpoint would otherwise never be findable by key again.
            index_from = self.index_service.last_index_file_end_phy_offset if self.index_service.files else 0
        elif self.read_only and self.config.message_index_enable and (
                self.index_service.damaged_files or (abnormal and (
                    self.index_service.stats().entry_count or (dispatch_from > 0 and len(files) == 1)))):
            # Read-only: the records the index files lack are indexed in memory (index_in_memory). Dispatch
            # may have written a run's units before its index entries: from the index's own end, then,
            # not the queues'. An index without entries means reading the whole log: done while the log
            # is one file (a new store killed in its first seconds: the first record's unit written, its
            # entries not, and a key query found nothing), left alone after a crash beyond that. A
            # damaged file is not loaded, nor any newer one: their records are indexed in memory too,
            # from the last whole file's end (the whole log if none is whole), or a clean store's key
            # queries would silently miss every message those files hold.
            index_from = self.index_service.last_index_file_end_phy_offset
            if self.index_service.damaged_files:
                log.warning("index file(s) %s cannot be read: the records they index are read from the commitlog "
                            "for this read-only open (a writable open rebuilds them)",
                            ", ".join(self.index_service.damaged_files))
        # A crash that did not end the kernel's boot lost no page-cache write: recovery may start
        # where the queues confirm, as after a clean shutdown (and dispatch what anything lacks).
        same_boot = abnormal and _crashed_in_this_boot(self.root / "abort")
        start_index = 0
        for i in range(len(files) - 1, 0, -1):
            mf = files[i]
            rc = check_record(mf.mv, 0, mf.length, check_crc=False, read_body=False)
            if rc.kind != RECORD_VALID or rc.message.store_timestamp == 0:
                continue
            m = rc.message
            if abnormal and not same_boot:
                ok = m.store_timestamp <= cp.min_timestamp
            else:
                ok = m.commit_log_offset <= max(dispatch_from, 0)
            if ok and self.config.message_index_enable and self.config.message_index_safe:
                ok = m.store_timestamp <= cp.index_msg_timestamp
            if ok:
                start_index = i
                break
        if index_from is not None and files and index_from < self.commit_log.max_offset():
            index_at = max(index_from, files[0].file_from_offset)
            start_index = min(start_index, self.commit_log.file_queue.index_at(index_at))
        if repairs and files:
            repair_at = max(min(repairs.values()), files[0].file_from_offset)
            start_index = min(start_index, self.commit_log.file_queue.index_at(repair_at))
        start_offset = files[start_index].file_from_offset if files else 0
        first_pos = 0
        if abnormal and not same_boot and files:
            # Within the first file to check, step over the records stored before the checkpoint's
            # time (flushed and dispatched before it was written) without decoding or CRC-checking
            # them, but never past where the index or a damaged queue needs records again.
            mf = files[start_index]
            bound = min(mf.length, self.commit_log.file_size)
            for need in ([index_from] if index_from is not None else []) + list(repairs.values()):
                bound = min(bound, max(need - mf.file_from_offset, 0))
            since = cp.min_timestamp
            if self.config.message_index_enable and self.config.message_index_safe:
                since = min(since, cp.index_msg_timestamp)
            first_pos = first_record_stored_after(mf.mv, 0, bound, since)
            start_offset = mf.file_from_offset + first_pos
        if (self.read_only and not damaged_queues and files and start_offset <= dispatch_from < self.commit_log.max_offset()
                and self._newest_unit_record_intact(dispatch_from)):
            # Inspection validates only beyond what the consume queues confirm (their units point at
            # records up to dispatch_from), as a writable recovery's checkpoint does: the cost is the
            # undispatched tail's, not the store's (a whole 1 GiB file was decoded and CRC-checked).
            at = dispatch_from if index_from is None or not files[0].file_from_offset <= index_from < dispatch_from \
                else index_from  # (a record's start: the newest indexed one)
            start_index = self.commit_log.file_queue.index_at(at)
            start_offset = at
            first_pos = at - files[start_index].file_from_offset
        # After a crash a record is dispatched again only if something lacks it: its consume queue
        # (each queue's own confirmed end, so a queue that lost its tail pages in a power cut is
        # refilled even where others are complete) or the index (beyond index_from). Re-dispatching
        # everything, as Java does, cost 2.5x a clean open at 200k messages and 7x at 1M.
        queue_ends = {key: cq.max_physic_end() for key, cq in self.consume_queues.items()} if abnormal else {}
        process_offset = start_offset
        stop_reason = ""
        dispatched = 0
        check_crc = self.config.check_crc_on_recover
        idx = start_index
        while idx < len(files):
            mf = files[idx]
            mv = mf.mv
            limit = min(mf.length, self.commit_log.file_size)
            pos, first_pos = first_pos, 0
            while True:
                # Fast path (compiled): the dispatch fields and the body CRC, no message object; what it
                # declines (BLANK end, torn or corrupt bytes) gets check_record's verdict and reason.
                fields = decode_dispatch_fields(mv, pos, limit)
                if fields is not None and (not check_crc or body_crc_matches(mv, pos, fields[5])):
                    size, topic, queue_id, queue_offset, stored_phy, sys_flag, store_ts, prepared, props = fields
                    phy = mf.file_from_offset + pos
                    if phy >= dispatch_from or (index_from is not None and phy >= index_from) or (
                            repairs and phy >= repairs.get((topic, queue_id), phy + 1)) or (
                            abnormal and phy >= queue_ends.get((topic, queue_id), -1)):
                        self._dispatch_recovered(dispatch_request_of(
                            topic, queue_id, stored_phy, size, sys_flag, store_ts, queue_offset, prepared, props,
                            self.delay_levels_ms))
                        dispatched += 1
                    pos += size
                    continue
                rc = check_record(mv, pos, limit, check_crc=check_crc, read_body=False)
                if rc.kind == RECORD_VALID:
                    phy = mf.file_from_offset + pos
                    if phy >= dispatch_from or (index_from is not None and phy >= index_from) or (
                            repairs and phy >= repairs.get((rc.message.topic, rc.message.queue_id), phy + 1)) or (
                            abnormal and phy >= queue_ends.get((rc.message.topic, rc.message.queue_id), -1)):
                        self._dispatch_recovered(build_dispatch_request(rc.message, self.delay_levels_ms))
                        dispatched += 1
                    pos += rc.size
                    continue
                if rc.kind == RECORD_BLANK:
                    pos = self.commit_log.file_size
                else:
                    stop_reason = rc.reason
                break
            process_offset = mf.file_from_offset + pos
            if pos >= self.commit_log.file_size and idx + 1 < len(files):
                idx += 1
                continue
            break
        truncated = discarded_records = intact_records = 0
        if files and self._data_bytes_after(process_offset) and not (
                self.read_only and abnormal and self._live_writer_appended_at(process_offset)):
            truncated, discarded_records, intact_records = self._discard_tail(process_offset)
            log.warning("recovery: commitlog valid data ends at offset %d (%s); %d byte(s) after it holding "
                        "%d record start(s), %d of them intact, are discarded%s", process_offset,
                        stop_reason or "end of data", truncated, discarded_records, intact_records,
                        "" if self.read_only else f" and kept in {self.root / LOST_FOUND_DIR / 'commitlog'}"
                        " (list them with mqadmin verifyStore --lostFound)")
        for cq in self.consume_queues.values():
            cq.truncate_dirty_logic_files(process_offset)
            settled = cq.settle_torn_unit(self.root)
            if settled:
                log.warning("recovery: %s", settled)
        if not self.read_only:
            self.index_service.truncate_beyond(process_offset)
        self._truncate_commit_log(process_offset)
        self._rebuild_queue_offset_table()
        self.correct_min_offsets()
        self.reput.reput_from_offset = process_offset
        if not abnormal:  # a clean shutdown dispatched everything (abort is removed only then)
            self.dispatched_frontier = process_offset
        if not self.read_only and cp is not None:
            cp.confirm_phy_offset = process_offset
        return RecoveryReport(abnormal, start_offset, process_offset, truncated, stop_reason, dispatched,
                              discarded_records, intact_records, same_boot)

    def _newest_unit_record_intact(self, dispatch_from: int) -> bool:
        """Whether the record the newest consume queue unit points at (ending at ``dispatch_from``) is
        whole (CRC checked) and is that unit's record, so a read-only open may start after it.

        Why: that start trusts the queues; a damaged newest record would otherwise never be looked
        at by the open (RocketMQ's recovery checks from the file start). One record is cheap.
        """
        for cq in self.consume_queues.values():
            if cq.max_physic_end() != dispatch_from:
                continue
            unit = cq.get_unit(cq.get_max_offset_in_queue() - 1)
            mf = self.commit_log.file_queue.find_mapped_file_by_offset(unit.phy_offset) if unit else None
            if unit is None or mf is None:
                return False
            rc = check_record(mf.mv, unit.phy_offset - mf.file_from_offset, min(mf.length, self.commit_log.file_size),
                              check_crc=True, read_body=False)
            m = rc.message
            return (rc.kind == RECORD_VALID and rc.size == unit.size and m.commit_log_offset == unit.phy_offset
                    and m.topic == cq.topic and m.queue_id == cq.queue_id)
        return False

    def beside_live_writer(self) -> bool:
        """Read-only, and the store is held by a running broker right now (its lock taken; ``abort``
        present, as a running broker keeps it).

        Why: such an open reads files the broker keeps writing, each at its own moment, so a part
        read later (the timer wheel, a checkpoint) may run ahead of one read earlier (the timer log,
        a consume queue). That is the broker being ahead, not damage; on a store nobody holds the
        same disagreement is damage and is reported.
        """
        return self.read_only and (self.root / "abort").exists() and is_store_locked(self.root)

    def _live_writer_appended_at(self, offset: int) -> bool:
        """Read-only beside a live writer: whether the bytes after the valid end are a record it was
        writing when recovery read there (they become a whole record within moments).

        Why: the scan read zeros (or a half-copied record) at ``offset`` and the probe after it then
        saw the writer's new bytes; calling those "corrupt, cannot be read" was a false alarm of
        verifyStore beside a running broker. A crashed writer's torn tail stays torn and is reported.

        When the re-reads do not see it whole, the store lock decides: a writer that still holds it
        is alive and its record still in flux (a copy into a page that faults can wait on the disk for
        longer than the re-reads under load); a crashed writer holds no lock.
        """
        mf = self.commit_log.file_queue.find_mapped_file_by_offset(offset)
        if mf is None:
            return False
        limit = min(mf.length, self.commit_log.file_size)
        for attempt in range(_LIVE_RETRIES):
            rc = check_record(mf.mv, offset - mf.file_from_offset, limit, check_crc=True, read_body=False)
            if rc.kind in (RECORD_VALID, RECORD_BLANK):
                return True
            time.sleep(_LIVE_PAUSE_S * (attempt + 1))
        return is_store_locked(self.root)

    def _data_bytes_after(self, offset: int) -> int:
        """How many non-zero-looking bytes follow the valid tail (0 for a clean end)."""
        mf = self.commit_log.file_queue.find_mapped_file_by_offset(offset)
        if mf is None:
            return 0
        pos = offset - mf.file_from_offset
        stop = min(mf.length, pos + 65536)
        extra = 0 if is_zero(mf.mv, pos, stop) else len(bytes(mf.mv[pos:stop]).rstrip(b"\x00"))
        later = [f for f in self.commit_log.file_queue.files if f.file_from_offset > mf.file_from_offset]
        return extra + sum(len(bytes(f.mv[:4096]).rstrip(b"\x00")) for f in later)

    def _discard_tail(self, offset: int) -> tuple[int, int, int]:
        """Account for (and, writable, keep) every byte of data after the valid tail ``offset``.

        Returns (bytes, record starts, intact records). Writable: each file's discarded bytes are
        copied to ``lost+found/commitlog/`` before recovery cuts them, and the cut part of the file
        that stays is zeroed so no later recovery can mistake the old records for new ones.
        """
        total = starts = intact = 0
        for mf in list(self.commit_log.file_queue.files):
            if mf.file_from_offset + mf.length <= offset:
                continue
            start = max(0, offset - mf.file_from_offset)
            end = data_end(mf.mv, start)
            if end <= start:
                continue
            data = bytes(mf.mv[start:end])
            total += end - start
            found = sum(1 for _ in iter_intact_records(data, read_body=False))
            intact += found
            starts += found + (1 if start == offset - mf.file_from_offset else 0)
            if not self.read_only:
                save_aside(self.root, mf.path, start, data)
                if mf.file_from_offset <= offset:  # the file that stays; later ones are removed
                    mf.write_at(start, bytes(end - start))
        return total, starts, intact

    def _truncate_commit_log(self, offset: int) -> None:
        fq = self.commit_log.file_queue
        if self.read_only:
            for mf in fq.files:
                if mf.file_from_offset <= offset < mf.file_from_offset + fq.file_size:
                    mf.wrote_position = offset - mf.file_from_offset
                elif mf.file_from_offset + fq.file_size <= offset:
                    mf.wrote_position = fq.file_size
            fq.files = [f for f in fq.files if f.file_from_offset <= offset]
        else:
            fq.set_max_offset(offset)
            for mf in fq.files:
                mf.flushed_position = mf.wrote_position
        self.commit_log.flushed_offset = offset
        self.commit_log.appended_records.clear()  # they describe bytes that may be gone
        self.commit_log.inner_batch_sizes.clear()

    def _rebuild_queue_offset_table(self) -> None:
        table = self.commit_log.queue_offsets
        for (topic, qid), cq in self.consume_queues.items():
            table.set(topic, qid, cq.get_max_offset_in_queue())

    def correct_min_offsets(self) -> None:
        cl_min = self.commit_log.min_offset()
        for cq in self.consume_queues.values():
            cq.correct_min_offset(cl_min)

    def _dispatch_recovered(self, req: DispatchRequest) -> None:
        if self.dispatch_filter is not None and not self.dispatch_filter(req.topic, req.commit_log_offset):
            return
        cq = self.consume_queues.get((req.topic, req.queue_id)) if req.enters_queue else None
        if cq is not None:
            q = req.msg_base_offset if cq.is_batch else req.consume_queue_offset
            if q < cq.get_max_offset_in_queue():
                unit = cq.get_unit(q)
                if unit is not None and unit.queue_offset == q and unit.phy_offset != req.commit_log_offset:
                    cq.cut_from_queue_offset(q, f"points at commitlog offset {unit.phy_offset}, but the record "
                                                f"with that queue offset is at {req.commit_log_offset}")
        if self.read_only:
            self._dispatch_in_memory(req)
            if self.index_service is not None and self.config.message_index_enable:
                self.index_service.index_in_memory(req.topic, req.commit_log_offset, req.store_timestamp,
                                                   req.uniq_key, req.keys, req.sys_flag)
        else:
            self.do_dispatch(req, notify=False)

    def _dispatch_in_memory(self, req: DispatchRequest) -> None:
        """Read-only recovery: records the CQ files do not have yet are known only by the count."""
        if not req.enters_queue:
            return
        key = (req.topic, req.queue_id)
        cq = self.consume_queues.get(key)
        if cq is not None and (req.msg_base_offset if cq.is_batch else req.consume_queue_offset) \
                < cq.get_max_offset_in_queue():
            return  # its unit is in the files (re-dispatched for the index only)
        if cq is None:
            # A queue whose first record the writer never dispatched (its reput thread was behind
            # when it died): no files yet, so a queue object with none, as dispatch would have made
            # it (BatchCQ for an inner batch), holds what the re-dispatch maps know. Constructing it
            # touches no file.
            qtype = BATCH_CQ if req.is_inner_batch else self.queue_type_of(req.topic)
            self.consume_queues[key] = self._new_queue(req.topic, req.queue_id, qtype)
        # Units cannot be written; they stay readable through read-only re-dispatch maps.
        pending = self._ro_pending.setdefault(key, [])
        pending.append(req)


    # -- dispatch ----------------------------------------------------------------------------------
    def dispatch_appended(self, rec: AppendedRecord) -> None:
        """Dispatch a record this process just appended, from the fields the append path kept.

        Why a second entry beside ``do_dispatch``: this runs once per put, and building a
        DispatchRequest only to take it apart again costs as much as the unit write. When nothing
        needs a request object (no extra dispatchers, no dispatch filter) and the append path knew
        TAGS/KEYS/UNIQ_KEY, the consume queue unit and the index entries are written from the fields
        directly, with the same decisions ``do_dispatch`` makes. The dispatch filter (a Broker sets
        one) takes the record's fields, so it keeps this path.
        """
        known = rec[9]
        if known is None or self.dispatchers or self.config.enable_consume_queue_ext:
            self.do_dispatch(dispatch_request_of_appended(rec, self.delay_levels_ms))
            return
        phy, size, topic, queue_id, queue_offset, sys_flag, store_ts, _prepared, props, _ = rec
        record_filter = self.dispatch_filter
        if record_filter is not None and not record_filter(topic, phy):
            return
        tags, keys, uniq_key = known
        tc = tags_code(tags)
        enters_queue = not sys_flag & TRANSACTION_PREPARED_TYPE  # NOT_TYPE and COMMIT records
        next_offset = queue_offset + 1
        if enters_queue:
            cq = self.consume_queues.get((topic, queue_id))
            if cq is None:
                cq = self.find_consume_queue(topic, queue_id, create=True,
                                             queue_type=BATCH_CQ if sys_flag & INNER_BATCH_FLAG else None)
            if cq is not None:
                if cq.is_batch:  # an inner batch takes INNER_NUM offsets from INNER_BASE (dispatch's rule)
                    batch_size, base = inner_batch_position(props, queue_offset)
                    cq.put_message_position_info(phy, size, tc, base, store_ts, batch_size)
                    next_offset = queue_offset + batch_size
                else:
                    cq.put_message_position_info(phy, size, tc, queue_offset)
                if self.checkpoint is not None:
                    self.checkpoint.logics_msg_timestamp = store_ts
        svc = self.index_service
        if svc is not None and self.config.message_index_enable and not self.read_only:
            if phy > svc.last_index_file_end_phy_offset:  # the common case of _index_record: a new record
                svc.build_index(topic, phy, store_ts, uniq_key, keys, sys_flag)
            else:
                self._index_record(topic, phy, store_ts, uniq_key, keys, sys_flag)
        if enters_queue:
            for listener in self.arrival_listeners:
                listener(topic, queue_id, next_offset, tc, store_ts, props)

    def do_dispatch(self, req: DispatchRequest, notify: bool = True) -> None:
        if self.dispatch_filter is not None and not self.dispatch_filter(req.topic, req.commit_log_offset):
            return
        enters_queue = is_dispatched_to_queue(req.sys_flag)
        if enters_queue:
            cq = self.consume_queues.get((req.topic, req.queue_id))
            if cq is None:
                qtype = BATCH_CQ if req.is_inner_batch else None
                cq = self.find_consume_queue(req.topic, req.queue_id, create=True, queue_type=qtype)
            if cq is not None:
                if cq.is_batch:
                    cq.put_message_position_info(req.commit_log_offset, req.msg_size, req.tags_code,
                                                 req.msg_base_offset, req.store_timestamp, req.batch_size)
                elif cq.ext is not None:
                    hook = self.filter_bit_map_hook
                    bit_map = hook.calc_filter_bit_map(req.topic, req.properties_string) if hook else None
                    cq.put_message_position_info(req.commit_log_offset, req.msg_size, req.tags_code,
                                                 req.consume_queue_offset, ext_unit=CqExtUnit(
                                                     req.tags_code, req.store_timestamp, bit_map))
                else:
                    cq.put_message_position_info(req.commit_log_offset, req.msg_size, req.tags_code,
                                                 req.consume_queue_offset)
                if self.checkpoint is not None:
                    self.checkpoint.logics_msg_timestamp = req.store_timestamp
        if self.index_service is not None and self.config.message_index_enable and not self.read_only:
            self._build_index(req)
        for d in self.dispatchers:
            d(req)
        if notify and enters_queue:
            for listener in self.arrival_listeners:
                listener(req.topic, req.queue_id, req.consume_queue_offset + req.batch_size, req.tags_code,
                         req.store_timestamp, req.properties_string)

    def _build_index(self, req: DispatchRequest) -> None:
        """Index one record; re-dispatch after recovery must not add a record's keys twice.

        Records before the newest indexed offset are complete in the index. The record *at* that
        offset may be only partly there: its keys can straddle a full file and the next one, and
        abnormal recovery deletes the newer file. Only its missing keys are added then.
        """
        self._index_record(req.topic, req.commit_log_offset, req.store_timestamp, req.uniq_key, req.keys,
                           req.sys_flag)

    def _index_record(self, topic: str, phy: int, store_timestamp: int, uniq_key: str | None, keys: str | None,
                      sys_flag: int) -> None:
        """``_build_index`` from a record's fields (the per-put path has no DispatchRequest)."""
        svc = self.index_service
        assert svc is not None
        missing = svc.unindexed_keys(topic, phy, uniq_key, keys)
        if missing is not None:
            svc.build_index(topic, phy, store_timestamp, *missing, sys_flag)

    def wait_for_dispatch(self, timeout: float = 10.0, up_to: int | None = None) -> bool:
        """Block until every written record (with ``up_to``: every record ending at or before that
        commitlog offset) is in its consume queue and the index; records in the write buffer are
        committed first. Readers that must see their own writes in a queue (tests, the CLI, the
        transaction check reading its op markers) call this: dispatch runs behind the put."""
        if not self.read_only:
            self.commit_log.commit()
        return self.reput.wait_until_dispatched(timeout, up_to)

    def dispatch_behind_bytes(self) -> int:
        return self.reput.behind() if self.reput else 0

    # -- write -------------------------------------------------------------------------------------
    def _check_writable(self) -> PutMessageResult | None:
        if self.read_only or not self._opened:
            return PutMessageResult(PutMessageStatus.SERVICE_NOT_AVAILABLE,
                                    remark="store is read-only" if self.read_only else "store is not open")
        return self._check_disk()

    def _check_disk(self) -> PutMessageResult | None:
        """Refuse puts while the commitlog's filesystem is past diskSpaceWarningLevelRatio (RocketMQ's
        disk-full flag), with one WARNING when it crosses diskMaxUsedSpaceRatio. Sampled at most every
        DISK_CHECK_INTERVAL_S; the physical limit itself is caught by the block reservation.
        """
        import shutil

        now = _monotonic()
        if now - self._disk_checked_at >= DISK_CHECK_INTERVAL_S:
            self._disk_checked_at = now
            try:
                usage = shutil.disk_usage(self.config.commit_log_dir if self.config.commit_log_dir.is_dir()
                                          else self.root)
                # df's Use%: used over what this process could ever use (reserved blocks excluded),
                # so a disk whose available space is gone reads 100%.
                room = usage.used + usage.free
                self._disk_used_pct = 100 * usage.used / room if room else 0.0
            except OSError:
                self._disk_used_pct = 0.0
            over = self._disk_used_pct >= self.config.disk_max_used_space_ratio
            if over and not self._disk_warned:
                log.warning("disk of %s is %.0f%% used (diskMaxUsedSpaceRatio %d%%); puts are refused from "
                            "diskSpaceWarningLevelRatio %d%%", self.config.commit_log_dir, self._disk_used_pct,
                            self.config.disk_max_used_space_ratio, self.config.disk_space_warning_level_ratio)
            self._disk_warned = over
        if self._disk_used_pct >= self.config.disk_space_warning_level_ratio:
            return PutMessageResult(PutMessageStatus.SERVICE_NOT_AVAILABLE,
                                    remark=f"disk full: {self.config.commit_log_dir} is {self._disk_used_pct:.0f}% "
                                           f"used (diskSpaceWarningLevelRatio "
                                           f"{self.config.disk_space_warning_level_ratio}%)")
        return None

    def _index_refusal(self, msgs: tuple[MessageInner, ...] | list[MessageInner]) -> PutMessageResult | None:
        """Refuse a put whose keys would need an index file the disk cannot hold (checked before the
        append, so a refused put changes nothing and an accepted one is always indexable)."""
        svc = self.index_service
        if svc is None or not self.config.message_index_enable or svc.has_room(CHEAP_KEYS * len(msgs)):
            return None
        # UNIQ_KEY (counted whether or not it is set yet) and each KEYS token, as dispatch indexes them
        need = sum(1 + len(m.properties.get("KEYS", "").split()) for m in msgs)
        if svc.has_room(need):
            return None
        try:
            svc.make_room(need)
        except OSError as e:
            return disk_refusal(e)
        return None

    def _dispatch_now(self, new: bool = False) -> None:
        """Dispatch in the caller's thread (store not started; ``new``: from the just-appended records'
        fields, ``ReputMessageService.dispatch_new``). The put is stored and acknowledged whatever
        happens here: a dispatch that fails (an index file the disk cannot hold) is retried by the
        next dispatch, from the same record, and the record is never reported as failed."""
        reput = self.reput
        try:
            if new:
                reput.dispatch_new()
            else:
                reput.do_reput()
            reput.stall = None
        except OSError as e:
            reput.note_stall(e)
            log.warning("dispatch of stored records is waiting at commitlog offset %d: %s",
                        reput.reput_from_offset, e)

    def _stall_refusal(self) -> PutMessageResult | None:
        """Refuse a put while dispatch waits at a stored record (``reput.stall``: a consume queue or
        index file the full disk cannot hold), until it moves on.

        Why: the record it waits at was acknowledged, and so was every put after it, yet none of them
        could be consumed or found by key until space came back (a probe acknowledged five sends on a
        full disk, none readable). RocketMQ refuses puts after such a failure (makeLogicsQueueError);
        here the refusal ends by itself once dispatch moves on. A store that is not started has no
        reput thread to retry: the put retries dispatch first.
        """
        reput = self.reput
        if reput.stall is not None and not self._started:
            self._dispatch_now()
        stall = reput.stall
        if stall is None:
            return None
        return PutMessageResult(PutMessageStatus.SERVICE_NOT_AVAILABLE,
                                remark=f"{stall}: puts are refused until dispatch moves on")

    def put_message(self, msg: MessageInner) -> PutMessageResult:
        """Append one message; a store that is not started dispatches it before returning.

        The path every single send takes, kept flat: the writable and disk checks run when their
        last pass is DISK_CHECK_INTERVAL_S old (one clock read and one comparison a put otherwise:
        ``_put_checked_until``; a refused put is checked again at the next one); a plain message is
        put and dispatched in one hot-path call (``fast_put.put_fast``), anything else is appended
        and then dispatched from the fields the append kept (``dispatch_new``).
        """
        if _monotonic() >= self._put_checked_until:
            bad = self._check_writable()
            if bad is not None:
                return bad
            self._put_checked_until = self._disk_checked_at + DISK_CHECK_INTERVAL_S
        done = put_fast(self, msg)  # (declines while dispatch is behind: a stall takes the general path)
        if done is not None:
            return done
        refused = self._stall_refusal() or self._index_refusal((msg,))
        if refused is not None:
            return refused
        result = self.commit_log.put_message(msg)
        if result.status is PUT_OK and self.checkpoint is not None:
            self.checkpoint.physic_msg_timestamp = result.store_timestamp
        if not self._started:
            self._dispatch_now(new=True)
        return result

    def put_messages(self, msgs: list[MessageInner]) -> PutMessageResult:
        """Exploded batch: one record per message, contiguous, consecutive queue offsets."""
        bad = self._check_writable()
        if bad:
            return bad
        if not msgs:
            return PutMessageResult(PutMessageStatus.MESSAGE_ILLEGAL, remark="empty batch")
        refused = self._stall_refusal() or self._index_refusal(msgs)
        if refused is not None:
            return refused
        result = self.commit_log.put_messages(msgs)
        if self.checkpoint is not None and result.ok:
            self.checkpoint.physic_msg_timestamp = result.store_timestamp
        if not self._started:
            self._dispatch_now()
        return result

    def put_inner_batch(self, msg: MessageInner, inner_num: int) -> PutMessageResult:
        """BatchCQ path: ``msg.body`` is a packed batch; one record, INNER_NUM/INNER_BASE properties.

        The checks before the append are ``put_message``'s flat ones (the writable and disk checks
        when their last pass is DISK_CHECK_INTERVAL_S old, ``_put_checked_until``; the index room a
        cheap comparison in the common case): a 64-message batch is one put.
        """
        if _monotonic() >= self._put_checked_until:
            bad = self._check_writable()
            if bad is not None:
                return bad
            self._put_checked_until = self._disk_checked_at + DISK_CHECK_INTERVAL_S
        if inner_num <= 0:
            return PutMessageResult(PutMessageStatus.MESSAGE_ILLEGAL, remark="inner batch has no messages")
        if inner_num > BCQ_MAX_BATCH_SIZE:
            return PutMessageResult(PutMessageStatus.MESSAGE_ILLEGAL, remark=(
                f"inner batch of {inner_num} messages: a BatchCQ unit holds at most {BCQ_MAX_BATCH_SIZE}"))
        if self.reput.stall is not None:
            refused = self._stall_refusal()
            if refused is not None:
                return refused
        svc = self.index_service
        if svc is not None and self.config.message_index_enable and not svc.has_room(CHEAP_KEYS):
            refused = self._index_refusal((msg,))
            if refused is not None:
                return refused
        msg.sys_flag |= INNER_BATCH_FLAG  # NEED_UNWRAP is the broker's choice (SendMessageProcessor)
        cl = self.commit_log
        done = put_inner_batch_buffered(self, msg, inner_num) if cl.write_buffer else \
            put_inner_batch_fast(self, msg, inner_num)
        if done is not None:
            return done
        result = cl.put_inner_batch(msg, inner_num, lambda: self._batch_queue_refusal(msg.topic, msg.queue_id))
        # With the write buffer, the checkpoint's physic time moves only with records in the file
        # (one still buffered is lost in a crash), and there is something to dispatch only after a
        # commit (the buffered records are not in the file yet: nothing new for dispatch).
        in_file = not cl.buffered_bytes
        if self.checkpoint is not None and result.ok and in_file:
            self.checkpoint.physic_msg_timestamp = result.store_timestamp
        if not self._started and (in_file or cl.appended_records):
            self._dispatch_now()
        return result

    def _batch_queue_refusal(self, topic: str, queue_id: int) -> PutMessageResult | None:
        """Under the append lock, before an inner batch takes its queue offsets: its queue is a
        BatchCQ from now on (made if there is none), or the put is refused.

        Why: a send resolves the topic's config, then puts; between the two the topic could be deleted
        and made again by a plain send as a normal topic, whose record's dispatch made a SimpleCQ queue.
        The inner batch (INNER_NUM queue offsets, one record) then got one SimpleCQ unit and every
        later unit of the queue sat at the wrong offset. Made here, under the lock that orders puts,
        the BatchCQ queue also takes a plain record put a moment before (a unit of batch size 1).
        The one-call paths put only into a BatchCQ queue that is already there.
        """
        cq = self.find_consume_queue(topic, queue_id, create=True, queue_type=BATCH_CQ)
        if cq is None or cq.is_batch:
            return None
        return PutMessageResult(PutMessageStatus.MESSAGE_ILLEGAL,
                                remark=f"queue {topic}-{queue_id} is a SimpleCQ: an inner batch needs a BatchCQ queue "
                                       "(delete the topic and create it with queue.type=BatchCQ)")

    # -- read --------------------------------------------------------------------------------------
    def get_max_offset_in_queue(self, topic: str, queue_id: int) -> int:
        cq = self.consume_queues.get((topic, queue_id))
        base = cq.get_max_offset_in_queue() if cq else 0
        pending = self._ro_pending.get((topic, queue_id)) if self.read_only else None
        if pending:
            last = pending[-1]
            base = max(base, last.msg_base_offset + last.batch_size if isinstance(cq, BatchConsumeQueue)
                       else last.consume_queue_offset + 1)
        return base

    def get_min_offset_in_queue(self, topic: str, queue_id: int) -> int:
        cq = self.consume_queues.get((topic, queue_id))
        return cq.get_min_offset_in_queue() if cq else 0

    def get_min_phy_offset(self) -> int:
        return self.commit_log.min_offset()

    def get_max_phy_offset(self) -> int:
        return self.commit_log.max_offset()

    def topics(self) -> list[str]:
        names = {t for t, _ in list(self.consume_queues)}  # a copy: dispatch adds queues while we read
        names.update(self.topic_table.topics)
        return sorted(names)

    def queue_ids(self, topic: str) -> list[int]:
        return sorted(q for t, q in list(self.consume_queues) if t == topic)  # a copy, as in topics()

    def get_units(self, topic: str, queue_id: int, offset: int, max_units: int) -> list[CqUnit]:
        cq = self.consume_queues.get((topic, queue_id))
        units = cq.get_units(offset, max_units) if cq else []
        if self.read_only:
            pending = self._ro_pending.get((topic, queue_id))
            if pending and len(units) < max_units:
                nxt = units[-1].queue_offset + units[-1].batch_num if units else offset
                for r in pending:
                    q = r.msg_base_offset if isinstance(cq, BatchConsumeQueue) else r.consume_queue_offset
                    # Only the unit that continues the run exactly: one further on would skip the
                    # offsets in between (they are in the CQ files, returned by a later call).
                    if q + r.batch_size > nxt and len(units) < max_units and (q == nxt if units else q <= nxt):
                        units.append(CqUnit(q, r.commit_log_offset, r.msg_size, r.tags_code, r.batch_size,
                                            r.store_timestamp))
                        nxt = q + r.batch_size
        return units

    def get_messages(self, topic: str, queue_id: int, offset: int, max_num: int,
                     message_filter: MessageFilterLike | None = None, max_units_scan: int = 32 * 1024,
                     transfer_limits: bool = False, max_total_bytes: int = MAX_PULL_MSG_SIZE
                     ) -> GetMessageResult:
        """Read up to ``max_num`` messages from ``offset`` (GetMessageStatus as RocketMQ's).

        ``transfer_limits``: the batch also ends as DefaultMessageStore's isTheBatchFull ends it
        (``_batch_full``): before the unit that would take it past maxTransferBytesOnMessageInMemory/InDisk
        or ``max_total_bytes`` (Java's maxTotalMsgSize), or once it holds
        maxTransferCountOnMessageInMemory/InDisk messages; the first unit always goes out, however large.
        ``next_begin_offset`` is then that unit's, so the next read starts there and nothing is skipped.
        Every read that answers a client asks for them (pull, pop, Broker.read_queue: mqadmin and the
        dashboard, gRPC): an answer must fit the 16 MiB frame every client reads (32 messages of 512 KiB
        did not, and the consumer lost its connection at each pull), and one pull must not hold hundreds
        of megabytes in the broker. The store's own bulk readers (revive log replay, transaction op
        queue, tools scanning a queue in process) read by count, as before."""
        cq = self.consume_queues.get((topic, queue_id))
        if cq is None:
            return GetMessageResult(GetMessageStatus.NO_MATCHED_LOGIC_QUEUE, 0, 0, 0)
        min_off = self.get_min_offset_in_queue(topic, queue_id)
        max_off = self.get_max_offset_in_queue(topic, queue_id)
        if max_off == 0:
            return GetMessageResult(GetMessageStatus.NO_MESSAGE_IN_QUEUE, 0, min_off, max_off)
        if offset < min_off:
            return GetMessageResult(GetMessageStatus.OFFSET_TOO_SMALL, min_off, min_off, max_off)
        if offset == max_off:
            return GetMessageResult(GetMessageStatus.OFFSET_OVERFLOW_ONE, offset, min_off, max_off)
        if offset > max_off:
            # 5.x corrects to the max offset even when the queue starts at 0 (4.x went back to 0 there)
            return GetMessageResult(GetMessageStatus.OFFSET_OVERFLOW_BADLY, max_off, min_off, max_off)
        messages: list[MessageExt] = []
        next_offset = offset
        scanned = 0
        filtered = 0
        cl_min = self.commit_log.min_offset()
        batch = isinstance(cq, BatchConsumeQueue)
        buffer_total = 0
        full = False
        max_phy = self.commit_log.max_offset()
        in_memory_span = total_physical_memory() * self.config.access_message_in_memory_max_ratio // 100
        while not full and len(messages) < max_num and next_offset < max_off and scanned < max_units_scan:
            units = self.get_units(topic, queue_id, next_offset, min(64, max_units_scan - scanned))
            if not units:
                break
            for u in units:
                scanned += 1
                unit_end = u.queue_offset + u.batch_num
                if unit_end <= next_offset:
                    continue
                if transfer_limits and messages and self._batch_full(u.size, len(messages), buffer_total, max_total_bytes,
                                                 max_phy - u.phy_offset <= in_memory_span):
                    full = True
                    break
                taken = len(messages)
                if u.phy_offset < cl_min:
                    next_offset = unit_end
                    continue
                # the ext unit goes along only where there is one (filters written before it take one argument)
                unit_matched = message_filter is None or (
                    message_filter.is_matched_by_consume_queue(u.tags_code) if u.ext is None and
                    u.tags_code > MAX_ADDR else message_filter.is_matched_by_consume_queue(
                        None if u.tags_code <= MAX_ADDR else u.tags_code, u.ext))
                # An inner batch's unit carries its outer record's tagsCode (0: the batches Java's producer
                # and ours send have no TAGS), not its messages': a unit that may be one is read and its
                # messages judged one by one. A plain unit refused by its tagsCode is skipped unread.
                if not unit_matched and not (batch and (u.batch_num > 1 or u.tags_code == 0)):
                    next_offset = unit_end
                    continue
                record = self._read_unit_record(cq, u)
                if record is None:  # retention deleted its file since cl_min was read: gone, like the ones below
                    next_offset = unit_end
                    continue
                if batch and record.sys_flag & INNER_BATCH_FLAG:
                    for m in unwrap_inner_batch(record, u.queue_offset):
                        if m.queue_offset < next_offset:
                            continue
                        if len(messages) >= max_num:
                            break
                        if message_filter is None or _inner_message_matches(message_filter, m):
                            messages.append(m)
                        else:
                            filtered += 1
                        next_offset = m.queue_offset + 1
                    if len(messages) > taken:
                        buffer_total += u.size
                    if len(messages) >= max_num:
                        break
                    next_offset = max(next_offset, unit_end)
                    continue
                if not unit_matched:  # an untagged plain record, read only to learn it is no inner batch
                    next_offset = unit_end
                    continue
                if batch:
                    record.queue_offset = u.queue_offset
                if message_filter is None or message_filter.is_matched_by_commit_log(record.properties):
                    messages.append(record)
                    buffer_total += u.size
                else:
                    filtered += 1
                next_offset = unit_end
                if len(messages) >= max_num:
                    break
        if messages:
            status = GetMessageStatus.FOUND
        elif next_offset > offset:
            status = GetMessageStatus.NO_MATCHED_MESSAGE
        else:
            status = GetMessageStatus.OFFSET_FOUND_NULL
            next_offset = offset + 1 if offset + 1 <= max_off else offset
        return GetMessageResult(status, next_offset, min_off, max_off, messages, filtered, buffer_total)

    def _batch_full(self, size: int, message_total: int, buffer_total: int, max_total_bytes: int,
                    in_memory: bool) -> bool:
        """Whether a batch already holding ``message_total`` messages in ``buffer_total`` bytes ends before
        a unit of ``size`` bytes (isTheBatchFull's byte and count rules; ``max_num`` is the caller's loop's).
        A unit counts whole, an inner batch's too, as Java hands a BatchCQ unit out whole."""
        c = self.config
        if buffer_total + size > max_total_bytes:
            return True
        if in_memory:
            return (buffer_total + size > c.max_transfer_bytes_on_message_in_memory
                    or message_total >= c.max_transfer_count_on_message_in_memory)
        return (buffer_total + size > c.max_transfer_bytes_on_message_in_disk
                or message_total >= c.max_transfer_count_on_message_in_disk)

    def _read_unit_record(self, cq: ConsumeQueueBase, u: CqUnit) -> MessageExt | None:
        """The record a unit points at; None when retention has deleted it meanwhile (a consumer reading
        the oldest file); CorruptDataError (naming the queue and offset) when the unit and the record do
        not agree, so no reader ever answers with another message."""
        where = cq.file_queue.directory
        if u.phy_offset + u.size > self.commit_log.max_offset():
            raise CorruptDataError(where, u.queue_offset, "a unit pointing inside the commitlog",
                                   f"{u.phy_offset}+{u.size}, past the commitlog end {self.commit_log.max_offset()}")
        record = self.commit_log.read_message(u.phy_offset, u.size)
        if record is None and u.phy_offset < self.commit_log.min_offset():
            return None
        if record is None:
            raise CorruptDataError(where, u.queue_offset, f"a record at commitlog offset {u.phy_offset}",
                                   "no data there")
        if record.topic != cq.topic or record.queue_id != cq.queue_id:
            raise CorruptDataError(where, u.queue_offset, f"a record of {cq.topic}/{cq.queue_id} at commitlog "
                                   f"offset {u.phy_offset}", f"one of {record.topic}/{record.queue_id}")
        if not cq.is_batch and record.queue_offset != u.queue_offset:
            raise CorruptDataError(where, u.queue_offset, f"the record with queue offset {u.queue_offset} at "
                                   f"commitlog offset {u.phy_offset}", f"queue offset {record.queue_offset}")
        return record

    def look_message_by_offset(self, commit_log_offset: int, size: int | None = None) -> MessageExt | None:
        """The record starting at ``commit_log_offset``: None past the end or where no record starts (a
        client's offset), CorruptDataError where a record starts but is damaged."""
        if commit_log_offset >= self.commit_log.max_offset() or commit_log_offset < self.commit_log.min_offset():
            return None
        return self.commit_log.read_message(commit_log_offset, size, must_exist=False)

    def query_message(self, topic: str, key: str, max_num: int = 64, begin: int = 0, end: int = 2 ** 63 - 1,
                      exact: bool = True) -> list[MessageExt]:
        """Messages of ``topic`` whose UNIQ_KEY or a KEYS token is ``key`` (via the IndexFile).

        An index entry is derived data: one that points where no record starts is skipped with a
        warning naming it (as Apache's queryMessage skips a read that fails), not turned into an
        error that blames an intact commitlog and hides the other matches. A damaged record where one
        starts is the commitlog's damage: CorruptDataError names it."""
        if self.index_service is None:
            return []
        max_phy = self.commit_log.max_offset()
        out = []
        for phy in sorted(set(self.index_service.query_offset(topic, key, max_num, begin, end))):
            if phy >= max_phy or phy < self.commit_log.min_offset():
                continue
            m = self.commit_log.read_message(phy, must_exist=False)
            if m is None:
                log.warning("index entry of %s#%s points at commitlog offset %d, where no record starts: skipped "
                            "(mqadmin verifyStore lists the index damage)", topic, key, phy)
                continue
            if m.topic != topic:
                continue
            if exact and m.uniq_key != key and key not in (m.keys or "").split(" "):
                continue
            out.append(m)
        return out

    def query_offsets_by_key(self, topic: str, key: str, max_num: int = 64, begin: int = 0,
                             end: int = 2 ** 63 - 1) -> list[int]:
        """Raw IndexService candidates (what IndexService.queryOffset returns), sorted."""
        if self.index_service is None:
            return []
        max_phy = self.commit_log.max_offset()
        return sorted(p for p in self.index_service.query_offset(topic, key, max_num, begin, end) if p < max_phy)

    def get_offset_in_queue_by_time(self, topic: str, queue_id: int, timestamp: int,
                                    boundary: str = BOUNDARY_LOWER) -> int:
        cq = self.consume_queues.get((topic, queue_id))
        if cq is None:
            return 0
        return cq.get_offset_in_queue_by_time(timestamp, self.commit_log.pickup_store_timestamp, boundary)

    def get_message_store_timestamp(self, topic: str, queue_id: int, offset: int) -> int:
        cq = self.consume_queues.get((topic, queue_id))
        if cq is None:
            return -1
        unit = cq.get_unit(offset)
        if unit is None:
            return -1
        if unit.store_time:
            return unit.store_time
        return self.commit_log.pickup_store_timestamp(unit.phy_offset, unit.size)

    def get_earliest_message_time(self, topic: str | None = None, queue_id: int | None = None) -> int:
        if topic is None:
            mf = self.commit_log.file_queue.files[0] if self.commit_log.file_queue.files else None
            if mf is None:
                return -1
            m = self.commit_log.get_message(mf.file_from_offset, read_body=False)
            return m.store_timestamp if m else -1
        return self.get_message_store_timestamp(topic, queue_id or 0,
                                                self.get_min_offset_in_queue(topic, queue_id or 0))

    def iter_commit_log(self, start: int | None = None, check_crc: bool = False, read_body: bool = True,
                        on_stop: Callable[[int, str], None] | None = None) -> Iterator[MessageExt]:
        """Every valid record from ``start`` to the end of the valid data. ``on_stop(offset, reason)``
        hears of a record that is not valid before the commitlog's end (a body CRC that does not match,
        a bad magic code, a missing file), where the walk stops: a checker must say where and why, not
        end quietly."""
        cl = self.commit_log
        offset = cl.min_offset() if start is None else start
        while offset < cl.max_offset():
            mf = cl.file_queue.find_mapped_file_by_offset(offset)
            if mf is None:
                if on_stop is not None:  # a file missing between the first and the last
                    missing = offset_to_file_name(offset - offset % cl.file_size)
                    on_stop(offset, f"commitlog file {missing} is missing")
                return
            pos = offset - mf.file_from_offset
            rc = check_record(mf.mv, pos, mf.wrote_position, check_crc=check_crc, read_body=read_body)
            if rc.kind == RECORD_VALID:
                yield rc.message
                offset += rc.size
            elif rc.kind == RECORD_BLANK or pos >= mf.wrote_position:
                offset = mf.file_from_offset + cl.file_size
            else:
                if on_stop is not None:
                    on_stop(offset, rc.reason)
                return

    # -- admin -------------------------------------------------------------------------------------
    @contextmanager
    def _puts_and_dispatch_held(self) -> Iterator[None]:
        """Hold the append lock and the dispatch lock (their order everywhere: put, dispatch, then
        the queue guard or the index lock) while queues are removed: no put can assign a queue offset,
        and no dispatch (the reput thread's, or a one-call put's, ``fast_put``) can write a unit,
        into a queue being destroyed; the next record of the topic goes into a new queue."""
        reput = self.reput
        with self.commit_log.put_lock:
            if reput is None:
                yield
                return
            with reput._dispatch_lock:
                yield

    def _dispatch_pending_locked(self, why: str) -> None:
        """Under ``_puts_and_dispatch_held``: every record put so far is dispatched to the queues it
        names, the write buffer's committed first. Why: queues about to be removed must take their
        records first; one dispatched after the removal would start a new queue at its old queue
        offset, while the next put's offset starts again at 0 (two messages at one offset, one lost)."""
        cl = self.commit_log
        if cl.write_buffer and not cl._commit_locked():
            log.warning("%s: the write buffer could not be committed; its records stay buffered", why)
        if self.reput is not None:  # (a store not started has only what the commit just handed over)
            try:
                self.reput.do_reput_locked()
            except OSError as e:
                log.warning("%s: dispatch of pending records stopped at commitlog offset %d: %s", why,
                            self.reput.reput_from_offset, e)

    def delete_topics(self, topics: Iterable[str], on_cut: Callable[[int], None] | None = None) -> int:
        """Destroy the consume queues of ``topics`` and forget their queue offsets.

        ``on_cut`` gets the commitlog offset every record of the old topics is below (a broker keeps it
        as the topics' tombstone) with puts and dispatch held, after their pending records reached
        the old queues, the commitlog was flushed up to it, and before the queues go: taken any earlier, a record put in between would be
        of the old topic but at or past the cut, and recovery would dispatch it into the new queue."""
        if self.read_only:
            raise PermissionError("store is open read-only")
        topics = list(topics)
        with self._puts_and_dispatch_held():
            self._dispatch_pending_locked(f"delete topics {topics}")
            if on_cut is not None:
                # On disk before the cut is: after a power cut a commitlog ending below it had the
                # records of a topic made again under that name put below the cut, never dispatched.
                self.commit_log.flush_held()
                on_cut(self.commit_log.max_offset() + self.commit_log.buffered_bytes)
            return self._destroy_queues_locked(topics)

    def drop_empty_queues(self, topic: str, then: Callable[[], None]) -> bool:
        """A queue type change (updateTopic's queue.type on a topic without messages): when, with puts
        and dispatch held and its pending records dispatched, no queue of ``topic`` holds a message,
        its queues go and ``then`` runs (the new config goes in before any put can make a queue of the
        old type again); False, changing nothing, when one does. Why under the locks: judged from the
        queues alone, a message put a moment before but not yet dispatched was not seen, and its
        queue was destroyed with it."""
        if self.read_only:
            raise PermissionError("store is open read-only")
        with self._puts_and_dispatch_held():
            self._dispatch_pending_locked(f"change the queue type of {topic}")
            if self.has_data(topic):
                return False
            self._destroy_queues_locked([topic])
            then()
            return True

    def _destroy_queues_locked(self, topics: list[str]) -> int:
        """Under ``_puts_and_dispatch_held``: the queues of ``topics``, their files and queue offsets go."""
        import shutil

        removed = 0
        with self._cq_guard:
            for key in [k for k in self.consume_queues if k[0] in set(topics)]:
                self.consume_queues.pop(key).destroy()
                removed += 1
            for t in topics:
                self.commit_log.queue_offsets.remove_topic(t)
            # Under the locks too: a put right after them may create the topic's queue again.
            for t in topics:
                for d in (CONSUME_QUEUE_DIR, BATCH_CONSUME_QUEUE_DIR, CONSUME_QUEUE_EXT_DIR):
                    p = self.root / d / t
                    if p.is_dir():
                        shutil.rmtree(p, ignore_errors=True)
        return removed

    def delete_expired_queue_files(self, commit_log_min_offset: int) -> int:
        """Retention's second step: each queue's leading files that point only below the commitlog's
        new min offset go, and its min offset moves up. Each queue under the queue guard, and only
        while it is still the store's: cleanExpiredCQ or deleteTopic may destroy it meanwhile (its
        files released under the walk: the walk failed with ValueError and stopped retention)."""
        with self._cq_guard:
            queues = list(self.consume_queues.items())
        deleted = 0
        for key, cq in queues:
            with self._cq_guard:
                if self.consume_queues.get(key) is cq:
                    deleted += cq.delete_expired_files(commit_log_min_offset)
        return deleted

    def clean_expired_consume_queues(self, keep: Callable[[str], bool] | None = None) -> list[tuple[str, int]]:
        """CLEAN_EXPIRED_CONSUMEQUEUE (cleanExpiredConsumerQueue): a queue whose last message ends below
        the commitlog's min offset points only at deleted files; it goes, with its queue offset entry
        (as Java's ConsumeQueueStore.cleanExpired). Empty queues, SCHEDULE_TOPIC_XXXX and the topics
        ``keep`` names stay: a broker keeps its system topics, as RocketMQ 5 does, since their readers
        are its own services holding a queue offset (the timer, pop revive, transaction checks) that
        a queue starting again at 0 would leave waiting for offsets that never come.
        Returns the (topic, queue id) removed."""
        if self.read_only:
            raise PermissionError("store is open read-only")
        min_phy = self.commit_log.min_offset()
        removed: list[tuple[str, int]] = []
        with self._puts_and_dispatch_held():
            self._dispatch_pending_locked("cleanExpiredConsumerQueue")  # a queue's newest record may be pending
            with self._cq_guard:
                for key, cq in sorted(self.consume_queues.items()):
                    if key[0] == SCHEDULE_TOPIC or keep is not None and keep(key[0]):
                        continue
                    end = cq.max_physic_end()
                    if 0 <= end < min_phy:
                        self.consume_queues.pop(key).destroy()
                        self.commit_log.queue_offsets.table.pop(f"{key[0]}-{key[1]}", None)
                        removed.append(key)
                        log.info("cleanExpiredConsumerQueue: %s-%d destroyed, its last message ends at %d, below "
                                 "the commitlog min offset %d", key[0], key[1], end, min_phy)
        return removed

    def clean_unused_topics(self, retain: set[str], keep: Callable[[str], bool] | None = None,
                            on_cut: Callable[[list[str], int], None] | None = None) -> list[str]:
        """CLEAN_UNUSED_TOPIC (cleanUnusedTopic): the queues of topics not in ``retain`` (the broker's
        topic configs) go; SCHEDULE_TOPIC_XXXX, LMQ queues and the topics ``keep`` names (the broker's
        system topics, as TopicValidator#isSystemTopic) stay. ``on_cut(topics, cut)`` is
        ``delete_topics``' on_cut (the broker tombstones them). Returns the topics removed."""
        if self.read_only:
            raise PermissionError("store is open read-only")
        unused = self.unused_topics(retain, keep)
        if unused:
            self.delete_topics(unused, on_cut=None if on_cut is None else lambda cut: on_cut(unused, cut))
            log.info("cleanUnusedTopic: removed the queues of %s", ", ".join(unused))
        return unused

    def unused_topics(self, retain: set[str], keep: Callable[[str], bool] | None = None) -> list[str]:
        """The topics ``clean_unused_topics`` would remove (verifyStore names them)."""
        with self._cq_guard:
            return sorted({t for t, _ in self.consume_queues
                           if t not in retain and t != SCHEDULE_TOPIC and not t.startswith("%LMQ%")
                           and not (keep is not None and keep(t))})

    def has_data(self, topic: str) -> bool:
        return any(cq.get_max_offset_in_queue() > 0 for (t, _), cq in list(self.consume_queues.items()) if t == topic)


def _inner_message_matches(message_filter: MessageFilterLike, m: MessageExt) -> bool:
    """Both filter steps for one message of an inner batch: the consume-queue step on the tagsCode its
    own TAGS would have as a plain record (its unit's is the outer record's), then the exact step."""
    return message_filter.is_matched_by_consume_queue(tags_code(m.tags)) and \
        message_filter.is_matched_by_commit_log(m.properties)


def unwrap_inner_batch(record: MessageExt, base_offset: int) -> list[MessageExt]:
    """Items of an inner-batch record as messages; item i gets queue offset base + i."""
    out = []
    for i, (flag, body, props) in enumerate(iter_batch_raw(record.body)):
        out.append(MessageExt(record.store_size, record.magic_code, record.body_crc, record.queue_id, flag,
                              base_offset + i, record.commit_log_offset, record.sys_flag & ~(INNER_BATCH_FLAG |
                              NEED_UNWRAP_FLAG), record.born_timestamp, record.born_host, record.store_timestamp,
                              record.store_host, record.reconsume_times, record.prepared_transaction_offset, body,
                              record.topic, props))
    return out


# StoreUtil's fallback when the machine's memory cannot be read.
_FALLBACK_PHYSICAL_MEMORY = 24 * 1024 ** 3


@functools.cache
def total_physical_memory() -> int:
    """The machine's physical memory in bytes (StoreUtil.TOTAL_PHYSICAL_MEMORY_SIZE): with
    accessMessageInMemoryMaxRatio it decides which units a read counts as in memory."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return _FALLBACK_PHYSICAL_MEMORY


BOOT_ID_PATH = Path("/proc/sys/kernel/random/boot_id")


def current_boot_id() -> str | None:
    """This kernel's boot id (Linux), or None where there is none."""
    try:
        return BOOT_ID_PATH.read_text().strip() or None
    except OSError:
        return None


def _mark_running(path: Path) -> None:
    """Create ``abort`` (the store is running) holding our pid and the kernel's boot id.

    Java only tests that the file exists, so the content is ours: the boot id tells recovery whether
    the machine restarted since (see ``_crashed_in_this_boot``). On a full disk the empty file, which
    needs no data block, is enough (recovery then assumes the worst, as Java does)."""
    try:
        path.write_text(f"{os.getpid()}\n{current_boot_id() or ''}\n")
    except OSError:
        path.touch()


def _crashed_in_this_boot(abort: Path) -> bool:
    """Whether the store was running under this same kernel boot when it stopped without a shutdown.

    Why it matters: a process killed by a signal loses no write it made into mapped files or by
    write(): they are in the kernel's page cache and reach the disk later. Only a kernel crash or a
    power cut loses them, and that always ends the boot. So within the same boot, only the last
    record (torn mid-copy) can be incomplete, and recovery need not re-check what the consume queues
    and the index confirm; after a reboot (or with no boot id) it checks as Java does.
    """
    boot = current_boot_id()
    if boot is None:
        return False
    try:
        lines = abort.read_text().split()
    except (OSError, UnicodeDecodeError):
        return False
    return len(lines) >= 2 and lines[1] == boot


def infer_file_sizes(config: StoreConfig, root: Path) -> bool:
    """An existing store's commitlog, CQ and BCQ file sizes win over ``config`` (they are unambiguous);
    True when the commitlog's did. Every reader of a store takes them so (the store, the Spark rebuild):
    a rebuild without the store's config wrote queue files of the default sizes the broker then could
    not open."""
    size = first_data_file_size(config.commit_log_dir)
    if size:
        config.mapped_file_size_commit_log = size
    cq_size = _first_nested_file_size(root / CONSUME_QUEUE_DIR)
    if cq_size and cq_size % CQ_STORE_UNIT_SIZE == 0:
        config.mapped_file_size_consume_queue = cq_size
    bcq_size = _first_nested_file_size(root / BATCH_CONSUME_QUEUE_DIR)
    if bcq_size and bcq_size % BCQ_STORE_UNIT_SIZE == 0:
        config.mapper_file_size_batch_consume_queue = bcq_size
    return bool(size)


def _first_nested_file_size(base: Path) -> int:
    """Length of the first non-empty data file of the first queue under ``base`` (0: none)."""
    if not base.is_dir():
        return 0
    for topic_dir in sorted(base.iterdir()):
        if not topic_dir.is_dir():
            continue
        for qdir in sorted(topic_dir.iterdir()):
            size = first_data_file_size(qdir)
            if size:
                return size
    return 0
