"""SimpleConsumer (POP) against real mqbroker processes: redelivery of what is not acked, ack, changing the
invisible time, tag filters, every broker of a topic drained, and the one-line errors a user sees."""

from __future__ import annotations

import asyncio
import json
import signal
from pathlib import Path

import pytest

from broker_core.client.config_check import ClientConfigError
from broker_core.client.connection import RemotingError
from broker_core.client.instance import BrokerError, ClientStateError, MQClientInstance
from broker_core.client.message import Message
from broker_core.client.producer import Producer
from broker_core.client.simple_consumer import InvalidReceiptHandleError, SimpleConsumer, receipt_handle
from broker_core.client.subscription import InvalidSubscriptionError
from broker_core.remoting import RequestCode, ResponseCode
from broker_core.remoting.bodies import MessageQueue
from broker_core.store.codec.message import MessageExt
from tests.client.conftest import FAST_ARGS, FAST_CONF, create_topic
from tests.grpc_v2.conftest import run_scenario
from tests.remoting_broker import BrokerProcess, running_broker


def run(coro, timeout: float = 90.0):
    return asyncio.run(asyncio.wait_for(coro, timeout))


async def _send(inst: MQClientInstance, topic: str, bodies: list[str], tags: str | None = None,
                mq: MessageQueue | None = None) -> None:
    p = Producer(topic + "P" + (tags or "") + (mq.broker_name if mq else ""), inst)
    await p.start()
    for b in bodies:
        await p.send(Message(topic, b.encode(), tags=tags), mq)
    await p.shutdown()


async def _receive_until(c: SimpleConsumer, want: int, timeout: float, invisible: float = 30.0,
                         max_messages: int = 16) -> list[MessageExt]:
    """Receive until ``want`` messages are in hand or ``timeout`` is over (dispatch and revive take a moment)."""
    got: list[MessageExt] = []
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while len(got) < want and loop.time() < deadline:
        got.extend(await c.receive(max_messages, invisible))
        if len(got) < want:
            await asyncio.sleep(0.2)
    return got


def _one_line(e: BaseException) -> str:
    text = str(e)
    assert text and "\n" not in text and "Traceback" not in text, text
    return text


def test_unacked_message_comes_back_after_its_invisible_time_with_reconsume_times_plus_one(
        broker: BrokerProcess, unique: str) -> None:
    async def go():
        inst = MQClientInstance(broker.namesrv_addr)
        await create_topic(inst, broker.broker_addr, unique, queues=2)
        await _send(inst, unique, ["m0"])
        c = SimpleConsumer(unique + "G", inst)
        c.subscribe(unique, "*")
        await c.start()
        first = await _receive_until(c, 1, 10, invisible=2.0)
        hidden = await c.receive(16, 2.0)  # within its invisible time nobody of the group gets it
        again = await _receive_until(c, 1, 20, invisible=30.0)
        with pytest.raises(BrokerError) as stale:  # the first handle expired when the message came back
            await c.ack(first[0])
        await c.ack(again[0])
        await c.shutdown()
        await inst.shutdown()
        return first, hidden, again, stale.value

    first, hidden, again, stale = run(go())
    assert [m.body for m in first] == [b"m0"] and first[0].reconsume_times == 0
    assert receipt_handle(first[0]).split(" ")[5] == "broker-a"
    assert hidden == []
    assert [m.body for m in again] == [b"m0"]
    assert again[0].uniq_key == first[0].uniq_key
    assert again[0].reconsume_times == 1
    assert again[0].topic == first[0].topic  # handed out under the subscribed topic, not %RETRY%
    assert receipt_handle(again[0]).split(" ")[4] in ("1", "2")  # from the group's pop retry topic
    assert stale.code == ResponseCode.NO_MESSAGE and "expired" in _one_line(stale)


