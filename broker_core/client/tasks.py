"""Stopping a client's background tasks (the heartbeat loop, the trace dispatcher, a push consumer's
rebalance and persist loops, the auto-batch guard) from a shutdown() that may itself be cancelled."""

from __future__ import annotations

import asyncio
from typing import Any


async def cancel_and_wait(*tasks: asyncio.Future[Any]) -> None:
    """Cancel ``tasks`` and wait until each has ended, whatever it ended with (a task stopped for a
    shutdown has nothing left to report); then, if the calling task was itself cancelled meanwhile,
    raise CancelledError.

    Why not ``task.cancel()`` then ``with suppress(CancelledError): await task``: while the caller
    waits there, a cancel aimed at the caller itself (``asyncio.timeout`` around a shutdown(), a
    supervisor stopping it) arrives as a CancelledError at that same await, and the suppress swallowed
    it: the cancel was accepted, yet shutdown() ran on and returned normally, so a timeout overran its
    deadline and the canceller never saw the cancel take effect. The caller's cancels are counted
    (``Task.cancelling()``): one that comes while waiting is raised once every task has ended, so the
    tasks are always stopped and the rest of the caller's awaited work is not done (its ``finally``
    still runs). A cancel the caller had already received before (a shutdown() in an
    ``except CancelledError`` cleanup) does not count: that cleanup runs to its end."""
    current = asyncio.current_task()
    cancels_before = current.cancelling() if current is not None else 0
    for task in tasks:
        task.cancel()
    for task in tasks:
        try:
            await task
        except (asyncio.CancelledError, Exception):
            pass  # the task's own end, or the caller's cancel: told apart by the count below
    if current is not None and current.cancelling() > cancels_before:
        raise asyncio.CancelledError
