"""One parked long poll that both a thread and an asyncio task can wait on.

Why: long polling (4.x pull, 5.x pop) parks a request until dispatch (the store's reput) sees a
message it wants. In-process callers block a worker thread on it, but an asyncio server must not
park one thread per request: it ``await``s the same waiter. Dispatch runs on the store's threads,
so waking an awaiting task goes through ``loop.call_soon_threadsafe``; no thread sits in a wait
for an asyncio caller.
"""

from __future__ import annotations

import contextlib
import threading
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # asyncio loads with the first awaiting caller (a server), not with every Broker
    import asyncio


def _resolve(fut: asyncio.Future[bool]) -> None:
    if not fut.done():
        fut.set_result(True)


class Waiter:
    """A wake-up flag with a blocking ``wait`` (threads) and an awaitable ``wait_async`` (asyncio).

    ``wake`` is idempotent and thread-safe; ``clear`` re-arms it for the next wait (pop re-checks
    its queues after every wake-up and parks again)."""

    __slots__ = ("_event", "_lock", "_futures")

    def __init__(self) -> None:
        self._event = threading.Event()
        self._lock = threading.Lock()
        self._futures: list[tuple[asyncio.AbstractEventLoop, asyncio.Future[bool]]] = []

    def wake(self) -> None:
        """Called by dispatch (any thread): wake the thread or task waiting, now or in the future."""
        with self._lock:
            self._event.set()
            pending, self._futures = self._futures, []
        for loop, fut in pending:
            with contextlib.suppress(RuntimeError):  # the loop is closed: nobody is waiting any more
                loop.call_soon_threadsafe(_resolve, fut)

    def is_set(self) -> bool:
        return self._event.is_set()

    def clear(self) -> None:
        self._event.clear()

    def wait(self, timeout: float) -> bool:
        """Block the calling thread up to ``timeout`` seconds; True when woken."""
        return self._event.wait(max(timeout, 0.0))

    async def wait_async(self, timeout: float) -> bool:
        """Await a wake-up for up to ``timeout`` seconds without holding a thread; True when woken."""
        import asyncio

        loop = asyncio.get_running_loop()
        with self._lock:
            if self._event.is_set():
                return True
            fut: asyncio.Future[bool] = loop.create_future()
            entry = (loop, fut)
            self._futures.append(entry)
        try:
            async with asyncio.timeout(max(timeout, 0.0)):
                return await fut
        except TimeoutError:
            return self._event.is_set()
        finally:
            with self._lock, contextlib.suppress(ValueError):
                self._futures.remove(entry)
