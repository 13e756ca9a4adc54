"""Awaitable long polling: a parked pull/pop holds no thread in asyncio, and dispatch wakes it.

The bug these guard against: an asyncio server that parks a thread per long-polling request
(thousands of idle consumers = thousands of threads), or a waiter that dispatch never wakes.
"""

from __future__ import annotations

import asyncio
import threading
import time

from broker_core.broker.pop import PopStatus
from broker_core.broker.pull import PullStatus
from broker_core.broker.waiter import Waiter


def test_waiter_wakes_a_thread_and_a_task() -> None:
    w = Waiter()
    assert w.wait(0.01) is False
    threading.Timer(0.05, w.wake).start()
    assert w.wait(5) is True

    async def main() -> tuple[bool, bool]:
        w2 = Waiter()
        timed_out = await w2.wait_async(0.02)
        threading.Timer(0.05, w2.wake).start()  # woken from another thread, as dispatch does
        woken = await w2.wait_async(5)
        return timed_out, woken

    assert asyncio.run(main()) == (False, True)


def test_a_wake_before_the_wait_is_not_lost() -> None:
    w = Waiter()
    w.wake()

    async def main() -> bool:
        return await w.wait_async(0.01)

    assert asyncio.run(main()) is True
    w.clear()
    assert w.wait(0.01) is False


def test_async_pull_is_woken_by_dispatch_without_a_thread(make_broker) -> None:
    b = make_broker()
    b.create_or_update_topic("LP", 1, 1)
    b.create_or_update_subscription_group("G")

    async def main() -> tuple[PullStatus, int, float]:
        threads_before = threading.active_count()
        task = asyncio.create_task(b.pull_message_async("G", "LP", 0, 0, suspend_timeout_ms=10_000))
        while b.pull_hold_service.waiting() == 0:
            await asyncio.sleep(0.005)
        parked_threads = threading.active_count() - threads_before
        started = time.monotonic()
        await asyncio.to_thread(b.send_message, "LP", b"hello", queue_id=0)
        result = await asyncio.wait_for(task, 5)
        assert b.pull_hold_service.waiting() == 0
        return result.status, parked_threads, time.monotonic() - started

    status, parked_threads, elapsed = asyncio.run(main())
    assert status is PullStatus.FOUND
    assert parked_threads == 0
    assert elapsed < 5


def test_async_pull_times_out_and_a_cancelled_pull_releases_its_waiter(make_broker) -> None:
    b = make_broker()
    b.create_or_update_topic("LP", 1, 1)
    b.create_or_update_subscription_group("G")

    async def main() -> PullStatus:
        result = await b.pull_message_async("G", "LP", 0, 0, suspend_timeout_ms=50)
        task = asyncio.create_task(b.pull_message_async("G", "LP", 0, 0, suspend_timeout_ms=10_000))
        while b.pull_hold_service.waiting() == 0:
            await asyncio.sleep(0.005)
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        return result.status

    assert asyncio.run(main()) is PullStatus.NO_NEW_MSG
    assert b.pull_hold_service.waiting() == 0


def test_blocking_pull_still_works_from_a_thread(make_broker) -> None:
    b = make_broker()
    b.create_or_update_topic("LP", 1, 1)
    b.create_or_update_subscription_group("G")
    threading.Timer(0.1, lambda: b.send_message("LP", b"x", queue_id=0)).start()
    assert b.pull_message("G", "LP", 0, 0, suspend_timeout_ms=10_000).status is PullStatus.FOUND


def test_async_pop_is_woken_by_a_send(make_broker) -> None:
    b = make_broker()
    b.create_or_update_topic("PT", 1, 1)
    b.create_or_update_subscription_group("PG")

    async def main() -> tuple[PopStatus, int]:
        task = asyncio.create_task(b.pop_message_async("PG", "PT", invisible_time_ms=60_000, poll_time_ms=10_000))
        while b.pop_service.long_polling.waiting() == 0:
            await asyncio.sleep(0.005)
        await asyncio.to_thread(b.send_message, "PT", b"popped", queue_id=0)
        result = await asyncio.wait_for(task, 5)
        return result.status, len(result.messages)

    status, n = asyncio.run(main())
    assert n == 1 and status is PopStatus.FOUND
    assert b.pop_service.long_polling.waiting() == 0
