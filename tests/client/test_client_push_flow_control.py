"""Push consumer: a subscription changed while running, size-based flow control, consumeTimeout, unsubscribe.

What a user saw before: ``subscribe(topic, "B")`` on a running consumer (started with "A") was ignored by
the pull loops, which kept the expression read when they started, so every message of tag B was filtered
out and committed past (lost); the broker kept showing "A" until the next 30 s heartbeat. A slow listener
and large messages let each queue cache up to 1000 messages whatever their size (Java also stops pulling a
queue at pullThresholdSizeForQueue, 100 MiB). A listener that hung kept the queue's committed offset where
it was for ever (Java sends such a message back after consumeTimeout, 15 min, and moves on).
"""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from broker_core.client.config_check import ClientConfigError
from broker_core.client.consumer_api import ConsumerApi
from broker_core.client.instance import MQClientInstance
from broker_core.client.message import Message
from broker_core.client.producer import Producer
from broker_core.client.push_consumer import ConsumeConcurrentlyStatus, ConsumeOrderlyStatus, PushConsumer
from broker_core.client.rebalance import ConsumeFromWhere
from broker_core.remoting import RequestCode
from broker_core.remoting.bodies import ConsumerConnection, ConsumerRunningInfo
from broker_core.remoting.headers import (
    GetConsumerConnectionListRequestHeader,
    GetConsumerRunningInfoRequestHeader,
)
from broker_core.store.codec.message import MessageExt
from tests.client.conftest import create_topic, wait_dispatched
from tests.remoting_broker import BrokerProcess

FIRST = ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET
OK = ConsumeConcurrentlyStatus.CONSUME_SUCCESS
NO_NAMESRV = "127.0.0.1:9"  # never dialled: a setting out of range fails before anything is sent


def run(coro, timeout: float = 90.0):
    return asyncio.run(asyncio.wait_for(coro, timeout))


async def wait_until(cond, timeout: float = 20.0) -> bool:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(0.05)
    return True


async def broker_subscription(inst: MQClientInstance, broker_addr: str, group: str, topic: str) -> str | None:
    """The expression the broker holds for ``group``/``topic`` (what mqadmin consumerConnection shows)."""
    resp = await inst.invoke(broker_addr, RequestCode.GET_CONSUMER_CONNECTION_LIST,
                             GetConsumerConnectionListRequestHeader(consumer_group=group))
    if not resp.body:
        return None
    sub = ConsumerConnection.from_json(resp.body).subscription_table.get(topic)
    return sub.sub_string if sub else None


async def send(p: Producer, topic: str, bodies: list[str], tag: str | None = None) -> None:
    for b in bodies:
        await p.send(Message(topic, b.encode(), tags=tag))


# ---------------------------------------------------------------- subscription changed while running
def test_a_tag_expression_changed_while_running_is_pulled_with_and_heartbeated_at_once(
        broker: BrokerProcess, unique: str) -> None:
    async def go():
        inst = MQClientInstance(broker.namesrv_addr)
        await create_topic(inst, broker.broker_addr, unique, queues=2)
        group = unique + "G"
        got: list[str] = []

        def listener(msgs: list[MessageExt]) -> ConsumeConcurrentlyStatus:
            got.extend(m.body.decode() for m in msgs)
            return OK

        c = PushConsumer(group, inst, consume_from=FIRST)
        c.subscribe(unique, "A")
        c.register_concurrently(listener)
        await c.start()
        p = Producer(unique + "P", inst)
        await p.start()
        await send(p, unique, ["a-before-0", "a-before-1"], "A")
        first = await wait_until(lambda: len(got) == 2)
        await asyncio.sleep(0.5)  # the pull loops are in their long polls, made with "A"
        c.subscribe(unique, "B")
        # Java's subscribe() heartbeats at once: the broker knows the new expression well before 30 s
        deadline = time.monotonic() + 5
        seen: str | None = None
        while time.monotonic() < deadline:
            seen = await broker_subscription(inst, broker.broker_addr, group, unique)
            if seen == "B":
                break
            await asyncio.sleep(0.1)
        await send(p, unique, [f"b-after-{i}" for i in range(3)], "B")
        await send(p, unique, [f"a-after-{i}" for i in range(3)], "A")
        ok = await wait_until(lambda: {f"b-after-{i}" for i in range(3)} <= set(got), 20)
        await asyncio.sleep(1.0)  # an "A" message consumed after the change would show up by now
        await c.shutdown()
        await p.shutdown()
        await inst.shutdown()
        return first, seen, ok, got

    first, seen, ok, got = run(go())
    assert first
    assert seen == "B"
    assert ok, f"the messages of the new tag were not consumed: {got}"
    assert sorted(got) == ["a-before-0", "a-before-1", "b-after-0", "b-after-1", "b-after-2"]


