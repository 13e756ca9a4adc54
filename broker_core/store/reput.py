"""ReputMessageService: turns new commitlog records into consume queue units and index entries.

It tracks ``reput_from_offset`` (the next commitlog byte to dispatch) and reports how far it is
behind the commitlog's write position, which operators watch as dispatch lag.
"""

from __future__ import annotations

import errno
import logging
import threading
import time
from collections.abc import Callable

from .buffered_put import dispatch_committed_locked
from .codec.message import RECORD_BLANK, RECORD_VALID, check_record, decode_dispatch_fields
from .dispatch import DispatchRequest, build_dispatch_request, dispatch_request_of
from .mapped_file import MappedFile

log = logging.getLogger("rmqops.store")

Dispatcher = Callable[[DispatchRequest], None]


class ReputMessageService:
    def __init__(self, store) -> None:  # store: MessageStore (a type import would be circular)
        self.store = store
        self.reput_from_offset = 0
        # Why dispatch waits at a stored record (an OSError: a consume queue or index file a full disk
        # cannot hold), None while it keeps up: the store refuses new puts meanwhile (``stall_refusal``).
        self.stall: str | None = None
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None
        self._stopping = False
        self._dispatch_lock = threading.Lock()

    def behind(self) -> int:
        return max(0, self.store.commit_log.max_offset() - self.reput_from_offset)

    def note_stall(self, e: OSError) -> None:
        """Dispatch failed at ``reput_from_offset`` with ``e``: say so in ``stall`` (a full disk named as such)."""
        text = str(e)
        if e.errno in (errno.ENOSPC, errno.EDQUOT) and "disk full" not in text:
            text = f"disk full: {text}"
        self.stall = f"dispatch waits at commitlog offset {self.reput_from_offset} ({text})"

    def wake(self) -> None:
        with self._cond:
            self._cond.notify_all()

    def start(self) -> None:
        if self._thread is None:
            self._stopping = False
            self._thread = threading.Thread(target=self._run, name="ReputMessageService", daemon=True)
            self._thread.start()

    def shutdown(self) -> None:
        """Dispatch everything written so far, then stop (a clean shutdown leaves no lag)."""
        self._stopping = True
        self.wake()
        if self._thread is not None:
            self._thread.join(timeout=30)
            self._thread = None
        try:
            self.do_reput()
        except OSError as e:  # e.g. an index file a full disk cannot hold: recovery re-dispatches it
            log.warning("dispatch stopped at commitlog offset %d at shutdown: %s", self.reput_from_offset, e)

    def _run(self) -> None:
        stalled_at: int | None = None
        while not self._stopping:
            if self.behind() == 0:
                with self._cond:
                    self._cond.wait(0.05)
                continue
            try:
                self.do_reput()
                stalled_at = None
                self.stall = None
            except OSError as e:
                # e.g. an index file a full disk cannot hold: the record is stored (and acknowledged);
                # dispatch waits at it and retries, one line per stall instead of a traceback a second
                self.note_stall(e)
                if stalled_at != self.reput_from_offset:
                    stalled_at = self.reput_from_offset
                    log.warning("dispatch waits at commitlog offset %d (%s); retrying every second", stalled_at, e)
                with self._cond:
                    self._cond.wait(1.0)
            except Exception:  # keep dispatching; a bug here must not silently stop the broker
                log.exception("dispatch failed at commitlog offset %d", self.reput_from_offset)
                with self._cond:
                    self._cond.wait(1.0)

    def wait_until_dispatched(self, timeout: float = 10.0, up_to: int | None = None) -> bool:
        """Block until every record (or every record ending at or before ``up_to``) is dispatched."""
        deadline = time.monotonic() + timeout
        cl = self.store.commit_log
        while self.reput_from_offset < (cl.max_offset() if up_to is None else min(up_to, cl.max_offset())):
            if self._thread is None:
                try:
                    self.do_reput()
                except OSError as e:  # stalled at a stored record (e.g. full disk): not dispatched yet
                    log.warning("dispatch waits at commitlog offset %d: %s", self.reput_from_offset, e)
                    return False
                continue
            if time.monotonic() > deadline:
                return False
            self.wake()
            time.sleep(0.001)
        return True

    def _dispatch_appended(self, offset: int) -> int:
        """Dispatch the appended records that follow on from ``offset`` one after another, moving
        reput_from_offset past each; returns how many. Entries dispatch has moved past are dropped.

        A run never crosses a commitlog file: every file ends with a BLANK, which is not appended.
        """
        store = self.store
        cl = store.commit_log
        appended = cl.appended_records
        while appended and appended[0][0] < offset:
            appended.popleft()
        dispatch_appended = store.dispatch_appended
        sizes = cl.inner_batch_sizes  # the batch sizes of inner batches the one-call put buffered
        n = 0
        while appended and appended[0][0] == offset:
            # such a batch at the head: it and the ones after it in one compiled call (as the putting
            # thread of a store that is not started does); what that leaves goes record by record
            if sizes and offset == self.reput_from_offset:
                while sizes and sizes[0][0] < offset:
                    sizes.popleft()
                if sizes and sizes[0][0] == offset:
                    done = dispatch_committed_locked(store)[0]
                    if done:
                        n += done
                        offset = self.reput_from_offset
                        continue
            rec = appended.popleft()
            dispatch_appended(rec)
            offset += rec[1]
            self.reput_from_offset = offset
            n += 1
        return n

    def dispatch_new(self) -> int:
        """``do_reput`` for a store whose puts dispatch synchronously (not started): the records this
        process just appended are dispatched from their fields under the dispatch lock, and only what
        is left (a file's BLANK end, records another writer added) goes the general way.
        """
        store = self.store
        n = 0
        with self._dispatch_lock:
            appended = store.commit_log.appended_records
            offset = self.reput_from_offset
            if appended and appended[0][0] == offset:
                dispatch_appended = store.dispatch_appended
                while appended and appended[0][0] == offset:
                    rec = appended.popleft()
                    dispatch_appended(rec)
                    offset += rec[1]
                    self.reput_from_offset = offset
                    n += 1
            files = store.commit_log.file_queue.files
            if files and offset == files[-1].file_from_offset + files[-1].wrote_position:
                return n
        return n + self.do_reput()

    def do_reput(self) -> int:
        """Dispatch all complete records from reput_from_offset up to the commitlog's end."""
        with self._dispatch_lock:
            return self.do_reput_locked()

    def do_reput_locked(self) -> int:
        """``do_reput`` with the dispatch lock already held by the caller: the reput thread, or a
        one-call put on a started store catching dispatch up before its own record (``fast_put``)."""
        store = self.store
        cl = store.commit_log
        file_size = store.config.mapped_file_size_commit_log
        dispatched = 0
        # Usually everything new was appended by this process: no file lookup, no decoding.
        dispatched += self._dispatch_appended(self.reput_from_offset)
        files = cl.file_queue.files
        if files and self.reput_from_offset == files[-1].file_from_offset + files[-1].wrote_position:
            return dispatched  # caught up (what max_offset() would say, without the calls)
        while True:
            max_offset = cl.max_offset()
            offset = self.reput_from_offset
            if offset >= max_offset:
                break
            if offset < cl.min_offset():
                log.warning("reput offset %d is below the commitlog min %d; skipping ahead", offset,
                            cl.min_offset())
                self.reput_from_offset = cl.min_offset()
                continue
            mf = cl.file_queue.find_mapped_file_by_offset(offset)
            if mf is None:
                break
            pos, n, stopped = self._dispatch_from_file(mf, offset - mf.file_from_offset)
            dispatched += n
            if stopped:
                return dispatched
            self.reput_from_offset = mf.file_from_offset + pos
            if pos < file_size:
                break
        return dispatched

    def _dispatch_from_file(self, mf: MappedFile, pos: int) -> tuple[int, int, bool]:
        """Dispatch the records of ``mf`` from ``pos`` to its write position; returns the position
        reached, how many were dispatched and whether dispatch stopped at bad data (then
        reput_from_offset is left at it). A BLANK end moves the position to the file's size."""
        store = self.store
        do_dispatch = store.do_dispatch
        delay_levels = store.delay_levels_ms
        base = mf.file_from_offset
        limit = mf.wrote_position
        mv = mf.mv
        dispatched = 0
        while pos < limit:
            # Records this process appended come with their fields (nothing to decode); the
            # rest is read from the file.
            n = self._dispatch_appended(base + pos)
            if n:
                dispatched += n
                pos = self.reput_from_offset - base
                continue
            # Fast path: decode only the fields dispatch needs. Anything else (the BLANK end
            # of a file, torn or corrupt data) goes through check_record for its verdict.
            fields = decode_dispatch_fields(mv, pos, limit)
            if fields is not None:
                size, topic, queue_id, queue_offset, phy, sys_flag, store_ts, prepared, props = fields
                do_dispatch(dispatch_request_of(topic, queue_id, phy, size, sys_flag, store_ts, queue_offset,
                                                prepared, props, delay_levels))
                pos += size
                dispatched += 1
                continue
            rc = check_record(mv, pos, limit, check_crc=False, read_body=False)
            if rc.kind == RECORD_VALID:
                do_dispatch(build_dispatch_request(rc.message, delay_levels))
                pos += rc.size
                dispatched += 1
            elif rc.kind == RECORD_BLANK:
                return store.config.mapped_file_size_commit_log, dispatched, False
            else:
                log.error("dispatch stopped at commitlog offset %d: %s", base + pos, rc.reason)
                self.reput_from_offset = base + pos
                return pos, dispatched, True
        return pos, dispatched, False