def test_acked_messages_are_not_redelivered_and_a_stale_handle_is_refused_in_one_line(
        broker: BrokerProcess, unique: str) -> None:
    async def go():
        inst = MQClientInstance(broker.namesrv_addr)
        await create_topic(inst, broker.broker_addr, unique, queues=2)
        await _send(inst, unique, [f"m{i}" for i in range(4)])
        c = SimpleConsumer(unique + "G", inst)
        c.subscribe(unique, "*")
        await c.start()
        got = await _receive_until(c, 4, 10, invisible=1.0)
        for m in got:
            await c.ack(m)
        later = await _receive_until(c, 1, 5, invisible=1.0)  # well past the 1 s invisible time
        with pytest.raises(BrokerError) as twice:
            await c.change_invisible_duration(got[0], 10)  # acked: no longer in flight
        forged = got[1]
        fields = receipt_handle(forged).split(" ")
        forged.properties["POP_CK"] = " ".join(fields[:7] + ["999"] + fields[8:])  # an offset never stored
        with pytest.raises(BrokerError) as wrong:
            await c.ack(forged)
        plain = MessageExt(0, 0, 0, 0, 0, 0, 0, 0, 0, ("127.0.0.1", 1), 0, ("127.0.0.1", 1), 0, 0, b"x", unique, "")
        with pytest.raises(InvalidReceiptHandleError) as no_handle:
            await c.ack(plain)
        await c.shutdown()
        await inst.shutdown()
        return got, later, twice.value, wrong.value, no_handle.value

    got, later, twice, wrong, no_handle = run(go())
    assert sorted(m.body for m in got) == [b"m0", b"m1", b"m2", b"m3"]
    assert later == []
    assert twice.code == ResponseCode.NO_MESSAGE and "invisible time" in _one_line(twice)
    assert wrong.code == ResponseCode.NO_MESSAGE and "offset is illegal" in _one_line(wrong)
    assert "ack of message" in str(wrong) and "broker-a" in str(wrong)
    assert "no receipt handle" in _one_line(no_handle)


def test_change_invisible_duration_keeps_the_message_hidden_longer(broker: BrokerProcess, unique: str) -> None:
    async def go():
        inst = MQClientInstance(broker.namesrv_addr)
        await create_topic(inst, broker.broker_addr, unique, queues=1)
        await _send(inst, unique, ["slow"])
        c = SimpleConsumer(unique + "G", inst)
        c.subscribe(unique)
        await c.start()
        got = await _receive_until(c, 1, 10, invisible=2.0)
        old = receipt_handle(got[0])
        await c.change_invisible_duration(got[0], 9)
        new = receipt_handle(got[0])
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        # the 2 s it was popped for, plus revive rounds: without the change it is back by now (test above)
        hidden = await _receive_until(c, 1, 6, invisible=30.0)
        back = await _receive_until(c, 1, 20, invisible=30.0)
        waited = loop.time() - t0
        for m in back:
            await c.ack(m)
        await c.shutdown()
        await inst.shutdown()
        return old, new, hidden, back, waited

    old, new, hidden, back, waited = run(go())
    assert new != old and new.split(" ")[2] == "9000"
    assert hidden == []
    assert [m.body for m in back] == [b"slow"] and back[0].reconsume_times == 1
    assert waited >= 8.0


def test_tag_expression_receives_only_its_tags(broker: BrokerProcess, unique: str) -> None:
    async def go():
        inst = MQClientInstance(broker.namesrv_addr)
        await create_topic(inst, broker.broker_addr, unique, queues=2)
        await _send(inst, unique, ["a0", "a1", "a2"], tags="TagA")
        await _send(inst, unique, ["b0", "b1"], tags="TagB")
        await _send(inst, unique, ["c0"], tags="TagC")
        c = SimpleConsumer(unique + "G", inst)
        c.subscribe(unique, "TagA || TagC")
        await c.start()
        got = await _receive_until(c, 4, 10)
        more = await _receive_until(c, 1, 2)
        for m in got:
            await c.ack(m)
        with pytest.raises(InvalidSubscriptionError) as bad:
            c.subscribe(unique, " || ")
        await c.shutdown()
        await inst.shutdown()
        return got, more, bad.value

    got, more, bad = run(go())
    assert sorted(m.body for m in got) == [b"a0", b"a1", b"a2", b"c0"]
    assert {m.tags for m in got} == {"TagA", "TagC"}
    assert more == []
    assert "names no tag" in _one_line(bad)


def test_no_route_is_one_line_and_names_the_topic(broker: BrokerProcess, unique: str) -> None:
    async def go():
        inst = MQClientInstance(broker.namesrv_addr)
        c = SimpleConsumer(unique + "G", inst)
        c.subscribe(unique + "Missing")
        await c.start()
        with pytest.raises(BrokerError) as e:
            await c.receive()
        await c.shutdown()
        await inst.shutdown()
        return e.value

    e = run(go())
    assert e.code == ResponseCode.TOPIC_NOT_EXIST
    assert unique + "Missing" in _one_line(e) and "no route" in str(e)


