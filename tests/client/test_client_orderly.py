"""Orderly consumption through a real mqbroker: a failing message suspends only its own queue.

ConsumeMessageOrderlyService's promise to the user: per queue, nothing overtakes a message that
failed; the queue is retried after a pause with its reconsume count growing; other queues go on
meanwhile; after max reconsume times the message goes to the group's DLQ and its queue continues.
"""

from __future__ import annotations

import asyncio
import time

from broker_core.client.consumer_api import PullStatus
from broker_core.client.instance import MQClientInstance
from broker_core.client.message import Message
from broker_core.client.producer import Producer
from broker_core.client.pull_consumer import PullConsumer
from broker_core.client.push_consumer import ConsumeOrderlyStatus, PushConsumer
from broker_core.client.rebalance import ConsumeFromWhere
from broker_core.store.codec.message import MessageExt
from tests.client.conftest import create_topic
from tests.client.test_client_push import run, wait_until
from tests.remoting_broker import BrokerProcess


def test_failing_message_suspends_its_queue_then_goes_to_the_dlq(broker: BrokerProcess, unique: str) -> None:
    group = unique + "G"

    async def go():
        inst = MQClientInstance(broker.namesrv_addr)
        await create_topic(inst, broker.broker_addr, unique, queues=4)
        p = Producer(unique + "P", inst)
        await p.start()
        queue_of: dict[str, int] = {}
        for key in ("alpha", "beta"):
            for i in range(8):
                r = await p.send_orderly(Message(unique, f"{key}-{i}".encode()), key)
                queue_of[key] = r.message_queue.queue_id
        assert queue_of["alpha"] != queue_of["beta"], "test needs the two keys on different queues"
        attempts: list[tuple[bytes, int, float]] = []

        def listener(msgs: list[MessageExt]) -> ConsumeOrderlyStatus:
            m = msgs[0]
            attempts.append((m.body, m.reconsume_times, time.monotonic()))
            return (ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT if m.body == b"alpha-3"
                    else ConsumeOrderlyStatus.SUCCESS)

        c = PushConsumer(group, inst, consume_from=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
                         max_reconsume_times=2)
        c.subscribe(unique, "*")
        c.register_orderly(listener)
        await c.start()
        done = await wait_until(lambda: sum(b.startswith(b"alpha") for b, _, _ in attempts) >= 10, 40)
        await c.shutdown()
        dlq = PullConsumer(group + "-dlq-reader", inst)
        await dlq.start()
        dead: list[MessageExt] = []
        for _ in range(50):
            queues = await dlq.fetch_subscribe_queues("%DLQ%" + group)
            for mq in queues:
                r = await dlq.pull(mq, "*", 0, 32)
                if r.status == PullStatus.FOUND:
                    dead.extend(r.messages)
            if dead:
                break
            await asyncio.sleep(0.2)
        await dlq.shutdown()
        await inst.shutdown()
        return done, attempts, dead

    done, attempts, dead = run(go(), 120)
    assert done, attempts
    alpha = [(b, rt) for b, rt, _ in attempts if b.startswith(b"alpha")]
    beta = [b for b, _, _ in attempts if b.startswith(b"beta")]
    # alpha-3 three times (reconsume 0, 1, 2), nothing of alpha overtakes it, then the queue goes on
    assert alpha == ([(f"alpha-{i}".encode(), 0) for i in range(3)] + [(b"alpha-3", n) for n in range(3)]
                     + [(f"alpha-{i}".encode(), 0) for i in range(4, 8)])
    # the other queue went on while alpha was suspended: all of beta before alpha-3's last try
    last_try = max(t for b, _, t in attempts if b == b"alpha-3")
    assert beta == [f"beta-{i}".encode() for i in range(8)]
    assert all(t < last_try for b, _, t in attempts if b.startswith(b"beta"))
    assert [m.body for m in dead] == [b"alpha-3"]
    assert dead[0].topic == "%DLQ%" + group and dead[0].properties["DLQ_ORIGIN_TOPIC"] == unique
