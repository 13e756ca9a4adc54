"""In-flight pop checkpoints, kept in memory and made durable in the revive topic.

Why: a popped-but-unacked message must come back after its invisible time even if the broker
restarts in between. Every checkpoint and ack is appended to ``rmq_sys_REVIVE_LOG_{cluster}``
(queue = the handle's revive queue id) before the caller answers; on start the log is replayed
from the revive group's committed offset (``CID_RMQ_SYS_REVIVE_GROUP`` in consumerOffset.json),
which advances as checkpoints complete. A revived or reset checkpoint gets a closing batch ack so
a replay never revives it twice.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from broker_core.broker.errors import BrokerSystemError
from broker_core.store.codec.message import MessageInner
from broker_core.store.commit_log import PutMessageResult
from broker_core.store.message_store import GetMessageStatus, MessageStore

from .pop_ck import (
    ACK_TAG,
    BATCH_ACK_TAG,
    CK_TAG,
    REVIVE_GROUP,
    AckMsg,
    PopCheckPoint,
    ReviveRecordError,
    build_revive_message,
)

log = logging.getLogger("rmqops.broker.pop")

CkKey = tuple[str, str, int, int]  # group, topic, queue id, pop time


class PopOffsetStore(Protocol):
    """What pop needs of the broker's consumer offsets (ConsumerOffsetManager): the committed offsets
    of the popping groups and of the revive group, and an admin's pending reset of a queue."""

    def query_offset(self, group: str, topic: str, queue_id: int) -> int:
        """The committed offset, or -1 when none."""
        ...

    def commit_offset(self, group: str, topic: str, queue_id: int, offset: int) -> None: ...

    def has_offset_reset(self, group: str, topic: str, queue_id: int) -> bool: ...

    def query_then_erase_reset_offset(self, group: str, topic: str, queue_id: int) -> int | None:
        """The offset an admin reset the queue to, taken (a second call returns None)."""
        ...


class ReviveLogWriteError(BrokerSystemError):
    """The store refused a revive-log record; the pop/ack it belongs to must not be answered OK (a
    refusal the client is told, SYSTEM_ERROR with the store's status: a full disk, a store shut down)."""


@dataclass(slots=True)
class CheckpointMatch:
    ck: PopCheckPoint
    index: int


