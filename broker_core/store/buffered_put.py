"""Inner batches on the write buffer (transientStorePoolEnable) without the general path's layers.

Why: with the write buffer a 64 x 1 KiB BatchCQ batch costs the CRC, its share of one ~1 MiB commit
(a pwritev of the buffered records) and Python around them. Profiled (issue 17, 2 cores): ~15 us of
pwritev and ~4 us of record encoding (mostly the CRC) a batch, against ~45 us of Python in the
layers: MessageStore -> CommitLog.put_inner_batch -> _buffer_inner_batch on the put side, and per
committed record dispatch_appended -> inner_batch_position (parsing INNER_NUM/INNER_BASE back out
of the properties string) -> BatchConsumeQueue.put_message_position_info -> IndexService.build_index.

Here each side is one flat function around one compiled call: the put around
``hotpath.buffer_inner_batch`` (INNER_BASE/INNER_NUM set, ``check_message`` + ``prepare_record`` +
``record_parts`` composed, so the verdicts and bytes are the general path's by construction, the
record's parts and dispatch entry appended to the buffer's lists), the dispatch of what a commit
handed over around ``hotpath.dispatch_inner_batches`` (one call for all its records: each one's
BatchCQ unit and index entries, the queue and index state moved on; a Python loop of one call a
record cost ~240 interpreted bytecodes a batch). Both have a pure-Python twin (``hot_py``), run by
the same tests. Why not the
unit and index entries in the put's call, as ``fast_put`` does without the buffer: dispatch must
happen only after the commit, as RocketMQ's reput reads only committed data. A buffered record is
in no queue and no index until it is in the file, so a failed commit or a crash leaves nothing
pointing at bytes that are not there. Whenever anything is unusual
(a file to end or roll, the buffer full after a failed commit, a queue or index file at its end, a
record the encoder refuses, a started store or dispatch hooks) the put or that record's dispatch is
left to the general path, which keeps every rule in one place.
"""

from __future__ import annotations

from collections import deque
from itertools import islice
from typing import TYPE_CHECKING

from . import commit_log
from .codec.hotpath import buffer_inner_batch as _buffer_inner_batch
from .codec.hotpath import dispatch_inner_batches as _dispatch_inner_batches
from .codec.message import END_FILE_MIN_BLANK_LENGTH, MessageInner
from .commit_log import DIRECT_WRITE_MIN, PUT_OK, WRITE_BUFFER_MAX_PARTS, PutMessageResult
from .fast_put import CHEAP_KEYS, enabled_index_service

if TYPE_CHECKING:
    from .message_store import MessageStore

# Room reserved ahead of a record beyond its body (header, topic, properties), as put_inner_batch_fast.
_RECORD_OVERHEAD = 32 * 1024


