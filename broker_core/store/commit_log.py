"""The CommitLog: one append-only log of every record of every topic (spec §1, §9).

Records are encoded outside the append lock; inside it only the queue offset, physical offset and
store timestamp are patched in and the bytes copied into the mapped file. A record that does not fit
the current file ends it with a BLANK marker (spec §1.7). Flushing is ASYNC (a background thread every
flushIntervalCommitLog) or SYNC with group commit: concurrent putters wait on one fsync that covers
all of them.
"""

from __future__ import annotations

import errno
import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum

from ..common.round_failures import RoundFailures
from .codec.hot_py import inner_batch_known
from .codec.hotpath import check_message, offset_msg_id
from .codec.message import (
    END_FILE_MIN_BLANK_LENGTH,
    MESSAGE_MAGIC_CODE_V1,
    MESSAGE_MAGIC_CODE_V2,
    MessageExt,
    MessageInner,
    PreparedRecord,
    RecordError,
    decode_record,
    encode_blank,
    prepare_record,
    read_magic,
    read_total_size,
    record_parts,
    write_record,
)
from .codec.sys_flag import TRANSACTION_PREPARED_TYPE, is_dispatched_to_queue
from .dispatch import KnownProperties
from .errors import CorruptDataError, StoreClosedError
from .mapped_file import MappedFile, MappedFileQueue, offset_to_file_name
from .store_config import SYNC_FLUSH, StoreConfig

log = logging.getLogger("rmqops.store")

# One appended record as dispatch needs it: (commit_log_offset, size, topic, queue_id, queue_offset,
# sys_flag, store_timestamp, prepared_transaction_offset, properties string, TAGS/KEYS/UNIQ_KEY if known).
AppendedRecord = tuple[int, int, str, int, int, int, int, int, str, KnownProperties | None]
APPENDED_RECORDS_MAX = 65536

# Records of at least this many bytes are written with pwritev instead of a copy into the mapping.
# Measured here per record, copy into a populated mapping vs pwritev: 1 KiB 2.0 vs 2.0 us, 4 KiB 5.6 vs
# 4.1 us, 64 KiB 78 vs 21.5 us (populating zero-fills every page before the copy overwrites it).
DIRECT_WRITE_MIN = 4 * 1024

# The longest a group commit round waits for requests to join it (RocketMQ's GroupCommitService
# waits up to 10 ms between rounds).
GROUP_COMMIT_GATHER_S = 0.01

# How long the flush thread waits before it tries a failed flush again (RocketMQ's GroupCommitService
# waits 10 ms between rounds whatever happened; a failing msync is retried at a tenth of that rate).
FLUSH_RETRY_PAUSE_S = 0.1

# How far ahead of the write position the commitlog mapping is faulted in, in one call.
POPULATE_AHEAD = 1 << 20

# With the write buffer (transientStorePoolEnable), buffered inner-batch records are committed to the
# file in one pwritev as soon as this many bytes are pending. Why 1 MiB: page-cache writes of one
# ~67 KiB batch record cost twice as much per byte here as writes of ~1 MiB (2.5 against 4.8 GB/s of
# CPU time, 16 records per pwritev; the kernel gives a large write large folios).
WRITE_BUFFER_COMMIT_BYTES = 1 << 20
# A commit is one pwritev of three buffers per record; Linux takes at most 1024 (IOV_MAX).
WRITE_BUFFER_MAX_PARTS = 1020


class PutMessageStatus(StrEnum):
    PUT_OK = "PUT_OK"
    FLUSH_DISK_TIMEOUT = "FLUSH_DISK_TIMEOUT"
    CREATE_MAPPED_FILE_FAILED = "CREATE_MAPPED_FILE_FAILED"
    MESSAGE_ILLEGAL = "MESSAGE_ILLEGAL"
    PROPERTIES_SIZE_EXCEEDED = "PROPERTIES_SIZE_EXCEEDED"
    SERVICE_NOT_AVAILABLE = "SERVICE_NOT_AVAILABLE"
    UNKNOWN_ERROR = "UNKNOWN_ERROR"
    # Put-hook refusals of timer messages (RocketMQ HookUtils); never produced by the store itself.
    WHEEL_TIMER_FLOW_CONTROL = "WHEEL_TIMER_FLOW_CONTROL"
    WHEEL_TIMER_MSG_ILLEGAL = "WHEEL_TIMER_MSG_ILLEGAL"
    WHEEL_TIMER_NOT_ENABLE = "WHEEL_TIMER_NOT_ENABLE"


@dataclass(slots=True)
class PutMessageResult:
    status: PutMessageStatus
    wrote_offset: int = -1
    wrote_bytes: int = 0
    msg_id: str = ""
    queue_offset: int = -1
    msg_num: int = 1
    store_timestamp: int = 0
    remark: str = ""
    msg_ids: list[str] | None = None

    @property
    def ok(self) -> bool:
        return self.status is PutMessageStatus.PUT_OK


PUT_OK = PutMessageStatus.PUT_OK


def _encode_failure(e: RecordError) -> PutMessageResult:
    status = PutMessageStatus.PROPERTIES_SIZE_EXCEEDED if "properties" in str(e) else PutMessageStatus.MESSAGE_ILLEGAL
    return PutMessageResult(status, remark=str(e))


