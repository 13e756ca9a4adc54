"""The client's periodic heartbeat and route refresh are independent tasks, as Java's MQClientInstance
schedules updateTopicRouteInfoFromNameServer and sendHeartbeatToAllBrokerWithLock apart. Before, one
loop ran the route refresh and then the heartbeat in a single try: while the name server was down every
cycle's heartbeat was skipped, and after 120 s of silence the broker dropped the consumers (they left
their group, the others rebalanced)."""

from __future__ import annotations

import asyncio

import pytest

from broker_core.client.consumer_api import ConsumerApi
from broker_core.client.instance import MQClientInstance
from broker_core.client.push_consumer import ConsumeConcurrentlyStatus, PushConsumer
from broker_core.store.codec.message import MessageExt
from tests.client.conftest import create_topic
from tests.net.harness import Servers

# a cycle of a few tenths of a second instead of 30 s, so several cycles pass in a test's time
FAST_CYCLE_S = 0.2



def listener(msgs: list[MessageExt]) -> ConsumeConcurrentlyStatus:
    return ConsumeConcurrentlyStatus.CONSUME_SUCCESS


def test_heartbeats_reach_the_broker_while_the_name_server_is_down(servers: Servers) -> None:
    broker = servers.brokers[0][0]
    broker_addr = broker.config.broker_addr
    registry = broker.client_registry

    async def go() -> None:
        inst = MQClientInstance(servers.namesrv_addr, heartbeat_interval=FAST_CYCLE_S,
                                route_refresh_interval=FAST_CYCLE_S)
        await create_topic(inst, broker_addr, "HbT", queues=2)
        consumer = PushConsumer("HbG", inst)
        consumer.subscribe("HbT", "*")
        consumer.register_concurrently(listener)
        await consumer.start()
        try:
            api = ConsumerApi(inst, "HbG")
            assert await api.find_consumer_ids("HbT", "HbG") == [inst.client_id]

            servers.loop.run(servers.namesrv.stop())
            heard_before = registry.consumer_clients("HbG")[0].last_update_timestamp
            await asyncio.sleep(8 * FAST_CYCLE_S)
            heard_after = registry.consumer_clients("HbG")[0].last_update_timestamp
            assert heard_after - heard_before >= 4 * FAST_CYCLE_S * 1000, (heard_before, heard_after)

            # what the broker's housekeeping does after channelExpiredTimeout (120 s), on this test's scale:
            # a client heard from within the last second stays in its group
            registry.channel_expired_timeout_ms = 1000
            assert registry.scan_expired() == []
            assert await api.find_consumer_ids("HbT", "HbG") == [inst.client_id]
        finally:
            await consumer.shutdown()
            await inst.shutdown()

    asyncio.run(go())


def test_a_broker_that_left_the_cluster_gets_no_more_heartbeats(servers: Servers,
                                                                 caplog: pytest.LogCaptureFixture) -> None:
    """Java's cleanOfflineBroker: an address no route names any more is forgotten before each heartbeat.
    Before, the client kept heartbeating a stopped broker forever, a logged failure every cycle (and a
    blackholed one held the others' heartbeats up for the request timeout)."""
    a_addr = servers.brokers[0][0].config.broker_addr
    _, b_server, b_addr = servers.add_broker("broker-b")

    async def go() -> None:
        inst = MQClientInstance(servers.namesrv_addr, heartbeat_interval=FAST_CYCLE_S,
                                route_refresh_interval=FAST_CYCLE_S)
        await create_topic(inst, b_addr, "LeftT", queues=2)
        await create_topic(inst, a_addr, "LeftT", queues=2)
        for _ in range(50):
            route = await inst.get_route("LeftT", refresh=True)
            if route is not None and len(route.data.broker_datas) == 2:
                break
            await asyncio.sleep(0.1)
        consumer = PushConsumer("LeftG", inst)
        consumer.subscribe("LeftT", "*")
        consumer.register_concurrently(listener)
        await consumer.start()
        try:
            assert inst.all_broker_addrs() == sorted([a_addr, b_addr])
            left = servers.brokers.pop()
            servers.loop.run(b_server.stop())  # unregisters broker-b from the name server
            left[0].shutdown()
            await asyncio.sleep(4 * FAST_CYCLE_S)  # a route refresh without broker-b, then a heartbeat
            caplog.clear()
            await asyncio.sleep(6 * FAST_CYCLE_S)
            failures = [r.getMessage() for r in caplog.records if r.getMessage().startswith(f"heartbeat to {b_addr}")]
            assert failures == []
            assert inst.all_broker_addrs() == [a_addr]
            ids = await ConsumerApi(inst, "LeftG").find_consumer_ids("LeftT", "LeftG")
            assert ids == [inst.client_id]
        finally:
            await consumer.shutdown()
            await inst.shutdown()

    with caplog.at_level("WARNING", logger="broker_core.client.instance"):
        asyncio.run(go())