def test_unsubscribe_stops_the_topic_and_heartbeats(broker: BrokerProcess, unique: str) -> None:
    async def go():
        inst = MQClientInstance(broker.namesrv_addr)
        await create_topic(inst, broker.broker_addr, unique, queues=2)
        other = unique + "x"
        await create_topic(inst, broker.broker_addr, other, queues=2)
        group = unique + "G"
        got: list[str] = []

        def listener(msgs: list[MessageExt]) -> ConsumeConcurrentlyStatus:
            got.extend(m.body.decode() for m in msgs)
            return OK

        c = PushConsumer(group, inst, consume_from=FIRST)
        c.subscribe(unique, "*")
        c.subscribe(other, "*")
        c.register_concurrently(listener)
        await c.start()
        p = Producer(unique + "P", inst)
        await p.start()
        await send(p, other, ["o-0"])
        first = await wait_until(lambda: "o-0" in got)
        await asyncio.to_thread(c.unsubscribe, other)  # from another thread, as a blocking listener may
        deadline = time.monotonic() + 5
        seen: str | None = "?"
        while time.monotonic() < deadline:
            seen = await broker_subscription(inst, broker.broker_addr, group, other)
            if seen is None:
                break
            await asyncio.sleep(0.1)
        await c.rebalance_once()  # the next round gives up the topic's queues (truncateMessageQueueNotMyTopic)
        owned = sorted({mq.topic for mq in c.rebalancer.process_queues}) if c.rebalancer else []
        await send(p, other, ["o-1"])
        await send(p, unique, ["u-0"])
        ok = await wait_until(lambda: "u-0" in got)
        await asyncio.sleep(1.0)
        await c.shutdown()
        await p.shutdown()
        await inst.shutdown()
        return first, seen, owned, ok, got

    first, seen, owned, ok, got = run(go())
    assert first and ok
    assert seen is None
    assert unique in owned and unique + "x" not in owned
    assert "o-1" not in got


# ---------------------------------------------------------------- flow control by size
@pytest.mark.parametrize(("setting", "value", "says"), [
    ("pull_threshold_for_queue", 0, "pull_threshold_for_queue Out of range [1, 65535] (Java's pullThresholdForQueue)"),
    ("pull_threshold_for_queue", 65536, "pull_threshold_for_queue Out of range [1, 65535]"),
    ("pull_threshold_size_for_queue", 0, "pull_threshold_size_for_queue Out of range [1, 1024]"),
    ("pull_threshold_size_for_queue", 1025, "pull_threshold_size_for_queue Out of range [1, 1024]"),
    ("pull_threshold_for_topic", 0, "pull_threshold_for_topic Out of range [1, 6553500]"),
    ("pull_threshold_for_topic", 6553501, "pull_threshold_for_topic Out of range [1, 6553500]"),
    ("pull_threshold_size_for_topic", -2, "pull_threshold_size_for_topic Out of range [1, 102400]"),
    ("pull_threshold_size_for_topic", 102401, "pull_threshold_size_for_topic Out of range [1, 102400]"),
    ("consume_timeout", 0, "consume_timeout must be a number of minutes above 0 (Java's consumeTimeout)"),
    ("consume_timeout", -1, "consume_timeout must be a number of minutes above 0"),
])
def test_a_flow_control_setting_out_of_range_fails_its_construction(setting: str, value: int, says: str) -> None:
    with pytest.raises(ClientConfigError) as err:
        PushConsumer("SettingsG", MQClientInstance(NO_NAMESRV), **{setting: value})  # type: ignore[arg-type]
    assert says in str(err.value)
    assert str(err.value).count("\n") == 0


def test_flow_control_settings_have_javas_defaults_and_accept_their_range_ends() -> None:
    c = PushConsumer("SettingsG", MQClientInstance(NO_NAMESRV))
    assert (c.pull_threshold_for_queue, c.pull_threshold_size_for_queue, c.pull_threshold_for_topic,
            c.pull_threshold_size_for_topic, c.consume_timeout) == (1000, 100, -1, -1, 15)
    for kw in ({"pull_threshold_for_queue": 1, "pull_threshold_size_for_queue": 1, "pull_threshold_for_topic": 1,
                "pull_threshold_size_for_topic": 1, "consume_timeout": 0.01},
               {"pull_threshold_for_queue": 65535, "pull_threshold_size_for_queue": 1024,
                "pull_threshold_for_topic": 6553500, "pull_threshold_size_for_topic": 102400}):
        PushConsumer("SettingsG", MQClientInstance(NO_NAMESRV), **kw)  # type: ignore[arg-type]
    c.pull_threshold_size_for_queue = 0  # public attributes: checked again at start()
    with pytest.raises(ClientConfigError, match="pull_threshold_size_for_queue Out of range"):
        asyncio.run(c.start())