def disk_refusal(e: OSError) -> PutMessageResult:
    """A put refused because the disk cannot take it (nothing was written, no offset taken).

    Public because every writer a put goes through answers a failed file create or grow the same way:
    the commitlog's appends and the MessageStore's index-room check before an append.
    """
    if isinstance(e, StoreClosedError):
        return PutMessageResult(PutMessageStatus.SERVICE_NOT_AVAILABLE, remark=str(e))
    if e.errno in (errno.ENOSPC, errno.EDQUOT):
        text = e.strerror or str(e)  # a DiskFullError's text already says "disk full: cannot allocate ..."
        return PutMessageResult(PutMessageStatus.SERVICE_NOT_AVAILABLE,
                                remark=text if text.startswith("disk full") else f"disk full: {text}")
    return PutMessageResult(PutMessageStatus.CREATE_MAPPED_FILE_FAILED, remark=f"cannot create or grow a file: {e}")


def _inner_batch_known(msg: MessageInner, props: str) -> KnownProperties | None:
    """TAGS/KEYS/UNIQ_KEY of an inner-batch record from its property dict, so that dispatch does not
    parse its properties string (INNER_NUM/INNER_BASE, which ``known_properties`` leaves to the
    string, dispatch reads from the string itself: ``dispatch.inner_batch_position``). The rule is
    ``hot_py.inner_batch_known``'s (the reference, taken here for any dict type).
    """
    return inner_batch_known(msg.topic, msg.properties, props)


def _uncommitted() -> PutMessageResult:
    """A put refused because the records buffered before it cannot be committed (they stay buffered)."""
    return PutMessageResult(PutMessageStatus.UNKNOWN_ERROR,
                            remark="the write buffer could not be committed to the commitlog (see the log)")


def now_ms() -> int:
    """Wall-clock milliseconds since the epoch (System.currentTimeMillis), from integer nanoseconds."""
    return time.time_ns() // 1_000_000


class QueueOffsetAssigner:
    """Next queue offset per ``topic-queueId``; rebuilt from consume queues at recovery."""

    def __init__(self) -> None:
        self.table: dict[str, int] = {}

    def next(self, topic: str, queue_id: int) -> int:
        return self.table.get(f"{topic}-{queue_id}", 0)

    def advance(self, topic: str, queue_id: int, step: int) -> None:
        key = f"{topic}-{queue_id}"
        self.table[key] = self.table.get(key, 0) + step

    def assign(self, topic: str, queue_id: int, step: int) -> int:
        """``next`` then ``advance`` with one key formatting and lookup (the single-put path)."""
        key = f"{topic}-{queue_id}"
        table = self.table
        base = table.get(key, 0)
        table[key] = base + step
        return base

    def set(self, topic: str, queue_id: int, offset: int) -> None:
        self.table[f"{topic}-{queue_id}"] = offset

    def remove_topic(self, topic: str) -> None:
        prefix = topic + "-"
        for key in [k for k in self.table if k.startswith(prefix) and k[len(prefix):].isdigit()]:
            del self.table[key]


