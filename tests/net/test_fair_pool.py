"""FairPool: waiting calls are served one connection at a time, and a cancelled caller never keeps a worker.

Why its own tests: a worker lost on a cancel path (client gone mid-request, server stopping) would
silently shrink the pool until every Broker call hangs; the wire tests would only see a slow broker.
"""

from __future__ import annotations

import asyncio
import threading

from broker_core.net.fair_pool import CURRENT_CONNECTION, FairPool


def run(coro):  # noqa: ANN001, ANN201 - a tiny asyncio.run wrapper
    return asyncio.run(coro)


def test_waiting_calls_take_turns_by_connection():
    async def main() -> list[str]:
        pool = FairPool(1, "t")
        gate = threading.Event()
        order: list[str] = []

        async def call(conn: str, tag: str, block: bool = False) -> None:
            CURRENT_CONNECTION.set(conn)
            await pool.run(lambda: gate.wait(5) if block else None)
            order.append(tag)

        first = asyncio.create_task(call("flood", "f0", block=True))  # holds the only worker
        await asyncio.sleep(0.05)
        tasks = [asyncio.create_task(call("flood", f"f{i}")) for i in range(1, 6)]
        await asyncio.sleep(0.01)
        tasks.append(asyncio.create_task(call("other", "o1")))  # arrives after five flood calls
        await asyncio.sleep(0.01)
        gate.set()
        await asyncio.gather(first, *tasks)
        pool.shutdown()
        return order

    order = run(main())
    assert order.index("o1") <= 2, order  # served right after the flood's next call, not after all five


def test_cancelled_waiters_do_not_keep_or_lose_workers():
    async def main() -> None:
        pool = FairPool(2, "t")
        gate = threading.Event()
        busy = [asyncio.create_task(pool.run(lambda: gate.wait(5))) for _ in range(2)]
        await asyncio.sleep(0.05)
        waiting = [asyncio.create_task(pool.run(lambda: 1)) for _ in range(3)]
        await asyncio.sleep(0.01)
        for t in waiting[:2]:
            t.cancel()  # cancelled while queued
        gate.set()
        await asyncio.gather(*busy)
        assert await waiting[2] == 1
        # every worker is free again: two calls that need each other's company both start
        both = threading.Barrier(2, timeout=5)
        await asyncio.wait_for(asyncio.gather(pool.run(both.wait), pool.run(both.wait)), 5)
        assert pool.waiting == 0
        pool.shutdown()

    run(main())


def test_a_cancel_right_after_the_handover_passes_the_worker_on():
    """The race: a worker is handed to a waiting call that is cancelled before it resumes."""
    async def main() -> None:
        pool = FairPool(1, "t")
        gate = threading.Event()
        victim: asyncio.Task[str] | None = None

        async def holder() -> None:
            await pool.run(lambda: gate.wait(5))  # its end hands the worker to `victim`...
            assert victim is not None
            victim.cancel()  # ...cancelled in the same loop step, before it resumes

        held = asyncio.create_task(holder())
        await asyncio.sleep(0.05)
        victim = asyncio.create_task(pool.run(lambda: "never"))
        after = asyncio.create_task(pool.run(lambda: "ran"))
        await asyncio.sleep(0.01)
        gate.set()
        await held
        assert await asyncio.wait_for(after, 5) == "ran"  # the worker went on to the next caller
        assert victim.cancelled()
        pool.shutdown()

    run(main())


def test_a_lost_connection_drops_its_waiting_calls_but_not_its_oneway_ones():
    async def main() -> tuple[list[str], bool]:
        from broker_core.net.fair_pool import ANSWER_EXPECTED

        pool = FairPool(1, "t")
        gate = threading.Event()
        ran: list[str] = []

        async def call(conn: str, tag: str, answer: bool, block: bool = False) -> None:
            CURRENT_CONNECTION.set(conn)
            ANSWER_EXPECTED.set(answer)
            await pool.run(lambda: gate.wait(5) if block else ran.append(tag))

        holder = asyncio.create_task(call("other", "hold", True, block=True))
        await asyncio.sleep(0.05)
        gone = [asyncio.create_task(call("gone", f"g{i}", answer=i != 1)) for i in range(3)]
        await asyncio.sleep(0.01)
        assert pool.drop_waiting("gone") == 2 and pool.waiting == 1
        gate.set()
        await holder
        results = await asyncio.gather(*gone, return_exceptions=True)
        # the worker is free again afterwards
        await asyncio.wait_for(pool.run(lambda: ran.append("after")), 5)
        pool.shutdown()
        return ran, [isinstance(r, asyncio.CancelledError) for r in results] == [True, False, True]

    ran, dropped_ones_cancelled = run(main())
    assert ran == ["g1", "after"] and dropped_ones_cancelled
