"""A worker-thread pool whose waiting calls are served round-robin by connection.

Why not a plain ThreadPoolExecutor: its queue is one FIFO shared by every client. A connection that
pipelines thousands of requests (each a blocking Broker call) queues them all ahead of everyone
else's, so another client's GET_MAX_OFFSET waited seconds behind 1,000 GET_ALL_TOPIC_CONFIGs. Here a
call runs at once while a worker is free; otherwise it waits in its connection's own queue, and each
freed worker goes to the next connection in turn. A flooding connection still gets every idle worker
(single-client throughput is unchanged), but a newcomer waits for at most one call per busy
connection, not for the flooder's whole backlog. Java answers overload with SYSTEM_BUSY once a
processor's queue is full; taking turns keeps every request and still bounds the others' wait.

The pool is driven from one event loop (the server's); the connection of the running request comes
from ``CURRENT_CONNECTION``, which the remoting server sets for each request's task.
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


class FairPool:
    """``run(call)`` on one of ``workers`` threads; when all are busy, callers wait their connection's turn."""

    def __init__(self, workers: int, thread_name_prefix: str) -> None:
        self._executor = ThreadPoolExecutor(max_workers=workers, thread_name_prefix=thread_name_prefix)
        self._workers = workers
        self._busy = 0
        self._waiting: OrderedDict[object | None, deque[asyncio.Future[None]]] = OrderedDict()

    @property
    def waiting(self) -> int:
        """Calls waiting for a worker (cancelled ones not yet skipped included)."""
        return sum(len(q) for q in self._waiting.values())

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
        queue.append(gate)
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
            gate = queue.popleft()
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