async def _wait_route_names_both_brokers(inst: MQClientInstance, topic: str) -> None:
    """The name server's route of ``topic`` lists broker-a and broker-b (each registered its copy)."""
    for _ in range(100):
        route = await inst.get_route(topic, refresh=True)
        if route and {q.broker_name for q in route.subscribe_queues()} == {"broker-a", "broker-b"}:
            return
        await asyncio.sleep(0.1)
    raise AssertionError(f"the route of {topic} never named both brokers")


def test_every_broker_of_the_topic_is_drained_and_a_dead_one_fails_in_one_line(tmp_path: Path, unique: str) -> None:
    with (running_broker(tmp_path / "a", FAST_CONF, extra_args=FAST_ARGS) as a,
          running_broker(tmp_path / "b", FAST_CONF, broker_name="broker-b", namesrv=a.namesrv_addr,
                         extra_args=FAST_ARGS) as b):
        async def go():
            inst = MQClientInstance(a.namesrv_addr)
            await create_topic(inst, a.broker_addr, unique, queues=2)
            await create_topic(inst, b.broker_addr, unique, queues=2)
            await _wait_route_names_both_brokers(inst, unique)
            for name in ("broker-a", "broker-b"):
                for qid in (0, 1):
                    await _send(inst, unique, [f"{name}-{qid}-{i}" for i in range(3)],
                                mq=MessageQueue(topic=unique, broker_name=name, queue_id=qid))
            c = SimpleConsumer(unique + "G", inst)
            c.subscribe(unique)
            await c.start()
            got = await _receive_until(c, 12, 20, invisible=60.0, max_messages=4)
            for m in got:
                if receipt_handle(m).split(" ")[5] == "broker-a":
                    await c.ack(m)
            await _send(inst, unique, ["late-a"], mq=MessageQueue(topic=unique, broker_name="broker-a", queue_id=0))
            b.proc.send_signal(signal.SIGKILL)
            b.proc.wait(10)
            from_b = next(m for m in got if receipt_handle(m).split(" ")[5] == "broker-b")
            with pytest.raises(RemotingError) as dead:
                await c.ack(from_b)
            survivors = await _receive_until(c, 1, 10)  # broker-b is skipped, broker-a still serves
            await c.shutdown()
            await inst.shutdown()
            return got, dead.value, survivors

        got, dead, survivors = run(go())
    bodies = sorted(m.body.decode() for m in got)
    assert bodies == sorted(f"{n}-{q}-{i}" for n in ("broker-a", "broker-b") for q in (0, 1) for i in range(3))
    assert {receipt_handle(m).split(" ")[5] for m in got} == {"broker-a", "broker-b"}
    for m in got:  # each handle names the broker and queue the message was stored in
        name, qid, _ = m.body.decode().rsplit("-", 2)
        assert receipt_handle(m).split(" ")[5:7] == [name, qid]
    text = _one_line(dead)
    assert "broker-b" in text and "ack of message" in text
    assert [m.body for m in survivors] == [b"late-a"]


def test_await_duration_long_polls_until_a_message_arrives(broker: BrokerProcess, unique: str) -> None:
    async def go():
        inst = MQClientInstance(broker.namesrv_addr)
        await create_topic(inst, broker.broker_addr, unique, queues=2)
        c = SimpleConsumer(unique + "G", inst, await_duration=8.0)
        c.subscribe(unique)
        await c.start()
        assert await c.receive(16, 30.0, await_duration=0) == []  # nothing yet, and no waiting
        loop = asyncio.get_running_loop()
        t0 = loop.time()

        async def send_later() -> None:
            await asyncio.sleep(1.0)
            await _send(inst, unique, ["late"])

        sender = loop.create_task(send_later())
        got = await c.receive(16, 30.0)  # parked on the broker until the send
        waited = loop.time() - t0
        await sender
        for m in got:
            await c.ack(m)
        await c.shutdown()
        await inst.shutdown()
        return got, waited

    got, waited = run(go())
    assert [m.body for m in got] == [b"late"]
    assert 0.9 <= waited < 6.0


async def _create_group(inst: MQClientInstance, broker_addr: str, group: str, **fields: object) -> None:
    """UPDATE_AND_CREATE_SUBSCRIPTIONGROUP with SubscriptionGroupConfig fields (consumeMessageOrderly, ...)."""
    body = json.dumps({"groupName": group, **fields}).encode()
    inst.check(await inst.invoke(broker_addr, RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, None, body))


