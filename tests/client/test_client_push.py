"""Push consumers (concurrent, orderly, cluster rebalancing, retry) and transactions over a real mqbroker."""

from __future__ import annotations

import asyncio
import time

from broker_core.client.consumer_api import ConsumerApi
from broker_core.client.instance import ClientStateError, MQClientInstance
from broker_core.client.message import Message
from broker_core.client.producer import LocalTransactionState, Producer, TransactionProducer
from broker_core.client.push_consumer import ConsumeConcurrentlyStatus, ConsumeOrderlyStatus, PushConsumer
from broker_core.client.rebalance import ConsumeFromWhere
from broker_core.store.codec.message import MessageExt
from tests.client.conftest import create_topic
from tests.remoting_broker import BrokerProcess

FIRST = ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET


def run(coro, timeout: float = 90.0):
    return asyncio.run(asyncio.wait_for(coro, timeout))


async def wait_until(cond, timeout: float = 20.0) -> bool:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(0.05)
    return True


def test_push_consumer_gets_its_tags_and_commits_offsets(broker: BrokerProcess, unique: str) -> None:
    async def go():
        inst = MQClientInstance(broker.namesrv_addr)
        await create_topic(inst, broker.broker_addr, unique)
        got: list[MessageExt] = []
        c = PushConsumer(unique + "G", inst, consume_from=FIRST)
        c.subscribe(unique, "TagA || TagC")

        def listener(msgs: list[MessageExt]) -> ConsumeConcurrentlyStatus:
            got.extend(msgs)
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

        c.register_concurrently(listener)
        await c.start()
        try:  # a second start would pull every queue twice (each message consumed twice): refused
            await c.start()
            second_start = "accepted"
        except ClientStateError as e:
            second_start = str(e)
        p = Producer(unique + "P", inst)
        await p.start()
        for i in range(30):
            await p.send(Message(unique, f"m{i}".encode(), tags=("TagA", "TagB", "TagC")[i % 3]))
        want = {f"m{i}".encode() for i in range(30) if i % 3 != 1}
        ok = await wait_until(lambda: {m.body for m in got} >= want)
        await c.shutdown()  # persists offsets
        api = ConsumerApi(inst, unique + "G")
        committed = {mq.queue_id: await api.query_consumer_offset(mq) for mq in await api.subscribe_queues(unique)}
        maxes = {mq.queue_id: await api.max_offset(mq) for mq in await api.subscribe_queues(unique)}
        await p.shutdown()
        await inst.shutdown()
        return ok, got, want, committed, maxes, second_start

    ok, got, want, committed, maxes, second_start = run(go())
    assert second_start == f"push consumer {unique}G is already started"
    assert ok and {m.body for m in got} == want
    assert len(got) == len(want)  # one pull loop a queue: nothing consumed twice
    # every queue committed past what was consumed from it (a filtered-out tail may still be held by the
    # broker's long poll, as in RocketMQ, so the commit can stop just before it)
    for qid, off in committed.items():
        consumed = [m.queue_offset for m in got if m.queue_id == qid]
        assert off is not None and off >= max(consumed, default=-1) + 1 and off <= maxes[qid]


def test_two_consumers_of_a_group_split_the_queues(broker: BrokerProcess, unique: str) -> None:
    async def go():
        setup = MQClientInstance(broker.namesrv_addr)
        await create_topic(setup, broker.broker_addr, unique, queues=4)
        seen: dict[str, list[MessageExt]] = {"a": [], "b": []}
        consumers = []
        for name in ("a", "b"):
            inst = MQClientInstance(broker.namesrv_addr, instance_name=f"{unique}-{name}")
            c = PushConsumer(unique + "G", inst, consume_from=FIRST)
            c.subscribe(unique, "*")
            c.register_concurrently(lambda msgs, n=name: seen[n].extend(msgs) or ConsumeConcurrentlyStatus.CONSUME_SUCCESS)
            await c.start()
            consumers.append(c)

        def owned(c: PushConsumer) -> set[int]:
            assert c.rebalancer is not None
            return {mq.queue_id for mq in c.rebalancer.process_queues if mq.topic == unique}

        # NOTIFY_CONSUMER_IDS_CHANGED makes the first consumer give up half of its queues
        split = await wait_until(lambda: owned(consumers[0]) | owned(consumers[1]) == {0, 1, 2, 3}
                                 and not owned(consumers[0]) & owned(consumers[1])
                                 and len(owned(consumers[0])) == 2, 15)
        p = Producer(unique + "P", setup)
        await p.start()
        for i in range(40):
            await p.send(Message(unique, f"m{i}".encode()))
        ok = await wait_until(lambda: len({m.body for m in seen["a"] + seen["b"]}) == 40)
        shares = [owned(c) for c in consumers]
        for c in consumers:
            await c.shutdown()
            await c.instance.shutdown()
        await setup.shutdown()
        return split, ok, shares, seen

    split, ok, shares, seen = run(go())
    assert split, f"queues not split: {shares}"
    assert ok
    assert {m.queue_id for m in seen["a"]} <= shares[0] and {m.queue_id for m in seen["b"]} <= shares[1]


