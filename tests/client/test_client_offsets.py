"""Consumer offsets in clustering mode through a real mqbroker (seed 002).

What a group relies on: a new group starts where ConsumeFromWhere says; the offset committed to
the broker never passes a message still being consumed (concurrent consumption finishes out of
order, and a crash must redeliver rather than lose); filtered-out messages do not pin the offset;
an offset the broker calls illegal is replaced by the broker's next begin offset.
"""

from __future__ import annotations

import asyncio

from broker_core.client.consumer_api import ConsumerApi
from broker_core.client.instance import MQClientInstance
from broker_core.client.message import Message
from broker_core.client.producer import Producer
from broker_core.client.push_consumer import ConsumeConcurrentlyStatus, PushConsumer
from broker_core.client.rebalance import ConsumeFromWhere
from broker_core.client.subscription import build_subscription
from broker_core.remoting.bodies import MessageQueue
from broker_core.store.codec.message import MessageExt
from tests.client.conftest import create_group, create_topic, wait_dispatched
from tests.client.test_client_push import run, wait_until
from tests.remoting_broker import BrokerProcess

OK = ConsumeConcurrentlyStatus.CONSUME_SUCCESS


async def _consumer(inst: MQClientInstance, group: str, topic: str, seen: list[MessageExt],
                    expression: str = "*", **kw: object) -> PushConsumer:
    c = PushConsumer(group, inst, **kw)  # type: ignore[arg-type]
    c.subscribe(topic, expression)
    c.register_concurrently(lambda msgs: seen.extend(msgs) or OK)
    await c.start()
    assert await wait_until(lambda: c.rebalancer is not None and any(
        mq.topic == topic for mq in c.rebalancer.process_queues), 15), "consumer got no queue"
    return c


def test_new_group_starts_where_consume_from_where_says(broker: BrokerProcess, unique: str) -> None:
    async def go():
        inst = MQClientInstance(broker.namesrv_addr)
        await create_topic(inst, broker.broker_addr, unique, queues=1)
        p = Producer(unique + "P", inst)
        await p.start()
        for i in range(4):
            await p.send(Message(unique, f"old{i}".encode()))
        await asyncio.sleep(0.05)
        await p.send(Message(unique, b"mid0"))
        await wait_dispatched(inst, unique, broker.broker_name, {0: 5})
        api = ConsumerApi(inst, "probe")
        mq = MessageQueue(topic=unique, broker_name=broker.broker_name, queue_id=0)
        # a TIMESTAMP group starts at the first message stored at or after the given time: mid0's
        mid = (await api.pull(mq, 4, 1, build_subscription(unique, "*"))).messages[0].store_timestamp
        for i in range(1, 3):
            await p.send(Message(unique, f"mid{i}".encode()))
        await wait_dispatched(inst, unique, broker.broker_name, {0: 7})
        seen: dict[str, list[MessageExt]] = {"first": [], "last": [], "ts": []}
        consumers = [
            await _consumer(inst, unique + "F", unique, seen["first"],
                            consume_from=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET),
            await _consumer(inst, unique + "L", unique, seen["last"],
                            consume_from=ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET),
            await _consumer(inst, unique + "T", unique, seen["ts"],
                            consume_from=ConsumeFromWhere.CONSUME_FROM_TIMESTAMP, consume_timestamp_ms=mid),
        ]
        for i in range(3):
            await p.send(Message(unique, f"new{i}".encode()))
        ok = await wait_until(lambda: len(seen["first"]) >= 10 and len(seen["last"]) >= 3
                              and len(seen["ts"]) >= 6, 20)
        await asyncio.sleep(0.3)
        for c in consumers:
            await c.shutdown()
        await inst.shutdown()
        return ok, {k: [m.body.decode() for m in v] for k, v in seen.items()}

    ok, seen = run(go())
    assert ok, seen
    assert seen["first"] == [f"old{i}" for i in range(4)] + [f"mid{i}" for i in range(3)] + [f"new{i}" for i in range(3)]
    assert seen["last"] == [f"new{i}" for i in range(3)]
    assert seen["ts"] == [f"mid{i}" for i in range(3)] + [f"new{i}" for i in range(3)]


