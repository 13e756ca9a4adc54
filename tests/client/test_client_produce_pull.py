"""Our remoting client against a real mqbroker: every send mode, pull, offsets, long polling, BatchCQ."""

from __future__ import annotations

import asyncio
import time

import pytest

from broker_core.client.consumer_api import PullStatus
from broker_core.client.instance import BrokerError, MQClientInstance
from broker_core.client.message import Message
from broker_core.client.producer import Producer, SendStatus
from broker_core.client.pull_consumer import PullConsumer
from broker_core.remoting.bodies import MessageQueue
from tests.client.conftest import create_topic, wait_dispatched
from tests.remoting_broker import BrokerProcess


def run(coro, timeout: float = 60.0):
    return asyncio.run(asyncio.wait_for(coro, timeout))


async def _dispatched(inst: MQClientInstance, topic: str, results: list) -> None:
    want: dict[int, int] = {}
    for r in results:
        want[r.message_queue.queue_id] = max(want.get(r.message_queue.queue_id, 0), r.queue_offset + 1)
    await wait_dispatched(inst, topic, results[0].message_queue.broker_name, want)


async def _pull_all(consumer: PullConsumer, topic: str, expr: str = "*") -> list:
    out = []
    for mq in await consumer.fetch_subscribe_queues(topic):
        offset = 0
        while True:
            r = await consumer.pull(mq, expr, offset, 32)
            out.extend(r.messages)
            if r.status != PullStatus.FOUND or r.next_begin_offset == offset:
                break
            offset = r.next_begin_offset
    return out


def test_sync_send_round_trips_body_tags_keys_and_ids(broker: BrokerProcess, unique: str) -> None:
    async def go():
        inst = MQClientInstance(broker.namesrv_addr)
        await create_topic(inst, broker.broker_addr, unique)
        p = Producer(unique + "P", inst)
        await p.start()
        sent = [await p.send(Message(unique, f"body-{i}".encode(), tags="TagA" if i % 2 else "TagB",
                                     keys=[f"k{i}", "common"], properties={"color": "red"}))
                for i in range(8)]
        await _dispatched(inst, unique, sent)
        c = PullConsumer(unique + "C", inst)
        await c.start()
        got = await _pull_all(c, unique)
        only_a = await _pull_all(c, unique, "TagA")
        await p.shutdown()
        await c.shutdown()
        await inst.shutdown()
        return sent, got, only_a

    sent, got, only_a = run(go())
    assert all(s.status == SendStatus.SEND_OK for s in sent)
    assert len({s.message_queue.queue_id for s in sent}) == 4  # round robin over the 4 queues
    by_id = {m.uniq_key: m for m in got}
    assert set(by_id) == {s.msg_id for s in sent}
    for s in sent:
        m = by_id[s.msg_id]
        assert m.msg_id == s.offset_msg_id and m.queue_offset == s.queue_offset
        assert m.get_property("color") == "red" and "common" in m.keys.split()
    assert sorted(m.body for m in only_a) == sorted(f"body-{i}".encode() for i in range(8) if i % 2)


def test_async_and_oneway_sends_are_stored(broker: BrokerProcess, unique: str) -> None:
    async def go():
        inst = MQClientInstance(broker.namesrv_addr)
        await create_topic(inst, broker.broker_addr, unique, queues=2)
        p = Producer(unique + "P", inst)
        await p.start()
        done: list = []
        tasks = [p.send_async(Message(unique, f"a{i}".encode()), lambda r, e: done.append((r, e)))
                 for i in range(20)]
        results = await asyncio.gather(*tasks)
        for i in range(5):
            await p.send_oneway(Message(unique, f"o{i}".encode()))
        c = PullConsumer(unique + "C", inst)
        got: list = []
        for _ in range(50):  # oneway sends are not acknowledged: wait until the broker stored them
            got = await _pull_all(c, unique)
            if len(got) >= 25:
                break
            await asyncio.sleep(0.1)
        await p.shutdown()
        await inst.shutdown()
        return results, done, got

    results, done, got = run(go())
    assert len(results) == 20 and all(r.status == SendStatus.SEND_OK for r in results)
    assert len(done) == 20 and all(e is None for _, e in done)
    assert sorted(m.body for m in got) == sorted([f"a{i}".encode() for i in range(20)]
                                                 + [f"o{i}".encode() for i in range(5)])


