"""A broker restarted under a running producer and push consumer: once with SIGTERM, once with SIGKILL.
The name server stays up; the broker comes back on its port and store. Every acknowledged send must be
consumed, and the clients must recover by themselves, with no restart of theirs.

Why: a rolling restart is what operators do most to a broker. It exercises what no single-process test
does: the clients' reconnects, route and heartbeat refresh, offsets the consumer carries across the
gap, and the broker's recovery of the records it acknowledged before it died.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import signal
import time
from contextlib import ExitStack
from pathlib import Path

import pytest

from broker_core.client.instance import MQClientInstance
from broker_core.client.message import Message
from broker_core.client.producer import Producer, SendStatus
from broker_core.client.push_consumer import ConsumeConcurrentlyStatus, PushConsumer
from broker_core.client.rebalance import ConsumeFromWhere
from broker_core.store.codec.message import MessageExt
from tests.client.conftest import consumer_ids, create_topic, free_port
from tests.remoting_broker import BrokerProcess, running_broker

ACKS_PER_PHASE = 200  # sends acknowledged before the first stop and after each restart (or 1.5 / 2.5 s)


def test_clients_lose_nothing_across_broker_restarts(tmp_path: Path, name_server: str) -> None:
    port = free_port()
    # the same remoting port across restarts, as the clients know it; a fixed listen port would put gRPC
    # on its default 8081, which another process on the machine may hold: a free one of its own
    broker_args = ("--listenPort", str(port), "--grpc-port", str(free_port()), "--registerNameServerPeriod", "2000")
    acked: set[bytes] = set()
    consumed: dict[bytes, int] = {}
    logs: list[str] = []
    stop = asyncio.Event()

    def listener(msgs: list[MessageExt]) -> ConsumeConcurrentlyStatus:
        for m in msgs:
            consumed[m.body] = consumed.get(m.body, 0) + 1
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    async def produce(producer: Producer, worker: int) -> None:
        for n in itertools.count():
            if stop.is_set():
                return
            body = f"{worker}-{n}".encode()
            try:
                if (await producer.send(Message("Roll", body))).status == SendStatus.SEND_OK:
                    acked.add(body)
            except Exception:  # the broker is down: never acknowledged, tried again with the next body
                await asyncio.sleep(0.1)

    async def acked_at_least(count: int, at_most_s: float) -> None:
        """Let the producers run until ``count`` sends are acknowledged, or ``at_most_s`` at most (what a
        fixed sleep waited): a few hundred acknowledged sends are what each phase needs, not the time."""
        deadline = time.monotonic() + at_most_s
        while len(acked) < count and time.monotonic() < deadline:
            await asyncio.sleep(0.05)

    async def restart(b: BrokerProcess, how: signal.Signals) -> BrokerProcess:
        os.kill(b.proc.pid, how)
        await asyncio.to_thread(b.proc.wait, 30)
        logs.append(b.log_text())
        before = len(acked)
        await asyncio.sleep(0.5)
        again = await asyncio.to_thread(lambda: running.enter_context(
            running_broker(tmp_path, namesrv=name_server, extra_args=broker_args)))
        await acked_at_least(before + ACKS_PER_PHASE, 2.5)
        assert len(acked) > before, f"no send acknowledged after the restart with {how.name}"
        return again

    with ExitStack() as running:
        b = running.enter_context(running_broker(tmp_path, namesrv=name_server, extra_args=broker_args))

        async def go() -> None:
            inst = MQClientInstance(name_server)
            await create_topic(inst, b.broker_addr, "Roll", queues=4)
            consumer = PushConsumer("RollG", MQClientInstance(name_server),
                                    consume_from=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET)
            consumer.subscribe("Roll", "*")
            consumer.register_concurrently(listener)
            await consumer.start()
            producer = Producer("RollP", inst)
            await producer.start()
            senders = [asyncio.create_task(produce(producer, w)) for w in range(4)]
            await acked_at_least(ACKS_PER_PHASE, 1.5)
            current = await restart(b, signal.SIGTERM)
            current = await restart(current, signal.SIGKILL)
            stop.set()
            await asyncio.gather(*senders)
            deadline = time.monotonic() + 60
            while not acked <= consumed.keys() and time.monotonic() < deadline:
                await asyncio.sleep(0.2)
            logs.append(current.log_text())
            await consumer.shutdown()
            await consumer.instance.shutdown()
            await producer.shutdown()
            await inst.shutdown()

        asyncio.run(go())
    missing = acked - consumed.keys()
    assert len(acked) > 100 and not missing, f"{len(missing)} of {len(acked)} acknowledged sends never consumed"
    assert all("Traceback" not in log for log in logs), next(log for log in logs if "Traceback" in log)[-3000:]


def test_a_killed_broker_s_queues_are_all_let_go_in_one_rebalance(tmp_path: Path, name_server: str,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """A consumer owning queues on broker-a and broker-b, with offsets of b's queues not yet persisted,
    when b is killed: the next rebalance must let go of every queue of b (and persist a's). Before, the
    failed offset send of the first b queue ended the round, so one queue was let go per 20 s round and
    the queues a leaving consumer handed over waited behind them."""
    import broker_core.client.push_consumer as push_consumer

    monkeypatch.setattr(push_consumer, "PERSIST_INTERVAL_S", 3600.0)  # b's consumed offsets stay unsent
    with ExitStack() as running:
        a = running.enter_context(running_broker(tmp_path / "a", namesrv=name_server, broker_name="broker-a"))
        b = running.enter_context(running_broker(tmp_path / "b", namesrv=name_server, broker_name="broker-b"))

        async def go() -> None:
            inst = MQClientInstance(name_server)
            for broker in (a, b):
                await create_topic(inst, broker.broker_addr, "Dead", queues=4)
            for _ in range(100):
                route = await inst.get_route("Dead", refresh=True)
                if route and len(route.data.broker_datas) == 2:
                    break
                await asyncio.sleep(0.1)
            consumed: set[bytes] = set()

            def listener(msgs: list[MessageExt]) -> ConsumeConcurrentlyStatus:
                consumed.update(m.body for m in msgs)
                return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

            consumer = PushConsumer("DeadG", MQClientInstance(name_server),
                                    consume_from=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET)
            consumer.subscribe("Dead", "*")
            consumer.register_concurrently(listener)
            await consumer.start()
            producer = Producer("DeadP", inst)
            await producer.start()
            try:
                def owned(name: str) -> set[int]:
                    assert consumer.rebalancer is not None
                    return {mq.queue_id for mq in consumer.rebalancer.process_queues
                            if mq.broker_name == name and mq.topic == "Dead"}

                deadline = time.monotonic() + 30
                while (owned("broker-a"), owned("broker-b")) != ({0, 1, 2, 3}, {0, 1, 2, 3}):
                    assert time.monotonic() < deadline, (owned("broker-a"), owned("broker-b"))
                    await asyncio.sleep(0.1)
                sent = set()
                for i in range(32):  # round robin over the 8 queues: every queue gets messages
                    body = f"m{i}".encode()
                    assert (await producer.send(Message("Dead", body))).status == SendStatus.SEND_OK
                    sent.add(body)
                deadline = time.monotonic() + 30
                while not sent <= consumed:
                    assert time.monotonic() < deadline, sent - consumed
                    await asyncio.sleep(0.1)
                b.proc.kill()
                await asyncio.to_thread(b.proc.wait, 30)
                deadline = time.monotonic() + 30  # the name server drops b when its connection closes
                while len((await inst.get_route("Dead", refresh=True)).data.broker_datas) != 1:
                    assert time.monotonic() < deadline
                    await asyncio.sleep(0.2)
                await consumer.instance.get_route("Dead", refresh=True)
                await consumer.rebalance_once()
                assert (owned("broker-a"), owned("broker-b")) == ({0, 1, 2, 3}, set())
            finally:
                await consumer.shutdown()
                await consumer.instance.shutdown()
                await producer.shutdown()
                await inst.shutdown()

        asyncio.run(go())



def test_a_restarted_broker_knows_the_consumers_before_their_next_heartbeat(tmp_path: Path,
                                                                           name_server: str) -> None:
    """Two consumers of a group, their broker killed and started again on its address: the broker must
    know both again within seconds, not at their next periodic heartbeat (30 s), and a third consumer
    joining then takes only its share of the queues. Before, the reconnected consumers sent nothing but
    pulls, the broker answered the group's consumer list without them (consumerConnection: not online),
    and the newcomer took every queue while the others went on reading theirs: each message twice."""
    port = free_port()
    broker_args = ("--listenPort", str(port), "--grpc-port", str(free_port()), "--registerNameServerPeriod", "2000")
    with ExitStack() as running:
        b = running.enter_context(running_broker(tmp_path, namesrv=name_server, extra_args=broker_args))

        async def go() -> None:
            admin = MQClientInstance(name_server)
            await create_topic(admin, b.broker_addr, "Back", queues=4)
            consumers: list[PushConsumer] = []

            async def join() -> PushConsumer:
                consumer = PushConsumer("BackG", MQClientInstance(name_server),
                                        consume_from=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET)
                consumer.subscribe("Back", "*")
                consumer.register_concurrently(lambda msgs: ConsumeConcurrentlyStatus.CONSUME_SUCCESS)
                await consumer.start()
                consumers.append(consumer)
                return consumer

            def owned(consumer: PushConsumer) -> set[int]:
                assert consumer.rebalancer is not None
                return {mq.queue_id for mq in consumer.rebalancer.process_queues if mq.topic == "Back"}

            try:
                a, b_ = await join(), await join()
                deadline = time.monotonic() + 30
                while sorted(map(len, (owned(a), owned(b_)))) != [2, 2]:
                    assert time.monotonic() < deadline, (owned(a), owned(b_))
                    await asyncio.sleep(0.1)
                b.proc.kill()
                await asyncio.to_thread(b.proc.wait, 30)
                await asyncio.sleep(2)
                again = await asyncio.to_thread(lambda: running.enter_context(
                    running_broker(tmp_path, namesrv=name_server, extra_args=broker_args)))
                up = time.monotonic()
                ids = {a.instance.client_id, b_.instance.client_id}
                while (known := await consumer_ids(admin, again.broker_addr, "BackG")) != ids:
                    # pulls retry 3 s after a failure: their new connections are made within ~6 s
                    assert time.monotonic() - up < 10, f"the restarted broker knows {known}, not {ids}"
                    await asyncio.sleep(0.2)
                c = await join()
                most = 0
                deadline = time.monotonic() + 4
                while time.monotonic() < deadline:
                    most = max(most, len(owned(c)))
                    await asyncio.sleep(0.02)
                assert 1 <= most <= 2, f"the third consumer took {most} of the 4 queues"
                assert sorted(q for x in consumers for q in owned(x)) == [0, 1, 2, 3]
            finally:
                for consumer in consumers:
                    await consumer.shutdown()
                    await consumer.instance.shutdown()
                await admin.shutdown()

        asyncio.run(go())
