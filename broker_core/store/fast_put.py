"""The one-call put: a plain message's record, consume queue unit and index entries in one hot-path call.

Why a separate path beside ``CommitLog.put_message`` + dispatch: for a 1 KiB message the byte work is
a few hundred nanoseconds in C, while the Python around the several calls it took (prepare, write,
dispatch, tags code, unit, index keys, each behind two or three layers) cost ~3.6 us (issue 17).
Here the Python is one flat function: it decides everything (which files, locks, queue offset, store
time) exactly as the general path would, lets ``hotpath.put_fast`` prove the message plain and write
all its bytes, and commits the returned state. Whenever anything is unusual (no file yet or one to
roll, a record that needs a BLANK end or a vectored write, a transaction or delay message, a queue
that is not a SimpleCQ at its expected end, an index file near full, dispatch behind or hooked,
SYNC_FLUSH) the hot call is not made or declines, nothing is written, and the caller runs the
general path, so every rule stays in one place. The files come out byte-identical to the general
path's (tests/store/test_put_fast.py checks it on both implementations).

It reads the components' state directly (files, counters, locks): that is the flattening issue 17
asks for (its ~10 nested calls cost ~3 us a put), kept in this one module of the store package.
"""

from __future__ import annotations

import logging
from time import time_ns as _time_ns
from typing import TYPE_CHECKING

from .codec.cq_unit import BCQ_STORE_UNIT_SIZE as BCQ_UNIT_SIZE
from .codec.cq_unit import CQ_STORE_UNIT_SIZE
from .codec.hotpath import put_fast as _put_fast
from .codec.message import END_FILE_MIN_BLANK_LENGTH, MessageInner
from .commit_log import DIRECT_WRITE_MIN, PUT_OK, PutMessageResult, PutMessageStatus, now_ms
from .index_file import IndexFileError

if TYPE_CHECKING:
    from .commit_log import CommitLog
    from .index_service import IndexService
    from .mapped_file import MappedFile
    from .message_store import MessageStore
    from .reput import ReputMessageService

log = logging.getLogger("rmqops.store")
_new = object.__new__

# Index keys a message is assumed to bring in the per-put room check (exact count only near a roll).
CHEAP_KEYS = 16
# Dispatch a started store's put catches up itself before its record, at most (bytes of commitlog):
# what a few general-path puts leave (a queue's first record, a BLANK end); a larger backlog is left
# to the reput thread rather than dispatched holding the append lock.
CATCH_UP_MAX = 4 << 20  # (below the concurrent reput's MIN_PARALLEL_BYTES: no process pool under the append lock)
# A record of this size or more is written with pwritev by the general path (DIRECT_WRITE_MIN).
_MAX_MAPPED_RECORD = DIRECT_WRITE_MIN - 1