class PopCheckpointLog:
    def __init__(self, store: MessageStore, put_message: Callable[[MessageInner], PutMessageResult], offsets: PopOffsetStore,
                 revive_topic: str, revive_queue_num: int, store_host: tuple[str, int],
                 clock: Callable[[], int]) -> None:
        if revive_queue_num <= 0:
            raise ValueError(f"reviveQueueNum must be positive, got {revive_queue_num}")
        self.store = store
        self.put_message = put_message
        self.offsets = offsets
        self.revive_topic = revive_topic
        self.revive_queue_num = revive_queue_num
        self.store_host = store_host
        self.clock = clock
        self.pending: dict[CkKey, list[PopCheckPoint]] = {}
        self._next_revive_offset = [0] * revive_queue_num
        self._ck_number = 0
        self._lock = threading.RLock()

    # -- writing ---------------------------------------------------------------------------------
    def next_revive_qid(self) -> int:
        with self._lock:
            qid = self._ck_number % self.revive_queue_num
            self._ck_number += 1
            return qid

    def _append(self, revive_qid: int, tag: str, uniq_id: str, body: bytes) -> int:
        msg = build_revive_message(self.revive_topic, revive_qid, tag, uniq_id, body, self.clock(), self.store_host)
        result = self.put_message(msg)
        if not result.ok and result.status.value != "FLUSH_DISK_TIMEOUT":
            raise ReviveLogWriteError(f"writing the pop {tag} record failed: {result.status.value} {result.remark}")
        with self._lock:
            if 0 <= revive_qid < self.revive_queue_num:
                self._next_revive_offset[revive_qid] = max(self._next_revive_offset[revive_qid],
                                                           result.queue_offset + 1)
        return result.queue_offset

    def add_checkpoint(self, ck: PopCheckPoint) -> PopCheckPoint:
        """Durably record a popped batch, then track it (revive_offset = its place in the log)."""
        with self._lock:
            ck.revive_offset = self._append(ck.revive_queue_id, CK_TAG, ck.uniq_id(), ck.encode())
            self.pending.setdefault((ck.group, ck.topic, ck.queue_id, ck.pop_time), []).append(ck)
        return ck

    def append_ack(self, ack: AckMsg, revive_qid: int) -> None:
        self._append(revive_qid, ack.tag, ack.uniq_id(), ack.encode())

    # -- lookups ---------------------------------------------------------------------------------
    def find(self, group: str, topic: str, queue_id: int, pop_time: int, offset: int) -> CheckpointMatch | None:
        """The checkpoint of a handle; one still waiting for this offset's ack wins over an acked one."""
        found: CheckpointMatch | None = None
        with self._lock:
            for ck in self.pending.get((group, topic, queue_id, pop_time), ()):
                idx = ck.index_of_ack(offset)
                if idx >= 0:
                    if not ck.is_acked(idx):
                        return CheckpointMatch(ck, idx)
                    found = found or CheckpointMatch(ck, idx)
        return found

    def checkpoints(self) -> list[PopCheckPoint]:
        with self._lock:
            return [ck for lst in self.pending.values() for ck in lst]

    def due(self, now_ms: int) -> list[PopCheckPoint]:
        """Checkpoints whose invisible time is over, earliest first."""
        with self._lock:
            out = [ck for lst in self.pending.values() for ck in lst if ck.revive_time <= now_ms]
        out.sort(key=lambda c: (c.revive_time, c.revive_queue_id, c.revive_offset))
        return out

    # -- state changes ---------------------------------------------------------------------------
    def mark_acked(self, match: CheckpointMatch) -> bool:
        """Set the ack bit; True when that finished the checkpoint (it is then dropped)."""
        with self._lock:
            match.ck.bit_map |= 1 << match.index
            if match.ck.done:
                self._drop(match.ck)
                return True
            return False

    def ack_offsets(self, ck: PopCheckPoint, offsets: list[int]) -> None:
        """Durably settle some offsets of a checkpoint (revived or reset) with one ``bAck`` record."""
        if offsets:
            self.append_ack(AckMsg(-1, ck.start_offset, ck.group, ck.topic, ck.queue_id, ck.pop_time,
                                   ck.broker_name, list(offsets)), ck.revive_queue_id)
        with self._lock:
            for off in offsets:
                idx = ck.index_of_ack(off)
                if idx >= 0:
                    ck.bit_map |= 1 << idx
            if ck.done:
                self._drop(ck)

    def close(self, ck: PopCheckPoint) -> None:
        """Settle every offset still open in a checkpoint and drop it."""
        self.ack_offsets(ck, ck.unacked_offsets())
        with self._lock:
            if not ck.done:  # a checkpoint with nothing open left still has to leave the table
                ck.bit_map = (1 << ck.num) - 1
            self._drop(ck)

    def _drop(self, ck: PopCheckPoint) -> None:
        key = (ck.group, ck.topic, ck.queue_id, ck.pop_time)
        lst = self.pending.get(key)
        if lst is not None:
            try:
                lst.remove(ck)
            except ValueError:
                pass
            if not lst:
                del self.pending[key]
        self._commit_revive_offset(ck.revive_queue_id)

    def _commit_revive_offset(self, revive_qid: int) -> None:
        """The revive group's offset: the oldest record still needed for replay in that queue."""
        if not 0 <= revive_qid < self.revive_queue_num:
            return
        oldest = min((ck.revive_offset for ck in self.checkpoints() if ck.revive_queue_id == revive_qid),
                     default=self._next_revive_offset[revive_qid])
        self.offsets.commit_offset(REVIVE_GROUP, self.revive_topic, revive_qid, oldest)

    def drop_queue(self, group: str, topic: str, queue_id: int) -> list[PopCheckPoint]:
        """Close every checkpoint of one queue (an offset reset makes them meaningless)."""
        dropped = [ck for ck in self.checkpoints() if ck.group == group and ck.topic == topic
                   and ck.queue_id == queue_id]
        for ck in dropped:
            self.close(ck)
        return dropped

    def drop_topic(self, topic: str) -> list[PopCheckPoint]:
        """Close every checkpoint of ``topic``, all groups and queues (the topic was deleted: a topic
        made again under its name has other messages at those offsets)."""
        dropped = [ck for ck in self.checkpoints() if ck.topic == topic]
        for ck in dropped:
            self.close(ck)
        return dropped

    # -- replay ----------------------------------------------------------------------------------
    def load(self) -> int:
        """Rebuild the pending checkpoints from the revive log; returns how many are in flight."""
        pending: dict[CkKey, list[PopCheckPoint]] = {}
        for qid in range(self.revive_queue_num):
            start = self.offsets.query_offset(REVIVE_GROUP, self.revive_topic, qid)
            if start < 0:
                start = self.store.get_min_offset_in_queue(self.revive_topic, qid)
            end = self.store.get_max_offset_in_queue(self.revive_topic, qid)
            self._next_revive_offset[qid] = end
            offset = max(start, self.store.get_min_offset_in_queue(self.revive_topic, qid))
            while offset < end:
                got = self.store.get_messages(self.revive_topic, qid, offset, 64)
                if got.status is not GetMessageStatus.FOUND:
                    if got.next_begin_offset <= offset:
                        break
                    offset = got.next_begin_offset
                    continue
                for m in got.messages:
                    self._replay_one(pending, qid, m.queue_offset, m.tags, m.body)
                offset = max(got.next_begin_offset, offset + 1)
        with self._lock:
            self.pending = pending
            # Keep spreading new checkpoints over the revive queues after a restart.
            self._ck_number = sum(self._next_revive_offset)
        return sum(len(v) for v in pending.values())

    @staticmethod
    def _replay_one(pending: dict[CkKey, list[PopCheckPoint]], qid: int, queue_offset: int, tag: str | None,
                    body: bytes) -> None:
        try:
            if tag == CK_TAG:
                ck = PopCheckPoint.decode(body)
                ck.revive_offset = queue_offset
                ck.revive_queue_id = qid
                if not ck.done:
                    pending.setdefault((ck.group, ck.topic, ck.queue_id, ck.pop_time), []).append(ck)
                return
            if tag not in (ACK_TAG, BATCH_ACK_TAG):
                return
            ack = AckMsg.decode(body, tag == BATCH_ACK_TAG)
        except ReviveRecordError as e:
            log.warning("skipping unreadable revive record %s@%d: %s", tag, queue_offset, e)
            return
        lst = pending.get((ack.group, ack.topic, ack.queue_id, ack.pop_time))
        if not lst:
            return  # its checkpoint completed before the committed revive offset
        for off in ack.offsets:
            for ck in lst:
                idx = ck.index_of_ack(off)
                if idx >= 0:
                    ck.bit_map |= 1 << idx
                    break
        for ck in [c for c in lst if c.done]:
            lst.remove(ck)
        if not lst:
            del pending[(ack.group, ack.topic, ack.queue_id, ack.pop_time)]
