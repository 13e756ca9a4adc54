"""A push consumer whose group is reset (mqadmin resetOffsetByTime / skipAccumulatedMessage) while it runs.

The broker answers the consumer's next pull with OFFSET_ILLEGAL (PULL_OFFSET_MOVED) and the reset
offset. As DefaultMQPushConsumerImpl's PullCallback does, the consumer must drop the queue's
ProcessQueue: what it buffered before the reset is not consumed any more and nothing of it is
committed, and a fresh ProcessQueue starts at once at the reset offset. Otherwise a skip still
delivers the skipped backlog, and after a backward reset the old batches commit offsets past what
was re-consumed, so a consumer stopped then loses the rest of the re-consumption.

The consumers run in the test's process; mqadmin runs as a real command (in a thread, so the
consumer's event loop goes on meanwhile). Every queue has parked its long poll at the queue's end
when the reset is made, so the test sends one more message to wake the poll: the broker answers it
with the reset at once instead of after the 15 s suspend.
"""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

import broker_core.client.push_consumer as push_consumer
from broker_core.client.consumer_api import ConsumerApi
from broker_core.client.instance import MQClientInstance
from broker_core.client.process_queue import ProcessQueue
from broker_core.client.push_consumer import ConsumeConcurrentlyStatus, ConsumeOrderlyStatus, PushConsumer
from broker_core.client.rebalance import ConsumeFromWhere
from broker_core.remoting.bodies import MessageQueue
from broker_core.store.codec.message import MessageExt
from tests.cli.test_cli_remote import mqadmin
from tests.client.conftest import create_topic, produce, wait_dispatched
from tests.client.test_client_logic import msg
from tests.client.test_client_push import run, wait_until
from tests.remoting_broker import BrokerProcess

FIRST = ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET
PERSIST_S = 0.5  # the consumer's offset persist period here (5 s by default)


@pytest.fixture(autouse=True)
def _persist_often(monkeypatch: pytest.MonkeyPatch) -> None:
    """The tests check which offset the consumer commits after a reset, not how often it persists: a short
    period shows each commit within a second instead of after up to 5 s (and checks more of them)."""
    monkeypatch.setattr(push_consumer, "PERSIST_INTERVAL_S", PERSIST_S)


async def _mqadmin(*args: str) -> str:
    r = await asyncio.to_thread(mqadmin, *args)
    assert r.returncode == 0, (args, r.stdout, r.stderr)
    return r.stdout


def test_skip_accumulated_drops_the_buffered_backlog(broker: BrokerProcess, unique: str) -> None:
    topic, group, n = unique, unique + "G", 200

    async def go():
        inst = MQClientInstance(broker.namesrv_addr)
        await create_topic(inst, broker.broker_addr, topic, queues=1)
        mq = MessageQueue(topic=topic, broker_name=broker.broker_name, queue_id=0)
        await produce(inst, topic, n, "old")
        await wait_dispatched(inst, topic, broker.broker_name, {0: n})
        started: list[tuple[int, float]] = []  # (queue offset, when the listener began it)

        def listener(msgs: list[MessageExt]) -> ConsumeConcurrentlyStatus:
            for m in msgs:
                started.append((m.queue_offset, time.monotonic()))
                time.sleep(0.1)  # slow: the whole backlog is buffered long before it is consumed
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

        c = PushConsumer(group, inst, consume_from=FIRST, consume_concurrency=2)
        c.subscribe(topic, "*")
        c.register_concurrently(listener)
        await c.start()
        assert await wait_until(lambda: len(started) >= 20, 15), started
        await _mqadmin("skipAccumulatedMessage", "-n", broker.namesrv_addr, "-g", group, "-t", topic)
        consumed_at_skip = len(started)
        await produce(inst, topic, 1, "new")  # wakes the parked pull: it gets OFFSET_ILLEGAL now
        woken = time.monotonic()
        resumed = await wait_until(lambda: any(off == n for off, _ in started), 10)
        api = ConsumerApi(inst, group)
        committed: list[int | None] = []

        async def committed_is_max() -> bool:
            committed.append(await api.query_consumer_offset(mq))
            return committed[-1] == n + 1

        deadline = time.monotonic() + 8  # the consumer persists its offsets every PERSIST_S
        while not await committed_is_max() and time.monotonic() < deadline:
            await asyncio.sleep(0.2)
        await c.shutdown()
        await inst.shutdown()
        return started, woken, resumed, consumed_at_skip, committed

    started, woken, resumed, consumed_at_skip, committed = run(go(), 60)
    assert consumed_at_skip < 150, "the backlog was consumed before the skip: the test proves nothing"
    # the new message is consumed right away, by a fresh process queue at the skip point
    assert resumed, started[-5:]
    # no skipped message is begun once the broker told the consumer of the skip (the batches already
    # in the listener finish: they began before it)
    late = [off for off, t in started if off < n and t > woken]
    assert len(late) <= 2, f"{len(late)} skipped messages consumed after the skip: {late[:20]}"
    # and their commits do not move the offset: it is the queue's max offset, where the group consumed to
    assert committed[-1] == n + 1, committed


