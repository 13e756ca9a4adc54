"""Waiting for what a started broker does on its own threads (reput, flushes, expiry, rebalance).

A started broker answers a send before the reput thread has put the message into its consume queue, so a
test that reads the queue right after a send races that thread. These helpers poll instead, and time out
with an assertion naming what never happened, rather than returning quietly and letting a later line
fail for a reason it does not say.
"""
from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from broker_core.broker.broker import Broker

T = TypeVar("T")


def wait_for(predicate: Callable[[], T], what: str, timeout: float = 10.0, interval: float = 0.02) -> T:
    """Poll until ``predicate`` returns something truthy, and return it."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(interval)


def wait_dispatched(broker: Broker, topic: str, queue_id: int, count: int, timeout: float = 10.0) -> None:
    """Wait until the queue holds at least ``count`` messages (its max offset has reached ``count``)."""
    wait_for(lambda: broker.get_topic(topic) is not None and broker.get_max_offset(topic, queue_id) >= count,
             f"{topic}/{queue_id} to reach {count} dispatched messages", timeout)


def run_bounded(coro: Coroutine[Any, Any, T], timeout: float = 60.0) -> T:
    """Run a test's coroutine to its end, or fail at ``timeout``: a hung client or server fails the one
    test quickly instead of holding the suite until pytest's 600 s limit."""
    return asyncio.run(asyncio.wait_for(coro, timeout))