def test_committed_offset_never_passes_a_message_still_being_consumed(broker: BrokerProcess,
                                                                      unique: str) -> None:
    async def go():
        inst = MQClientInstance(broker.namesrv_addr)
        await create_topic(inst, broker.broker_addr, unique, queues=1)
        p = Producer(unique + "P", inst)
        await p.start()
        for i in range(10):
            await p.send(Message(unique, f"m{i}".encode()))
        release = asyncio.Event()
        done: list[bytes] = []

        async def listener(msgs: list[MessageExt]) -> ConsumeConcurrentlyStatus:
            if msgs[0].body == b"m3":
                await release.wait()  # a slow message in the middle of the queue
            done.append(msgs[0].body)
            return OK

        c = PushConsumer(unique + "G", inst, consume_from=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET)
        c.subscribe(unique, "*")
        c.register_concurrently(listener)
        await c.start()
        others = await wait_until(lambda: len(done) == 9, 20)
        await c.offsets.persist_all()
        api = ConsumerApi(inst, unique + "G")
        mq = MessageQueue(topic=unique, broker_name=broker.broker_name, queue_id=0)
        while_slow = await api.query_consumer_offset(mq)
        release.set()
        finished = await wait_until(lambda: len(done) == 10, 20)
        await c.shutdown()  # commits on shutdown
        after = await api.query_consumer_offset(mq)
        await inst.shutdown()
        return others, while_slow, finished, after

    others, while_slow, finished, after = run(go())
    assert others and finished
    assert while_slow == 3  # m4..m9 are done, but m3 is not: a crash now must redeliver m3
    assert after == 10


def test_filtered_messages_do_not_pin_the_offset_and_an_illegal_offset_is_replaced(broker: BrokerProcess,
                                                                                   unique: str) -> None:
    async def go():
        inst = MQClientInstance(broker.namesrv_addr)
        await create_topic(inst, broker.broker_addr, unique, queues=1)
        group = unique + "G"
        mq = MessageQueue(topic=unique, broker_name=broker.broker_name, queue_id=0)
        api = ConsumerApi(inst, group)
        p = Producer(unique + "P", inst)
        await p.start()
        for i in range(3):
            await p.send(Message(unique, f"m{i}".encode(), tags="TagB"))
        await wait_dispatched(inst, unique, broker.broker_name, {0: 3})
        await create_group(inst, broker.broker_addr, group)  # the group exists; its stored offset went bad
        await api.update_consumer_offset(mq, 1000)  # beyond the queue: the broker calls it illegal
        seen: list[MessageExt] = []
        c = await _consumer(inst, group, unique, seen, "TagA")
        corrected = await wait_until(lambda: c.offsets.read_memory(mq) == 3, 15)
        for i in range(3, 8):
            await p.send(Message(unique, f"m{i}".encode(), tags="TagB"))  # none matches TagA
        await p.send(Message(unique, b"wanted", tags="TagA"))
        got = await wait_until(lambda: [m.body for m in seen] == [b"wanted"], 15)
        # m3..m7 were filtered out before "wanted": the offset passes them, not just "wanted" itself
        past_filtered = await wait_until(lambda: c.offsets.read_memory(mq) == 9, 15)
        await c.shutdown()
        committed = await api.query_consumer_offset(mq)
        await inst.shutdown()
        return corrected, got, past_filtered, committed, [m.body for m in seen]

    corrected, got, past_filtered, committed, seen = run(go())
    assert corrected, "OFFSET_ILLEGAL did not move the offset to the broker's next begin offset"
    assert got, seen
    assert past_filtered and committed == 9