def put_inner_batch_buffered(store: MessageStore, msg: MessageInner, inner_num: int) -> PutMessageResult | None:
    """``CommitLog.put_inner_batch`` with the write buffer, flat; None (nothing changed) when the general
    path must do it. The caller has checked that the store is writable, ``inner_num`` > 0 and the
    index has room, and has set INNER_BATCH_FLAG.

    The record takes the place after what is buffered (or the file's write position when nothing
    is), in the same file: no BLANK end, no roll, no commit needed first (else declined). Its disk
    blocks are reserved before it is buffered. When the buffer reaches ``WRITE_BUFFER_COMMIT_BYTES``
    it is committed and, the store dispatching in the putting thread, the committed records are
    dispatched at once (``dispatch_committed``), in a store that is not started; such a store takes
    no dispatch hooks here, as the other one-call puts. A started store (a running broker's: reput
    thread, commit service) leaves dispatch to its reput thread, which takes the same flat dispatch
    (``dispatch_committed_locked``) and obeys the hooks; the thread is woken only when a commit moved
    records into the file. Waking it on every put, when a buffered record is not in the file yet,
    cost the put thread ~10% of its time and the interpreter a switch to a thread with nothing to do.
    """
    started = store._started
    if not started and (store.dispatchers or store.dispatch_filter is not None):
        return None
    cl = store.commit_log
    body = msg.body
    if not cl.write_buffer or type(msg.properties) is not dict or (type(body) is not bytes
                                                                    and type(body) is not bytearray):
        return None
    commit_bytes = commit_log.WRITE_BUFFER_COMMIT_BYTES  # read at call time: tests lower it
    put_lock = cl.put_lock
    put_lock.acquire()
    commits_before = cl.commits
    try:
        mf = cl._wb_file
        parts = cl._wb_parts
        if mf is None:
            files = cl.file_queue.files
            if not files:
                return None
            mf = files[-1]
            pos = mf.wrote_position
            # a small record that the general path would populate the mapping for (_file_for) is left to it
            small_room = mf.populated_to - pos
        else:
            pos = cl._wb_end
            # a buffer that should have been committed already (a failed commit): the general path
            if pos - mf.wrote_position >= commit_bytes or len(parts) >= WRITE_BUFFER_MAX_PARTS:
                return None
            small_room = None
        # The record's limits in this file: room for its BLANK end and disk blocks reserved (here,
        # ahead of the largest record this body can make).
        file_end = cl.file_size - END_FILE_MIN_BLANK_LENGTH
        reserved_to = mf.reserved_to
        need = pos + len(body) + _RECORD_OVERHEAD
        if need > reserved_to and need <= file_end:
            if not _reserved(mf, need):
                return None
            reserved_to = mf.reserved_to
        room = (file_end if file_end < reserved_to else reserved_to) - pos
        cq = store.consume_queues.get((msg.topic, msg.queue_id))
        if cq is None or not cq.is_batch:  # the general path makes the BatchCQ queue, or refuses a SimpleCQ one
            return None
        key = f"{msg.topic}-{msg.queue_id}"
        table = cl.queue_offsets.table
        base_q = table.get(key, 0)
        store_ts = msg.store_timestamp if msg.keep_store_timestamp else cl.clock()
        phy = mf.file_from_offset + pos
        done = _buffer_inner_batch(msg, cl.config.max_message_size, phy, base_q, store_ts, inner_num, room,
                                   room if small_room is None else small_room, DIRECT_WRITE_MIN, parts,
                                   cl._wb_records)
        if done is None:  # nothing changed, the message's properties as they were
            return None
        size, msg_id = done
        end = pos + size
        cl.last_store_timestamp = store_ts
        cl._wb_file = mf
        cl.inner_batch_sizes.append((phy, base_q, inner_num))
        cl._wb_end = end
        table[key] = base_q + inner_num
        # a failure keeps the records buffered: the next commit writes them
        committed = (end - mf.wrote_position >= commit_bytes or len(parts) >= WRITE_BUFFER_MAX_PARTS) \
            and cl._commit_locked()
    finally:
        put_lock.release()
    if cl.append_listeners and cl.commits != commits_before:  # records reached the file: dispatch looks
        for listener in cl.append_listeners:
            listener()
    if committed:  # the buffer is empty: this record is in the file (MessageStore.put_inner_batch's rule)
        checkpoint = store.checkpoint
        if checkpoint is not None:
            checkpoint.physic_msg_timestamp = store_ts
        if not started:  # a started store's reput thread dispatches them (woken above)
            dispatch_committed(store)
    elif cl.appended_records and not started:  # a dispatch left waiting earlier: retried on each put
        store._dispatch_now()
    return PutMessageResult(PUT_OK, phy, size, msg_id, base_q, inner_num, store_ts, "", [msg_id])


def _reserved(mf, end: int) -> bool:
    """Disk blocks reserved up to ``end`` (the commit then cannot run out of space); False on a full
    disk, where the general path refuses the put with the right status."""
    try:
        mf.reserve(end)
    except OSError:
        return False
    return True


def dispatch_committed(store: MessageStore) -> None:
    """Dispatch, in the putting thread of a store that is not started, the records its commit just
    handed over (``dispatch_committed_locked`` under the dispatch lock); what that leaves goes the
    general way (``MessageStore._dispatch_now``)."""
    dispatch_lock = store.reput._dispatch_lock
    dispatch_lock.acquire()
    try:
        caught_up = dispatch_committed_locked(store)[1]
    finally:
        dispatch_lock.release()
    if not caught_up:
        store._dispatch_now()


# Records a dispatch filter is asked about ahead of one flat dispatch call, at most: what a refused
# record's run costs to find is bounded whatever the backlog.
FILTERED_RUN_MAX = 64


