"""Broadcasting consumers through a real mqbroker, and the local offsets file (LocalFileOffsetStore)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from broker_core.client.instance import MQClientInstance
from broker_core.client.local_offset_store import (
    LocalFileOffsetStore,
    OffsetFileError,
    format_offsets,
    parse_offsets,
)
from broker_core.client.message import Message
from broker_core.client.producer import Producer
from broker_core.client.push_consumer import ConsumeConcurrentlyStatus, MessageModel, PushConsumer
from broker_core.client.rebalance import ConsumeFromWhere
from broker_core.remoting.bodies import MessageQueue
from tests.client.conftest import create_topic
from tests.client.test_client_produce_pull import run
from tests.remoting_broker import BrokerProcess


class _Receiver:
    def __init__(self) -> None:
        self.bodies: list[bytes] = []

    def __call__(self, msgs: list) -> ConsumeConcurrentlyStatus:
        self.bodies.extend(m.body for m in msgs)
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS


async def _start(namesrv: str, group: str, topic: str, name: str | None, store: Path,
                 consume_from: ConsumeFromWhere = ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET
                 ) -> tuple[PushConsumer, _Receiver]:
    """A broadcasting consumer; ``name`` None: the instance's default name (a new client id each time)."""
    inst = MQClientInstance(namesrv, instance_name=name)
    c = PushConsumer(group, inst, message_model=MessageModel.BROADCASTING, offset_store_dir=str(store),
                     consume_from=consume_from)
    rec = _Receiver()
    c.subscribe(topic, "*")
    c.register_concurrently(rec)
    await c.start()
    return c, rec


async def _stop(c: PushConsumer) -> None:
    await c.shutdown()
    await c.instance.shutdown()


def _committed(c: PushConsumer, topic: str, broker_name: str) -> int:
    """Offsets the consumer has recorded over the topic's 4 queues (what its file will hold)."""
    return sum(c.offsets.read_memory(MessageQueue(topic=topic, broker_name=broker_name, queue_id=q)) or 0
               for q in range(4))


