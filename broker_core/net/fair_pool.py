"""A worker-thread pool whose waiting calls are served round-robin by connection.

Why not a plain ThreadPoolExecutor: its queue is one FIFO shared by every client. A connection that
pipelines thousands of requests (each a blocking Broker call) queues them all ahead of everyone
else's, so another client's GET_MAX_OFFSET waited seconds behind 1,000 GET_ALL_TOPIC_CONFIGs. Here a
call runs at once while a worker is free; otherwise it waits in its connection's own queue, and each
freed worker goes to the next connection in turn. A flooding connection still gets every idle worker
(single-client throughput is unchanged), but a newcomer waits for at most one call per busy
connection, not for the flooder's whole backlog. Java answers overload with SYSTEM_BUSY once a
processor's queue is full; taking turns keeps every request and still bounds the others' wait.

A connection that is gone has its waiting calls dropped (``drop_waiting``) unless they must run: 2,000
clients that each sent a slow admin request and hung up kept the workers busy for ~30 s with answers
nobody would read, while a live producer's send waited behind them. A oneway request still runs
(its effect is wanted; there is no answer to lose).

The pool is driven from one event loop (the server's); the connection of the running request comes
from ``CURRENT_CONNECTION``, and whether it waits for an answer from ``ANSWER_EXPECTED``, which the
remoting server sets for each request's task.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict, deque
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from contextvars import ContextVar
from typing import TypeVar

T = TypeVar("T")

CURRENT_CONNECTION: ContextVar[object | None] = ContextVar("rmqops_current_connection", default=None)
"""The connection whose request the current task serves (None outside a request): the pool's turn key."""
CURRENT_REQUEST_CODE: ContextVar[int | None] = ContextVar("rmqops_request_code", default=None)
"""The request code the current task serves (None outside a request): the broker's lane for it."""
ANSWER_EXPECTED: ContextVar[bool] = ContextVar("rmqops_answer_expected", default=False)
"""Whether someone waits for the current request's answer (not oneway): only such a call may be dropped
unrun when its connection is lost."""


class FairPool:
    """``run(call)`` on one of ``workers`` threads; when all are busy, callers wait their connection's turn."""

    def __init__(self, workers: int, thread_name_prefix: str) -> None:
        self._executor = ThreadPoolExecutor(max_workers=workers, thread_name_prefix=thread_name_prefix)
        self._workers = workers
        self._busy = 0
        # per connection, its waiting calls: (the gate a freed worker opens, droppable when it is gone)
        self._waiting: OrderedDict[object | None, deque[tuple[asyncio.Future[None], bool]]] = OrderedDict()

    @property
    def waiting(self) -> int:
        """Calls waiting for a worker (cancelled ones not yet skipped included)."""
        return sum(len(q) for q in self._waiting.values())

    def drop_waiting(self, key: object) -> int:
        """``key``'s connection is lost: its waiting calls that expect an answer end unrun (their tasks
        see CancelledError, as a server stopping cancels them); oneway ones keep their turn. Returns
        how many were dropped."""
        queue = self._waiting.get(key)
        if queue is None:
            return 0
        kept = deque(entry for entry in queue if not entry[1] and not entry[0].done())
        dropped = 0
        for gate, droppable in queue:
            if droppable and not gate.done():
                gate.cancel()
                dropped += 1
        if kept:
            self._waiting[key] = kept
        else:
            del self._waiting[key]
        return dropped

    async def run(self, call: Callable[[], T]) -> T:
        loop = asyncio.get_running_loop()
        await self._acquire(loop)
        try:
            return await loop.run_in_executor(self._executor, call)
        finally:
            self._release()

    async def _acquire(self, loop: asyncio.AbstractEventLoop) -> None:
        if self._busy < self._workers and not self._waiting:
            self._busy += 1
            return
        key = CURRENT_CONNECTION.get()
        gate: asyncio.Future[None] = loop.create_future()
        queue = self._waiting.get(key)
        if queue is None:
            queue = self._waiting[key] = deque()
        queue.append((gate, ANSWER_EXPECTED.get()))
        try:
            await gate
        except asyncio.CancelledError:
            if gate.done() and not gate.cancelled():  # a worker was handed over just before the cancel
                self._release()
            raise  # a gate cancelled while waiting stays queued; _release skips it

    def _release(self) -> None:
        """Hand the freed worker to the next connection in turn (its oldest call), else free it."""
        waiting = self._waiting
        while waiting:
            key, queue = next(iter(waiting.items()))
            gate, _ = queue.popleft()
            if queue:
                waiting.move_to_end(key)  # its next call waits for every other connection's turn
            else:
                del waiting[key]
            if not gate.done():
                gate.set_result(None)
                return
        self._busy -= 1

    def shutdown(self) -> None:
        self._executor.shutdown(wait=True, cancel_futures=True)
