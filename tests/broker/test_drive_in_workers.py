"""``drive_in_workers``: the reads of wait steps run on worker threads, the waits on the loop, and a
cancelled drive (client gone, server stopping) always closes its steps, releasing a parked waiter."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from broker_core.broker.wait_steps import WaitSteps, drive_in_workers
from broker_core.broker.waiter import Waiter


def _runner(pool: ThreadPoolExecutor) -> Callable[[Callable[[], Any]], Any]:
    async def run(call: Callable[[], Any]) -> Any:
        return await asyncio.get_running_loop().run_in_executor(pool, call)
    return run


def test_reads_run_on_workers_and_finish_encodes_there_too() -> None:
    waiter = Waiter()
    threads: list[str] = []

    def steps() -> WaitSteps[int]:
        threads.append(threading.current_thread().name)
        woken = yield waiter, 5.0
        threads.append(threading.current_thread().name)
        return 7 if woken else -1

    def finish(v: int) -> str:
        threads.append(threading.current_thread().name)
        return f"answer {v}"

    async def main() -> str:
        with ThreadPoolExecutor(1, thread_name_prefix="lane") as pool:
            task = asyncio.create_task(drive_in_workers(steps(), _runner(pool), finish))
            await asyncio.sleep(0.1)
            waiter.wake()
            return await task

    assert asyncio.run(main()) == "answer 7"
    assert len(threads) == 3 and all(t.startswith("lane") for t in threads), threads


def test_a_cancelled_parked_drive_closes_its_steps() -> None:
    waiter = Waiter()
    released = threading.Event()

    def steps() -> WaitSteps[int]:
        try:
            yield waiter, 60.0
            return 1
        finally:
            released.set()

    async def main() -> None:
        with ThreadPoolExecutor(1) as pool:
            task = asyncio.create_task(drive_in_workers(steps(), _runner(pool), lambda v: v))
            await asyncio.sleep(0.1)
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            assert released.is_set()

    asyncio.run(main())


def test_a_drive_cancelled_while_a_worker_reads_closes_the_steps_when_the_read_ends() -> None:
    reading, go_on, released = threading.Event(), threading.Event(), threading.Event()
    waiter = Waiter()

    def steps() -> WaitSteps[int]:
        try:
            reading.set()
            go_on.wait(10)  # the read is still going when the task is cancelled
            yield waiter, 60.0  # it parked: nobody will drive it on
            return 1
        finally:
            released.set()

    async def main() -> None:
        with ThreadPoolExecutor(1) as pool:
            task = asyncio.create_task(drive_in_workers(steps(), _runner(pool), lambda v: v))
            await asyncio.get_running_loop().run_in_executor(None, reading.wait, 10)
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            assert not released.is_set()  # the worker is still inside the step: it cannot be closed yet
            go_on.set()
        assert released.wait(10), "the steps were never closed: their waiter stays parked"

    asyncio.run(main())
