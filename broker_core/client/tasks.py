"""Stopping a client's background tasks (the heartbeat loop, the trace dispatcher, a push consumer's
rebalance and persist loops, the auto-batch guard) from a shutdown() that may itself be cancelled, and
letting the teardown that must not be cut short (a push consumer's offset commit) finish first."""

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
    cancels_before = _cancels_of_caller()
    for task in tasks:
        task.cancel()
    await _wait_ended(tasks, cancels_before)


async def finish_and_wait(*tasks: asyncio.Future[Any]) -> None:
    """Wait until ``tasks`` have ended, not cancelling them, even when the calling task is cancelled
    meanwhile; then raise that cancel (the rule of cancel_and_wait, without the cancel).

    For work that must not be cut short by a cancel of the one waiting for it: a push consumer's
    shutdown() run under ``asyncio.timeout`` that fires still commits the consumed offsets (Java's
    shutdown always runs persistConsumerOffset), then ends cancelled. Each task's own result or
    failure is left on the task for the caller to read."""
    await _wait_ended(tasks, _cancels_of_caller())


def _cancels_of_caller() -> int:
    current = asyncio.current_task()
    return current.cancelling() if current is not None else 0


async def _wait_ended(tasks: tuple[asyncio.Future[Any], ...], cancels_before: int) -> None:
    """Wait until every task has ended, whatever it ended with; a cancel of the caller that arrives
    meanwhile is raised once they have, a cancel received before (more than ``cancels_before``) not.
    ``asyncio.wait`` passes no cancel of the caller on to the tasks: awaiting a task directly would.
    The caller's own task, when among them, is not waited for (it would wait for itself forever): a
    cancel it was given lands at its next await."""
    current = asyncio.current_task()
    for task in tasks:
        while task is not current and not task.done():
            try:
                await asyncio.wait([task])
            except asyncio.CancelledError:
                pass  # the caller's cancel: counted, raised below once the tasks have ended
    if current is not None and current.cancelling() > cancels_before:
        raise asyncio.CancelledError