def test_failed_message_comes_back_through_the_retry_topic(broker: BrokerProcess, unique: str) -> None:
    async def go():
        inst = MQClientInstance(broker.namesrv_addr)
        await create_topic(inst, broker.broker_addr, unique, queues=1)
        got: list[tuple[bytes, int, str]] = []

        def listener(msgs: list[MessageExt]) -> ConsumeConcurrentlyStatus:
            m = msgs[0]
            got.append((m.body, m.reconsume_times, m.topic))
            return ConsumeConcurrentlyStatus.RECONSUME_LATER if m.reconsume_times == 0 \
                else ConsumeConcurrentlyStatus.CONSUME_SUCCESS

        c = PushConsumer(unique + "G", inst, consume_from=FIRST)
        c.subscribe(unique, "*")
        c.register_concurrently(listener)
        await c.start()
        p = Producer(unique + "P", inst)
        await p.start()
        await p.send(Message(unique, b"flaky"))
        ok = await wait_until(lambda: len(got) >= 2, 30)
        await c.shutdown()
        await inst.shutdown()
        return ok, got

    ok, got = run(go())
    assert ok, got
    assert got[0] == (b"flaky", 0, unique)
    assert got[1] == (b"flaky", 1, unique)  # redelivered from %RETRY%group, shown under its own topic


def test_orderly_consumer_keeps_order_through_a_failure_and_holds_the_lock(broker: BrokerProcess,
                                                                           unique: str) -> None:
    async def go():
        inst = MQClientInstance(broker.namesrv_addr)
        await create_topic(inst, broker.broker_addr, unique, queues=2)
        p = Producer(unique + "P", inst)
        await p.start()
        for i in range(20):
            await p.send_orderly(Message(unique, f"{i:02d}".encode()), "the-key")
        got: list[bytes] = []
        failed_once: set[bytes] = set()

        def listener(msgs: list[MessageExt]) -> ConsumeOrderlyStatus:
            body = msgs[0].body
            got.append(body)
            if body == b"07" and body not in failed_once:
                failed_once.add(body)
                return ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT
            return ConsumeOrderlyStatus.SUCCESS

        c = PushConsumer(unique + "G", inst, consume_from=FIRST)
        c.subscribe(unique, "*")
        c.register_orderly(listener)
        await c.start()
        ok = await wait_until(lambda: len(got) >= 21, 30)
        # another client of the group cannot take a queue this one has locked
        other = MQClientInstance(broker.namesrv_addr, instance_name=unique + "-other")
        await other.get_route(unique)
        api = ConsumerApi(other, unique + "G")
        assert c.rebalancer is not None
        mine = sorted(c.rebalancer.process_queues)
        stolen = await api.lock_batch(mine[0].broker_name, mine)
        await c.shutdown()  # unlocks
        freed = await api.lock_batch(mine[0].broker_name, mine)
        await other.shutdown()
        await inst.shutdown()
        return ok, got, stolen, freed, mine

    ok, got, stolen, freed, mine = run(go())
    assert ok
    expected = [f"{i:02d}".encode() for i in range(20)]
    assert got == expected[:8] + expected[7:]  # "07" twice, nothing overtakes it
    assert stolen == set() and freed == set(mine)


def test_transaction_commit_rollback_and_check_back(broker: BrokerProcess, unique: str) -> None:
    class Listener:
        def __init__(self) -> None:
            self.checked: list[bytes] = []

        def execute_local_transaction(self, msg: Message, arg: object) -> LocalTransactionState:
            return LocalTransactionState(arg)

        def check_local_transaction(self, msg: MessageExt) -> LocalTransactionState:
            self.checked.append(msg.body)
            return LocalTransactionState.COMMIT_MESSAGE

    async def go():
        inst = MQClientInstance(broker.namesrv_addr)
        await create_topic(inst, broker.broker_addr, unique, queues=1)
        listener = Listener()
        tp = TransactionProducer(unique + "TP", inst, listener)
        await tp.start()  # its first route makes the instance heartbeat the broker (check-back needs it)
        got: list[bytes] = []
        c = PushConsumer(unique + "G", inst, consume_from=FIRST)
        c.subscribe(unique, "*")
        c.register_concurrently(lambda msgs: got.extend(m.body for m in msgs)
                                or ConsumeConcurrentlyStatus.CONSUME_SUCCESS)
        await c.start()
        results = [await tp.send_in_transaction(Message(unique, body), state.value) for body, state in (
            (b"commit", LocalTransactionState.COMMIT_MESSAGE), (b"rollback", LocalTransactionState.ROLLBACK_MESSAGE),
            (b"unknown", LocalTransactionState.UNKNOW))]
        ok = await wait_until(lambda: set(got) >= {b"commit", b"unknown"}, 40)
        await asyncio.sleep(1.5)
        await c.shutdown()
        await tp.shutdown()
        await inst.shutdown()
        return ok, got, listener.checked, results

    ok, got, checked, results = run(go())
    assert [r.local_state for r in results] == [LocalTransactionState.COMMIT_MESSAGE,
                                                LocalTransactionState.ROLLBACK_MESSAGE, LocalTransactionState.UNKNOW]
    assert ok, (got, checked)
    assert b"unknown" in checked and sorted(set(got)) == [b"commit", b"unknown"]


