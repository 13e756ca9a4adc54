"""Op ("done") markers in RMQ_SYS_TRANS_OP_HALF_TOPIC: body codec and the per-queue batcher.

Why batching: RocketMQ 5 does not write one op record per end-transaction; it queues ``"<offset>,"``
strings per half queue and writes them as one record once ``transactionOpMsgMaxSize`` characters
are queued or ``transactionOpBatchInterval`` ms have passed (TransactionalOpBatchService). Readers
split on ``,`` and ignore empty parts, which also accepts legacy single-offset bodies (spec §11.3).
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from broker_core.broker.transaction.transactional_message_util import (
    OFFSET_SEPARATOR,
    REMOVE_TAG,
    RMQ_SYS_TRANS_OP_HALF_TOPIC,
)
from broker_core.store.codec.hosts import Host
from broker_core.store.codec.message import MessageInner
from broker_core.store.codec.properties import (
    PROPERTY_TAGS,
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
    PROPERTY_WAIT_STORE_MSG_OK,
)


def encode_op_body(half_queue_offsets: list[int]) -> bytes:
    return "".join(f"{o}{OFFSET_SEPARATOR}" for o in half_queue_offsets).encode("ascii")


def decode_op_body(body: bytes) -> list[int]:
    """Half-queue offsets named by an op body. Unparsable parts become -1, as Java's getLong does,
    so the caller skips them (they are below any queue's minimum offset)."""
    out = []
    for part in body.decode("utf-8", errors="replace").split(OFFSET_SEPARATOR):
        if not part:
            continue
        try:
            out.append(int(part))
        except ValueError:
            out.append(-1)
    return out


def build_op_message(queue_id: int, body: bytes, store_host: Host, now_ms: int, uniq_key: str) -> MessageInner:
    """The op record (Bridge.makeOpMessageInner): sysFlag 0, TAGS "d", its own UNIQ_KEY."""
    props = {PROPERTY_TAGS: REMOVE_TAG, PROPERTY_WAIT_STORE_MSG_OK: "true",
             PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX: uniq_key}
    return MessageInner(topic=RMQ_SYS_TRANS_OP_HALF_TOPIC, body=body, properties=props, queue_id=queue_id,
                        sys_flag=0, born_timestamp=now_ms, born_host=store_host, store_host=store_host)


@dataclass
class _QueueOpContext:
    """MessageQueueOpContext: the offsets waiting to be written for one half queue."""

    last_write_timestamp: int
    items: deque[str] = field(default_factory=deque)
    total_size: int = 0


class OpBatcher:
    """Collects ``"<offset>,"`` items per half queue and decides when a batch is due.

    ``limits`` gives ``(transactionOpMsgMaxSize, transactionOpBatchInterval)`` and is asked at every
    decision, as Apache's TransactionalOpBatchService and TransactionalMessageServiceImpl read the
    BrokerConfig on every round: an updateBrokerConfig of either reaches the markers already queued."""

    def __init__(self, limits: Callable[[], tuple[int, int]] = lambda: (4096, 3000)) -> None:
        self._limits = limits
        self._contexts: dict[int, _QueueOpContext] = {}
        self._lock = threading.Lock()

    @property
    def max_size(self) -> int:
        """Characters of queued offsets that make a batch full (and bound one op body)."""
        return self._limits()[0]

    @property
    def batch_interval(self) -> int:
        """ms after a queue's last write when its queued offsets are written however few."""
        return self._limits()[1]

    def add(self, queue_id: int, half_queue_offset: int, now_ms: int) -> bool:
        """Queue one offset; True when the queue now holds a full batch (write it soon)."""
        data = f"{half_queue_offset}{OFFSET_SEPARATOR}"
        max_size = self.max_size
        with self._lock:
            ctx = self._contexts.get(queue_id)
            if ctx is None:
                ctx = self._contexts[queue_id] = _QueueOpContext(now_ms)
            ctx.items.append(data)
            ctx.total_size += len(data)
            return ctx.total_size > max_size

    def pending(self) -> int:
        with self._lock:
            return sum(len(c.items) for c in self._contexts.values())

    def take_due(self, now_ms: int, force: bool = False) -> list[tuple[int, bytes]]:
        """Bodies to write now: queues with a full batch or whose interval has passed (all if ``force``).

        Each body holds at most ``max_size`` characters (one item may overshoot, as in Java); the
        rest stays queued for the next call.
        """
        out: list[tuple[int, bytes]] = []
        max_size, batch_interval = self._limits()
        with self._lock:
            for queue_id, ctx in self._contexts.items():
                if not ctx.items:
                    continue
                if not force and ctx.total_size < max_size and now_ms - ctx.last_write_timestamp < batch_interval:
                    continue
                parts: list[str] = []
                size = 0
                while ctx.items and size < max_size:
                    item = ctx.items.popleft()
                    parts.append(item)
                    size += len(item)
                ctx.total_size -= size
                ctx.last_write_timestamp = now_ms
                out.append((queue_id, "".join(parts).encode("ascii")))
        return out

    def requeue(self, queue_id: int, body: bytes) -> None:
        """Put a body whose write failed back in front, so no offset is lost."""
        items = [f"{o}{OFFSET_SEPARATOR}" for o in decode_op_body(body)]
        with self._lock:
            ctx = self._contexts.setdefault(queue_id, _QueueOpContext(0))
            ctx.items.extendleft(reversed(items))
            ctx.total_size += sum(len(i) for i in items)

    def next_wakeup(self) -> int | None:
        """Earliest time a non-empty queue becomes due by interval, or None when nothing waits."""
        interval = self.batch_interval
        with self._lock:
            times = [c.last_write_timestamp + interval for c in self._contexts.values() if c.items]
        return min(times) if times else None
