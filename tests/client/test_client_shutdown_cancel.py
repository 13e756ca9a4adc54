"""A shutdown() that is itself cancelled must end cancelled. Each shutdown cancels its background tasks
(the heartbeat loop, the trace dispatcher, the auto-batch guard, a push consumer's loops) and waits for
them; it used to wait with ``suppress(CancelledError)``, which also swallowed a cancel aimed at the task
running the shutdown (``asyncio.timeout`` around it, a supervisor stopping it): the cancel was accepted,
yet shutdown() went on and returned normally, so a timeout overran its deadline and the canceller
never saw its cancel take effect.

The tests cancel the shutdown exactly when one of the object's background tasks ends, from a callback on
that task (it runs before the shutdown wakes up): the cancel lands while the shutdown waits for its
background tasks, deterministically."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TypeVar

from broker_core.client.instance import MQClientInstance
from broker_core.client.message import Message
from broker_core.client.producer import Producer
from broker_core.client.push_consumer import ConsumeConcurrentlyStatus, PushConsumer
from broker_core.store.codec.message import MessageExt
from tests.client.conftest import create_topic
from tests.remoting_broker import BrokerProcess

T = TypeVar("T")


def run(coro: Awaitable[T], timeout: float = 60.0) -> T:
    async def bounded() -> T:
        async with asyncio.timeout(timeout):
            return await coro
    return asyncio.run(bounded())


async def tasks_started_by(start: Callable[[], Awaitable[object]]) -> set[asyncio.Task[object]]:
    """The tasks ``start()`` left running (its one-shot helpers have ended by the time this returns)."""
    before = asyncio.all_tasks()
    await start()
    await asyncio.sleep(0.2)
    return {t for t in asyncio.all_tasks() - before if not t.done()}


async def shutdown_cancelled_as_a_task_ends(shutdown: Callable[[], Awaitable[None]],
                                            background: set[asyncio.Task[object]]) -> tuple[bool, str]:
    """Run ``shutdown()`` and cancel it as the first of ``background`` ends; answer whether the cancel
    was accepted and how the shutdown ended."""
    assert background, "nothing to stop: the test would prove nothing"
    stopping = asyncio.ensure_future(shutdown())
    accepted: list[bool] = []

    def cancel_stopping(_: object) -> None:
        if not accepted:
            accepted.append(stopping.cancel())

    for task in background:
        task.add_done_callback(cancel_stopping)
    try:
        await stopping
        outcome = "returned"
    except asyncio.CancelledError:
        outcome = "cancelled"
    assert all(t.done() for t in background), "a cancelled shutdown left a background task running"
    return accepted[0], outcome


def test_a_client_instance_shutdown_cancelled_while_stopping_its_heartbeat_loop_ends_cancelled(
        broker: BrokerProcess) -> None:
    async def go() -> tuple[bool, str]:
        inst = MQClientInstance(broker.namesrv_addr)
        background = await tasks_started_by(inst.start)
        outcome = await shutdown_cancelled_as_a_task_ends(inst.shutdown, background)
        await inst.shutdown()
        return outcome

    assert run(go()) == (True, "cancelled")


def test_a_traced_producer_shutdown_cancelled_while_stopping_its_trace_dispatcher_ends_cancelled(
        broker: BrokerProcess, unique: str) -> None:
    async def go() -> tuple[bool, str]:
        inst = MQClientInstance(broker.namesrv_addr)
        await inst.start()
        producer = Producer(unique + "P", inst, enable_msg_trace=True)
        background = await tasks_started_by(producer.start)
        outcome = await shutdown_cancelled_as_a_task_ends(producer.shutdown, background)
        await producer.shutdown()
        await inst.shutdown()
        return outcome

    assert run(go()) == (True, "cancelled")


def test_an_autobatch_producer_shutdown_cancelled_while_stopping_its_batch_guard_ends_cancelled(
        broker: BrokerProcess, unique: str) -> None:
    async def go() -> tuple[bool, str, bool]:
        inst = MQClientInstance(broker.namesrv_addr)
        await create_topic(inst, broker.broker_addr, unique)
        producer = Producer(unique + "P", inst, auto_batch=True, batch_max_delay_ms=30_000)
        await producer.start()
        sending: list[asyncio.Task[object]] = []

        async def send_one() -> None:  # waits in an open batch: the guard that sends it later is running
            sending.append(producer.send_async(Message(unique, b"m")))

        background = await tasks_started_by(send_one) - set(sending)
        outcome = await shutdown_cancelled_as_a_task_ends(producer.shutdown, background)
        sent = (await sending[0]) is not None  # shutdown sent the open batch before stopping the guard
        await producer.shutdown()
        await inst.shutdown()
        return (*outcome, sent)

    assert run(go()) == (True, "cancelled", True)


def test_a_push_consumer_shutdown_cancelled_while_stopping_its_loops_ends_cancelled(
        broker: BrokerProcess, unique: str) -> None:
    async def go() -> tuple[bool, str]:
        inst = MQClientInstance(broker.namesrv_addr)
        await create_topic(inst, broker.broker_addr, unique)
        await inst.start()
        consumer = PushConsumer(unique + "G", inst)
        consumer.subscribe(unique, "*")

        def listener(msgs: list[MessageExt]) -> ConsumeConcurrentlyStatus:
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

        consumer.register_concurrently(listener)
        background = await tasks_started_by(consumer.start)
        outcome = await shutdown_cancelled_as_a_task_ends(consumer.shutdown, background)
        await inst.shutdown()
        return outcome

    assert run(go()) == (True, "cancelled")


def test_a_shutdown_in_a_cancelled_tasks_cleanup_runs_to_its_end(broker: BrokerProcess, unique: str) -> None:
    """The cancel the task got before it began shutting down is not the shutdown's to raise again:
    the cleanup stops the trace dispatcher, flushes, and returns, and the task re-raises it itself."""

    async def go() -> tuple[str, bool]:
        inst = MQClientInstance(broker.namesrv_addr)
        await inst.start()
        producer = Producer(unique + "P", inst, enable_msg_trace=True)
        background = await tasks_started_by(producer.start)  # the trace dispatcher's loop
        cleanup: list[str] = []

        async def work() -> None:
            try:
                await asyncio.sleep(60)
            except asyncio.CancelledError:
                try:
                    await producer.shutdown()
                    cleanup.append("returned")
                except asyncio.CancelledError:
                    cleanup.append("cancelled")
                raise

        worker = asyncio.ensure_future(work())
        await asyncio.sleep(0.05)
        worker.cancel()
        await asyncio.wait([worker])
        stopped = all(t.done() for t in background)
        await inst.shutdown()
        return cleanup[0], worker.cancelled() and stopped

    assert run(go()) == ("returned", True)
