"""A 0x01 inside a property value, through a real mqbroker with our Producer: sent and read back as sent
on every send path. Java's client checks no separator in putUserProperty and Apache's broker stores
the value: MessageDecoder.string2messageProperties splits a pair at its first 0x01, so ``a 0x01 b``
reads back whole. Our producer refused it before sending ("property pv 'a\\x01b' contains a property
separator"), as the broker did from other clients (ali-ons: tests/interop)."""

from __future__ import annotations

import asyncio

from broker_core.client.instance import MQClientInstance
from broker_core.client.message import Message
from broker_core.client.producer import Producer, TransactionProducer
from tests.client.conftest import create_topic
from tests.client.test_client_message_checks import _Listener, _stored
from tests.client.test_client_produce_pull import run
from tests.remoting_broker import BrokerProcess


def test_a_x01_inside_a_value_is_sent_and_read_back_on_every_send_path(broker: BrokerProcess, unique: str) -> None:
    """send, send_oneway, send_batch and send_in_transaction: TAGS, KEYS and a user property with 0x01 in
    their values are pulled back byte for byte."""
    async def go():
        inst = MQClientInstance(broker.namesrv_addr)
        await create_topic(inst, broker.broker_addr, unique, queues=1)
        p = Producer(unique + "P", inst)
        tp = TransactionProducer(unique + "TP", inst, _Listener())
        await p.start()
        await tp.start()

        def msg(path: str) -> Message:
            return Message(unique, path.encode(), tags="t\x01x", keys=["k\x01y"], properties={"pv": "a\x01b"})

        await p.send(msg("send"))
        await p.send_oneway(msg("send_oneway"))
        await p.send_batch([msg("send_batch")])
        await tp.send_in_transaction(msg("send_in_transaction"))
        for _ in range(50):
            stored = await _stored(inst, unique)
            if len(stored) == 4:
                break
            await asyncio.sleep(0.1)
        await tp.shutdown()
        await p.shutdown()
        await inst.shutdown()
        return stored

    stored = run(go())
    assert sorted(m.body for m in stored) == [b"send", b"send_batch", b"send_in_transaction", b"send_oneway"]
    for m in stored:
        assert (m.properties["pv"], m.tags, m.keys) == ("a\x01b", "t\x01x", "k\x01y"), m.properties