class CommitLog:
    def __init__(self, config: StoreConfig, clock: Callable[[], int] = now_ms, read_only: bool = False) -> None:
        self.config = config
        self.clock = clock
        self.read_only = read_only
        self.file_size = config.mapped_file_size_commit_log
        self.file_queue = MappedFileQueue(config.commit_log_dir, self.file_size, read_only)
        self.put_lock = threading.Lock()
        self.queue_offsets = QueueOffsetAssigner()
        self.last_store_timestamp = 0
        # The store time of the newest record known to be on disk (what RocketMQ's flush service puts
        # in the checkpoint as physicMsgTimestamp): the time of the newest record in the file when a
        # flush began, once that flush reached it; and of the newest committed write-buffer record.
        self.flushed_store_timestamp = 0
        self._committed_store_timestamp = 0
        self.sync_flush = config.flush_disk_type == SYNC_FLUSH
        self._flush_cond = threading.Condition()
        self._flush_requested_to = 0
        # Group commit rounds (SYNC_FLUSH): flush requests since the current round began, and last round's.
        self._requests_this_round = 0
        self._requests_last_round = 1
        self.flushed_offset = 0
        self.fsync_count = 0
        self._flush_thread: threading.Thread | None = None
        self._stopping = False
        self.append_listeners: list[Callable[[], None]] = []
        # What each append wrote, in commitlog order, for dispatch: it need not decode what was just
        # encoded. Bounded; dispatch reads from the file whatever is not (or no longer) here.
        self.appended_records: deque[AppendedRecord] = deque(maxlen=APPENDED_RECORDS_MAX)
        # The write buffer (RocketMQ's transientStorePool; inner-batch records only, see put_inner_batch):
        # records appended after the file's write position, not yet in the file. ``_wb_end`` is the file
        # position after the last of them; their (header, body, tail) buffers and dispatch fields wait
        # for ``commit``, which writes them and moves the write position (readers see no more).
        self.write_buffer = config.write_buffer_enabled and not read_only
        self._wb_file: MappedFile | None = None
        self._wb_end = 0
        # Commits of the write buffer so far: a put tells whether its call moved records into the file.
        self.commits = 0
        # fast_put.put_inner_batch_fast encodes a large record here, then writes it with one pwritev (a
        # copy into the mapping would pay for zero-filled pages first, see MappedFile.write_vectored)
        self.record_scratch = bytearray()
        self._wb_parts: list[bytes | bytearray | memoryview] = []
        self._wb_records: list[AppendedRecord] = []
        # (commitlog offset, INNER_BASE, INNER_NUM) of the inner batches buffered_put.py buffered, so its
        # dispatch need not parse them back out of the properties string; stale entries are skipped.
        self.inner_batch_sizes: deque[tuple[int, int, int]] = deque(maxlen=APPENDED_RECORDS_MAX)

    # -- lifecycle ---------------------------------------------------------------------------------
    def load(self) -> None:
        self.file_queue.load()
        files = self.file_queue.files
        for before, after in zip(files, files[1:], strict=False):
            if after.file_from_offset != before.file_from_offset + self.file_size:
                # Not repairable (the records are the data): say it once here, each read of a record in
                # the gap then fails with CorruptDataError naming its consume queue and offset.
                first = offset_to_file_name(before.file_from_offset + self.file_size)
                last = offset_to_file_name(after.file_from_offset - self.file_size)
                log.error("commitlog: %s missing; the records in it cannot be read",
                          f"file {first} is" if first == last else f"files {first} to {last} are")

    def start(self) -> None:
        if self.read_only or self._flush_thread is not None:
            return
        self._stopping = False
        target = self._group_commit_loop if self.sync_flush else self._async_flush_loop
        self._flush_thread = threading.Thread(target=target, name="CommitLogFlush", daemon=True)
        self._flush_thread.start()

    def shutdown(self) -> None:
        self._stopping = True
        with self._flush_cond:
            self._flush_cond.notify_all()
        if self._flush_thread is not None:
            self._flush_thread.join(timeout=10)
            self._flush_thread = None
        if not self.read_only:
            self.flush()

    def close(self) -> None:
        """Close every file under the append lock, after the put holding it (if any) and with what it
        left buffered committed and flushed; the file queue then refuses to make a file, so a later
        put is refused (SERVICE_NOT_AVAILABLE) instead of starting the log again at offset 0."""
        with self.put_lock:
            if self._wb_records and not self._commit_locked():
                log.error("closing the commitlog with %d buffered record(s) not committed", len(self._wb_records))
            if not self.read_only:
                self.file_queue.flush()
            self.file_queue.close()

    # -- offsets -----------------------------------------------------------------------------------
    def min_offset(self) -> int:
        return self.file_queue.min_offset()

    def max_offset(self) -> int:
        return self.file_queue.max_offset()

    def roll_next_file(self, offset: int) -> int:
        return offset + self.file_size - offset % self.file_size

    # -- append ------------------------------------------------------------------------------------
    def put_message(self, msg: MessageInner, queue_step: int = 1, queue_offset: int | None = None,
                    properties_string: str | None = None) -> PutMessageResult:
        """Append one record; ``queue_step`` is how many queue offsets it consumes (INNER_NUM).

        The same steps as ``put_messages`` for one message, without its per-batch lists, written out
        flat: this is the path every single send takes. The record is prepared (and its body CRC
        computed) before the lock; under it only the file, offsets and store time are decided.
        """
        if self.read_only:
            return PutMessageResult(PutMessageStatus.SERVICE_NOT_AVAILABLE, remark="store is open read-only")
        try:
            check_message(msg, properties_string is not None)
            rec = prepare_record(msg, properties_string, self.config.max_message_size)
        except RecordError as e:
            return _encode_failure(e)
        size = rec[0]
        file_size = self.file_size
        if size + END_FILE_MIN_BLANK_LENGTH > file_size:
            return self._too_large(size)
        # PREPARED and ROLLBACK records (TRANSACTION_PREPARED_TYPE bit set) get no queue offset.
        tran_typed = msg.sys_flag & TRANSACTION_PREPARED_TYPE
        with self.put_lock:
            if self._wb_records and not self._commit_locked():
                return _uncommitted()
            files = self.file_queue.files
            mf = files[-1] if files else None
            pos = mf.wrote_position if mf is not None else 0
            if mf is None or pos + size + END_FILE_MIN_BLANK_LENGTH > file_size or (
                    pos + size > mf.populated_to and size < DIRECT_WRITE_MIN) or pos + size > mf.reserved_to:
                # A new file, the end of one (BLANK), or a mapping to populate / disk blocks to reserve ahead.
                try:
                    mf = self._file_for(size)
                except OSError as e:
                    return disk_refusal(e)
                if mf is None:
                    return PutMessageResult(PutMessageStatus.CREATE_MAPPED_FILE_FAILED)
                pos = mf.wrote_position
            store_ts = msg.store_timestamp if msg.keep_store_timestamp else self.clock()
            self.last_store_timestamp = store_ts
            if queue_offset is not None:
                base_q = queue_offset
            elif tran_typed:
                base_q = self.queue_offsets.next(msg.topic, msg.queue_id)
            else:
                base_q = self.queue_offsets.assign(msg.topic, msg.queue_id, queue_step)
            q = 0 if tran_typed else base_q
            phy = mf.file_from_offset + pos
            try:
                if size < DIRECT_WRITE_MIN:
                    msg_id = write_record(mf.mv, pos, rec, msg, q, phy, store_ts)
                else:
                    mf.write_vectored(pos, record_parts(rec, msg, q, phy, store_ts))
                    msg_id = offset_msg_id(rec[5], phy)
            except Exception as e:  # nothing may stay changed: the offset goes back, the bytes are void
                if queue_offset is None and not tran_typed:
                    self.queue_offsets.set(msg.topic, msg.queue_id, base_q)
                return self._append_failed(mf, pos, 0, e, pos + size)
            mf.wrote_position = pos + size
            self.appended_records.append((phy, size, msg.topic, msg.queue_id, q, rec[3], store_ts,
                                          msg.prepared_transaction_offset, rec[7], rec[8]))
        for listener in self.append_listeners:
            listener()
        # positional: a dataclass __init__ with a keyword argument costs twice as much (0.4 against 0.2 us)
        result = PutMessageResult(PUT_OK, phy, size, msg_id, base_q, queue_step, store_ts, "", [msg_id])
        if self.sync_flush and self._wait_for_flush(phy + size, msg):
            result.status = PutMessageStatus.FLUSH_DISK_TIMEOUT
        return result

    def put_inner_batch(self, msg: MessageInner, inner_num: int,
                        queue_check: Callable[[], PutMessageResult | None] | None = None) -> PutMessageResult:
        """Append a BatchCQ inner-batch record consuming ``inner_num`` queue offsets.

        INNER_BASE must equal the queue offset the record gets, which is only known under the
        append lock, so this record is prepared inside the lock (spec §1.11.3). With the write
        buffer the record is buffered (``_buffer_inner_batch``) instead of written at once.
        ``queue_check`` runs under the append lock before the queue offset is taken; a result from it
        is the put's (a refusal: nothing is written).
        """
        if self.read_only:
            return PutMessageResult(PutMessageStatus.SERVICE_NOT_AVAILABLE, remark="store is open read-only")
        try:
            check_message(msg)
        except RecordError as e:
            return _encode_failure(e)
        with self.put_lock:
            refused = queue_check() if queue_check is not None else None
            if refused is not None:
                return refused
            commits_before = self.commits
            base_q = self.queue_offsets.next(msg.topic, msg.queue_id)
            msg.properties["INNER_BASE"] = str(base_q)
            msg.properties["INNER_NUM"] = str(inner_num)
            try:
                rec = prepare_record(msg, None, self.config.max_message_size)
            except RecordError as e:
                return _encode_failure(e)
            size = rec[0]
            if size + END_FILE_MIN_BLANK_LENGTH > self.file_size:
                return self._too_large(size)
            if self.write_buffer:
                buffered = self._buffer_inner_batch(msg, rec, base_q, inner_num)
            else:
                try:
                    mf = self._file_for(size)
                except OSError as e:
                    return disk_refusal(e)
                if mf is None:
                    return PutMessageResult(PutMessageStatus.CREATE_MAPPED_FILE_FAILED)
                store_ts = self._store_timestamp(msg)
                try:
                    phy, msg_id = self._append_record(mf, rec, msg, base_q, store_ts,
                                                      _inner_batch_known(msg, rec[7]))
                except Exception as e:
                    return self._append_failed(mf, mf.wrote_position, 0, e, mf.wrote_position + size)
                self.queue_offsets.advance(msg.topic, msg.queue_id, inner_num)
        if self.write_buffer:  # (the write buffer is never on under SYNC_FLUSH: nothing to wait for)
            if buffered.ok and self.commits != commits_before:  # records reached the file: dispatch looks
                for listener in self.append_listeners:
                    listener()
            return buffered
        return self._appended(msg, phy, msg_id, size, base_q, inner_num, store_ts)

    def _buffer_inner_batch(self, msg: MessageInner, rec: PreparedRecord, base_q: int, inner_num: int
                            ) -> PutMessageResult:
        """``put_inner_batch``'s append with the write buffer (called with the put lock held).

        The record takes the position after what is already buffered; its disk blocks are reserved
        now (a full disk refuses this put, nothing buffered), so the commit cannot run out of space.
        The body is kept by reference when it is ``bytes`` (immutable), copied otherwise: the caller
        may reuse its buffer once the put returns.
        """
        size = rec[0]
        mf = self._wb_file
        if mf is not None and (self._wb_end + size + END_FILE_MIN_BLANK_LENGTH > self.file_size
                               or self._wb_end - mf.wrote_position >= WRITE_BUFFER_COMMIT_BYTES
                               or len(self._wb_parts) >= WRITE_BUFFER_MAX_PARTS):
            # The file ends with what is buffered (commit, then roll), or the buffer is full (a commit
            # failed after the last put): nothing more is buffered until it is committed.
            if not self._commit_locked():
                return _uncommitted()
            mf = None
        try:
            if mf is None:
                mf = self._file_for(size)
                if mf is None:
                    return PutMessageResult(PutMessageStatus.CREATE_MAPPED_FILE_FAILED)
                pos = mf.wrote_position
            else:
                pos = self._wb_end
                mf.reserve(pos + size)
        except OSError as e:
            return disk_refusal(e)
        store_ts = self._store_timestamp(msg)
        phy = mf.file_from_offset + pos
        header, body, tail = record_parts(rec, msg, base_q, phy, store_ts)
        # The buffer's state changes only here, all at once: a file with nothing buffered is never kept.
        self._wb_file = mf
        self._wb_parts += (header, body if type(body) is bytes else bytes(body), tail)
        self._wb_records.append((phy, size, msg.topic, msg.queue_id, base_q, rec[3], store_ts,
                                 msg.prepared_transaction_offset, rec[7], _inner_batch_known(msg, rec[7])))
        self._wb_end = pos + size
        self.queue_offsets.advance(msg.topic, msg.queue_id, inner_num)
        if self._wb_end - mf.wrote_position >= WRITE_BUFFER_COMMIT_BYTES or len(self._wb_parts) >= WRITE_BUFFER_MAX_PARTS:
            self._commit_locked()  # a failure keeps the records buffered: the next commit writes them
        msg_id = offset_msg_id(rec[5], phy)
        return PutMessageResult(PUT_OK, phy, size, msg_id, base_q, inner_num, store_ts, "", [msg_id])

    def commit(self) -> bool:
        """Write the buffered records to the commitlog file (CommitRealTimeService's commit); from
        then on readers and dispatch see them. True when nothing is left buffered."""
        with self.put_lock:
            if not self._wb_records:
                return True
            done = self._commit_locked()
        if done:
            for listener in self.append_listeners:
                listener()
        return done

    @property
    def buffered_bytes(self) -> int:
        """Bytes of records put but not yet committed to the file (0 without the write buffer)."""
        mf = self._wb_file
        return 0 if mf is None else self._wb_end - mf.wrote_position

    def _commit_locked(self) -> bool:
        """``commit`` under the put lock. The buffered bytes go in with one pwritev at the write
        position, which then moves past them, and their dispatch entries are handed over. On an
        error nothing moves and everything stays buffered: a retry writes the same bytes at the
        same place (a torn write is overwritten, and beyond the write position no reader looks).
        """
        mf = self._wb_file
        if mf is None:
            return True
        try:
            mf.write_vectored(mf.wrote_position, tuple(self._wb_parts))
        except Exception:
            log.exception("could not commit %d buffered bytes at commitlog offset %d", self._wb_end - mf.wrote_position,
                          mf.file_from_offset + mf.wrote_position)
            return False
        mf.wrote_position = self._wb_end
        self.commits += 1
        if self._wb_records:
            self._committed_store_timestamp = self._wb_records[-1][6]
        self.appended_records.extend(self._wb_records)
        self._wb_file = None
        self._wb_parts = []
        self._wb_records = []
        return True

    def _append_failed(self, mf: MappedFile, start_pos: int, records_done: int, e: Exception,
                       written_to: int) -> PutMessageResult:
        """Undo a partly written append (under the put lock): the write position goes back to
        ``start_pos``, the bytes up to ``written_to`` are zeroed (a later recovery must not find them)
        and the dispatch entries of the records already written are dropped. The caller restores the
        queue offset. Why: a put that fails must change nothing (no offset, no record).
        """
        for _ in range(records_done):
            self.appended_records.pop()
        end = max(mf.wrote_position, min(written_to, mf.file_size))
        mf.wrote_position = start_pos
        try:
            if end > start_pos:
                mf.write_at(start_pos, bytes(end - start_pos))
        except Exception:  # the bytes stay past the write position; recovery still cuts there
            log.exception("could not clear a failed append at %d", mf.file_from_offset + start_pos)
        log.error("append at commitlog offset %d failed: %s", mf.file_from_offset + start_pos, e)
        return PutMessageResult(PutMessageStatus.UNKNOWN_ERROR, remark=f"append failed: {e}")

    def _too_large(self, size: int) -> PutMessageResult:
        """A record (or whole batch) must fit one file with room for the 8-byte BLANK marker."""
        return PutMessageResult(PutMessageStatus.MESSAGE_ILLEGAL,
                                remark=f"batch of {size} bytes cannot fit one commitlog file")

    def _store_timestamp(self, msg: MessageInner) -> int:
        """The append time, taken under the put lock (kept as given when the caller fixes it)."""
        store_ts = msg.store_timestamp if msg.keep_store_timestamp else self.clock()
        self.last_store_timestamp = store_ts
        return store_ts

    def _appended(self, msg: MessageInner, phy: int, msg_id: str, size: int, base_q: int, msg_num: int,
                  store_ts: int) -> PutMessageResult:
        """After an append: wake dispatch, build the result, wait for the flush under SYNC_FLUSH."""
        for listener in self.append_listeners:
            listener()
        result = PutMessageResult(PUT_OK, phy, size, msg_id, base_q, msg_num, store_ts, "", [msg_id])
        if self.sync_flush and self._wait_for_flush(phy + size, msg):
            result.status = PutMessageStatus.FLUSH_DISK_TIMEOUT
        return result

    def _append_record(self, mf: MappedFile, rec: PreparedRecord, msg: MessageInner, queue_offset: int,
                       store_ts: int, known: KnownProperties | None = None) -> tuple[int, str]:
        """Write a prepared record at the file's write position (under the put lock), advance it and
        hand dispatch the record's fields (``known``: TAGS/KEYS/UNIQ_KEY when the caller knows them
        better than ``rec``); returns its commitlog offset and offset msgId.

        Small records are copied into the mapping (populated ahead); large ones go in with pwritev.
        """
        pos = mf.wrote_position
        phy = mf.file_from_offset + pos
        size = rec[0]
        if size < DIRECT_WRITE_MIN:
            msg_id = write_record(mf.mv, pos, rec, msg, queue_offset, phy, store_ts)
        else:
            mf.write_vectored(pos, record_parts(rec, msg, queue_offset, phy, store_ts))
            msg_id = offset_msg_id(rec[5], phy)
        mf.wrote_position = pos + size
        self.appended_records.append((phy, size, msg.topic, msg.queue_id, queue_offset, rec[3], store_ts,
                                      msg.prepared_transaction_offset, rec[7], rec[8] if known is None else known))
        return phy, msg_id

    def _file_for(self, size: int) -> MappedFile | None:
        """The file the next ``size`` bytes go to; a file they do not fit is ended with BLANK first."""
        files = self.file_queue.files
        if files:  # the common case: the last file has room and is populated past the record
            mf = files[-1]
            end = mf.wrote_position + size
            if end + END_FILE_MIN_BLANK_LENGTH <= self.file_size and end <= mf.reserved_to and (
                    end <= mf.populated_to or size >= DIRECT_WRITE_MIN):
                return mf
        mf = files[-1] if files else None
        if mf is None or mf.is_full():
            start = 0 if mf is None else mf.file_from_offset + self.file_size
            mf = self._next_file(start, size)
            self.file_queue.add_file(mf)
            return mf
        if size + END_FILE_MIN_BLANK_LENGTH > mf.free:
            return self._roll(mf, size)
        self._make_room(mf, size)
        return mf

    def _roll(self, last: MappedFile, size: int) -> MappedFile:
        """End ``last`` with BLANK and go on in the next file, which gets the disk blocks for ``size``
        bytes first; on a full disk (DiskFullError) nothing has changed.

        Why this order: ending the file first left, after a refused put, the BLANK written, an empty
        next file and dispatch moved past ``last``; it was no longer the file being written, and the
        disk cleaner (forced on that full disk) deleted it with every message acknowledged in it.
        """
        last.reserve(last.wrote_position + END_FILE_MIN_BLANK_LENGTH)
        nxt = self._next_file(last.file_from_offset + self.file_size, size)
        last.append(encode_blank(last.free))
        last.wrote_position = self.file_size
        self.file_queue.add_file(nxt)
        return nxt

    def _next_file(self, start: int, size: int) -> MappedFile:
        """A new file at ``start`` with room made for ``size`` bytes, not yet in the file queue; a
        file the disk cannot hold is deleted again before the error goes up."""
        mf = self.file_queue.new_file(start)
        try:
            self._make_room(mf, size)
        except BaseException:
            mf.destroy()
            raise
        return mf

    @staticmethod
    def _make_room(mf: MappedFile, size: int) -> None:
        """Populate the mapping ahead of a small record and reserve the disk blocks of the next
        ``size`` bytes (DiskFullError before anything is written)."""
        if size < DIRECT_WRITE_MIN and mf.wrote_position + size > mf.populated_to:
            mf.populate(mf.wrote_position + size + POPULATE_AHEAD)
        mf.reserve(mf.wrote_position + size)

    def put_messages(self, msgs: list[MessageInner], properties_strings: list[str | None] | None = None
                     ) -> PutMessageResult:
        """Append an exploded batch: contiguous records in one file, consecutive queue offsets."""
        props = properties_strings or [None] * len(msgs)
        if self.read_only:
            return PutMessageResult(PutMessageStatus.SERVICE_NOT_AVAILABLE, remark="store is open read-only")
        try:
            for m, p in zip(msgs, props, strict=True):
                check_message(m, p is not None)
            prepared = [prepare_record(m, p, self.config.max_message_size) for m, p in zip(msgs, props, strict=True)]
        except RecordError as e:
            return _encode_failure(e)
        total = sum(rec[0] for rec in prepared)
        if total + END_FILE_MIN_BLANK_LENGTH > self.file_size:
            return self._too_large(total)
        first = msgs[0]
        with self.put_lock:
            if self._wb_records and not self._commit_locked():
                return _uncommitted()
            try:
                mf = self._file_for(total)
            except OSError as e:
                return disk_refusal(e)
            if mf is None:
                return PutMessageResult(PutMessageStatus.CREATE_MAPPED_FILE_FAILED)
            store_ts = self._store_timestamp(first)
            wrote_offset = mf.file_from_offset + mf.wrote_position
            base_q = self.queue_offsets.next(first.topic, first.queue_id)
            ids: list[str] = []
            q = base_q
            tran_typed = not is_dispatched_to_queue(first.sys_flag)
            start_pos = mf.wrote_position
            try:
                for m, rec in zip(msgs, prepared, strict=True):
                    ts = m.store_timestamp if m.keep_store_timestamp else store_ts
                    ids.append(self._append_record(mf, rec, m, 0 if tran_typed else q, ts)[1])
                    q += 1
            except Exception as e:
                return self._append_failed(mf, start_pos, len(ids), e, start_pos + total)
            if not tran_typed:
                self.queue_offsets.advance(first.topic, first.queue_id, q - base_q)
            end_offset = wrote_offset + total
        for listener in self.append_listeners:
            listener()
        result = PutMessageResult(PutMessageStatus.PUT_OK, wrote_offset, total, ",".join(ids), base_q,
                                  len(msgs), store_ts, msg_ids=ids)
        if self.sync_flush and self._wait_for_flush(end_offset, first):
            result.status = PutMessageStatus.FLUSH_DISK_TIMEOUT
        return result

    # -- flush -------------------------------------------------------------------------------------
    def _wait_for_flush(self, end_offset: int, msg: MessageInner) -> bool:
        """Block until ``end_offset`` is on disk; True on timeout. WAIT=false skips waiting."""
        if msg.properties.get("WAIT") == "false":
            return False
        deadline = time.monotonic() + self.config.sync_flush_timeout / 1000
        with self._flush_cond:
            if end_offset > self._flush_requested_to:
                self._flush_requested_to = end_offset
            self._requests_this_round += 1
            self._flush_cond.notify_all()
            while self.flushed_offset < end_offset:
                if self._flush_thread is None:
                    self._flush_cond.release()
                    try:
                        self.flush()
                    except OSError as e:  # stored, not on disk: the put's answer says so, not a traceback
                        log.error("commitlog flush for a SYNC_FLUSH put failed: %s", e)
                        return True
                    finally:
                        self._flush_cond.acquire()
                    continue
                left = deadline - time.monotonic()
                if left <= 0:
                    return True
                self._flush_cond.wait(left)
        return False

    def _group_commit_loop(self) -> None:
        """GroupCommitService: one flush for every waiting request.

        RocketMQ swaps its whole request list and flushes once for all of it; its putters run in
        parallel, so by the time a flush starts every producer that is going to ask has asked. Here
        the putters woken by the last flush take turns on the GIL, and the first request would
        start a flush before the others have even written their records: each then costs one more
        flush. So a round gathers: after the first request it waits (at most GROUP_COMMIT_GATHER_S)
        until as many requests have come as the last round had, then flushes everything written
        so far. A lone producer is flushed at once (its last round had one request).

        A flush that fails (EIO from msync: the storage failed) must not end the thread, or every
        later SYNC_FLUSH put would wait out its timeout for good: it is logged once, retried after
        FLUSH_RETRY_PAUSE_S, and the waiting putters answer FLUSH_DISK_TIMEOUT when their wait ends.
        """
        failures = RoundFailures(log, "commitlog flush")
        while True:
            with self._flush_cond:
                while not self._stopping and self._flush_requested_to <= self.flushed_offset:
                    self._flush_cond.wait(0.01)
                if self._stopping and self._flush_requested_to <= self.flushed_offset:
                    return
                deadline = time.monotonic() + GROUP_COMMIT_GATHER_S
                while self._requests_this_round < self._requests_last_round and not self._stopping:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        break
                    self._flush_cond.wait(left)
                self._requests_last_round = max(1, self._requests_this_round)
                self._requests_this_round = 0
            if not self._flush_round(failures):
                with self._flush_cond:
                    if not self._stopping:
                        self._flush_cond.wait(FLUSH_RETRY_PAUSE_S)
                    if self._stopping:  # shutdown's own flush tries once more and reports
                        return

    def _async_flush_loop(self) -> None:
        """FlushRealTimeService (and CommitRealTimeService): a failed round is logged once and
        retried on the next pass; the thread must outlive it, or nothing is flushed any more."""
        failures = RoundFailures(log, "commitlog flush")
        interval = self.config.flush_interval_commit_log / 1000
        thorough = self.config.flush_commit_log_thorough_interval / 1000
        last_thorough = time.monotonic()
        # With the write buffer this is also RocketMQ's CommitRealTimeService: what is buffered is
        # committed every commitIntervalCommitLog, the flush still runs every flushIntervalCommitLog.
        commit_every = self.config.commit_interval_commit_log / 1000 if self.write_buffer else interval
        next_flush = time.monotonic() + interval
        while not self._stopping:
            with self._flush_cond:
                self._flush_cond.wait(min(interval, commit_every))
            if self._stopping:
                break
            if self.write_buffer:
                if not self._flush_round(failures, commit_only=True):
                    continue
                if time.monotonic() < next_flush:
                    continue
                next_flush = time.monotonic() + interval
            least = self.config.flush_commit_log_least_pages
            if time.monotonic() - last_thorough >= thorough:
                least = 0
                last_thorough = time.monotonic()
            self._flush_round(failures, least)

    def _flush_round(self, failures: RoundFailures, least_pages: int = 0, commit_only: bool = False) -> bool:
        """One round of the flush thread; False when it failed (logged through ``failures``).

        Why catch everything: RocketMQ's flush services catch Throwable in their loop too. An OSError
        is the storage (one line naming the file, then "works again"); anything else keeps its
        traceback, and the thread still carries on.
        """
        try:
            if commit_only:
                self.commit()
            else:
                self.flush(least_pages)
        except Exception as e:
            failures.failed(e)
            return False
        if not commit_only:
            failures.succeeded()
        return True

    def flush(self, least_pages: int = 0) -> None:
        """msync every dirty file (committing the write buffer first); wakes putters waiting on a group
        commit."""
        if self._wb_records:
            self.commit()
        with self.put_lock:
            target, in_file_ts, dirty = self._flush_plan()
        self._flush_files(target, in_file_ts, dirty, least_pages)

    def flush_held(self) -> None:
        """``flush`` for a caller that holds ``put_lock`` with the write buffer committed
        (``MessageStore.delete_topics``: a tombstone's cut must be on disk before the tombstone)."""
        if self._wb_records:
            raise RuntimeError("flush_held: the write buffer holds records; commit them first")
        target, in_file_ts, dirty = self._flush_plan()
        self._flush_files(target, in_file_ts, dirty, 0)

    def _flush_plan(self) -> tuple[int, int, list[MappedFile]]:
        """Under ``put_lock``: the offset a flush now reaches, the newest store time in the files, the
        files with unflushed bytes."""
        target = self.max_offset()
        # the newest record in the file: a buffered one (not in the file yet) does not count
        in_file_ts = self._committed_store_timestamp if self._wb_records else self.last_store_timestamp
        return target, in_file_ts, [mf for mf in self.file_queue.files if mf.flushed_position < mf.wrote_position]

    def _flush_files(self, target: int, in_file_ts: int, dirty: list[MappedFile], least_pages: int) -> None:
        for mf in dirty:
            mf.flush(least_pages)
        if dirty:
            self.fsync_count += 1
        flushed = target if least_pages == 0 or not dirty else min(
            (mf.file_from_offset + mf.flushed_position for mf in dirty), default=target)
        with self._flush_cond:
            if flushed > self.flushed_offset:
                self.flushed_offset = flushed
            if flushed >= target and in_file_ts > self.flushed_store_timestamp:
                self.flushed_store_timestamp = in_file_ts
            self._flush_cond.notify_all()

    # -- read --------------------------------------------------------------------------------------
    def get_data(self, offset: int, size: int | None = None) -> bytes | None:
        """The bytes of the record at ``offset`` (a copy: the file may be destroyed once read)."""
        with self.file_queue.reading(offset) as mf:
            if mf is None:
                return None
            pos = offset - mf.file_from_offset
            if size is None:
                if pos + 4 > mf.wrote_position:
                    return None
                size = read_total_size(mf.mv, pos)
            if size <= 0 or pos + size > mf.wrote_position:
                return None
            return bytes(mf.mv[pos:pos + size])

    def get_message(self, offset: int, size: int | None = None, read_body: bool = True) -> MessageExt | None:
        data = self.get_data(offset, size)
        if data is None:
            return None
        try:
            return decode_record(data, 0, read_body)
        except RecordError:
            return None

    def read_message(self, offset: int, size: int | None = None, read_body: bool = True,
                     must_exist: bool = True) -> MessageExt | None:
        """The record at ``offset``; None when nothing is stored there (outside the files or past the
        written data), CorruptDataError when the bytes there are not the record they should be.

        Why strict: a lenient read turned corruption into "no message" (or the next message). A record
        must decode, must fit the written data, must say it is at ``offset`` and, when the caller
        knows it (a CQ unit), must be ``size`` bytes long. ``must_exist=False`` is for offsets a client
        gave (a msgId, a transaction offset): where no record magic code is found, that is "no record
        starts here" (None), not corruption. The file is held while it is read: retention may delete
        it meanwhile (a consumer reading the oldest file), and then it is unmapped after this read.
        """
        with self.file_queue.reading(offset) as mf:
            if mf is None:
                return None
            return self._read_held(mf, offset, size, read_body, must_exist)

    def _read_held(self, mf: MappedFile, offset: int, size: int | None, read_body: bool,
                   must_exist: bool) -> MessageExt | None:
        pos = offset - mf.file_from_offset
        if pos >= mf.wrote_position:
            return None
        if pos + 8 > mf.wrote_position:
            if not must_exist:  # a client's offset into the last bytes of a record: no record starts there
                return None
            raise CorruptDataError(mf.path, pos, "a record header", f"only {mf.wrote_position - pos} bytes of data")
        total = read_total_size(mf.mv, pos)
        if not must_exist and read_magic(mf.mv, pos) not in (MESSAGE_MAGIC_CODE_V1, MESSAGE_MAGIC_CODE_V2):
            return None
        if size is not None and total != size:
            raise CorruptDataError(mf.path, pos, f"a record of {size} bytes", f"TOTALSIZE {total}")
        if total <= 0 or pos + total > mf.wrote_position:
            raise CorruptDataError(mf.path, pos, "a record inside the written data",
                                   f"TOTALSIZE {total} with {mf.wrote_position - pos} bytes written")
        try:
            msg = decode_record(mf.mv[pos:pos + total], 0, read_body)
        except RecordError as e:
            raise CorruptDataError(mf.path, pos, "a valid record", str(e)) from None
        if msg.commit_log_offset != offset:
            raise CorruptDataError(mf.path, pos, f"the record stored at commitlog offset {offset}",
                                   f"one that says it is at {msg.commit_log_offset}")
        msg.commit_log_offset = offset
        return msg

    def pickup_store_timestamp(self, offset: int, size: int) -> int:
        msg = self.get_message(offset, size, read_body=False)
        return msg.store_timestamp if msg else -1