def test_backward_reset_of_an_orderly_consumer_reconsumes_from_the_reset_point(
        broker: BrokerProcess, unique: str) -> None:
    topic, group, n, redo = unique, unique + "G", 200, 20

    async def go():
        inst = MQClientInstance(broker.namesrv_addr)
        await create_topic(inst, broker.broker_addr, topic, queues=1)
        mq = MessageQueue(topic=topic, broker_name=broker.broker_name, queue_id=0)
        await produce(inst, topic, n, "old")
        await wait_dispatched(inst, topic, broker.broker_name, {0: n})
        done: list[int] = []  # queue offsets in the order the listener finished them
        reconsumed: list[int] = []  # offsets finished since offset 0 came again
        stop = threading.Event()  # set: the listener blocks (the consumer "hangs", as if killed)
        release = threading.Event()

        def listener(msgs: list[MessageExt]) -> ConsumeOrderlyStatus:
            for m in msgs:
                if stop.is_set():
                    release.wait(30)
                time.sleep(0.05)
                if m.queue_offset == 0 and done:
                    reconsumed.append(0)
                elif reconsumed:
                    reconsumed.append(m.queue_offset)
                done.append(m.queue_offset)
                if len(reconsumed) >= redo:
                    stop.set()  # offsets 0..redo-1 re-consumed; the next message never finishes
            return ConsumeOrderlyStatus.SUCCESS

        c = PushConsumer(group, inst, consume_from=FIRST)
        c.subscribe(topic, "*")
        c.register_orderly(listener)
        # what the consumer commits (in memory) against the highest offset re-consumed at that moment
        violations: list[tuple[int, int]] = []

        async def watch() -> None:
            while True:
                off = c.offsets.read_memory(mq)
                if reconsumed and off is not None and off > max(reconsumed) + 1:
                    violations.append((off, max(reconsumed)))
                await asyncio.sleep(0.005)

        await c.start()
        watcher = asyncio.ensure_future(watch())
        assert await wait_until(lambda: len(done) >= 30, 15), done
        await _mqadmin("resetOffsetByTime", "-n", broker.namesrv_addr, "-g", group, "-t", topic, "-s", "0")
        consumed_at_reset = len(done)
        await produce(inst, topic, 1, "new")  # wakes the parked pull: it gets OFFSET_ILLEGAL now
        done_at_wake = len(done)
        stopped = await wait_until(stop.is_set, 15)
        api = ConsumerApi(inst, group)
        committed: list[int | None] = []
        deadline = time.monotonic() + 8  # the consumer persists its offsets every PERSIST_S
        while time.monotonic() < deadline:
            committed.append(await api.query_consumer_offset(mq))
            if committed[-1] == redo:
                break
            await asyncio.sleep(0.2)
        progress = await _mqadmin("consumerProgress", "-n", broker.namesrv_addr, "-g", group)
        watcher.cancel()
        finished = done[:]  # the message blocked in the listener finishes once released: not part of the check
        release.set()
        await c.shutdown()
        await inst.shutdown()
        return finished, consumed_at_reset, done_at_wake, stopped, violations, committed, progress

    done, consumed_at_reset, done_at_wake, stopped, violations, committed, progress = run(go(), 60)
    assert consumed_at_reset < n - 40, "the backlog was consumed before the reset: the test proves nothing"
    assert stopped, done[consumed_at_reset:]
    # after the reset: at most the batch that was in the listener, then 0, 1, 2, ... in order; no
    # message of the old backlog past the reset point comes before them
    after = done[done_at_wake:]
    first = after.index(0)
    assert first <= 1, after[:40]
    assert after[first:] == list(range(redo)), after[:40]
    # the offset never runs ahead of the re-consumption: stopped now, the group resumes at offset redo
    assert not violations, violations[:10]
    assert committed and all(o is not None and o <= redo for o in committed), committed
    assert committed[-1] == redo, committed
    row = next(line.split() for line in progress.splitlines() if line.startswith(topic + " "))
    assert str(redo) in row, progress


def test_a_dropped_process_queue_commits_nothing() -> None:
    """Batches of a dropped queue that finish late (concurrent or orderly) give no offset to commit."""
    concurrent, orderly = ProcessQueue(), ProcessQueue()
    msgs = [msg(i) for i in range(5)]
    concurrent.put(msgs)
    orderly.put(msgs)
    assert orderly.take(2) == msgs[:2]
    concurrent.dropped = orderly.dropped = True
    assert concurrent.remove(msgs[:2]) == -1
    assert concurrent.remove(msgs[2:]) == -1
    assert orderly.commit() == -1
    assert orderly.commit() == -1  # the taken messages are gone, not committed later