async def _until(pred, timeout: float = 20.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not pred():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError("condition not reached in time")
        await asyncio.sleep(0.05)


def test_broadcasting_consumers_each_get_everything_and_resume_from_their_own_files(
        broker: BrokerProcess, unique: str, tmp_path: Path) -> None:
    group = unique + "G"

    async def go():
        inst = MQClientInstance(broker.namesrv_addr)
        await create_topic(inst, broker.broker_addr, unique, queues=4)
        p = Producer(unique + "P", inst)
        await p.start()
        first = [f"a{i}".encode() for i in range(20)]
        for b in first:
            await p.send(Message(unique, b))
        c1, r1 = await _start(broker.namesrv_addr, group, unique, "one", tmp_path)
        c2, r2 = await _start(broker.namesrv_addr, group, unique, "two", tmp_path)
        bn = broker.broker_name
        await _until(lambda: _committed(c1, unique, bn) == 20 and _committed(c2, unique, bn) == 20)
        await _stop(c2)  # "two" stops; "one" goes on alone
        second = [f"b{i}".encode() for i in range(10)]
        for b in second:
            await p.send(Message(unique, b))
        await _until(lambda: _committed(c1, unique, bn) == 30)
        await _stop(c1)
        third = [f"c{i}".encode() for i in range(5)]
        for b in third:
            await p.send(Message(unique, b))
        files = {f: f.read_text() for f in sorted(tmp_path.glob(f"*/{group}/offsets.json"))}
        c1b, r1b = await _start(broker.namesrv_addr, group, unique, "one", tmp_path)
        c2b, r2b = await _start(broker.namesrv_addr, group, unique, "two", tmp_path)
        await _until(lambda: _committed(c1b, unique, bn) == 35 and _committed(c2b, unique, bn) == 35)
        await asyncio.sleep(1.0)  # nothing more may arrive (no re-delivery from the start)
        await _stop(c1b)
        await _stop(c2b)
        await p.shutdown()
        await inst.shutdown()
        return first, second, third, r1, r2, r1b, r2b, files

    first, second, third, r1, r2, r1b, r2b, files = run(go(), timeout=120)
    assert sorted(r1.bodies) == sorted(first + second)  # each broadcasting consumer got everything
    assert sorted(r2.bodies) == sorted(first)
    assert sorted(r1b.bodies) == sorted(third)  # resumed from its own file
    assert sorted(r2b.bodies) == sorted(second + third)  # its file was older
    assert [f.parent.parent.name for f in files] == ["127.0.0.1@one", "127.0.0.1@two"]
    (f1, t1), (f2, t2) = files.items()
    one, two = parse_offsets(t1, f1), parse_offsets(t2, f2)
    assert sum(one.values()) == 30 and sum(two.values()) == 20  # what each had consumed when it stopped


def test_offsets_file_round_trips_java_format_and_falls_back_to_bak(tmp_path: Path) -> None:
    mq0 = MessageQueue(topic="T%x", broker_name="broker-a", queue_id=0)
    mq1 = MessageQueue(topic="T%x", broker_name="broker-a", queue_id=1)
    text = format_offsets({mq1: 7, mq0: 3})
    assert text == ('{"offsetTable":{{"brokerName":"broker-a","queueId":0,"topic":"T%x"}:3,'
                    '{"brokerName":"broker-a","queueId":1,"topic":"T%x"}:7}}')
    # fastjson's pretty form, as Java's LocalFileOffsetStore writes it, parses too
    pretty = '{\n\t"offsetTable":{{\n\t\t\t"brokerName":"broker-a",\n\t\t\t"queueId":1,\n\t\t\t"topic":"T%x"\n\t\t}:7\n\t}\n}'
    assert parse_offsets(pretty, tmp_path / "p") == {mq1: 7}

    store = LocalFileOffsetStore("127.0.0.1@c", "G", tmp_path)
    store.update(mq0, 3)
    run(store.persist_all())
    store.update(mq0, 5)
    run(store.persist_all())
    assert store.path.with_name("offsets.json.bak").read_text() == format_offsets({mq0: 3})
    store.path.write_text('{"offsetTable":{{"brokerName":"broker-a",')  # torn write: the .bak is used
    again = LocalFileOffsetStore("127.0.0.1@c", "G", tmp_path)
    assert run(again.read_store(mq0)) == 3
    store.path.with_name("offsets.json.bak").write_text("garbage")
    broken = LocalFileOffsetStore("127.0.0.1@c", "G", tmp_path)
    with pytest.raises(OffsetFileError, match=r"offsets\.json: not an offsetTable"):
        broken.load()
    assert store.path.exists() and store.path.with_name("offsets.json.bak").exists()  # nothing deleted
    with pytest.raises(OffsetFileError, match=r"offset \d+: unexpected"):
        parse_offsets('{"offsetTable":{{"brokerName":"b","queueId":0,"topic":"t"}:1, 42}}', tmp_path / "x")


def test_broadcasting_consumer_refuses_to_start_on_an_unreadable_offsets_file(broker: BrokerProcess, unique: str,
                                                                             tmp_path: Path) -> None:
    bad = tmp_path / "127.0.0.1@bad" / (unique + "G") / "offsets.json"
    bad.parent.mkdir(parents=True)
    bad.write_text("{not json")

    async def go():
        with pytest.raises(OffsetFileError, match=str(bad).replace(".", r"\.")):
            await _start(broker.namesrv_addr, unique + "G", unique, "bad", tmp_path)

    run(go())
    assert bad.read_text() == "{not json"


def test_a_broadcasting_consumer_restarted_with_default_names_resumes_from_its_file(
        broker: BrokerProcess, unique: str, tmp_path: Path) -> None:
    """Each process gets a new default client id (pid#time); the offsets file is filed under the id Java
    gives a broadcasting consumer, ip@DEFAULT, so the new process finds it and skips nothing."""
    group = unique + "G"

    async def consume_until(count: int, rec_list: list[bytes]) -> PushConsumer:
        c, rec = await _start(broker.namesrv_addr, group, unique, None, tmp_path,  # a new client id every time
                              ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET)
        await _until(lambda: _committed(c, unique, broker.broker_name) == count)
        rec_list.extend(rec.bodies)
        await _stop(c)
        return c

    async def go():
        inst = MQClientInstance(broker.namesrv_addr)
        await create_topic(inst, broker.broker_addr, unique, queues=4)
        p = Producer(unique + "P", inst)
        await p.start()
        first_run: list[bytes] = []
        second_run: list[bytes] = []
        c1 = None

        async def send(tag: str, n: int) -> None:
            for i in range(n):
                await p.send(Message(unique, f"{tag}{i}".encode()))

        # the first run starts from the last offset (0 on an empty topic) and consumes 6
        task = asyncio.get_running_loop().create_task(consume_until(6, first_run))
        await asyncio.sleep(1.0)
        await send("a", 6)
        c1 = await task
        await send("down", 4)  # sent while no consumer runs
        c2 = await consume_until(10, second_run)
        await p.shutdown()
        await inst.shutdown()
        return c1, c2, first_run, second_run

    c1, c2, first_run, second_run = run(go(), timeout=120)
    assert c1.instance.client_id != c2.instance.client_id
    assert sorted(first_run) == sorted(f"a{i}".encode() for i in range(6))
    assert sorted(second_run) == sorted(f"down{i}".encode() for i in range(4))  # resumed: nothing skipped
    assert [d.name for d in tmp_path.iterdir()] == ["127.0.0.1@DEFAULT"]  # one file, no orphan per process


def test_an_online_broadcasting_group_is_listed_by_consumer_progress(broker: BrokerProcess, unique: str,
                                                                    tmp_path: Path) -> None:
    """Its heartbeat creates the group's %RETRY% topic whatever the message model, as Java's
    ClientManageProcessor.heartBeat does, and consumerProgress (no -g) finds groups by those topics: a
    broadcasting group online was missing from the listing."""
    from tests.net.net_util import mqadmin

    async def go() -> str:
        inst = MQClientInstance(broker.namesrv_addr)
        await create_topic(inst, broker.broker_addr, unique)
        await inst.shutdown()
        c, _ = await _start(broker.namesrv_addr, unique + "G", unique, "listed", tmp_path)
        try:
            return await asyncio.to_thread(mqadmin, broker.namesrv_addr, "consumerProgress", "--output", "json")
        finally:
            await _stop(c)

    rows = json.loads(run(go()))
    row = next((r for r in rows if r["group"] == unique + "G"), None)
    assert row is not None, rows
    assert row["count"] == 1 and row["model"] == "BROADCASTING" and row["type"] == "PUSH", row