def test_a_slow_listener_of_large_messages_caps_the_cached_size_of_its_queue(
        broker: BrokerProcess, unique: str) -> None:
    body_size = 600 * 1024
    n = 12

    async def go():
        inst = MQClientInstance(broker.namesrv_addr)
        await create_topic(inst, broker.broker_addr, unique, queues=1)
        p = Producer(unique + "P", inst)
        await p.start()
        for i in range(n):
            await p.send(Message(unique, f"big-{i} ".encode().ljust(body_size, b"x")))
        await wait_dispatched(inst, unique, broker.broker_name, {0: n})
        release = threading.Event()
        got: list[int] = []

        def listener(msgs: list[MessageExt]) -> ConsumeConcurrentlyStatus:
            release.wait(60)
            got.extend(m.queue_offset for m in msgs)
            return OK

        group = unique + "G"
        c = PushConsumer(group, inst, consume_from=FIRST, pull_batch_size=1, pull_threshold_size_for_queue=2)
        c.subscribe(unique, "*")
        c.register_concurrently(listener)
        await c.start()
        await asyncio.sleep(3.0)  # time enough to pull all twelve, were nothing holding the pulls back
        resp = await inst.invoke(broker.broker_addr, RequestCode.GET_CONSUMER_RUNNING_INFO,
                                 GetConsumerRunningInfoRequestHeader(consumer_group=group,
                                                                     client_id=inst.client_id))
        info = ConsumerRunningInfo.from_json(resp.body)
        release.set()
        done = await wait_until(lambda: len(got) == n, 30)
        await c.shutdown()
        await p.shutdown()
        await inst.shutdown()
        return info, done, got

    info, done, got = run(go())
    assert info.properties["pullThresholdSizeForQueue"] == "2"
    assert info.properties["pullThresholdForQueue"] == "1000"
    [(mq, pq)] = [(mq, pq) for mq, pq in info.mq_table.items() if mq.topic == unique]
    # as Java: pulling stops once the cached size in whole MiB is over the threshold, so it holds at most
    # the threshold plus one pull's batch (2 MiB + 600 KiB: five messages, 3 MiB shown)
    assert pq.cached_msg_size_in_mi_b <= 3, pq
    assert 0 < pq.cached_msg_count <= 6, pq
    assert done and sorted(got) == list(range(n))  # nothing lost once the listener goes on


# ---------------------------------------------------------------- consumeTimeout
def test_a_hanging_listener_is_sent_back_after_consume_timeout_and_the_offset_moves_on(
        broker: BrokerProcess, unique: str) -> None:
    async def go():
        inst = MQClientInstance(broker.namesrv_addr)
        await create_topic(inst, broker.broker_addr, unique, queues=1)
        release = threading.Event()
        got: list[tuple[str, int]] = []

        def listener(msgs: list[MessageExt]) -> ConsumeConcurrentlyStatus:
            for m in msgs:
                got.append((m.body.decode(), m.reconsume_times))
                if m.body == b"m1" and m.reconsume_times == 0:
                    release.wait(60)  # hangs (until the test ends)
            return OK

        group = unique + "G"
        c = PushConsumer(group, inst, consume_from=FIRST, consume_timeout=0.02)  # 1.2 s
        c.subscribe(unique, "*")
        c.register_concurrently(listener)
        await c.start()
        p = Producer(unique + "P", inst)
        await p.start()
        await send(p, unique, ["m0", "m1", "m2"])
        mq = (await ConsumerApi(inst, group).subscribe_queues(unique))[0]
        moved = await wait_until(lambda: (c.offsets.read_memory(mq) or 0) >= 3, 15)
        back = await wait_until(lambda: ("m1", 1) in got, 20)
        offset = c.offsets.read_memory(mq)
        release.set()
        await c.shutdown()
        await p.shutdown()
        await inst.shutdown()
        return moved, back, offset, got

    moved, back, offset, got = run(go())
    assert moved, f"the committed offset stayed at {offset} behind the hanging listener"
    assert back, f"the hung message was not sent back to be consumed again: {got}"
    assert offset == 3


def test_an_orderly_consumer_keeps_a_hanging_batch_whatever_consume_timeout(
        broker: BrokerProcess, unique: str) -> None:
    """As Java's cleanExpiredMsg: orderly queues are not touched (a message leaving breaks the order)."""
    async def go():
        inst = MQClientInstance(broker.namesrv_addr)
        await create_topic(inst, broker.broker_addr, unique, queues=1)
        release = threading.Event()
        got: list[str] = []

        def listener(msgs: list[MessageExt]) -> ConsumeOrderlyStatus:
            got.extend(m.body.decode() for m in msgs)
            if msgs[0].body == b"m0":
                release.wait(60)
            return ConsumeOrderlyStatus.SUCCESS

        group = unique + "G"
        c = PushConsumer(group, inst, consume_from=FIRST, consume_timeout=0.01)
        c.subscribe(unique, "*")
        c.register_orderly(listener)
        await c.start()
        p = Producer(unique + "P", inst)
        await p.start()
        await send(p, unique, ["m0", "m1"])
        await wait_until(lambda: "m0" in got)
        await asyncio.sleep(2.0)
        mq = (await ConsumerApi(inst, group).subscribe_queues(unique))[0]
        offset = c.offsets.read_memory(mq)
        release.set()
        done = await wait_until(lambda: "m1" in got)
        await c.shutdown()
        await p.shutdown()
        await inst.shutdown()
        return offset, done, got

    offset, done, got = run(go())
    assert offset in (None, 0)
    assert done and got == ["m0", "m1"]