def put_fast(store: MessageStore, msg: MessageInner) -> PutMessageResult | None:
    """Put ``msg`` in one hot-path call and dispatch it at once; None (nothing changed) when the general
    path must do it. The caller has checked that the store is writable and its disk not full.

    Only with no dispatch hooks (extra dispatchers, the consume queue ext's filter bitmap) and
    dispatch caught up with the commitlog: then this put is the next record dispatch would see, and
    doing both under the append lock, the dispatch lock and the index lock is what put +
    ``dispatch_new`` do in turn.

    A started store (a running broker's: reput thread, flush threads) takes it too. Why it is safe:
    the reput thread dispatches only under the dispatch lock, reading ``reput_from_offset`` and the
    file's write position under it, so with the append lock (no other put) and the dispatch lock held,
    ``reput_from_offset == phy`` means every earlier record is dispatched and this one is the next;
    writing it, its unit and entries and moving ``reput_from_offset`` past it before releasing leaves
    the reput thread nothing to do for it (no lost or double dispatch; the ``appended_records`` entries
    behind it are dropped by dispatch). What the general path appended and the reput thread has not
    dispatched yet is dispatched first, here (``_caught_up``). Lock order, everywhere: append lock,
    dispatch lock, then the index lock or the queue guard. The reput thread holds the dispatch lock
    and takes the queue guard and the index lock, never the append lock (nor do the arrival listeners
    it calls); flush, commit and retention take the append lock alone; ``delete_topics`` takes
    append, dispatch, then queue guard; so waiting for the dispatch lock here cannot deadlock.
    The dispatch filter (a broker's refuses a deleted topic's records written before the deletion,
    ``commit_log_offset < cut``, the cut being the commitlog's end at the deletion) is asked for the
    record under the locks: a new record is at or past every cut, so it never refuses one, but any
    other filter is obeyed (a refused record goes the general way and is not dispatched). Around the
    locks a started store's put does what the general path's dispatch would: checkpoint times, the
    arrival listeners (long polling, pop), the append listeners but the reput thread's wake.

    Written for the interpreter (CPython 3.11), measured per put on a 2-core VM (issue 17): the
    Python around the one C call cost ~3.5 us against ~3 us for the call itself. Hence locals for
    everything read twice, acquire/release rather than ``with`` (three locks a put, and ``with`` looks
    up two special methods a lock), the queue offset table's key kept on the queue
    (``offset_key``) instead of formatted, the store time from ``time_ns`` when the clock is the
    default one, plain comparisons instead of ``min()``, and the result built by ``_ok_result``.
    """
    if store.dispatchers or store.config.enable_consume_queue_ext:
        return None
    started = store._started
    record_filter = store.dispatch_filter
    cl = store.commit_log
    # SYNC_FLUSH waits for its flush; with the write buffer (transientStorePoolEnable) the file's write
    # position lags the buffered records, which the general path commits before appending behind them
    if cl.sync_flush or cl.write_buffer:
        return None
    topic = msg.topic
    queue_id = msg.queue_id
    try:
        cq = store.consume_queues.get((topic, queue_id))
    except TypeError:  # an unhashable topic or queue id: the general path names the field
        return None
    # (started: a queue dispatch has not created yet may be created by the catch-up below)
    if cq is None and not started or cq is not None and cq.is_batch:
        return None
    held = _lock_at_next_record(store, cl, started)
    if held is None:
        return None
    svc, mf, pos, phy = held
    reput = store.reput
    try:
        # The queue is still the store's (delete_topics removes queues under these locks), and read
        # here, under the dispatch lock, its last file is the one dispatch would write to.
        cq = store.consume_queues.get((topic, queue_id))  # (maybe created by the catch-up)
        if cq is None or cq.is_batch:
            return None
        # The dispatch filter would let this record through (a new record is at or past any deleted
        # topic's cut, so a broker's never refuses it; asked anyway, it is one call)
        if record_filter is not None and not record_filter(topic, phy):
            return None
        cq_files = cq.file_queue.files
        if not cq_files:
            return None
        cq_mf = cq_files[-1]
        key = cq.offset_key
        table = cl.queue_offsets.table
        queue_offset = table.get(key, 0)
        cq_pos = cq_mf.wrote_position
        if cq_mf.file_from_offset + cq_pos != queue_offset * CQ_STORE_UNIT_SIZE or cq.max_physic_offset > phy:
            return None
        # The record must not need a BLANK end, a populate or reservation ahead, or a vectored write:
        # min(file end less the BLANK room, populated_to, reserved_to, pos + _MAX_MAPPED_RECORD)
        limit = cl.file_size - END_FILE_MIN_BLANK_LENGTH
        if mf.populated_to < limit:
            limit = mf.populated_to
        if mf.reserved_to < limit:
            limit = mf.reserved_to
        if pos + _MAX_MAPPED_RECORD < limit:
            limit = pos + _MAX_MAPPED_RECORD
        clock = cl.clock
        if svc is None:
            store_ts = _time_ns() // 1_000_000 if clock is now_ms else clock()
            done = _put_fast(msg, cl.config.max_message_size, mf.mv, pos, limit, phy, queue_offset, store_ts,
                             cq_mf.mv, cq_pos, None, 0, 0, 0, 0, 0, 0)
            if done is None:
                return None
            size, msg_id, tags_code, props = done[:4]
        else:
            idx_files = svc._files
            if not idx_files:
                return None
            idx = idx_files[-1]
            index_count = idx._index_count
            index_num = idx.index_num
            # IndexService.has_room(CHEAP_KEYS), a file build_index writes to without a roll, and a
            # record not indexed yet (at or below endPhyOffset the re-dispatch rules apply)
            if not idx.reserved or index_num - index_count < CHEAP_KEYS + svc._margin \
                    or phy <= idx._end_phy_offset:
                return None
            store_ts = _time_ns() // 1_000_000 if clock is now_ms else clock()
            done = _put_fast(msg, cl.config.max_message_size, mf.mv, pos, limit, phy, queue_offset, store_ts,
                             cq_mf.mv, cq_pos, idx._buf, idx.hash_slot_num, index_num, index_count,
                             idx._begin_timestamp, idx._begin_phy_offset, idx._hash_slot_count)
            if done is None:
                return None
            size, msg_id, tags_code, props, begin_ts, begin_phy, slot_count, n = done
            if n != index_count:  # entries written: IndexFile.put_keys's header update
                idx._begin_timestamp = begin_ts
                idx._begin_phy_offset = begin_phy
                idx._hash_slot_count = slot_count
                idx._index_count = n
                idx._end_phy_offset = phy
                idx._end_timestamp = store_ts
        end = phy + size
        mf.wrote_position = pos + size
        table[key] = queue_offset + 1
        cl.last_store_timestamp = store_ts
        cq_mf.wrote_position = cq_pos + CQ_STORE_UNIT_SIZE
        cq.max_physic_offset = end
        reput.reput_from_offset = end
    finally:
        if svc is not None:
            svc._lock.release()
        reput._dispatch_lock.release()
        cl.put_lock.release()
    checkpoint = store.checkpoint
    if checkpoint is not None:
        checkpoint.physic_msg_timestamp = store_ts
        checkpoint.logics_msg_timestamp = store_ts
    listeners = cl.append_listeners
    if listeners:
        # not the reput thread's wake (a started store's): this record is dispatched already
        wake = store.reput_wake
        for listener in listeners:
            if listener is not wake:
                listener()
    listeners = store.arrival_listeners
    if listeners:
        for listener in listeners:
            listener(topic, queue_id, queue_offset + 1, tags_code, store_ts, props)
    return _ok_result(phy, size, msg_id, queue_offset, store_ts)


