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


def wait_all_dispatched(broker: Broker, timeout: float = 10.0) -> None:
    """Wait until the reput thread has caught up with everything written so far: every record is in its
    consume queue and the index, so reads by offset, key or count see all the sends that came before.
    (It commits the write buffer first, so a test of what the buffer holds back must not call it.)"""
    assert broker.store.wait_for_dispatch(timeout), \
        f"timed out after {timeout:g} s waiting for dispatch (behind {broker.store.dispatch_behind_bytes()} bytes)"


def wait_remote_dispatched(namesrv_addr: str, broker_addr: str | None = None, timeout: float = 10.0, *,
                           access_key: str | None = None, secret_key: str | None = None) -> None:
    """The same wait for a broker in another process (mqbroker, a harness server), which a test cannot
    ask in process: poll its GET_BROKER_RUNTIME_INFO until dispatchBehindBytes is 0, so every send it
    acknowledged before the call is in its consume queue and the index (queryMsgByKey, queryCq, pulls)."""
    from mqadmin.connect import open_remote_admin

    with open_remote_admin(namesrv_addr, access_key=access_key, secret_key=secret_key) as admin:
        wait_for(lambda: admin.broker_status(broker_addr).get("dispatchBehindBytes") == "0",
                 f"the broker at {broker_addr or namesrv_addr} to dispatch everything it stored", timeout, 0.05)


def run_bounded(coro: Coroutine[Any, Any, T], timeout: float = 60.0) -> T:
    """Run a test's coroutine to its end, or fail at ``timeout``: a hung client or server fails the one
    test quickly instead of holding the suite until pytest's 600 s limit."""
    return asyncio.run(asyncio.wait_for(coro, timeout))
