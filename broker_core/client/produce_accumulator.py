"""AutoBatch: the producer's ProduceAccumulator (seed 004), grouping single sends into batch sends.

Why this shape (RocketMQ's ProduceAccumulator): users keep calling ``send(msg)`` and the client does
the classifying and packing the batch models demand. Messages are grouped by an AggregateKey —
topic, queue (None: the batch picks its queue at send time), wait-store flag and tags (a BatchCQ
record carries one tag for all its items) — so every batch satisfies the broker's constraints by
construction. A batch leaves when it reaches ``batch_max_bytes`` (inside the sending call) or has
waited ``batch_max_delay_ms`` (one background task scanning every max_delay/2). Memory held by all
accumulations is bounded by ``total_batch_max_bytes``: a send beyond it waits (FIFO, so the order of
sends to one queue is kept) until earlier batches are answered. A queue (a chosen one, or a sharding
key's) has at most one open accumulation: a send to it under another key (a tag change) closes the
open one first, and the queue's batches are sent one after the other, so the per-queue order of
messages is the order of the sends whatever their tags.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Protocol

from broker_core.remoting.bodies import MessageQueue

from .config_check import check_int
from .tasks import cancel_and_wait

log = logging.getLogger(__name__)

DEFAULT_BATCH_MAX_BYTES = 32 * 1024
DEFAULT_BATCH_MAX_DELAY_MS = 10
DEFAULT_TOTAL_BATCH_MAX_BYTES = 32 * 1024 * 1024
# Java's ProduceAccumulator bounds: a batch of at most 2 MiB (half the broker's default maxMessageSize; 8 MiB
# failed every send with MESSAGE_ILLEGAL) held at most 30 s
MAX_BATCH_MAX_BYTES = 2 * 1024 * 1024
MAX_BATCH_MAX_DELAY_MS = 30 * 1000


def check_batch_settings(batch_max_bytes: object, batch_max_delay_ms: object, total_batch_max_bytes: object) -> None:
    """Java's ProduceAccumulator.batchMaxBytes/batchMaxDelayMs/totalBatchMaxBytes checks (ClientConfigError).
    Before, 0 or -1 as batch_max_bytes silently turned batching off and 8 MiB failed every send."""
    check_int("batch_max_bytes", batch_max_bytes, 1, MAX_BATCH_MAX_BYTES, "batchMaxBytes")
    check_int("batch_max_delay_ms", batch_max_delay_ms, 1, MAX_BATCH_MAX_DELAY_MS, "batchMaxDelayMs")
    check_int("total_batch_max_bytes", total_batch_max_bytes, 1, None, "totalBatchMaxBytes")


class BatchSendOutcome(Protocol):
    """What one SEND_BATCH_MESSAGE answered: enough to split into one result per message."""

    @property
    def message_queue(self) -> MessageQueue: ...

    @property
    def queue_offset(self) -> int: ...

    @property
    def offset_msg_id(self) -> str: ...


@dataclass(frozen=True)
class AggregateKey:
    """What messages of one batch share. Tags stay in it: a BatchCQ inner batch is one record whose one
    TAGS is what consumers' tag filters match; the order across keys of one queue is kept by the
    accumulator (one open accumulation per queue), not by the key."""

    topic: str
    mq: MessageQueue | None
    wait_store_msg_ok: bool
    tags: str | None


@dataclass
class _Pending:
    item: bytes  # the message encoded as a batch item (encoded once, in the sending call)
    future: asyncio.Future[tuple[BatchSendOutcome, int]]


@dataclass
class _Accumulation:
    key: AggregateKey
    created: float
    items: list[_Pending] = field(default_factory=list)
    size: int = 0


BatchSender = Callable[[AggregateKey, list[bytes]], Awaitable[BatchSendOutcome]]


class _ByteBudget:
    """A FIFO byte semaphore: the back-pressure of total_batch_max_bytes."""

    def __init__(self, total: int) -> None:
        self.total = total
        self.used = 0
        self._waiters: deque[tuple[int, asyncio.Future[None]]] = deque()

    @property
    def waiting(self) -> int:
        return len(self._waiters)

    async def acquire(self, n: int) -> None:
        if not self._waiters and self._fits(n):
            self.used += n
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append((n, fut))
        try:
            await fut
        except asyncio.CancelledError:
            if fut.done() and not fut.cancelled():
                self.release(n)  # granted just as we were cancelled
            else:
                with contextlib.suppress(ValueError):
                    self._waiters.remove((n, fut))
            raise

    def _fits(self, n: int) -> bool:
        return self.used == 0 or self.used + n <= self.total  # one oversized message may always go alone

    def release(self, n: int) -> None:
        self.used -= n
        while self._waiters and self._fits(self._waiters[0][0]):
            size, fut = self._waiters.popleft()
            if fut.cancelled():
                continue
            self.used += size
            fut.set_result(None)


class ProduceAccumulator:
    def __init__(self, sender: BatchSender, *, batch_max_bytes: int = DEFAULT_BATCH_MAX_BYTES,
                 batch_max_delay_ms: int = DEFAULT_BATCH_MAX_DELAY_MS,
                 total_batch_max_bytes: int = DEFAULT_TOTAL_BATCH_MAX_BYTES) -> None:
        check_batch_settings(batch_max_bytes, batch_max_delay_ms, total_batch_max_bytes)
        self._sender = sender
        self.batch_max_bytes = batch_max_bytes
        self.batch_max_delay = batch_max_delay_ms / 1000.0
        self._budget = _ByteBudget(total_batch_max_bytes)
        self._open: dict[AggregateKey, _Accumulation] = {}
        self._open_of_queue: dict[MessageQueue, AggregateKey] = {}  # the one open key of a chosen queue
        self._tails: dict[MessageQueue, asyncio.Task[None]] = {}  # last in-flight batch of a chosen queue
        self._inflight: set[asyncio.Task[None]] = set()
        self._guard: asyncio.Task[None] | None = None
        self._closed = False
        self._entering = 0  # add() calls between the closed check and their item's accumulation
        self.batches_sent = 0  # figures for users and tests: how much batching happened
        self.messages_sent = 0

    @property
    def waiting_sends(self) -> int:
        """Sends blocked by total_batch_max_bytes right now (back-pressure at work)."""
        return self._budget.waiting

    @property
    def held_bytes(self) -> int:
        """Bytes of messages accepted and not yet answered (never above total_batch_max_bytes but for one)."""
        return self._budget.used

    @property
    def total_batch_max_bytes(self) -> int:
        return self._budget.total

    async def add(self, key: AggregateKey, item: bytes) -> tuple[BatchSendOutcome, int]:
        """Accumulate one encoded batch item; answer the batch's outcome and the item's index in it."""
        size = len(item)
        if self._closed:
            raise RuntimeError("the producer's accumulator is shut down")
        # counted until the item is in an accumulation: close() waits for sends it accepted that are
        # still waiting for the byte budget, which get their place only as earlier batches are answered
        self._entering += 1
        try:
            await self._budget.acquire(size)
            fut: asyncio.Future[tuple[BatchSendOutcome, int]] = asyncio.get_running_loop().create_future()
            acc = self._open.get(key)
            if acc is None:
                if key.mq is not None:
                    other = self._open_of_queue.get(key.mq)
                    if other is not None:  # the queue's earlier messages leave before this one's batch
                        self._dispatch(self._open.pop(other))
                    self._open_of_queue[key.mq] = key
                acc = self._open[key] = _Accumulation(key, asyncio.get_running_loop().time())
            acc.items.append(_Pending(item, fut))
            acc.size += size
        finally:
            self._entering -= 1
        if acc.size >= self.batch_max_bytes or self._closed:
            self._dispatch(self._open.pop(key))  # space dimension (or closing): sent from the sending call
        else:
            self._ensure_guard()
        return await fut

    def _ensure_guard(self) -> None:
        if self._guard is None or self._guard.done():
            self._guard = asyncio.get_running_loop().create_task(self._guard_loop())

    async def _guard_loop(self) -> None:
        """The one background task (time dimension): every max_delay/2 send batches that waited max_delay.
        It ends when nothing is open (no wake-ups of an idle producer) and the next add starts it again."""
        loop = asyncio.get_running_loop()
        while not self._closed and self._open:
            await asyncio.sleep(self.batch_max_delay / 2)
            now = loop.time()
            for key in [k for k, a in self._open.items() if now - a.created >= self.batch_max_delay]:
                self._dispatch(self._open.pop(key))

    def _dispatch(self, acc: _Accumulation) -> None:
        mq = acc.key.mq
        prev = self._tails.get(mq) if mq is not None else None
        task = asyncio.get_running_loop().create_task(self._send(acc, prev))
        self._inflight.add(task)
        task.add_done_callback(self._inflight.discard)
        if mq is not None:
            if self._open_of_queue.get(mq) == acc.key:
                del self._open_of_queue[mq]
            self._tails[mq] = task
            task.add_done_callback(lambda t, q=mq: self._tails.pop(q, None) if self._tails.get(q) is t else None)

    async def _send(self, acc: _Accumulation, prev: asyncio.Task[None] | None) -> None:
        if prev is not None:
            with contextlib.suppress(BaseException):
                await asyncio.shield(prev)  # keep one queue's batches in send order
        try:
            self.batches_sent += 1
            self.messages_sent += len(acc.items)
            outcome = await self._sender(acc.key, [p.item for p in acc.items])
        except BaseException as e:  # every message of the batch gets the batch's failure
            for p in acc.items:
                if not p.future.done():
                    p.future.set_exception(e if isinstance(e, Exception) else RuntimeError(str(e)))
            if not isinstance(e, Exception):
                raise
        else:
            for i, p in enumerate(acc.items):
                if not p.future.done():
                    p.future.set_result((outcome, i))
        finally:
            self._budget.release(acc.size)

    async def flush(self) -> None:
        """Send every open accumulation now and wait for all answers (shutdown, tests)."""
        for key in list(self._open):
            self._dispatch(self._open.pop(key))
        while self._inflight:
            await asyncio.gather(*list(self._inflight), return_exceptions=True)

    async def close(self) -> None:
        """Refuse new sends at once, then send every one accepted before and wait for its answer: the open
        accumulations and the sends still waiting for the byte budget (nothing is left unsent)."""
        self._closed = True
        while self._open or self._inflight or self._entering:
            for key in list(self._open):
                self._dispatch(self._open.pop(key))
            if self._inflight:
                await asyncio.gather(*list(self._inflight), return_exceptions=True)
            else:
                await asyncio.sleep(0)  # a send granted its bytes takes its place in an accumulation
        if self._guard is not None:
            guard, self._guard = self._guard, None
            await cancel_and_wait(guard)