def test_a_broker_refusing_the_group_neither_drops_what_another_popped_nor_gets_the_long_poll(
        tmp_path: Path, unique: str) -> None:
    # broker-b refuses the group (consumeEnable=false, as `updateSubGroup -b <b> -s false`): the messages
    # broker-a hands out in the same receive must reach the app, or they go invisible and, receive after
    # receive, end in the DLQ unseen; the long poll must go to broker-a, which answered
    with (running_broker(tmp_path / "a", FAST_CONF, extra_args=FAST_ARGS) as a,
          running_broker(tmp_path / "b", FAST_CONF, broker_name="broker-b", namesrv=a.namesrv_addr,
                         extra_args=FAST_ARGS) as b):
        async def go():
            inst = MQClientInstance(a.namesrv_addr)
            await create_topic(inst, a.broker_addr, unique, queues=1)
            await create_topic(inst, b.broker_addr, unique, queues=1)
            await _wait_route_names_both_brokers(inst, unique)
            group, closed = unique + "G", unique + "Closed"
            await _create_group(inst, b.broker_addr, group, consumeEnable=False)
            for addr in (a.broker_addr, b.broker_addr):
                await _create_group(inst, addr, closed, consumeEnable=False)
            await _send(inst, unique, ["a0", "a1"], mq=MessageQueue(topic=unique, broker_name="broker-a", queue_id=0))
            c = SimpleConsumer(group, inst, init_mode=0)
            c.subscribe(unique)
            await c.start()
            first = await c.receive(8, 30.0)  # broker-a first (the first receive's turn), then broker-b refuses
            for m in first:
                await c.ack(m)
            loop = asyncio.get_running_loop()

            async def send_later() -> None:
                await asyncio.sleep(1.0)
                await _send(inst, unique, ["late"], mq=MessageQueue(topic=unique, broker_name="broker-a", queue_id=0))

            sender = loop.create_task(send_later())
            late = await c.receive(8, 30.0, await_duration=6.0)  # broker-b's turn first: it fails, broker-a polls
            await sender
            for m in late:
                await c.ack(m)
            shut = SimpleConsumer(closed, inst)
            shut.subscribe(unique)
            await shut.start()
            with pytest.raises(BrokerError) as every:
                await shut.receive(8, 30.0)
            await shut.shutdown()
            await c.shutdown()
            await inst.shutdown()
            return first, late, every.value

        first, late, every = run(go())
    assert sorted(m.body for m in first) == [b"a0", b"a1"]
    assert [m.body for m in late] == [b"late"]
    text = _one_line(every)
    assert every.code == ResponseCode.NO_PERMISSION
    assert "broker-a" in text and "broker-b" in text and "no permission" in text


def test_an_orderly_group_gets_a_queue_in_order_one_message_in_flight_at_a_time(
        broker: BrokerProcess, unique: str) -> None:
    # Apache's proxy pops with order=true when the group's consumeMessageOrderly is on: while f0 is in
    # flight nothing behind it in its queue is handed out, and f0 comes back first
    async def go():
        inst = MQClientInstance(broker.namesrv_addr)
        await create_topic(inst, broker.broker_addr, unique, queues=1)
        await _create_group(inst, broker.broker_addr, unique + "G", consumeMessageOrderly=True)
        await _send(inst, unique, ["f0", "f1", "f2"])
        c = SimpleConsumer(unique + "G", inst, init_mode=0)
        c.subscribe(unique)
        await c.start()
        first = await _receive_until(c, 1, 10, invisible=2.0, max_messages=1)
        behind = await c.receive(16, 2.0)  # f0 in flight: f1 must wait
        again = await _receive_until(c, 1, 15, invisible=30.0, max_messages=1)
        for m in again:
            await c.ack(m)
        rest = await _receive_until(c, 2, 10, invisible=30.0)
        for m in rest:
            await c.ack(m)
        await c.shutdown()
        await inst.shutdown()
        return first, behind, again, rest

    first, behind, again, rest = run(go())
    assert [m.body for m in first] == [b"f0"]
    assert behind == []
    assert [m.body for m in again] == [b"f0"] and again[0].reconsume_times == 1
    assert [m.body for m in rest] == [b"f1", b"f2"]


