"""A push consumer's shutdown() that is cancelled (a timeout around it fires, a supervisor cancels its
task) must still commit the group's consumed offsets to the broker, as Java's
DefaultMQPushConsumerImpl.shutdown always runs persistConsumerOffset: they used to stay in memory,
so what had been consumed was consumed again after a restart. A second shutdown() after such a cancel
must not return at once with the teardown unfinished (offsets unsaved, the consumer still registered
with the broker); one after a completed shutdown has nothing left to do.

The offsets are what the broker answers QUERY_CONSUMER_OFFSET for the group, as an admin sees them;
the periodic persist is pushed out of the tests' time so that only the shutdown can send them."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterator

import pytest

from broker_core.client import push_consumer
from broker_core.client.consumer_api import ConsumerApi
from broker_core.client.instance import MQClientInstance
from broker_core.client.push_consumer import ConsumeConcurrentlyStatus, PushConsumer
from broker_core.client.rebalance import ConsumeFromWhere
from broker_core.remoting import RequestCode, ResponseCode
from broker_core.remoting.bodies import MessageQueue
from broker_core.remoting.headers import GetConsumerConnectionListRequestHeader
from broker_core.store.codec.message import MessageExt
from tests.client.conftest import create_topic, produce, wait_dispatched
from tests.client.test_client_push import wait_until
from tests.client.test_client_shutdown_cancel import run, shutdown_cancelled_as_a_task_ends, tasks_started_by
from tests.net.harness import Servers

SENT = 10


@pytest.fixture(autouse=True)
def no_periodic_persist(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(push_consumer, "PERSIST_INTERVAL_S", 3600.0)
    yield


class Group:
    """A one-queue topic holding ``SENT`` messages and a started consumer group that consumed them all."""

    def __init__(self, servers: Servers, name: str) -> None:
        broker, _ = servers.brokers[0]
        self.broker_addr = broker.config.broker_addr
        self.topic, self.group = name, name + "G"
        self.mq = MessageQueue(topic=self.topic, broker_name=broker.config.broker_name, queue_id=0)
        self.admin = MQClientInstance(servers.namesrv_addr)  # the admin's view: a client of its own
        self.inst = MQClientInstance(servers.namesrv_addr)
        self.consumer = PushConsumer(self.group, self.inst, consume_from=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET)
        self.consumed: list[bytes] = []

    async def consume_all(self) -> None:
        await create_topic(self.admin, self.broker_addr, self.topic, queues=1)
        await produce(self.admin, self.topic, SENT, "m")
        await wait_dispatched(self.admin, self.topic, self.mq.broker_name, {0: SENT})
        self.consumer.subscribe(self.topic, "*")

        def listener(msgs: list[MessageExt]) -> ConsumeConcurrentlyStatus:
            self.consumed.extend(m.body for m in msgs)
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

        self.consumer.register_concurrently(listener)
        await self.consumer.start()
        assert await wait_until(lambda: self.consumer.offsets.read_memory(self.mq) == SENT), self.consumed
        # only a shutdown sends the offset: the pulls carried the one of before the consumption
        assert (await self.committed() or 0) < SENT

    async def committed(self) -> int | None:
        return await ConsumerApi(self.admin, self.group).query_consumer_offset(self.mq)

    async def online(self) -> bool:
        header = GetConsumerConnectionListRequestHeader(consumer_group=self.group)
        resp = await self.admin.invoke(self.broker_addr, RequestCode.GET_CONSUMER_CONNECTION_LIST, header)
        assert resp.code in (ResponseCode.SUCCESS, ResponseCode.CONSUMER_NOT_ONLINE), resp.remark
        return resp.code == ResponseCode.SUCCESS

    async def close(self) -> None:
        await self.consumer.shutdown()
        await self.inst.shutdown()
        await self.admin.shutdown()


async def with_group(servers: Servers, name: str, body: Callable[[Group], Awaitable[object]]) -> object:
    g = Group(servers, name)
    try:
        for inst in (g.inst, g.admin):  # before the consumer: their tasks are not the consumer's to stop
            await inst.start()
        return await body(g)
    finally:
        await g.close()


def test_a_shutdown_cut_off_by_a_timeout_still_commits_what_was_consumed(servers: Servers, unique: str) -> None:
    async def go(g: Group) -> tuple[str, int | None, bool, list[bytes]]:
        await g.consume_all()
        try:
            async with asyncio.timeout(0):  # fires at the shutdown's first wait
                await g.consumer.shutdown()
            ended = "returned"
        except TimeoutError:
            ended = "timed out"
        committed, online = await g.committed(), await g.online()
        # a restarted consumer of the group goes on after what was consumed: nothing comes again
        again: list[bytes] = []
        restarted = PushConsumer(g.group, g.inst, consume_from=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET)
        restarted.subscribe(g.topic, "*")
        restarted.register_concurrently(lambda msgs: again.extend(m.body for m in msgs)
                                        or ConsumeConcurrentlyStatus.CONSUME_SUCCESS)
        await restarted.start()
        try:
            await produce(g.admin, g.topic, 1, "after")
            assert await wait_until(lambda: b"after0" in again), again
        finally:
            await restarted.shutdown()
        return ended, committed, online, again

    assert run(with_group(servers, unique, go)) == ("timed out", SENT, False, [b"after0"])


def test_a_second_shutdown_after_a_cancelled_one_finishes_the_teardown(servers: Servers, unique: str) -> None:
    async def go(g: Group) -> tuple[tuple[bool, str], str, int | None, bool, str]:
        background = await tasks_started_by(g.consume_all)  # its loops: the rebalance, persist and pull
        first = await shutdown_cancelled_as_a_task_ends(g.consumer.shutdown, background)
        await g.consumer.shutdown()
        second = "returned"
        committed, online = await g.committed(), await g.online()
        await g.consumer.shutdown()  # a completed shutdown left nothing to do
        return first, second, committed, online, "returned"

    assert run(with_group(servers, unique, go)) == ((True, "cancelled"), "returned", SENT, False, "returned")


def test_a_shutdown_called_from_an_async_listener_commits_what_was_consumed(servers: Servers, unique: str) -> None:
    """The listener's task is one the teardown stops: the shutdown it called ends with it, cancelled,
    while the teardown goes on and commits the batches consumed before it (the batch that called is not)."""

    async def go(g: Group) -> tuple[list[str], int | None]:
        ends: list[str] = []

        async def listener(msgs: list[MessageExt]) -> ConsumeConcurrentlyStatus:
            if msgs[-1].body == f"m{SENT - 1}".encode():
                try:
                    await g.consumer.shutdown()
                    ends.append("returned")
                except asyncio.CancelledError:
                    ends.append("cancelled")
                    raise
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

        await create_topic(g.admin, g.broker_addr, g.topic, queues=1)
        await produce(g.admin, g.topic, SENT, "m")
        g.consumer.subscribe(g.topic, "*")
        g.consumer.register_concurrently(listener)
        await g.consumer.start()
        offline = False
        for _ in range(200):
            if ends and not await g.online():
                offline = True
                break
            await asyncio.sleep(0.05)
        assert offline, ends
        return ends, await g.committed()

    assert run(with_group(servers, unique, go)) == (["cancelled"], SENT - 1)
