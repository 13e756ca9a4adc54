"""AutoBatch (seed 004) through a real mqbroker: per-message results, per-queue order, bypass, back-pressure."""

from __future__ import annotations

import asyncio

import pytest

from broker_core.client.instance import BrokerError, MQClientInstance
from broker_core.client.message import Message
from broker_core.client.producer import Producer, SendStatus
from broker_core.client.pull_consumer import PullConsumer
from broker_core.remoting.bodies import MessageQueue
from tests.client.conftest import create_topic, wait_dispatched
from tests.client.test_client_produce_pull import _pull_all, run
from tests.remoting_broker import BrokerProcess


async def _dispatched(inst: MQClientInstance, topic: str, results: list) -> None:
    want: dict[int, int] = {}
    for r in results:
        want[r.message_queue.queue_id] = max(want.get(r.message_queue.queue_id, 0), r.queue_offset + 1)
    await wait_dispatched(inst, topic, results[0].message_queue.broker_name, want)


@pytest.mark.parametrize("queue_type", ["SimpleCQ", "BatchCQ"])
def test_autobatch_keeps_per_message_results_and_queue_order(broker: BrokerProcess, unique: str,
                                                            queue_type: str) -> None:
    topic = f"{unique}{queue_type}"

    async def go():
        inst = MQClientInstance(broker.namesrv_addr)
        await create_topic(inst, broker.broker_addr, topic, queues=4, attributes=f"+queue.type={queue_type}")
        p = Producer(topic + "P", inst, batch_max_bytes=4 * 1024, batch_max_delay_ms=20)
        p.auto_batch = True
        await p.start()
        mqs = [MessageQueue(topic=topic, broker_name=broker.broker_name, queue_id=q) for q in range(4)]
        # queue-bound async sends, interleaved over the queues; then unbound sync sends, concurrently
        bound = [p.send_async(Message(topic, f"q{n % 4}-{n // 4:04d}".encode() + b"." * 300, tags="T"),
                              mq=mqs[n % 4]) for n in range(400)]
        bound_res = await asyncio.gather(*bound)
        free_res = await asyncio.gather(*(p.send(Message(topic, f"free-{n}".encode())) for n in range(60)))
        acc = p.accumulator()
        batches, batched = acc.batches_sent, acc.messages_sent
        await _dispatched(inst, topic, bound_res + free_res)
        c = PullConsumer(topic + "C", inst)
        got = await _pull_all(c, topic)
        await p.shutdown()
        await inst.shutdown()
        return mqs, bound_res, free_res, batches, batched, got

    mqs, bound_res, free_res, batches, batched, got = run(go())
    assert batched == 460 and batches < 460 / 4  # messages really travelled in batches
    assert all(r.status == SendStatus.SEND_OK for r in bound_res + free_res)
    for n, r in enumerate(bound_res):
        assert r.message_queue == mqs[n % 4]
    for q in range(4):  # a queue's offsets follow the order of the sends to it
        offs = [r.queue_offset for n, r in enumerate(bound_res) if n % 4 == q]
        assert offs == list(range(offs[0], offs[0] + 100))
    results = bound_res + free_res
    assert len({(r.message_queue.queue_id, r.queue_offset) for r in results}) == 460
    assert len({r.msg_id for r in results}) == 460
    stored = {m.uniq_key: m for m in got}
    assert set(stored) == {r.msg_id for r in results}
    for r in results:  # each result names its own stored message
        m = stored[r.msg_id]
        assert (m.queue_id, m.queue_offset) == (r.message_queue.queue_id, r.queue_offset)
        assert m.msg_id == r.offset_msg_id
    for q in range(4):
        bodies = [m.body.rstrip(b".") for m in sorted(got, key=lambda m: m.queue_offset)
                  if m.queue_id == q and m.body.startswith(b"q")]
        assert bodies == [f"q{q}-{i:04d}".encode() for i in range(100)]
    if queue_type == "BatchCQ":  # one inner-batch record holds many messages
        assert len({m.commit_log_offset for m in got}) < len(got) / 4
    else:
        assert len({m.commit_log_offset for m in got}) == len(got)


