"""What the Python Producer refuses before sending (Java's Validators.checkMessage and more), through a
real mqbroker: an empty body, a 0x01/0x02 separator in a property name or a 0x02 in a tag, key or
property value (the broker would decode other properties from them), properties over 32,767 bytes.
A 0x01 inside a value is sent and stored, as Java's client and Apache's broker do (the decoder splits
a pair at its first 0x01). Each is a MessageCheckError naming
the field or size and the limit; nothing is stored; in an AutoBatch only the bad message's send
fails. The broker itself still takes an empty body from other clients, as Apache's broker does."""

from __future__ import annotations

import asyncio
import zlib

import pytest

from broker_core.client.instance import MQClientInstance
from broker_core.client.message import Message, MessageCheckError, decode_records
from broker_core.client.producer import LocalTransactionState, Producer, SendStatus, TransactionProducer
from broker_core.client.pull_consumer import PullConsumer
from broker_core.common.response_code import ResponseCode
from broker_core.remoting.bodies import MessageQueue
from broker_core.store.codec.message import MessageInner, encode_record
from broker_core.store.codec.sys_flag import COMPRESSED_FLAG
from tests.client.conftest import create_topic, wait_dispatched
from tests.client.test_client_produce_pull import _pull_all, run
from tests.remoting_broker import BrokerProcess

SEPARATOR_CASES = {
    "tag": dict(tags="a\x02b\x01c"),
    "keys": dict(keys="k1\x02KEYS\x01evil"),
    "key list": dict(keys=["k1", "x\x02y"]),
    "property name": dict(properties={"a\x01b": "c"}),
    "property value": dict(properties={"p": "v\x02KEYS\x01evil"}),
}


class _Listener:
    def execute_local_transaction(self, msg: Message, arg: object) -> LocalTransactionState:
        return LocalTransactionState.COMMIT_MESSAGE

    def check_local_transaction(self, msg: object) -> LocalTransactionState:
        return LocalTransactionState.COMMIT_MESSAGE


async def _stored(inst: MQClientInstance, topic: str) -> list:
    c = PullConsumer(topic + "_Probe", inst)
    await c.start()
    try:
        return await _pull_all(c, topic)
    finally:
        await c.shutdown()


def test_separators_are_refused_on_every_send_path(broker: BrokerProcess, unique: str) -> None:
    async def go():
        inst = MQClientInstance(broker.namesrv_addr)
        await create_topic(inst, broker.broker_addr, unique, queues=1)
        p = Producer(unique + "P", inst)
        tp = TransactionProducer(unique + "TP", inst, _Listener())
        await p.start()
        await tp.start()
        errors: dict[tuple[str, str], str] = {}
        for name, fields in SEPARATOR_CASES.items():
            sends = {"send": lambda m: p.send(m), "send_oneway": lambda m: p.send_oneway(m),
                     "send_batch": lambda m: p.send_batch([Message(unique, b"fine"), m]),
                     "send_in_transaction": lambda m: tp.send_in_transaction(m)}
            for path, call in sends.items():
                try:
                    await call(Message(unique, b"body", **fields))
                    errors[(name, path)] = "accepted"
                except MessageCheckError as e:
                    errors[(name, path)] = e.message
        await asyncio.sleep(0.5)  # a oneway send that got through would be stored by now
        stored = await _stored(inst, unique)
        await tp.shutdown()
        await p.shutdown()
        await inst.shutdown()
        return errors, stored

    errors, stored = run(go())
    for (name, path), text in errors.items():
        assert "contains a property separator" in text, (name, path, text)
    assert "batch message 1:" in errors[("tag", "send_batch")]
    assert "property TAGS 'a\\x02b\\x01c'" in errors[("tag", "send")]
    assert stored == []


def test_properties_over_the_limit_are_refused_before_sending(broker: BrokerProcess, unique: str) -> None:
    async def go():
        inst = MQClientInstance(broker.namesrv_addr)
        await create_topic(inst, broker.broker_addr, unique, queues=1)
        p = Producer(unique + "P", inst)
        await p.start()
        errors = []
        big = Message(unique, b"b", properties={"big": "v" * 40_000})
        for call in (lambda: p.send_batch([Message(unique, b"a"), big]), lambda: p.send(big)):
            with pytest.raises(MessageCheckError) as ei:
                await call()
            errors.append(ei.value)
        stored = await _stored(inst, unique)
        await p.shutdown()
        await inst.shutdown()
        return errors, stored

    errors, stored = run(go())
    batch, single = errors
    assert batch.message.startswith("batch message 1: the message properties size ")
    for e in errors:
        assert "exceeds the limit of 32767 bytes" in str(e) and e.code == ResponseCode.MESSAGE_ILLEGAL
    assert stored == []


