"""SQL92 pull and pop over a real broker and real remoting, with the dispatch-time bitmap on and off.

With enableConsumeQueueExt + enableCalcFilterBitMap a consumer that registered a SQL92 subscription (by
heartbeat) before the messages were stored must get exactly its messages, and the broker must have
skipped the others from the consume queue ext, without reading them (the filter manager's counters).
A consumer registering later, or the flags off, must get the same messages by reading and evaluating.
"""

from __future__ import annotations

import asyncio

from harness import Servers

from broker_core.broker.broker import Broker
from broker_core.broker.pop.pop_service import CONSUME_INIT_MODE_MIN
from broker_core.client.consumer_api import PullStatus
from broker_core.client.instance import MQClientInstance
from broker_core.client.message import Message
from broker_core.client.producer import Producer
from broker_core.client.pull_consumer import PullConsumer
from tests.client.conftest import create_topic
from tests.waiting import wait_for

FLAGS = {"enableConsumeQueueExt": "true", "enableCalcFilterBitMap": "true"}
N = 200
EXPR = "pick = 'yes' AND seq >= 0"
MATCHING = {i for i in range(N) if i % 10 == 0}


def run(coro, timeout: float = 60.0):
    return asyncio.run(asyncio.wait_for(coro, timeout))


async def _registered_consumer(inst: MQClientInstance, group: str, topic: str) -> PullConsumer:
    c = PullConsumer(group, inst)
    c.subscribe(topic, EXPR, "SQL92")
    await c.start()
    await inst.send_heartbeat_to_all()
    return c


async def _send(inst: MQClientInstance, topic: str) -> None:
    p = Producer(topic + "P", inst)
    await p.start()
    for i in range(N):
        await p.send(Message(topic, b"m%d" % i, tags="TagA",
                             properties={"pick": "yes" if i in MATCHING else "no", "seq": str(i)}))
    await p.shutdown()


async def _pull_all(c: PullConsumer, topic: str) -> list[int]:
    seqs = []
    for mq in await c.fetch_subscribe_queues(topic):
        offset = 0
        for _ in range(200):
            r = await c.pull(mq, EXPR, offset, 32, expression_type="SQL92")
            seqs += [int(m.get_property("seq")) for m in r.messages]
            if r.status not in (PullStatus.FOUND, PullStatus.NO_MATCHED_MSG):
                break
            offset = r.next_begin_offset
    return sorted(seqs)


def _wait_dispatched(broker: Broker, topic: str) -> None:
    wait_for(lambda: sum(broker.get_max_offset(topic, q) for q in range(2)) >= N, f"{N} messages of {topic}")


def _pop_all(broker, group: str, topic: str) -> list[int]:
    seqs: list[int] = []
    for _ in range(50):
        r = broker.pop_message(group, topic, None, 32, 60_000, "SQL92", EXPR, init_mode=CONSUME_INIT_MODE_MIN)
        if not r.messages:
            break
        seqs += [int(m.properties["seq"]) for m in r.messages]
    return sorted(seqs)


def test_bitmap_skips_non_matching_messages_for_registered_consumers(tmp_path) -> None:
    servers = Servers(tmp_path)
    try:
        broker, _server, addr = servers.add_broker(props=FLAGS)
        stats = broker.consumer_filter_manager.stats

        async def go():
            inst = MQClientInstance(servers.namesrv_addr)
            await create_topic(inst, addr, "Sq", queues=2)
            early = await _registered_consumer(inst, "early", "Sq")
            popper = await _registered_consumer(inst, "popper", "Sq")
            await asyncio.sleep(0.01)  # messages stored strictly after the filters were born
            await _send(inst, "Sq")
            _wait_dispatched(broker, "Sq")
            got_early = await _pull_all(early, "Sq")
            after_early = (stats.skipped, stats.maybe, stats.not_usable)
            got_pop = await asyncio.get_running_loop().run_in_executor(None, _pop_all, broker, "popper", "Sq")
            after_pop = (stats.skipped, stats.maybe, stats.not_usable)
            late = await _registered_consumer(inst, "late", "Sq")  # after the messages were stored
            got_late = await _pull_all(late, "Sq")
            after_late = (stats.skipped, stats.maybe, stats.not_usable)
            for c in (early, popper, late):
                await c.shutdown()
            await inst.shutdown()
            return got_early, after_early, got_pop, after_pop, got_late, after_late

        got_early, after_early, got_pop, after_pop, got_late, after_late = run(go())
        assert got_early == sorted(MATCHING)
        # Two SQL92 consumers set bits: a message of neither group sets none, so only a matching message
        # can be a "maybe" for "early" (no false positive possible): every other one was skipped unread.
        assert after_early == (N - len(MATCHING), len(MATCHING), 0)
        assert got_pop == sorted(MATCHING)
        assert after_pop[0] - after_early[0] == N - len(MATCHING)
        assert got_late == sorted(MATCHING)
        assert after_late[2] - after_pop[2] == N  # born after every message: each one read and evaluated
        assert after_late[0] == after_pop[0]
        ext = broker.root / "consumequeue_ext" / "Sq"
        assert sorted(p.name for p in ext.iterdir()) == ["0", "1"]
        # the bitmap's skips are what spared the commitlog: a store read with the same filter reads only
        # the matching messages, the plain SQL92 filter reads all of them
        from broker_core.broker.filter import build_filter
        from broker_core.broker.filter.expression_filter import with_bitmap

        plain = build_filter("SQL92", EXPR)
        with_bits = with_bitmap(plain, "early", "Sq", broker.consumer_filter_manager)
        assert with_bits is not plain
        for f, refused in ((with_bits, 0), (plain, sum(1 for i in range(N) if i not in MATCHING))):
            total = sum(broker.store.get_messages("Sq", q, 0, N, f).filter_message_count for q in range(2))
            assert total == refused
    finally:
        servers.close()


def test_flags_off_change_nothing(tmp_path) -> None:
    servers = Servers(tmp_path)
    try:
        broker, _server, addr = servers.add_broker()

        async def go():
            inst = MQClientInstance(servers.namesrv_addr)
            await create_topic(inst, addr, "Off", queues=2)
            c = await _registered_consumer(inst, "g", "Off")
            await asyncio.sleep(0.01)
            await _send(inst, "Off")
            _wait_dispatched(broker, "Off")
            got = await _pull_all(c, "Off")
            await c.shutdown()
            await inst.shutdown()
            return got

        assert run(go()) == sorted(MATCHING)
        stats = broker.consumer_filter_manager.stats
        assert (stats.skipped, stats.maybe) == (0, 0)
        assert not (broker.root / "consumequeue_ext").exists()
    finally:
        servers.close()