def test_a_restarted_transaction_producer_is_asked_about_its_predecessors_halves(broker: BrokerProcess,
                                                                                  unique: str) -> None:
    """A new instance knew no broker before its first send, so its start heartbeated nobody: the half
    left UNKNOW by the producer before the restart found no live producer of the group and was given up
    (TRANS_CHECK_MAX_TIME_TOPIC) after transactionCheckMax checks, never committed."""
    class Listener:
        def __init__(self) -> None:
            self.checked: list[bytes] = []

        def execute_local_transaction(self, msg: Message, arg: object) -> LocalTransactionState:
            return LocalTransactionState.UNKNOW

        def check_local_transaction(self, msg: MessageExt) -> LocalTransactionState:
            self.checked.append(msg.body)
            return LocalTransactionState.COMMIT_MESSAGE

    async def go():
        setup = MQClientInstance(broker.namesrv_addr)
        await create_topic(setup, broker.broker_addr, unique, queues=1)
        await setup.shutdown()
        before = MQClientInstance(broker.namesrv_addr, instance_name=unique + "-before")
        tp = TransactionProducer(unique + "TP", before, Listener())
        await tp.start()
        await tp.send_in_transaction(Message(unique, b"left-unknown"), None)
        await tp.shutdown()  # unregisters: no producer of the group is online
        await before.shutdown()
        after = MQClientInstance(broker.namesrv_addr, instance_name=unique + "-after")
        listener = Listener()
        restarted = TransactionProducer(unique + "TP", after, listener)
        await restarted.start()  # sends nothing: only its start tells the broker it is there
        asked = await wait_until(lambda: b"left-unknown" in listener.checked, 20)
        await restarted.shutdown()
        await after.shutdown()
        return asked, listener.checked

    asked, checked = run(go())
    assert asked, checked


def test_blocking_listener_runs_on_consume_concurrency_threads(broker: BrokerProcess, unique: str) -> None:
    """consume_concurrency (Java's consumeThreadMax) above asyncio's default executor (min(32, cpus + 4)
    threads) really runs that many blocking listener calls at once, on the consumer's own threads, which
    end with the consumer."""
    import threading

    concurrency = 40

    async def go():
        inst = MQClientInstance(broker.namesrv_addr)
        await create_topic(inst, broker.broker_addr, unique)
        p = Producer(unique + "P", inst)
        await p.start()
        for i in range(2 * concurrency):
            await p.send(Message(unique, f"m{i}".encode()))
        lock = threading.Lock()
        enough = threading.Event()
        active = 0
        peak = 0
        done: list[bytes] = []
        names: set[str] = set()

        def listener(msgs: list[MessageExt]) -> ConsumeConcurrentlyStatus:
            nonlocal active, peak
            with lock:
                active += 1
                peak = max(peak, active)
                names.add(threading.current_thread().name)
                if active >= concurrency:
                    enough.set()
            enough.wait(2.0)  # a blocking listener: holds its thread until all ran at once (or 2 s)
            with lock:
                active -= 1
                done.extend(m.body for m in msgs)
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

        c = PushConsumer(unique + "G", inst, consume_from=FIRST, consume_concurrency=concurrency)
        c.subscribe(unique, "*")
        c.register_concurrently(listener)
        await c.start()
        ok = await wait_until(lambda: len(done) >= 2 * concurrency, timeout=30.0)
        await c.shutdown()
        prefix = f"ConsumeMessageThread_{unique}G"
        ended = await wait_until(lambda: not any(t.name.startswith(prefix) for t in threading.enumerate()), 5.0)
        await p.shutdown()
        await inst.shutdown()
        return ok, peak, names, prefix, ended

    ok, peak, names, prefix, ended = run(go())
    assert ok
    assert peak == concurrency
    assert all(n.startswith(prefix) for n in names)
    assert ended  # the consume threads end with the consumer