@pytest.mark.parametrize("bad", [
    pytest.param(Message("", b"bad", properties={"a\x01b": "c"}), id="separator"),
    pytest.param(Message("", b"bad", properties={"big": "v" * 33_000}), id="properties-33k"),
    pytest.param(Message("", b"bad", properties={"big": "v" * 70_000}), id="properties-70k"),
    pytest.param(Message("", b""), id="empty-body"),
])
def test_autobatch_one_bad_message_fails_alone(broker: BrokerProcess, unique: str, bad: Message) -> None:
    async def go():
        inst = MQClientInstance(broker.namesrv_addr)
        await create_topic(inst, broker.broker_addr, unique, queues=1)
        p = Producer(unique + "P", inst, auto_batch=True, batch_max_delay_ms=200)
        await p.start()
        bad.topic = unique
        good = [p.send(Message(unique, f"good{i}".encode())) for i in range(4)]
        results = await asyncio.gather(*good[:2], p.send(bad), *good[2:], return_exceptions=True)
        if not any(isinstance(r, BaseException) for r in results[:2] + results[3:]):
            await wait_dispatched(inst, unique, broker.broker_name, {0: 4})
        stored = await _stored(inst, unique)
        await p.shutdown()
        await inst.shutdown()
        return results, stored

    results, stored = run(go())
    error = results.pop(2)
    assert isinstance(error, MessageCheckError), error
    assert all(getattr(r, "status", r) == SendStatus.SEND_OK for r in results), results
    assert sorted(m.body for m in stored) == [b"good0", b"good1", b"good2", b"good3"]


def test_empty_body_is_refused_by_the_producer_but_taken_by_the_broker(broker: BrokerProcess, unique: str) -> None:
    async def go():
        inst = MQClientInstance(broker.namesrv_addr)
        await create_topic(inst, broker.broker_addr, unique, queues=1)
        p = Producer(unique + "P", inst)
        tp = TransactionProducer(unique + "TP", inst, _Listener())
        await p.start()
        await tp.start()
        errors = []
        for call in (lambda: p.send(Message(unique, b"")), lambda: p.send_oneway(Message(unique, b"")),
                     lambda: p.send_batch([Message(unique, b"x"), Message(unique, b"")]),
                     lambda: tp.send_in_transaction(Message(unique, b""))):
            try:
                await call()
                errors.append("accepted")
            except MessageCheckError as e:
                errors.append(e.message)
        await asyncio.sleep(0.5)
        before = await _stored(inst, unique)
        # another client's empty body (a raw SEND_MESSAGE_V2): the broker stores it, as Apache's does
        mq = MessageQueue(topic=unique, broker_name=broker.broker_name, queue_id=0)
        conn = await inst.connection(broker.broker_addr)
        resp = await conn.invoke(p._request(mq, b"", {"WAIT": "true"}, 0, 0, False), 10)
        await wait_dispatched(inst, unique, broker.broker_name, {0: 1})
        after = await _stored(inst, unique)
        await tp.shutdown()
        await p.shutdown()
        await inst.shutdown()
        return errors, before, resp.code, after

    errors, before, code, after = run(go())
    assert all("the message body length is zero" in e for e in errors), errors
    assert errors[2].startswith("batch message 1:")
    assert before == []
    assert code == ResponseCode.SUCCESS and [m.body for m in after] == [b""]


def test_decode_records_clears_compressed_flag_once_inflated() -> None:
    """As Java's MessageDecoder (``sysFlag &= ~COMPRESSED_FLAG`` after inflating); a body that does
    not inflate keeps the flag, since it is still the stored bytes."""
    original = b"compressed body " * 500

    def record(body: bytes) -> bytes:
        msg = MessageInner("T", body, {"UNIQ_KEY": "A"}, sys_flag=COMPRESSED_FLAG, born_host=("127.0.0.1", 1))
        return bytes(encode_record(msg, 0, 0, 1))

    [m] = decode_records(record(zlib.compress(original)))
    assert m.body == original and m.sys_flag & COMPRESSED_FLAG == 0
    [raw] = decode_records(record(zlib.compress(original)), decompress=False)
    assert raw.body == zlib.compress(original) and raw.sys_flag & COMPRESSED_FLAG
    [torn] = decode_records(record(b"not zlib"))
    assert torn.body == b"not zlib" and torn.sys_flag & COMPRESSED_FLAG


@pytest.mark.parametrize("kind", ["LZ4", "ZSTD"])
def test_decode_records_decompresses_lz4_and_zstd_bodies(kind: str) -> None:
    """A Java 5.x producer with compressType=LZ4 or ZSTD writes an LZ4 frame or a zstd frame and marks the
    type in SYSFLAG bits 8-10; the pulled message is the body as sent, the type bits kept (as Java)."""
    import lz4.frame
    import zstandard

    original = b"compressed body " * 500
    flag, body = {"LZ4": (0x100, lz4.frame.compress(original)),
                  "ZSTD": (0x200, zstandard.ZstdCompressor().compress(original))}[kind]
    msg = MessageInner("T", body, {"UNIQ_KEY": "A"}, sys_flag=COMPRESSED_FLAG | flag, born_host=("127.0.0.1", 1))
    [m] = decode_records(bytes(encode_record(msg, 0, 0, 1)))
    assert (m.body, m.sys_flag) == (original, flag)