def test_an_orderly_group_message_held_by_a_grpc_consumer_is_not_handed_out_again(
        broker: BrokerProcess, unique: str, tmp_path: Path) -> None:
    assert broker.grpc_addr
    group = unique + "G"

    async def setup():
        inst = MQClientInstance(broker.namesrv_addr)
        await create_topic(inst, broker.broker_addr, unique, queues=1)
        await _create_group(inst, broker.broker_addr, group, consumeMessageOrderly=True)
        await _send(inst, unique, ["f0", "f1"])
        await inst.shutdown()

    run(setup())
    held = run_scenario(broker.grpc_addr, tmp_path, "simple_consume", topic=unique, group=group, expect=1, batch=1,
                        ack=False, invisible=30, **{"await": 2})

    async def go():
        inst = MQClientInstance(broker.namesrv_addr)
        c = SimpleConsumer(group, inst, init_mode=0)
        c.subscribe(unique)
        await c.start()
        got = await _receive_until(c, 1, 2)
        await c.shutdown()
        await inst.shutdown()
        return got

    got = run(go())
    assert [m["body"] for m in held["received"]] == ["f0"]
    assert got == []


def test_receive_ack_and_change_outside_start_and_shutdown_are_refused_and_shutdown_ends_a_long_poll(
        broker: BrokerProcess, unique: str) -> None:
    async def go():
        inst = MQClientInstance(broker.namesrv_addr)
        await create_topic(inst, broker.broker_addr, unique, queues=1)
        await _send(inst, unique, ["x0"])
        c = SimpleConsumer(unique + "G", inst, init_mode=0, await_duration=20.0)
        c.subscribe(unique)
        with pytest.raises(ClientStateError) as before:
            await c.receive(1, 30.0)
        await c.start()
        got = await _receive_until(c, 1, 10)
        loop = asyncio.get_running_loop()
        parked = loop.create_task(c.receive(4, 30.0))  # nothing left: it parks on the broker for 20 s
        await asyncio.sleep(0.5)
        t0 = loop.time()
        await c.shutdown()
        after_parked = await asyncio.wait_for(parked, 5)
        ended = loop.time() - t0
        errors = []
        for call in (c.receive(1, 30.0), c.ack(got[0]), c.change_invisible_duration(got[0], 10)):
            with pytest.raises(ClientStateError) as e:
                await call
            errors.append(e.value)
        await inst.shutdown()
        return before.value, after_parked, ended, errors

    before, after_parked, ended, errors = run(go())
    assert "not running" in _one_line(before)
    assert after_parked == [] and ended < 3.0
    for e in errors:
        assert "not running" in _one_line(e) and "shut down" in str(e)


def test_durations_out_of_range_and_unknown_filter_types_are_refused_in_one_line(
        broker: BrokerProcess, unique: str) -> None:
    async def go():
        inst = MQClientInstance(broker.namesrv_addr)
        c = SimpleConsumer(unique + "G", inst)
        c.subscribe(unique)
        with pytest.raises(InvalidSubscriptionError) as bad_type:
            c.subscribe(unique, "a > 1", "SQL93")
        await c.start()
        msg = MessageExt(0, 0, 0, 0, 0, 0, 0, 0, 0, ("127.0.0.1", 1), 0, ("127.0.0.1", 1), 0, 0, b"x", unique, "")
        msg.properties["POP_CK"] = "0 1700000000000 30000 0 0 broker-a 0 0"
        errors = []
        for call in (c.receive(1, float("inf")), c.receive(1, 0.0004), c.receive(1, 30.0, await_duration=float("inf")),
                     c.change_invisible_duration(msg, float("inf")), c.change_invisible_duration(msg, 0.0004)):
            with pytest.raises(ClientConfigError) as e:
                await call
            errors.append(e.value)
        with pytest.raises(ClientConfigError) as ctor:
            SimpleConsumer(unique + "G2", inst, await_duration=float("inf"))
        await c.shutdown()
        await inst.shutdown()
        return bad_type.value, errors, ctor.value

    bad_type, errors, ctor = run(go())
    assert "SQL93" in _one_line(bad_type) and "TAG" in str(bad_type) and "SQL92" in str(bad_type)
    for e in [*errors, ctor]:
        assert "OverflowError" not in _one_line(e)
    assert "inf" in str(errors[0]) and "invisible_duration" in str(errors[0])
    assert "0 ms" in str(errors[1]) and "0 ms" in str(errors[4])
    assert "await_duration" in str(errors[2]) and "await_duration" in str(ctor)