def enabled_index_service(store: MessageStore) -> IndexService | None:
    """The index service a put's dispatch writes entries to; None when messageIndexEnable is off."""
    svc = store.index_service
    return svc if svc is not None and store.config.message_index_enable else None


def _lock_at_next_record(store: MessageStore, cl: CommitLog, started: bool
                         ) -> tuple[IndexService | None, MappedFile, int, int] | None:
    """The one-call puts' shared prologue: take the append lock, the dispatch lock and (when the
    index is on) the index lock, in that order, with dispatch caught up with the commitlog, so the
    record about to be appended is the next one dispatch would see (entries left in
    ``appended_records`` are then behind it; dispatch drops them). Returns the enabled index service
    and the commitlog's last file, write position and physical offset there, the caller releasing
    the three locks; None, with nothing held, when dispatch is behind.

    acquire/release rather than ``with``: three locks a put, and ``with`` builds bound methods.
    Started: the reput thread may hold the dispatch lock; this waits for it (it never waits for the
    append lock: see ``_caught_up``). Declining instead made a convoy: every general-path put wakes
    the reput thread, which the interpreter preempts holding the lock, so the next puts decline too.
    """
    reput = store.reput
    svc = enabled_index_service(store)
    put_lock = cl.put_lock
    dispatch_lock = reput._dispatch_lock
    put_lock.acquire()
    dispatch_lock.acquire()
    if not started or _caught_up(cl, reput):
        files = cl.file_queue.files
        if files:
            mf = files[-1]
            pos = mf.wrote_position
            phy = mf.file_from_offset + pos
            if reput.reput_from_offset == phy:
                if svc is not None:
                    svc._lock.acquire()
                return svc, mf, pos, phy
    dispatch_lock.release()
    put_lock.release()
    return None


