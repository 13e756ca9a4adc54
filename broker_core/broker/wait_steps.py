"""Long-polling logic written once, run blocking (threads) or awaited (asyncio).

Why: a suspended pull or pop is "read, park until woken or timed out, read again". Writing that
loop twice (threads and asyncio) would let the two drift apart. Instead the loop is a generator
that yields ``(waiter, seconds)`` each time it must wait and receives whether it was woken;
``drive_blocking`` waits on a thread, ``drive_async`` awaits, so no thread is parked per request;
``drive_in_workers`` awaits too but runs each read on a worker (a server's event loop must not copy
a 4 MB message hundreds of times in a row).
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Awaitable, Callable, Generator
from typing import Any, Generic, TypeVar, cast

from .waiter import Waiter

T = TypeVar("T")
R = TypeVar("R")

WaitSteps = Generator[tuple[Waiter, float], bool, T]
"""Yields (waiter, timeout in seconds); is sent True when woken; returns the result."""


def drive_blocking(steps: WaitSteps[T]) -> T:
    """Run the steps on this thread, blocking in each wait."""
    try:
        waiter, timeout = next(steps)
        while True:
            waiter, timeout = steps.send(waiter.wait(timeout))
    except StopIteration as done:
        return done.value
    finally:
        steps.close()  # an exception mid-wait still releases the parked waiter


async def drive_async(steps: WaitSteps[T]) -> T:
    """Run the steps in an asyncio task: each wait is an ``await``, the reads run inline."""
    try:
        waiter, timeout = next(steps)
        while True:
            woken = await waiter.wait_async(timeout)
            waiter, timeout = steps.send(woken)
    except StopIteration as done:
        return done.value
    finally:
        steps.close()  # a cancelled task (client gone, server stopping) releases its waiter


StepRunner = Callable[[Callable[[], Any]], Awaitable[Any]]
"""Runs a blocking call off the event loop and awaits its result (the server's worker lane)."""


class _Stepper(Generic[T, R]):
    """Advances wait steps on worker threads, one step at a time, and closes them exactly once.

    Why a lock and an ``abandoned`` flag: a task cancelled (client gone, server stopping) while a
    worker is still inside a step cannot close the generator ("generator already executing"); the
    worker then closes it when its step ends, so a parked waiter is always released."""

    __slots__ = ("_steps", "_finish", "_lock", "_abandoned")

    def __init__(self, steps: WaitSteps[T], finish: Callable[[T], R]) -> None:
        self._steps = steps
        self._finish = finish
        self._lock = threading.Lock()
        self._abandoned = False

    def step(self, woken: bool | None) -> tuple[bool, Any]:
        """(True, finish(result)) when the steps are done, else (False, (waiter, seconds)). Never raises
        StopIteration (an executor future cannot carry it)."""
        with self._lock:
            if self._abandoned:
                return True, None  # nobody waits for this answer any more
            try:
                try:
                    out = next(self._steps) if woken is None else self._steps.send(woken)
                except StopIteration as done:
                    return True, self._finish(done.value)
                return False, out
            finally:
                if self._abandoned:
                    self._steps.close()

    def abandon(self) -> None:
        """Close the steps now, or (a worker is inside a step) when that step ends."""
        self._abandoned = True
        if self._lock.acquire(blocking=False):
            try:
                self._steps.close()
            finally:
                self._lock.release()


async def drive_in_workers(steps: WaitSteps[T], run: StepRunner, finish: Callable[[T], R]) -> R:
    """Like ``drive_async``, but every read (the first and each one after a wake-up) and ``finish`` (the
    answer's encoding) run through ``run`` on a worker thread: only the waits are awaited on the loop.

    Why: 500 parked pulls woken by one 4 MB message each read, copied and encoded it inline, and the
    event loop (the name server's too) answered nothing for ~15 s. Apache hands woken pulls to the
    pullMessageExecutor (PullMessageProcessor.executeRequestWhenWakeup) for the same reason."""
    stepper = _Stepper(steps, finish)
    try:
        done, out = await run(functools.partial(stepper.step, None))
        while not done:
            waiter, timeout = out
            woken = await waiter.wait_async(timeout)
            done, out = await run(functools.partial(stepper.step, woken))
        return cast(R, out)
    finally:
        stepper.abandon()  # a cancelled task (client gone, server stopping) releases its parked waiter
