"""One mqbroker process serving both protocols: what one client sends, the other consumes."""

from __future__ import annotations

import asyncio

from broker_core.client.consumer_api import PullStatus
from broker_core.client.instance import MQClientInstance
from broker_core.client.message import Message
from broker_core.client.producer import Producer
from broker_core.client.pull_consumer import PullConsumer
from tests.client.conftest import create_topic
from tests.remoting_broker import running_broker

from .conftest import run_scenario


async def _pull_all(consumer: PullConsumer, topic: str) -> list:
    out = []
    for mq in await consumer.fetch_subscribe_queues(topic):
        offset = 0
        while True:
            r = await consumer.pull(mq, "*", offset, 32)
            out.extend(r.messages)
            if r.status != PullStatus.FOUND or r.next_begin_offset == offset:
                break
            offset = r.next_begin_offset
    return out


def test_grpc_to_remoting_and_back(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    with running_broker(tmp_path / "b") as b:
        assert b.grpc_addr is not None

        async def setup_and_send() -> list:
            inst = MQClientInstance(b.namesrv_addr)
            await create_topic(inst, b.broker_addr, "Cross", 2)
            p = Producer("CrossP", inst)
            await p.start()
            sent = [await p.send(Message("Cross", f"remoting-{i}".encode(), tags="R", keys=[f"rk{i}"]))
                    for i in range(4)]
            await p.shutdown()
            await inst.shutdown()
            return sent

        remoting_sent = asyncio.run(asyncio.wait_for(setup_and_send(), 60))
        grpc_sent = run_scenario(b.grpc_addr, home, "produce", topic="Cross", count=4, tag="G", keys="gk")
        assert len(grpc_sent["sent"]) == 4, grpc_sent

        got_grpc = run_scenario(b.grpc_addr, home, "simple_consume", topic="Cross", group="CrossG", expect=8)
        assert {m["id"] for m in got_grpc["received"]} == {s.msg_id for s in remoting_sent} | set(grpc_sent["sent"])
        assert sorted(m["keys"][0] for m in got_grpc["received"] if m["tag"] == "R") == [f"rk{i}" for i in range(4)]

        async def pull() -> list:
            inst = MQClientInstance(b.namesrv_addr)
            c = PullConsumer("CrossPull", inst)
            await c.start()
            msgs = await _pull_all(c, "Cross")
            await c.shutdown()
            await inst.shutdown()
            return msgs

        pulled = asyncio.run(asyncio.wait_for(pull(), 60))
        from_grpc = {m.uniq_key: m for m in pulled if m.get_property("TAGS") == "G"}
        assert set(from_grpc) == set(grpc_sent["sent"])
        assert sorted(m.keys for m in from_grpc.values()) == [f"gk-{i}" for i in range(4)]


def test_grpc_producer_is_asked_about_its_half_in_mqbroker(tmp_path):
    """mqbroker serves remoting and gRPC from one broker: both front ends' check listeners must be
    installed. The remoting one, set after the gRPC endpoint had started, replaced it, so a gRPC
    producer was never asked and its open half was discarded after transactionCheckMax checks."""
    home = tmp_path / "home"
    home.mkdir()
    conf = {"transactionTimeOut": "2000", "transactionCheckInterval": "1000"}
    with running_broker(tmp_path / "b", conf) as b:
        async def setup() -> None:
            inst = MQClientInstance(b.namesrv_addr)
            await create_topic(inst, b.broker_addr, "TxBoth", 2, attributes="+message.type=TRANSACTION")
            await inst.shutdown()

        asyncio.run(asyncio.wait_for(setup(), 60))
        checked = run_scenario(b.grpc_addr, home, "transaction", topic="TxBoth", mode="open", check="commit",
                               prefix="checked", timeout=25)
        assert checked["id"] in checked["checked"], checked
        got = run_scenario(b.grpc_addr, home, "simple_consume", topic="TxBoth", group="TxG", expect=1, timeout=15)
        assert [m["id"] for m in got["received"]] == [checked["id"]]