def test_autobatch_routes_delayed_retry_and_big_messages_around_the_accumulator(broker: BrokerProcess,
                                                                               unique: str) -> None:
    """The broker refuses delayed messages and retry topics in a batch: AutoBatch must send them alone."""
    retry_topic = f"%RETRY%{unique}G"

    async def go():
        inst = MQClientInstance(broker.namesrv_addr)
        await create_topic(inst, broker.broker_addr, unique, queues=2)
        await create_topic(inst, broker.broker_addr, retry_topic, queues=1)
        p = Producer(unique + "P", inst, auto_batch=True, batch_max_bytes=2048)
        await p.start()
        delayed = p.send(Message(unique, b"later", delay_level=1))
        retry = p.send(Message(retry_topic, b"again"))
        big = p.send(Message(unique, b"B" * 4096))
        nowait = p.send(Message(unique, b"no-wait", properties={"WAIT": "false"}))
        plain = [p.send(Message(unique, f"p{i}".encode())) for i in range(5)]
        res = await asyncio.gather(delayed, retry, big, nowait, *plain)
        acc = p.accumulator()
        batched = acc.messages_sent
        await p.shutdown()
        await inst.shutdown()
        return res, batched

    res, batched = run(go())
    assert all(r.status == SendStatus.SEND_OK for r in res)
    assert res[1].message_queue.topic == retry_topic
    assert batched == 6  # the no-wait message and the 5 plain ones; delayed, retry and big went alone


def test_autobatch_failure_reaches_every_send_of_the_batch(broker: BrokerProcess, unique: str) -> None:
    async def go():
        inst = MQClientInstance(broker.namesrv_addr)
        p = Producer(unique + "P", inst, auto_batch=True)
        await p.start()
        mq = MessageQueue(topic=unique + "missing", broker_name="no-such-broker", queue_id=0)
        try:
            outcome = await asyncio.gather(*(p.send(Message(mq.topic, b"x"), mq=mq) for _ in range(3)),
                                           return_exceptions=True)
        finally:
            await p.shutdown()
            await inst.shutdown()
        return outcome

    outcome = run(go())
    assert len(outcome) == 3 and all(isinstance(e, BrokerError) and "no-such-broker" in str(e) for e in outcome)


def test_autobatch_memory_is_bounded_with_back_pressure(broker: BrokerProcess, unique: str) -> None:
    total = 8 * 1024

    async def go():
        inst = MQClientInstance(broker.namesrv_addr)
        await create_topic(inst, broker.broker_addr, unique, queues=2)
        p = Producer(unique + "P", inst, auto_batch=True, batch_max_bytes=2048, batch_max_delay_ms=50,
                     total_batch_max_bytes=total)
        await p.start()
        acc = p.accumulator()
        held: list[int] = []
        waiting: list[int] = []
        sends = [p.send_async(Message(unique, bytes([65 + i % 26]) * 1000)) for i in range(300)]
        while not all(t.done() for t in sends):
            held.append(acc.held_bytes)
            waiting.append(acc.waiting_sends)
            await asyncio.sleep(0)
        res = await asyncio.gather(*sends)
        c = PullConsumer(unique + "C", inst)
        await _dispatched(inst, unique, res)
        got = await _pull_all(c, unique)
        await p.shutdown()
        await inst.shutdown()
        return held, waiting, res, got, acc.held_bytes

    held, waiting, res, got, after = run(go())
    assert max(held) <= total and after == 0
    assert max(waiting) > 100  # most sends had to wait for memory
    assert len(res) == 300 and all(r.status == SendStatus.SEND_OK for r in res)
    assert len(got) == 300