def _caught_up(cl: CommitLog, reput: ReputMessageService) -> bool:
    """A started store's dispatch has reached the commitlog's end, after dispatching here, in the
    putting thread, what the general path appended and the reput thread has not dispatched yet
    (``do_reput_locked``: the same dispatch in commitlog order, called with the append and dispatch
    locks held; the reput thread holds the dispatch lock for it too). Why: after one general-path put
    (the first of a queue, a file roll and its BLANK end, a message the one call declines) every
    following put would otherwise decline until the reput thread got the interpreter to catch up.
    False when a dispatch failed (e.g. an index file a full disk cannot hold): the reput thread
    retries it and says so; this put takes the general path."""
    files = cl.file_queue.files
    if not files:
        return False
    last = files[-1]
    end = last.file_from_offset + last.wrote_position
    if reput.reput_from_offset == end:
        return True
    if end - reput.reput_from_offset > CATCH_UP_MAX:  # a backlog: the reput thread's, not under the append lock
        return False
    try:
        reput.do_reput_locked()
    except Exception:  # noqa: BLE001 - the reput thread reports it when it retries
        return False
    return True


def _ok_result(phy: int, size: int, msg_id: str, queue_offset: int, store_ts: int) -> PutMessageResult:
    """``PutMessageResult(PUT_OK, phy, size, msg_id, queue_offset, 1, store_ts, "", [msg_id])``, built
    field by field: on CPython 3.11 calling a class whose ``__init__`` is Python code goes through
    the generic type call (~0.36-0.78 us for these nine fields here), setting the slots of a bare
    instance costs a third of that. Every field is set, as the dataclass's ``__init__`` would."""
    r = _new(PutMessageResult)
    r.status = PUT_OK
    r.wrote_offset = phy
    r.wrote_bytes = size
    r.msg_id = msg_id
    r.queue_offset = queue_offset
    r.msg_num = 1
    r.store_timestamp = store_ts
    r.remark = ""
    r.msg_ids = [msg_id]
    return r


# Room the populate/reserve ahead of an inner batch assumes beyond its body (header, topic, properties).
_BATCH_RECORD_OVERHEAD = 32 * 1024


