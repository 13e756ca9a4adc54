"""A live push consumer reset by INVOKE_BROKER_TO_RESET_OFFSET on a broker in client mode
(useServerSideResetOffset=false).

The broker sends RESET_CONSUMER_CLIENT_OFFSET (220) to the group's online consumers, which, as Java's
MQClientInstance.resetOffset, drop the queues, set and persist the new offsets and take the queues again
there: the consumer consumes again from the reset point. Nothing of it may stay in the broker's server-side
reset table: turning the setting back on later must not rewind the group a second time.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

import broker_core.client.push_consumer as push_consumer
from broker_core.client.consumer_api import ConsumerApi
from broker_core.client.instance import MQClientInstance
from broker_core.client.push_consumer import ConsumeConcurrentlyStatus, PushConsumer
from broker_core.client.rebalance import ConsumeFromWhere
from broker_core.remoting import RequestCode, ResponseCode
from broker_core.remoting.bodies import MessageQueue, ResetOffsetBody
from broker_core.remoting.headers import ResetOffsetRequestHeader
from broker_core.store.codec.message import MessageExt
from tests.client.conftest import FAST_ARGS, FAST_CONF, create_topic, produce, wait_dispatched
from tests.client.test_client_push import run, wait_until
from tests.remoting_broker import BrokerProcess, running_broker

QUEUES, N = 2, 10  # N messages per queue
PERSIST_S = 0.5  # the consumer's offset persist period here (5 s by default): the tests wait for commits


@pytest.fixture(autouse=True)
def _persist_often(monkeypatch: pytest.MonkeyPatch) -> None:
    """What the tests check is where the consumer commits after a reset, not how often it persists: a
    short period lets them see each commit in a fraction of a second instead of waiting out 5 s."""
    monkeypatch.setattr(push_consumer, "PERSIST_INTERVAL_S", PERSIST_S)


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    with running_broker(Path(tmp_path_factory.mktemp("mqbroker")),
                        {**FAST_CONF, "useServerSideResetOffset": "false"}, extra_args=FAST_ARGS) as b:
        yield b


async def _committed(api: ConsumerApi, mqs: list[MessageQueue], want: int, timeout: float = 15) -> bool:
    """Wait until the broker holds ``want`` for every queue (the consumer persists every ``PERSIST_S``)."""
    deadline = asyncio.get_running_loop().time() + timeout
    while [await api.query_consumer_offset(mq) for mq in mqs] != [want] * len(mqs):
        if asyncio.get_running_loop().time() > deadline:
            return False
        await asyncio.sleep(0.2)
    return True


async def _reset(inst: MQClientInstance, broker: BrokerProcess, topic: str, group: str, timestamp: int):
    header = ResetOffsetRequestHeader(topic=topic, group=group, timestamp=timestamp, is_force=True, offset=-1)
    return await inst.invoke(broker.broker_addr, RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, header)


async def _set_server_side(inst: MQClientInstance, broker: BrokerProcess, on: bool) -> None:
    body = f"useServerSideResetOffset={'true' if on else 'false'}\n".encode()
    inst.check(await inst.invoke(broker.broker_addr, RequestCode.UPDATE_BROKER_CONFIG, None, body))


class _Consumed:
    """What the listener received, in order."""

    def __init__(self) -> None:
        self.bodies: list[str] = []

    def __call__(self, msgs: list[MessageExt]) -> ConsumeConcurrentlyStatus:
        self.bodies += [m.body.decode() for m in msgs]
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS


async def _consume_all(inst: MQClientInstance, broker: BrokerProcess, topic: str, group: str,
                       consumed: _Consumed) -> tuple[PushConsumer, list[MessageQueue]]:
    """A topic with N messages per queue, consumed once by a started consumer, offsets on the broker."""
    await create_topic(inst, broker.broker_addr, topic, queues=QUEUES)
    mqs = [MessageQueue(topic=topic, broker_name=broker.broker_name, queue_id=q) for q in range(QUEUES)]
    await produce(inst, topic, N * QUEUES, "old")
    await wait_dispatched(inst, topic, broker.broker_name, dict.fromkeys(range(QUEUES), N))
    c = PushConsumer(group, inst, consume_from=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET)
    c.subscribe(topic, "*")
    c.register_concurrently(consumed)
    await c.start()
    assert await wait_until(lambda: len(consumed.bodies) >= N * QUEUES, 20), consumed.bodies
    assert await _committed(ConsumerApi(inst, group), mqs, N), "the consumer never committed its offsets"
    return c, mqs


@asynccontextmanager
async def _consuming(broker: BrokerProcess, topic: str, group: str
                     ) -> AsyncIterator[tuple[MQClientInstance, _Consumed, list[MessageQueue]]]:
    """``_consume_all`` on a client of its own, shut down (consumer, then client) on the way out."""
    inst = MQClientInstance(broker.namesrv_addr)
    consumed = _Consumed()
    c, mqs = await _consume_all(inst, broker, topic, group, consumed)
    try:
        yield inst, consumed, mqs
    finally:
        await c.shutdown()
        await inst.shutdown()


def test_live_consumer_consumes_again_from_a_client_mode_reset(broker: BrokerProcess, unique: str) -> None:
    topic, group = unique, unique + "G"

    async def go():
        async with _consuming(broker, topic, group) as (inst, consumed, mqs):
            resp = await _reset(inst, broker, topic, group, 0)
            table = ResetOffsetBody.from_json(resp.body).offset_table if resp.body else None
            again = await wait_until(lambda: len(consumed.bodies) >= 2 * N * QUEUES, 20)
            # the consumer persisted where it consumed to again
            committed = await _committed(ConsumerApi(inst, group), mqs, N)
            return resp.code, resp.remark, table, mqs, again, list(consumed.bodies), committed

    code, remark, table, mqs, again, bodies, committed = run(go(), 90)
    assert code == ResponseCode.SUCCESS, remark
    assert table == dict.fromkeys(mqs, 0)
    assert again, f"the consumer did not consume again after the reset: {len(bodies)} messages"
    # every old message exactly twice: once before the reset, once after
    assert sorted(bodies) == sorted(f"old{i}" for i in range(N * QUEUES) for _ in range(2))
    assert committed


def test_turning_server_side_reset_back_on_does_not_rewind(broker: BrokerProcess, unique: str) -> None:
    topic, group = unique, unique + "G"

    async def go():
        async with _consuming(broker, topic, group) as (inst, consumed, mqs):
            resp = await _reset(inst, broker, topic, group, 0)
            inst.check(resp)
            assert await wait_until(lambda: len(consumed.bodies) >= 2 * N * QUEUES, 20), len(consumed.bodies)
            assert await _committed(ConsumerApi(inst, group), mqs, N)
            before = len(consumed.bodies)
            await _set_server_side(inst, broker, True)
            try:
                await produce(inst, topic, 4, "new")
                await wait_until(lambda: len(consumed.bodies) >= before + 4, 20)
                await asyncio.sleep(3)  # a rewind would deliver old messages again by now
            finally:
                await _set_server_side(inst, broker, False)
            return consumed.bodies[before:]

    later = run(go(), 120)
    assert sorted(later) == [f"new{i}" for i in range(4)], later