def dispatch_committed_locked(store: MessageStore) -> tuple[int, bool]:
    """Dispatch the committed inner batches at the head of ``CommitLog.appended_records``, flat
    (``ReputMessageService.dispatch_new`` + ``MessageStore.dispatch_appended`` for inner batches);
    called with the dispatch lock held, by ``dispatch_committed`` or by the reput thread of a started
    store (``ReputMessageService._dispatch_appended``). Returns how many records it dispatched and
    whether dispatch has caught up with the commitlog.

    Each record's BatchCQ unit (the batch size as the put knew it, ``CommitLog.inner_batch_sizes``,
    instead of parsing INNER_NUM and INNER_BASE back out of its properties string) and its index
    entries are written under the index lock, in commitlog order, by one compiled call for as many
    records as it takes (``dispatch_inner_batches``); this function keeps the index roll of a record
    whose keys did not all fit, the arrival listeners and the checkpoint. The first record that
    needs anything else (a queue's first unit or a full queue file, an index file without room or a
    re-dispatch, an unknown batch size) and everything after it are left to the general path, as is
    everything while dispatch hooks are set (extra dispatchers, the consume queue ext). A dispatch
    filter (a broker's: it refuses a deleted topic's records written before the deletion) is asked
    about the records ahead, up to ``FILTERED_RUN_MAX``: the call takes only those before the first
    it refuses, which the general path then refuses. A record whose index roll fails (a full disk)
    is left too: it is stored and acknowledged, and the general path retries it from its unit on
    (written again only if missing), as ``MessageStore._dispatch_now`` does.
    """
    if store.dispatchers or store.config.enable_consume_queue_ext:
        return 0, False
    reput = store.reput
    cl = store.commit_log
    pending = cl.appended_records
    offset = reput.reput_from_offset
    while pending and pending[0][0] < offset:  # entries dispatch has moved past
        pending.popleft()
    appended = pending
    record_filter = store.dispatch_filter
    if record_filter is not None:
        run = 0
        for rec in pending:
            if run == FILTERED_RUN_MAX or not record_filter(rec[2], rec[0]):
                break
            run += 1
        if run == 0:
            return 0, False
        if run < len(pending):  # the call sees only the records the filter lets through
            appended = deque(islice(pending, run))
    sizes = cl.inner_batch_sizes
    cqs = store.consume_queues
    svc = enabled_index_service(store)
    checkpoint = store.checkpoint
    listeners = store.arrival_listeners
    index_lock = svc._lock if svc is not None else None
    taken = len(appended)
    dispatched = 0
    if index_lock is not None:
        index_lock.acquire()
    try:
        if svc is not None:
            idx_files = svc._files
            idx = idx_files[-1] if idx_files and idx_files[-1].reserved else None
            room_needed = CHEAP_KEYS + svc._margin
        arrivals: list | None = [] if listeners else None
        while appended:
            if svc is None:
                state = _dispatch_inner_batches(appended, sizes, cqs, offset, None, 0, 0, 1, 0, 0, 0, 0, 0, 0, arrivals)
            elif idx is None:  # no file IndexService.build_index writes to without a roll
                break
            else:
                state = _dispatch_inner_batches(
                    appended, sizes, cqs, offset, idx._buf, idx.hash_slot_num, idx.index_num, idx._index_count,
                    idx._begin_timestamp, idx._begin_phy_offset, idx._hash_slot_count, idx._end_phy_offset,
                    idx._end_timestamp, room_needed, arrivals)
                # IndexFile.put_keys's header values (unchanged when no entry was written)
                (idx._index_count, idx._begin_timestamp, idx._begin_phy_offset, idx._hash_slot_count,
                 idx._end_phy_offset, idx._end_timestamp) = state[3:9]
            offset, count, last_ts, partial = state[0], state[1], state[2], state[9]
            if last_ts is not None and checkpoint is not None:
                checkpoint.logics_msg_timestamp = last_ts
            if count:
                reput.reput_from_offset = offset
                dispatched += count
            if arrivals:
                for arrival in arrivals:
                    for listener in listeners:
                        listener(*arrival)
                arrivals.clear()
            if partial is None:  # a record the flat dispatch does not take, or none left
                break
            # its unit and the keys that fitted are written: the rest after build_index's roll
            written, key_count, tc = partial
            phy, size, topic, queue_id, base, _flag, store_ts, _prepared, props, known = appended[0]
            _tags, keys, uniq_key = known
            while written < key_count:
                written += svc._get_and_create_last_file().put_keys(topic, uniq_key, keys, phy, store_ts, written)[0]
            idx = svc._files[-1] if svc._files[-1].reserved else None
            num = sizes[0][2]
            appended.popleft()
            sizes.popleft()
            offset = phy + size
            reput.reput_from_offset = offset
            dispatched += 1
            for listener in listeners:
                listener(topic, queue_id, base + num, tc, store_ts, props)
        failed = False
    except OSError:  # an index file the disk cannot hold: the general path retries and says so
        failed = True
    finally:
        if index_lock is not None:
            index_lock.release()
        if appended is not pending:  # what the call took off its run comes off the real list too
            for _ in range(taken - len(appended)):
                pending.popleft()
    files = cl.file_queue.files
    caught_up = not failed and not pending and bool(files) and \
        offset == files[-1].file_from_offset + files[-1].wrote_position
    return dispatched, caught_up
