"""A push consumer whose broker stops answering (SIGSTOP: the connection stays up, nothing comes back).

Why: offsets go to the broker oneway, as Java's RemoteBrokerOffsetStore sends them. Waiting for each
queue's answer made shutdown() cost the 5 s request timeout per owned queue in turn (83 s for 16
queues), and the periodic persist and a rebalance dropping queues waited as long.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import time
from pathlib import Path

import pytest

import broker_core.client.push_consumer as push_consumer
from broker_core.client.consumer_api import ConsumerApi
from broker_core.client.instance import MQClientInstance
from broker_core.client.push_consumer import ConsumeConcurrentlyStatus, PushConsumer
from broker_core.client.rebalance import ConsumeFromWhere
from broker_core.remoting.bodies import MessageQueue
from broker_core.store.codec.message import MessageExt
from tests.client.conftest import create_topic, produce
from tests.remoting_broker import running_broker

QUEUES = 8


async def _consume_every_queue(name_server: str, broker_addr: str, topic: str, group: str) -> PushConsumer:
    """A consumer that has consumed 4 messages of each of the topic's queues (offsets not yet persisted)."""
    inst = MQClientInstance(name_server)
    await create_topic(inst, broker_addr, topic, queues=QUEUES)
    await produce(inst, topic, 4 * QUEUES, "m")  # round robin: 4 per queue
    await inst.shutdown()
    consumed: set[bytes] = set()

    def listener(msgs: list[MessageExt]) -> ConsumeConcurrentlyStatus:
        consumed.update(m.body for m in msgs)
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    consumer = PushConsumer(group, MQClientInstance(name_server),
                            consume_from=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET)
    consumer.subscribe(topic, "*")
    consumer.register_concurrently(listener)
    await consumer.start()
    deadline = time.monotonic() + 30
    while len(consumed) < 4 * QUEUES:
        assert time.monotonic() < deadline, f"{len(consumed)} of {4 * QUEUES} consumed"
        await asyncio.sleep(0.1)
    return consumer


def test_shutdown_with_a_stopped_broker_takes_no_timeout_per_queue(tmp_path: Path, name_server: str,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(push_consumer, "PERSIST_INTERVAL_S", 3600.0)  # only shutdown() persists
    with running_broker(tmp_path, namesrv=name_server) as b:
        async def go() -> None:
            consumer = await _consume_every_queue(name_server, b.broker_addr, "Stall", "StallG")
            os.kill(b.proc.pid, signal.SIGSTOP)
            try:
                started = time.monotonic()
                await consumer.shutdown()
                took = time.monotonic() - started
                await consumer.instance.shutdown()
            finally:
                os.kill(b.proc.pid, signal.SIGCONT)
            # UNREGISTER_CLIENT still waits its 3 s for the one broker, as Java's does; 5 s per queue is gone
            assert took < 6, f"shutdown() took {took:.1f}s with the broker stopped"
            # the offsets written while it was stopped are stored once it runs again
            inst = MQClientInstance(name_server)
            api = ConsumerApi(inst, "StallG")
            try:
                deadline = time.monotonic() + 10
                while True:
                    stored = [await api.query_consumer_offset(MessageQueue(topic="Stall", broker_name=b.broker_name, queue_id=q))
                              for q in range(QUEUES)]
                    if stored == [4] * QUEUES:
                        break
                    assert time.monotonic() < deadline, stored
                    await asyncio.sleep(0.2)
            finally:
                await inst.shutdown()

        asyncio.run(go())


def test_shutdown_with_its_broker_gone_logs_the_unsent_offsets(tmp_path: Path, name_server: str,
                                                               monkeypatch: pytest.MonkeyPatch,
                                                               caplog: pytest.LogCaptureFixture) -> None:
    """The broker killed: an offset that cannot be written is a warning naming the queue, no traceback,
    and shutdown() returns normally."""
    monkeypatch.setattr(push_consumer, "PERSIST_INTERVAL_S", 3600.0)
    with running_broker(tmp_path, namesrv=name_server) as b:
        async def go() -> None:
            consumer = await _consume_every_queue(name_server, b.broker_addr, "Gone", "GoneG")
            b.proc.kill()
            await asyncio.to_thread(b.proc.wait, 30)
            caplog.clear()
            with caplog.at_level(logging.WARNING, logger="broker_core.client"):
                await consumer.shutdown()
                await consumer.instance.shutdown()
            unsent = [r for r in caplog.records if r.getMessage().startswith("persisting offset 4 of ")]
            assert unsent, [r.getMessage() for r in caplog.records]
            assert all(r.exc_info is None for r in caplog.records), [r.getMessage() for r in caplog.records]

        asyncio.run(go())