def test_autobatch_sync_send_times_out_when_the_broker_stops_answering(broker: BrokerProcess, unique: str) -> None:
    """A batched sync send is bounded by send_timeout (plus the batch delay) like a direct one, and fails
    with its batch's own error; a send with its own timeout goes direct, as Java's send(msg, timeout) does."""
    import os
    import signal
    import time

    from broker_core.client.connection import RemotingTimeoutError

    async def go():
        inst = MQClientInstance(broker.namesrv_addr)
        await create_topic(inst, broker.broker_addr, unique, queues=2)
        p = Producer(unique + "P", inst, send_timeout=1.0, batch_max_delay_ms=10)
        p.auto_batch = True
        await p.start()
        await p.send(Message(unique, b"warm"))  # route and connection ready
        direct = await p.send(Message(unique, b"direct"), timeout=2.0)
        batched = p.accumulator().messages_sent
        os.kill(broker.proc.pid, signal.SIGSTOP)
        try:
            t0 = time.monotonic()
            try:
                await p.send(Message(unique, b"stalled"))
                outcome = "answered"
            except RemotingTimeoutError as e:
                outcome = str(e)
            waited = time.monotonic() - t0
        finally:
            os.kill(broker.proc.pid, signal.SIGCONT)
        await p.shutdown()
        await inst.shutdown()
        return direct, batched, outcome, waited

    direct, batched, outcome, waited = run(go())
    assert direct.status == SendStatus.SEND_OK and batched == 1  # only "warm" went through the accumulator
    assert f"wait response from {broker.broker_addr} timed out" in outcome
    assert waited < 3.0


def test_shutdown_sends_every_accepted_message_and_later_sends_are_refused(broker: BrokerProcess, unique: str) -> None:
    """Sends held back by total_batch_max_bytes when shutdown() begins are sent and answered (none left in
    an accumulator nobody sends); a send during or after the shutdown, or before start(), is refused at
    once, as Java's "service state not OK"."""
    from broker_core.client.instance import ClientStateError

    async def go():
        inst = MQClientInstance(broker.namesrv_addr)
        await create_topic(inst, broker.broker_addr, unique, queues=1)
        p = Producer(unique + "P", inst, auto_batch=True, batch_max_bytes=2048, total_batch_max_bytes=4096,
                     batch_max_delay_ms=200)
        refused: list[str] = []
        try:
            await p.send(Message(unique, b"too early"))
        except ClientStateError as e:
            refused.append(str(e))
        await p.start()
        sends = [p.send_async(Message(unique, f"m{i:03d}".encode() + b"." * 400)) for i in range(120)]
        for _ in range(5):  # every send reaches its accumulator (~8 fit the budget, the others wait)
            await asyncio.sleep(0)
        held_back = p.accumulator().waiting_sends
        closing = asyncio.get_running_loop().create_task(p.shutdown())
        await asyncio.sleep(0)
        during = p.send_async(Message(unique, b"during shutdown"))
        await closing
        res = await asyncio.gather(*sends, return_exceptions=True)
        try:
            await during
        except ClientStateError as e:
            refused.append(str(e))
        try:
            await p.send(Message(unique, b"after shutdown"))
        except ClientStateError as e:
            refused.append(str(e))
        await _dispatched(inst, unique, [r for r in res if not isinstance(r, BaseException)])
        got = await _pull_all(PullConsumer(unique + "C", inst), unique)
        await inst.shutdown()
        return held_back, res, got, refused, p._accumulator

    held_back, res, got, refused, accumulator = run(go())
    assert held_back > 50  # most sends were waiting for the byte budget when shutdown began
    assert all(not isinstance(r, BaseException) and r.status == SendStatus.SEND_OK for r in res), res
    assert sorted(m.body[:4] for m in got) == [f"m{i:03d}".encode() for i in range(120)]
    state = "The producer service state not OK"
    assert refused == [f"{state}, CREATE_JUST: producer {unique}P is not started: call start() first",
                       f"{state}, SHUTDOWN_ALREADY: producer {unique}P is shut down",
                       f"{state}, SHUTDOWN_ALREADY: producer {unique}P is shut down"]
    assert accumulator is None  # no accumulator (and no background task) recreated after shutdown


