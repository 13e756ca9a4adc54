"""Long-polling logic written once, run blocking (threads) or awaited (asyncio).

Why: a suspended pull or pop is "read, park until woken or timed out, read again". Writing that
loop twice (threads and asyncio) would let the two drift apart. Instead the loop is a generator
that yields ``(waiter, seconds)`` each time it must wait and receives whether it was woken;
``drive_blocking`` waits on a thread, ``drive_async`` awaits, so no thread is parked per request.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import TypeVar

from .waiter import Waiter

T = TypeVar("T")

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
