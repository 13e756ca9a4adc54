"""Rebalance rounds against real brokers that cannot give what the round asks of them.

Why: a rebalance runs under the consumer's rebalance lock and decides which queues are consumed at all.
A broker that has no heartbeat of the group yet (just restarted) answers GET_CONSUMER_LIST_BY_GROUP
with "no consumer for this group"; Java's rebalanceByTopic then changes nothing (cidAll null), where
this client dropped every queue of the topic. A broker that stops answering must not hold a round up
by a request timeout per orderly queue it drops: Java unlocks a dropped queue oneway.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
from contextlib import ExitStack
from pathlib import Path

from broker_core.client.instance import MQClientInstance
from broker_core.client.push_consumer import ConsumeConcurrentlyStatus, ConsumeOrderlyStatus, PushConsumer
from broker_core.client.rebalance import ConsumeFromWhere
from broker_core.remoting import RequestCode, ResponseCode
from broker_core.remoting.headers import GetConsumerListByGroupRequestHeader, UnregisterClientRequestHeader
from broker_core.store.codec.message import MessageExt
from tests.client.conftest import consumer_ids, create_topic, produce
from tests.remoting_broker import BrokerProcess, running_broker


def _owned(consumer: PushConsumer, topic: str, broker_name: str | None = None) -> set[tuple[str, int]]:
    assert consumer.rebalancer is not None
    return {(mq.broker_name, mq.queue_id) for mq in consumer.rebalancer.process_queues
            if mq.topic == topic and broker_name in (None, mq.broker_name)}


async def _until(what: str, check, timeout: float = 30.0) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, what
        await asyncio.sleep(0.05)


def test_a_rebalance_keeps_its_queues_while_the_broker_lists_no_consumers(broker: BrokerProcess,
                                                                          unique: str) -> None:
    topic, group = unique, unique + "G"
    consumed: set[bytes] = set()

    def listener(msgs: list[MessageExt]) -> ConsumeConcurrentlyStatus:
        consumed.update(m.body for m in msgs)
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    async def go() -> None:
        admin = MQClientInstance(broker.namesrv_addr)
        await create_topic(admin, broker.broker_addr, topic, queues=4)
        consumer = PushConsumer(group, MQClientInstance(broker.namesrv_addr),
                                consume_from=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET)
        consumer.subscribe(topic, "*")
        consumer.register_concurrently(listener)
        await consumer.start()
        try:
            every = {(broker.broker_name, q) for q in range(4)}
            await _until("the consumer owns every queue", lambda: _owned(consumer, topic) == every)
            # the broker forgets the group (as a restarted one has before the client's heartbeat)
            inst = consumer.instance
            inst.check(await inst.invoke(broker.broker_addr, RequestCode.UNREGISTER_CLIENT,
                                         UnregisterClientRequestHeader(client_id=inst.client_id,
                                                                       consumer_group=group)))
            resp = await admin.invoke(broker.broker_addr, RequestCode.GET_CONSUMER_LIST_BY_GROUP,
                                      GetConsumerListByGroupRequestHeader(consumer_group=group))
            assert (resp.code, resp.remark) == (ResponseCode.SYSTEM_ERROR, f"no consumer for this group, {group}")
            await consumer.rebalance_once()
            assert _owned(consumer, topic) == every
            await produce(admin, topic, 8, "after")
            sent = {f"after{i}".encode() for i in range(8)}
            await _until("the messages sent meanwhile are consumed", lambda: sent <= consumed)
        finally:
            await consumer.shutdown()
            await consumer.instance.shutdown()
            await admin.shutdown()

    asyncio.run(go())



def test_dropping_the_orderly_queues_of_a_stopped_broker_takes_no_timeout_per_queue(tmp_path: Path,
                                                                                    name_server: str) -> None:
    """Consumer A owns the 8 orderly queues of broker-a and broker-b; broker-b stops answering; B joins,
    and A's share becomes broker-a's 4 queues. A's round must let go of broker-b's 4 at once: waiting
    for each unlock's answer took the 5 s request timeout per queue (20 s), the round holding the
    rebalance lock all along."""
    with ExitStack() as running:
        a = running.enter_context(running_broker(tmp_path / "a", namesrv=name_server, broker_name="broker-a"))
        b = running.enter_context(running_broker(tmp_path / "b", namesrv=name_server, broker_name="broker-b"))

        async def go() -> None:
            admin = MQClientInstance(name_server)
            for brk in (a, b):
                await create_topic(admin, brk.broker_addr, "Ord", queues=4)
            deadline = time.monotonic() + 10
            while len((await admin.get_route("Ord", refresh=True)).data.broker_datas) != 2:
                assert time.monotonic() < deadline, "no route to both brokers"
                await asyncio.sleep(0.1)
            consumers: list[PushConsumer] = []

            async def join(name: str) -> None:
                # client ids 127.0.0.1@A < 127.0.0.1@B: A's share is the first half, broker-a's queues
                c = PushConsumer("OrdG", MQClientInstance(name_server, instance_name=name),
                                 consume_from=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET)
                c.subscribe("Ord", "*")
                c.register_orderly(lambda msgs: ConsumeOrderlyStatus.SUCCESS)
                consumers.append(c)
                await c.start()

            stopped = False
            try:
                await join("A")
                first = consumers[0]
                await _until("A owns all 8 queues", lambda: len(_owned(first, "Ord")) == 8)
                os.kill(b.proc.pid, signal.SIGSTOP)
                stopped = True
                joining = asyncio.create_task(join("B"))  # its heartbeat to broker-b waits for a timeout
                ids = {first.instance.client_id, "127.0.0.1@B"}
                deadline = time.monotonic() + 15
                while await consumer_ids(admin, a.broker_addr, "OrdG") != ids:
                    assert time.monotonic() < deadline, "broker-a never listed both consumers"
                    await asyncio.sleep(0.05)
                started = time.monotonic()
                await _until("A lets go of broker-b's queues", lambda: not _owned(first, "Ord", "broker-b"))
                took = time.monotonic() - started
                assert took < 4, f"A took {took:.1f}s to let go of broker-b's 4 queues"
                assert _owned(first, "Ord") == {("broker-a", q) for q in range(4)}
                os.kill(b.proc.pid, signal.SIGCONT)
                stopped = False
                await joining
            finally:
                if stopped:
                    os.kill(b.proc.pid, signal.SIGCONT)
                for c in consumers:
                    await c.shutdown()
                    await c.instance.shutdown()
                await admin.shutdown()

        asyncio.run(go())