def put_inner_batch_fast(store: MessageStore, msg: MessageInner, inner_num: int) -> PutMessageResult | None:
    """``put_inner_batch`` of a BatchCQ inner batch in one hot-path call and its dispatch at once; None
    (nothing changed) when the general path must do it. The caller has checked that the store is
    writable, ``inner_num`` > 0 and the index has room, and has set INNER_BATCH_FLAG.

    Why: a 64 x 1 KiB batch spent ~25 us of store Python around the byte work (append bookkeeping,
    pwritev layering, dispatch of the BatchCQ unit and the index entries; issue 17), about as much as
    the CRC and the copy. The same conditions as ``put_fast`` (no reput thread, no dispatch hooks,
    dispatch caught up, not SYNC_FLUSH), and the decisions of ``CommitLog.put_inner_batch`` +
    ``BatchConsumeQueue.put_message_position_info``: INNER_BASE/INNER_NUM set in the property dict
    under the append lock (put back as they were when the call declines), the record written into
    the mapping (populated and reserved ahead here, the general path would pwritev it), no BLANK end
    or file roll (declined), the unit appended to a BatchCQ file that has room and is at the queue's
    end. With the write buffer (``transientStorePoolEnable``) it declines: the records then go
    through the buffer and are dispatched at commit, which only the general path does.

    Measured (2 cores, load ~3.5): ~20 us less CPU a 64 x 1 KiB batch than the general path (about
    60-76 against 80-94 us), but the ratio to 1 MiB page-cache writes stays ~0.28: one unaligned
    ~66 KB pwrite a record costs ~2x per byte what 1 MiB writes do (1.8-2.9 against 4-5.4 GB/s of
    CPU in a bare loop here). Grouped writes need the write buffer: its store takes
    ``buffered_put.put_inner_batch_buffered`` instead (record into the buffer, unit and index entries
    after the commit).
    """
    if store.dispatchers:
        return None
    started = store._started
    record_filter = store.dispatch_filter
    cl = store.commit_log
    if cl.sync_flush or cl.write_buffer:
        return None
    topic = msg.topic
    queue_id = msg.queue_id
    props = msg.properties
    body = msg.body
    if type(props) is not dict or type(body) not in (bytes, bytearray):
        return None
    try:
        cq = store.consume_queues.get((topic, queue_id))
    except TypeError:  # an unhashable topic or queue id: the general path names the field
        return None
    if cq is None or not cq.is_batch:
        return None
    held = _lock_at_next_record(store, cl, started)
    if held is None:
        return None
    svc, mf, pos, phy = held
    reput = store.reput
    try:
        # put_fast's checks under the locks: still the store's queue, the filter lets it through, and
        # its last file (read under the dispatch lock) has room for the unit
        if store.consume_queues.get((topic, queue_id)) is not cq or cq.max_offset == 0:  # 0: minOffset to set
            return None
        if record_filter is not None and not record_filter(topic, phy):
            return None
        cq_files = cq.file_queue.files
        if not cq_files:
            return None
        cq_mf = cq_files[-1]
        cq_pos = cq_mf.wrote_position
        if cq_pos + BCQ_UNIT_SIZE > cq_mf.file_size:  # the unit goes to a new file: general path
            return None
        key = cq.offset_key
        table = cl.queue_offsets.table
        base_q = table.get(key, 0)
        if cq.max_offset != base_q or cq.max_physic_offset >= phy:
            return None
        file_end = cl.file_size - END_FILE_MIN_BLANK_LENGTH
        room = len(body) + _BATCH_RECORD_OVERHEAD
        if pos + room > file_end:  # near the file's end: the general path decides on a BLANK end and a roll
            return None
        if pos + room > mf.reserved_to:
            try:
                mf.reserve(pos + room)  # the write below then cannot run out of disk space
            except OSError:  # a full disk: the general path refuses the put with the right status
                return None
        scratch = cl.record_scratch
        if len(scratch) < room:
            scratch = cl.record_scratch = bytearray(room)
        limit = min(room, file_end - pos, mf.reserved_to - pos)
        # CommitLog.put_inner_batch's properties, set under the append lock (the queue offset is known)
        old_base = props.get("INNER_BASE", _MISSING)
        old_num = props.get("INNER_NUM", _MISSING)
        base_text = str(base_q)
        props["INNER_BASE"] = base_text
        props["INNER_NUM"] = str(inner_num)
        store_ts = cl.clock()
        if svc is None:
            done = _put_fast(msg, cl.config.max_message_size, scratch, 0, limit, phy, base_q, store_ts,
                             cq_mf.mv, cq_pos, None, 0, 0, 0, 0, 0, 0, inner_num)
        else:
            idx_files = svc._files
            idx = idx_files[-1] if idx_files else None
            if idx is None or not idx.reserved or idx.index_num - idx._index_count < CHEAP_KEYS + svc._margin \
                    or phy <= idx._end_phy_offset:
                done = None
            else:
                index_count = idx._index_count
                done = _put_fast(msg, cl.config.max_message_size, scratch, 0, limit, phy, base_q, store_ts,
                                 cq_mf.mv, cq_pos, idx._buf, idx.hash_slot_num, idx.index_num, index_count,
                                 idx._begin_timestamp, idx._begin_phy_offset, idx._hash_slot_count, inner_num)
        if done is None:  # nothing written: the properties go back as they were
            _restore(props, "INNER_BASE", old_base)
            _restore(props, "INNER_NUM", old_num)
            return None
        size, msg_id, tags_code, text, begin_ts, begin_phy, slot_count, n = done
        try:
            with memoryview(scratch) as view:
                mf.write_vectored(pos, (view[:size],))
        except OSError as e:  # (not a full disk: the blocks are reserved) nothing the put wrote counts
            return _write_failed(store, cq_mf, cq_pos, idx if svc is not None else None, phy, e)
        if svc is not None and n != idx._index_count:  # entries written: IndexFile.put_keys's header update
            idx._begin_timestamp = begin_ts
            idx._begin_phy_offset = begin_phy
            idx._hash_slot_count = slot_count
            idx._index_count = n
            idx._end_phy_offset = phy
            idx._end_timestamp = store_ts
        end = phy + size
        mf.wrote_position = pos + size
        next_q = base_q + inner_num
        table[key] = next_q
        cl.last_store_timestamp = store_ts
        cq_mf.wrote_position = cq_pos + BCQ_UNIT_SIZE
        cq.max_physic_offset = phy
        cq.max_offset = next_q
        reput.reput_from_offset = end
    finally:
        if svc is not None:
            svc._lock.release()
        reput._dispatch_lock.release()
        cl.put_lock.release()
    checkpoint = store.checkpoint
    if checkpoint is not None:
        checkpoint.physic_msg_timestamp = store_ts
        checkpoint.logics_msg_timestamp = store_ts
    wake = store.reput_wake
    for listener in cl.append_listeners:
        if listener is not wake:  # dispatched already (put_fast)
            listener()
    for listener in store.arrival_listeners:
        listener(topic, queue_id, next_q, tags_code, store_ts, text)
    return PutMessageResult(PUT_OK, phy, size, msg_id, base_q, inner_num, store_ts, "", [msg_id])


