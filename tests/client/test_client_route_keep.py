"""A name server that answers TOPIC_NOT_EXIST for a topic the client already routes (restarted empty,
before the brokers' next 30 s registration) must not make the client forget the route: Java's
MQClientInstance.updateTopicRouteInfoFromNameServer keeps the cached route and subscribe info. Before,
the route was dropped, every send failed with "No route info of this topic" and one rebalance let go of
every queue of the topic. A topic the client never routed still fails with that message."""

from __future__ import annotations

import asyncio
import time

import pytest

from broker_core.client.instance import BrokerError, MQClientInstance
from broker_core.client.message import Message
from broker_core.client.producer import Producer, SendStatus
from broker_core.client.push_consumer import ConsumeConcurrentlyStatus, ConsumeFromWhere, PushConsumer
from broker_core.net.namesrv import NameServer, NamesrvConfig
from broker_core.store.codec.message import MessageExt
from tests.client.conftest import create_topic
from tests.net.harness import Servers

TOPIC = "KeptT"



def restart_name_server_empty(servers: Servers) -> None:
    """Stop the name server (its connections close) and start an empty one on the same port."""
    async def restart() -> None:
        port = servers.namesrv.port
        await servers.namesrv.stop()
        servers.namesrv = NameServer(NamesrvConfig(listen_port=port), servers.server_config)
        await servers.namesrv.start()

    servers.loop.run(restart())


async def wait_owned(consumer: PushConsumer, want: int, timeout: float = 10.0) -> None:
    """Wait until the consumer's rebalance owns ``want`` queues of TOPIC."""
    deadline = time.monotonic() + timeout
    while owned(consumer) != want:
        assert time.monotonic() < deadline, owned(consumer)
        await asyncio.sleep(0.05)


def owned(consumer: PushConsumer) -> int:
    assert consumer.rebalancer is not None
    return sum(1 for mq in consumer.rebalancer.process_queues if mq.topic == TOPIC)


async def send_all(producer: Producer, bodies: list[bytes]) -> None:
    for body in bodies:
        assert (await producer.send(Message(TOPIC, body))).status == SendStatus.SEND_OK


async def wait_consumed(consumed: set[bytes], want: set[bytes], timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while not want <= consumed:
        assert time.monotonic() < deadline, sorted(want - consumed)
        await asyncio.sleep(0.05)


def test_a_name_server_restarted_empty_keeps_the_routes_the_client_had(servers: Servers) -> None:
    broker_addr = servers.brokers[0][0].config.broker_addr
    ns = servers.namesrv_addr

    async def go() -> None:
        consumed: set[bytes] = set()

        def listener(msgs: list[MessageExt]) -> ConsumeConcurrentlyStatus:
            consumed.update(m.body for m in msgs)
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

        inst = MQClientInstance(ns)
        await create_topic(inst, broker_addr, TOPIC, queues=4)
        consumer = PushConsumer("KeptG", MQClientInstance(ns), consume_from=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET)
        consumer.subscribe(TOPIC, "*")
        consumer.register_concurrently(listener)
        producer = Producer("KeptP", inst)
        await consumer.start()
        await producer.start()
        try:
            await wait_owned(consumer, 4)
            before = [f"before-{i}".encode() for i in range(8)]
            await send_all(producer, before)
            await wait_consumed(consumed, set(before))

            restart_name_server_empty(servers)
            await asyncio.sleep(0.3)  # the clients see their name server connections close
            # what the periodic 30 s route refresh of each instance does
            for i in (inst, consumer.instance):
                route = await i.get_route(TOPIC, refresh=True)
                assert route is not None and len(route.subscribe_queues()) == 4
            after = [f"after-{i}".encode() for i in range(8)]
            await send_all(producer, after)
            await consumer.rebalance_once()
            assert owned(consumer) == 4
            await wait_consumed(consumed, set(after))

            # a client that never routed the topic: the empty name server's answer is all it has
            fresh = MQClientInstance(ns)
            stranger = Producer("KeptP2", fresh)
            await stranger.start()
            try:
                with pytest.raises(BrokerError, match=f"No route info of this topic: {TOPIC}"):
                    await stranger.send(Message(TOPIC, b"nowhere"))
            finally:
                await stranger.shutdown()
                await fresh.shutdown()
        finally:
            await consumer.shutdown()
            await consumer.instance.shutdown()
            await producer.shutdown()
            await inst.shutdown()

    asyncio.run(go())