@pytest.mark.parametrize("queue_type", ["SimpleCQ", "BatchCQ"])
def test_batch_send_lands_in_one_queue_with_consecutive_offsets(broker: BrokerProcess, unique: str,
                                                                queue_type: str) -> None:
    topic = f"{unique}{queue_type}"

    async def go():
        inst = MQClientInstance(broker.namesrv_addr)
        await create_topic(inst, broker.broker_addr, topic, queues=2, attributes=f"+queue.type={queue_type}")
        p = Producer(topic + "P", inst)
        await p.start()
        r1 = await p.send_batch([Message(topic, f"m{i}".encode(), tags="B") for i in range(32)])
        r2 = await p.send_batch([Message(topic, f"n{i}".encode()) for i in range(5)], mq=r1.message_queue)
        await wait_dispatched(inst, topic, r1.message_queue.broker_name, {r1.message_queue.queue_id: 37})
        c = PullConsumer(topic + "C", inst)
        first = await c.pull(r1.message_queue, "*", 0, 64)
        rest = await c.pull(r1.message_queue, "*", first.next_begin_offset, 64)
        await inst.shutdown()
        return r1, r2, first, rest

    r1, r2, first, rest = run(go())
    assert r1.status == SendStatus.SEND_OK and len(r1.msg_id.split(",")) == 32
    assert r2.queue_offset == r1.queue_offset + 32
    # one answer carries at most maxTransferCountOnMessageInMemory (32) messages, as Apache's isTheBatchFull
    assert len(first.messages) == 32
    got = first.messages + rest.messages
    assert [m.body for m in got] == [f"m{i}".encode() for i in range(32)] + [f"n{i}".encode() for i in range(5)]
    assert [m.queue_offset for m in got] == list(range(37))
    assert [m.uniq_key for m in got[:32]] == r1.msg_id.split(",")
    # the batch carries its own UNIQ_KEY, as Java's DefaultMQProducer.batch() sets it: on a BatchCQ topic
    # the broker stores it as one inner-batch record (without one, message by message)
    records = {m.commit_log_offset for m in got[:32]}
    assert len(records) == (1 if queue_type == "BatchCQ" else 32)


def test_ordered_sends_by_key_stay_in_one_queue_in_order(broker: BrokerProcess, unique: str) -> None:
    async def go():
        inst = MQClientInstance(broker.namesrv_addr)
        await create_topic(inst, broker.broker_addr, unique)
        p = Producer(unique + "P", inst)
        await p.start()
        res = {k: [await p.send_orderly(Message(unique, f"{k}-{i}".encode()), k) for i in range(10)]
               for k in ("order-1", "order-2", "order-3")}
        await _dispatched(inst, unique, [r for rs in res.values() for r in rs])
        c = PullConsumer(unique + "C", inst)
        got = await _pull_all(c, unique)
        await inst.shutdown()
        return res, got

    res, got = run(go())
    for key, results in res.items():
        assert len({r.message_queue for r in results}) == 1
        in_queue = [m.body for m in got if m.body.startswith(key.encode())]
        assert in_queue == [f"{key}-{i}".encode() for i in range(10)]


def test_offsets_and_long_polling(broker: BrokerProcess, unique: str) -> None:
    async def go():
        inst = MQClientInstance(broker.namesrv_addr)
        await create_topic(inst, broker.broker_addr, unique, queues=1)
        c = PullConsumer(unique + "C", inst)
        await c.start()
        mq = MessageQueue(topic=unique, broker_name=broker.broker_name, queue_id=0)
        before = await c.fetch_consume_offset(mq)
        p = Producer(unique + "P", inst)
        await p.start()
        for i in range(3):
            await p.send(Message(unique, f"x{i}".encode()), mq=mq)
        await wait_dispatched(inst, unique, broker.broker_name, {0: 3})
        mx, mn = await c.max_offset(mq), await c.min_offset(mq)
        await c.update_consume_offset(mq, 2)
        after = await c.fetch_consume_offset(mq)
        # a pull at the end waits (long polling) until the next message arrives
        started = time.monotonic()
        pull = asyncio.ensure_future(c.pull(mq, "*", 3, 32, block_ms=10_000))
        await asyncio.sleep(0.5)
        assert not pull.done()
        await p.send(Message(unique, b"late"), mq=mq)
        r = await pull
        waited = time.monotonic() - started
        empty = await c.pull(mq, "*", 4, 32)
        moved = await c.pull(mq, "*", 99, 32)
        await c.shutdown()
        await inst.shutdown()
        return before, mx, mn, after, r, waited, empty, moved

    before, mx, mn, after, r, waited, empty, moved = run(go())
    assert before is None and (mn, mx) == (0, 3) and after == 2
    assert r.status == PullStatus.FOUND and [m.body for m in r.messages] == [b"late"] and waited < 8
    assert empty.status == PullStatus.NO_NEW_MSG and empty.next_begin_offset == 4
    assert moved.status == PullStatus.OFFSET_ILLEGAL and moved.next_begin_offset == 4


def test_send_to_unknown_topic_without_autocreate_route_fails_cleanly(broker: BrokerProcess, unique: str) -> None:
    async def go():
        inst = MQClientInstance(broker.namesrv_addr)
        p = Producer(unique + "P", inst)
        await p.start()
        mq = MessageQueue(topic=unique + "missing", broker_name="no-such-broker", queue_id=0)
        try:
            with pytest.raises(BrokerError, match="no-such-broker"):
                await p.send(Message(mq.topic, b"x"), mq=mq)
        finally:
            await inst.shutdown()

    run(go())


