"""A consumed offset sent oneway to a broker that never read it is sent again.

Why: offsets go to the broker oneway (Java's updateConsumeOffsetToBroker(mq, offset, true)), and a
oneway counts as sent once written to the connection. Written to a stopped broker's socket buffer and
lost when the broker is then killed, an offset the store remembered as sent was never sent again while
its queue stayed quiet: after the broker's restart the group's stored offset stayed behind what was
consumed, and those messages came again to the next consumer of the queue. Java's persistAll sends
every queue's offset on every round, moved or not.
"""

from __future__ import annotations

import asyncio
import os
import signal
import threading
import time
from contextlib import ExitStack
from pathlib import Path

import pytest

import broker_core.client.push_consumer as push_consumer
from broker_core.client.consumer_api import ConsumerApi
from broker_core.client.instance import MQClientInstance
from broker_core.client.push_consumer import ConsumeConcurrentlyStatus, PushConsumer
from broker_core.client.rebalance import ConsumeFromWhere
from broker_core.remoting.bodies import MessageQueue
from broker_core.store.codec.message import MessageExt
from tests.client.conftest import create_topic, free_port, produce
from tests.remoting_broker import running_broker

PERSIST_S = 0.3


def test_an_offset_lost_with_a_stopped_broker_is_sent_again_after_its_restart(
        tmp_path: Path, name_server: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(push_consumer, "PERSIST_INTERVAL_S", PERSIST_S)
    # a failed pull waits an hour before the next: only the offset store can bring the broker the
    # consumed offset (a pull carries it too, which would hide a lost persist)
    monkeypatch.setattr(push_consumer, "PULL_DELAY_ON_ERROR_S", 3600.0)
    broker_args = ("--listenPort", str(free_port()), "--grpc-port", str(free_port()))
    release = threading.Event()
    started: list[bytes] = []

    def listener(msgs: list[MessageExt]) -> ConsumeConcurrentlyStatus:
        started.extend(m.body for m in msgs)
        release.wait(30)  # held until the broker is stopped: the offset is first sent to a stopped broker
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    with ExitStack() as running:
        b = running.enter_context(running_broker(tmp_path, namesrv=name_server, extra_args=broker_args))

        async def go() -> None:
            admin = MQClientInstance(name_server)
            await create_topic(admin, b.broker_addr, "Quiet", queues=1)
            await produce(admin, "Quiet", 4, "m")
            consumer = PushConsumer("QuietG", MQClientInstance(name_server),
                                    consume_from=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET)
            consumer.subscribe("Quiet", "*")
            consumer.register_concurrently(listener)
            await consumer.start()
            mq = MessageQueue(topic="Quiet", broker_name=b.broker_name, queue_id=0)
            try:
                deadline = time.monotonic() + 30
                while len(started) < 4:
                    assert time.monotonic() < deadline, started
                    await asyncio.sleep(0.05)
                os.kill(b.proc.pid, signal.SIGSTOP)
                release.set()
                deadline = time.monotonic() + 10
                while consumer.offsets.read_memory(mq) != 4:
                    assert time.monotonic() < deadline, consumer.offsets.read_memory(mq)
                    await asyncio.sleep(0.05)
                await asyncio.sleep(3 * PERSIST_S)  # persist rounds write offset 4 to the stopped broker
                os.kill(b.proc.pid, signal.SIGKILL)
                await asyncio.to_thread(b.proc.wait, 30)
                again = await asyncio.to_thread(lambda: running.enter_context(
                    running_broker(tmp_path, namesrv=name_server, extra_args=broker_args)))
                api = ConsumerApi(admin, "QuietG")
                up = time.monotonic()
                while (stored := await api.query_consumer_offset(mq)) != 4:
                    # the client reconnects at its next persist round (or heartbeat): a few rounds
                    assert time.monotonic() - up < 10 * PERSIST_S + 5, \
                        f"the restarted broker {again.broker_addr} stores offset {stored}, 4 were consumed"
                    await asyncio.sleep(0.1)
            finally:
                release.set()
                await consumer.shutdown()
                await consumer.instance.shutdown()
                await admin.shutdown()

        asyncio.run(go())