def test_a_keyed_send_still_finding_its_route_when_shutdown_begins_is_refused(broker: BrokerProcess,
                                                                              unique: str) -> None:
    """A send with a sharding key looks up its route before joining an accumulator; if shutdown() runs
    meanwhile, the send is refused as any send after shutdown, not failed with a bare RuntimeError or
    put in a new accumulator nobody closes (sent later by a producer that was shut down)."""
    from broker_core.client.instance import ClientStateError

    async def go():
        inst = MQClientInstance(broker.namesrv_addr)
        await create_topic(inst, broker.broker_addr, unique, queues=2)
        other = MQClientInstance(broker.namesrv_addr)  # its route of the topic is not looked up yet
        p = Producer(unique + "P", other, auto_batch=True, batch_max_delay_ms=10)
        await p.start()
        keyed = asyncio.get_running_loop().create_task(p.send(Message(unique, b"keyed"), sharding_key="k"))
        await asyncio.sleep(0)  # the send is waiting for the name server's route
        await p.shutdown()
        try:
            await keyed
            outcome = "sent"
        except ClientStateError as e:
            outcome = str(e)
        except Exception as e:  # noqa: BLE001 - what a user would have caught instead
            outcome = f"{type(e).__name__}: {e}"
        await asyncio.sleep(0.5)  # a leftover accumulator would have sent it (and it dispatched) by now
        got = await _pull_all(PullConsumer(unique + "C", inst), unique)
        await other.shutdown()
        await inst.shutdown()
        return outcome, p._accumulator, got

    outcome, accumulator, got = run(go())
    assert outcome == f"The producer service state not OK, SHUTDOWN_ALREADY: producer {unique}P is shut down"
    assert accumulator is None and got == []


@pytest.mark.parametrize("queue_type", ["SimpleCQ", "BatchCQ"])
def test_autobatch_keeps_send_order_of_one_queue_when_tags_interleave(broker: BrokerProcess, unique: str,
                                                                     queue_type: str) -> None:
    """Messages of one queue (a chosen queue, or one sharding key) with changing tags are stored in send
    order, each with its own tag; a tag filter still sees exactly its messages."""
    topic = f"{unique}{queue_type}"

    async def go():
        inst = MQClientInstance(broker.namesrv_addr)
        await create_topic(inst, broker.broker_addr, topic, queues=2, attributes=f"+queue.type={queue_type}")
        p = Producer(topic + "P", inst, auto_batch=True, batch_max_bytes=4 * 1024, batch_max_delay_ms=20)
        await p.start()
        mq = MessageQueue(topic=topic, broker_name=broker.broker_name, queue_id=0)
        # runs of 3 messages per tag, A B A B ...: to queue 0, and by sharding key "order-7"
        bound = [p.send_async(Message(topic, f"mq-{n:03d}".encode(), tags=f"T{n // 3 % 2}"), mq=mq)
                 for n in range(60)]
        keyed = [asyncio.ensure_future(p.send(Message(topic, f"key-{n:03d}".encode(), tags=f"T{n // 3 % 2}"),
                                              sharding_key="order-7")) for n in range(60)]
        bound_res = await asyncio.gather(*bound)
        keyed_res = await asyncio.gather(*keyed)
        batches = p.accumulator().batches_sent
        await _dispatched(inst, topic, bound_res + keyed_res)
        got = await _pull_all(PullConsumer(topic + "C", inst), topic)
        only_t1 = await _pull_all(PullConsumer(topic + "C1", inst), topic, "T1")
        await p.shutdown()
        await inst.shutdown()
        return bound_res, keyed_res, batches, got, only_t1

    bound_res, keyed_res, batches, got, only_t1 = run(go())
    assert batches < 120 / 2  # runs of one tag still travel in batches
    for prefix, res in (("mq-", bound_res), ("key-", keyed_res)):
        assert len({r.message_queue for r in res}) == 1
        offs = [r.queue_offset for r in res]
        assert offs == list(range(offs[0], offs[0] + 60)), offs  # offsets follow the send order
        stored = sorted((m for m in got if m.body.startswith(prefix.encode())), key=lambda m: m.queue_offset)
        assert [m.body for m in stored] == [f"{prefix}{n:03d}".encode() for n in range(60)]
        assert [m.tags for m in stored] == [f"T{n // 3 % 2}" for n in range(60)]
    assert sorted(m.body for m in only_t1) == sorted(m.body for m in got if m.tags == "T1")
