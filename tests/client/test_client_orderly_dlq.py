"""An orderly PushConsumer dead-letters a message as Java's ConsumeMessageOrderlyService does: the
message itself, sent to %RETRY%group with its reconsume count (+1) and maxReconsumeTimes in the
header, which the broker stores in %DLQ%group. The DLQ copy carries the client's count, not the
stored record's 0 + 1, and the original UNIQ_KEY, body and properties."""

from __future__ import annotations

import asyncio

from broker_core.client.consumer_api import PullStatus
from broker_core.client.instance import MQClientInstance
from broker_core.client.message import Message
from broker_core.client.producer import Producer
from broker_core.client.pull_consumer import PullConsumer
from broker_core.client.push_consumer import ConsumeOrderlyStatus, PushConsumer
from broker_core.client.rebalance import ConsumeFromWhere
from broker_core.remoting.bodies import MessageQueue
from broker_core.store.codec.message import MessageExt
from tests.client.conftest import create_topic
from tests.client.test_client_push import run, wait_until
from tests.remoting_broker import BrokerProcess


def test_orderly_dlq_copy_carries_the_client_reconsume_count(broker: BrokerProcess, unique: str) -> None:
    group = unique + "G"

    async def go():
        inst = MQClientInstance(broker.namesrv_addr)
        await create_topic(inst, broker.broker_addr, unique, queues=1)
        p = Producer(unique + "P", inst)
        await p.start()
        mq = MessageQueue(topic=unique, broker_name=broker.broker_name, queue_id=0)
        sent = {}
        for body in (b"m1", b"bad", b"m3"):
            sent[body] = await p.send(Message(unique, body, tags="TagO", keys="key-" + body.decode()), mq)
        seen: list[tuple[bytes, int]] = []

        def listener(msgs: list[MessageExt]) -> ConsumeOrderlyStatus:
            seen.extend((m.body, m.reconsume_times) for m in msgs)
            return (ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT if any(m.body == b"bad" for m in msgs)
                    else ConsumeOrderlyStatus.SUCCESS)

        c = PushConsumer(group, inst, consume_from=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
                         max_reconsume_times=2)
        c.subscribe(unique, "*")
        c.register_orderly(listener)
        await c.start()
        done = await wait_until(lambda: (b"m3", 0) in seen, 40)
        await c.shutdown()
        reader = PullConsumer(group + "-dlq-reader", inst)
        await reader.start()
        dead: list[MessageExt] = []
        for _ in range(50):
            for q in await reader.fetch_subscribe_queues("%DLQ%" + group):
                r = await reader.pull(q, "*", 0, 32)
                if r.status == PullStatus.FOUND:
                    dead.extend(r.messages)
            if dead:
                break
            await asyncio.sleep(0.2)
        await reader.shutdown()
        await p.shutdown()
        await inst.shutdown()
        return done, seen, dead, sent

    done, seen, dead, sent = run(go(), 120)
    assert done, seen
    assert [rt for b, rt in seen if b == b"bad"] == [0, 1, 2]
    [d] = dead
    assert d.body == b"bad" and d.topic == "%DLQ%" + group
    # consumed 3 times (0, 1, 2): the DLQ copy says so (Java 5.x sends reconsumeTimes + 1), not 1
    assert d.reconsume_times == 3
    assert d.uniq_key == sent[b"bad"].msg_id and d.tags == "TagO" and d.properties["KEYS"] == "key-bad"
    assert d.properties["RETRY_TOPIC"] == unique and d.properties["DLQ_ORIGIN_TOPIC"] == unique
    assert d.properties["ORIGIN_MESSAGE_ID"] == sent[b"bad"].msg_id
    assert "RECONSUME_TIME" not in d.properties and "MAX_RECONSUME_TIMES" not in d.properties