_MISSING = object()


def _write_failed(store: MessageStore, cq_mf, cq_pos: int, idx, phy: int, e: OSError) -> PutMessageResult:
    """The record could not be written (an I/O error): nothing the put wrote may count. Its BatchCQ
    unit is zeroed; the index file's header goes back to its in-memory state, and the entries the call
    wrote past it are cut with their hash slots re-pointed to each chain's previous entry
    (``IndexFile.repair_torn_tail``, as after a crash between entries and header), so no slot points
    at an entry of a record that is not there and later keys sharing a slot keep their chains. The
    disk blocks are reserved before the call, so only an I/O error gets here. Called under the locks."""
    cq_mf.mv[cq_pos:cq_pos + BCQ_UNIT_SIZE] = bytes(BCQ_UNIT_SIZE)
    if idx is not None:
        idx._write_header()
        try:
            idx.repair_torn_tail(safe_phy=phy)
        except IndexFileError as err:  # the header is this file's own: not expected; say so loudly
            log.error("index file %s not repaired after a failed write: %s", idx.path, err)
    log.error("inner batch write at commitlog offset %d failed: %s", phy, e)
    return PutMessageResult(PutMessageStatus.UNKNOWN_ERROR, remark=f"append failed: {e}")


def _restore(props: dict[str, str], name: str, old: object) -> None:
    """Put a property back as it was before a declined call set it (absent: removed)."""
    if old is _MISSING:
        props.pop(name, None)
    else:
        props[name] = old  # type: ignore[assignment]