def test_a_started_producer_is_known_to_the_broker_at_once(broker: BrokerProcess, unique: str) -> None:
    """Java's producer start() heartbeats every broker its instance knows. Ours waited for the periodic
    heartbeat (30 s), so a transaction check-back meanwhile found "no live producer of group" and the half
    used up its checks; the broker lists the producer right after start() now."""
    from broker_core.remoting import RequestCode, ResponseCode
    from broker_core.remoting.headers import GetProducerConnectionListRequestHeader

    async def go():
        inst = MQClientInstance(broker.namesrv_addr)
        await create_topic(inst, broker.broker_addr, unique)  # the instance knows the broker already
        await inst.start()
        p = Producer(unique + "P", inst)
        await p.start()
        resp = await inst.invoke(broker.broker_addr, RequestCode.GET_PRODUCER_CONNECTION_LIST,
                                 GetProducerConnectionListRequestHeader(producer_group=unique + "P"))
        await p.shutdown()
        await inst.shutdown()
        return resp

    resp = run(go())
    assert resp.code == ResponseCode.SUCCESS, resp.remark


def test_sends_racing_shutdown_are_refused_and_open_no_connection(broker: BrokerProcess, unique: str) -> None:
    """A send still finding its route when Producer.shutdown() begins fails with Java's "service state
    not OK ... SHUTDOWN_ALREADY" and is not stored; after MQClientInstance.shutdown() (or while it
    runs) a send, or a connection being opened, fails instead of opening a connection nobody closes."""
    from broker_core.client.instance import ClientStateError

    async def go():
        setup = MQClientInstance(broker.namesrv_addr)
        await create_topic(setup, broker.broker_addr, unique, queues=1)
        # 1: the producer shuts down while a send waits for the name server's route
        inst = MQClientInstance(broker.namesrv_addr)
        p = Producer(unique + "P", inst)
        await p.start()
        racing = asyncio.get_running_loop().create_task(p.send(Message(unique, b"racing producer shutdown")))
        await asyncio.sleep(0)  # the send passed its first check and waits for the route
        await p.shutdown()
        outcome: list[str] = []
        try:
            await racing
            outcome.append("sent")
        except ClientStateError as e:
            outcome.append(str(e))
        # 2: the instance shuts down under a started producer, then while a connection is being opened
        p2 = Producer(unique + "P2", inst)
        await p2.start()
        sent = await p2.send(Message(unique, b"before instance shutdown"))
        await inst.shutdown()
        try:
            await p2.send(Message(unique, b"after instance shutdown"))
            outcome.append("sent")
        except ClientStateError as e:
            outcome.append(str(e))
        inst3 = MQClientInstance(broker.namesrv_addr)
        opening = asyncio.get_running_loop().create_task(inst3.connection(broker.broker_addr))
        await asyncio.sleep(0)
        await inst3.shutdown()
        try:
            await opening
            outcome.append("opened")
        except ClientStateError as e:
            outcome.append(str(e))
        await wait_dispatched(setup, unique, broker.broker_name, {0: sent.queue_offset + 1})
        await asyncio.sleep(0.3)  # a send that got through would be dispatched by now
        got = await _pull_all(PullConsumer(unique + "C", setup), unique)
        await setup.shutdown()
        return outcome, got, inst.client_id, inst3.client_id, inst._conns, inst3._conns

    outcome, got, client_id, client_id3, conns, conns3 = run(go())
    assert outcome[0] == f"The producer service state not OK, SHUTDOWN_ALREADY: producer {unique}P is shut down"
    assert outcome[1].startswith(f"The client instance {client_id} is shut down (SHUTDOWN_ALREADY): "
                                 "no new connection to "), outcome
    assert outcome[2] == (f"The client instance {client_id3} is shut down (SHUTDOWN_ALREADY): "
                          f"no new connection to {broker.broker_addr}")
    assert conns == {} and conns3 == {}
    assert [m.body for m in got] == [b"before instance shutdown"]


def test_a_pull_consumer_commits_before_its_first_pull(broker: BrokerProcess, unique: str) -> None:
    """An application that sets where its group starts before pulling (as the dashboard's load does): a commit
    never creates a group, so the broker must have the group's heartbeat first. The route was known before
    the consumer started, so no heartbeat for a newly seen broker went out on its own."""
    async def go():
        inst = MQClientInstance(broker.namesrv_addr)
        await create_topic(inst, broker.broker_addr, unique, queues=1)
        c = PullConsumer(unique + "C", inst)
        await c.start()
        (mq,) = await c.fetch_subscribe_queues(unique)
        await c.update_consume_offset(mq, 0)
        committed = await c.fetch_consume_offset(mq)
        await c.shutdown()
        await inst.shutdown()
        return committed

    assert run(go()) == 0