def test_body_over_max_message_size_is_refused_and_the_connection_keeps_working(broker: BrokerProcess,
                                                                                unique: str) -> None:
    """As Java's Validators.checkMessage with DefaultMQProducer.maxMessageSize (4 MiB): a larger body, on
    every send path, and a batch whose whole body is larger, are refused before anything is sent; a
    17 MiB body (over the 16 MiB frame limit) no longer resets the connection other sends share."""
    limit = 4 * 1024 * 1024
    over = Message(unique, b"x" * (limit + 1))
    huge = Message(unique, b"h" * (17 * 1024 * 1024))

    async def go():
        inst = MQClientInstance(broker.namesrv_addr)
        await create_topic(inst, broker.broker_addr, unique, queues=1)
        p = Producer(unique + "P", inst)
        ab = Producer(unique + "AB", inst, auto_batch=True)
        small = Producer(unique + "S", inst, max_message_size=1024)
        tp = TransactionProducer(unique + "TP", inst, _Listener())
        for prod in (p, ab, small, tp):
            await prod.start()
        calls = {"send": lambda: p.send(over), "send 17 MiB": lambda: p.send(huge),
                 "send_oneway": lambda: p.send_oneway(huge), "auto_batch": lambda: ab.send(over),
                 "send_batch item": lambda: p.send_batch([Message(unique, b"a"), over]),
                 "send_batch whole": lambda: p.send_batch([Message(unique, b"q" * (limit // 4)) for _ in range(4)]),
                 "send_in_transaction": lambda: tp.send_in_transaction(over),
                 "max_message_size=1024": lambda: small.send(Message(unique, b"s" * 1025))}
        errors: dict[str, str] = {}
        for name, call in calls.items():
            try:
                await call()
                errors[name] = "accepted"
            except MessageCheckError as e:
                errors[name] = e.message
        at_limit = await p.send(Message(unique, b"L" * limit))  # exactly maxMessageSize is fine
        after = await p.send(Message(unique, b"after"))
        await wait_dispatched(inst, unique, broker.broker_name, {0: 2})
        stored = await _stored(inst, unique)
        for prod in (tp, small, ab, p):
            await prod.shutdown()
        await inst.shutdown()
        return errors, at_limit, after, stored

    errors, at_limit, after, stored = run(go())
    for name, text in errors.items():
        want = 1024 if name == "max_message_size=1024" else limit
        assert text.startswith("batch message 1: " if name == "send_batch item" else "the message body size"), \
            (name, text)
        assert f"the message body size over max value, MAX: {want}" in text, (name, text)
    assert at_limit.status == SendStatus.SEND_OK and after.status == SendStatus.SEND_OK
    assert [len(m.body) for m in stored] == [limit, 5]


def test_a_queue_of_another_topic_is_refused_on_every_send_path(broker: BrokerProcess, unique: str) -> None:
    """The request takes its topic from the queue: a message for topic A sent to a queue of topic B was
    stored in B, answered SEND_OK, and A's consumers never saw it. Java refuses it ("message's topic not
    equal mq's topic"); so does every send path here, AutoBatch included, and nothing is stored."""
    orders, audit = unique + "Orders", unique + "Audit"

    async def go():
        inst = MQClientInstance(broker.namesrv_addr)
        for topic in (orders, audit):
            await create_topic(inst, broker.broker_addr, topic, queues=1)
        audit_q0 = MessageQueue(topic=audit, broker_name=broker.broker_name, queue_id=0)
        p = Producer(unique + "P", inst)
        batching = Producer(unique + "AB", inst, auto_batch=True, batch_max_delay_ms=50)
        await p.start()
        await batching.start()
        sends = {"send": lambda: p.send(Message(orders, b"o"), audit_q0),
                 "send_async": lambda: p.send_async(Message(orders, b"o"), mq=audit_q0),
                 "send_oneway": lambda: p.send_oneway(Message(orders, b"o"), audit_q0),
                 "send_batch": lambda: p.send_batch([Message(orders, b"o")], audit_q0),
                 "auto_batch": lambda: batching.send(Message(orders, b"o"), audit_q0)}
        errors = {}
        for path, call in sends.items():
            with pytest.raises(MessageCheckError) as ei:
                await call()
            errors[path] = ei.value.message
        await asyncio.sleep(0.5)  # a oneway send that got through would be stored by now
        stored = await _stored(inst, audit)
        ok = await p.send(Message(audit, b"a"), audit_q0)  # the right topic still goes
        await batching.shutdown()
        await p.shutdown()
        await inst.shutdown()
        return errors, stored, ok

    errors, stored, ok = run(go())
    for path, text in errors.items():
        assert text == f"message's topic {orders!r} is not the queue's topic {audit!r}; nothing was sent", path
    assert stored == []
    assert ok.status == SendStatus.SEND_OK and ok.message_queue.topic == audit
