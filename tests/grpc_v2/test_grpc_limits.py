"""gRPC SendMessage limits and encodings, against real servers.

- a GZIP-encoded body is stored flagged COMPRESSED (upstream SendMessageActivity.buildSysFlag), so a
  remoting consumer, a raw gRPC receiver (IDENTITY) and the official client all get the original body;
- the body limit is the broker's live maxMessageSize (updateBrokerConfig), for the Settings a
  producer gets and for the SendMessage check, answered MESSAGE_BODY_TOO_LARGE;
- the broker's own property-size refusal keeps the MESSAGE_PROPERTIES_TOO_LARGE code.
"""

from __future__ import annotations

import asyncio
import uuid
import zlib
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from google.protobuf.duration_pb2 import Duration

from broker_core.broker.send import BodyTooLargeError, PropertiesTooLargeError
from broker_core.client.instance import MQClientInstance
from broker_core.client.pull_consumer import PullConsumer
from broker_core.net.grpc_v2.service import _rpc_error
from broker_core.net.grpc_v2.stubs import pb, service_pb2_grpc
from broker_core.remoting.bodies import MessageQueue
from broker_core.store.codec.sys_flag import COMPRESSED_FLAG
from tests.client.conftest import create_topic
from tests.remoting_broker import BrokerProcess, running_broker
from tests.waiting import wait_all_dispatched, wait_dispatched

from .conftest import RunningGrpcBroker, run_scenario, start_grpc_broker, stop_grpc_broker

MD = (("x-mq-client-id", "limits@1@0@abc"), ("x-mq-language", "PYTHON"), ("x-mq-client-version", "5.1.2"))
R = pb.Resource
ORIGINAL = b"gzip-encoded body " * 400  # 7200 bytes


def wire(topic: str, body: bytes, encoding: int = pb.Encoding.IDENTITY, **sp: object) -> object:
    system = pb.SystemProperties(message_id=uuid.uuid4().hex.upper(), message_type=pb.MessageType.NORMAL,
                                 body_encoding=encoding, **sp)
    return pb.Message(topic=R(name=topic), body=body, system_properties=system)


def send(stub: service_pb2_grpc.MessagingServiceStub, message: object) -> object:
    return stub.SendMessage(pb.SendMessageRequest(messages=[message]), metadata=MD, timeout=10).status


def channel(address: str) -> grpc.Channel:
    return grpc.insecure_channel(address, options=[("grpc.max_send_message_length", 64 << 20),
                                                   ("grpc.max_receive_message_length", 64 << 20)])


# ------------------------------------------------------------------------- body_encoding=GZIP
@pytest.fixture(scope="module")
def process(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """mqbroker with its remoting and gRPC endpoints: a gRPC send, consumed over both protocols."""
    with running_broker(Path(tmp_path_factory.mktemp("grpc-limits"))) as b:
        yield b


def _pull(broker: BrokerProcess, topic: str, n: int) -> list:
    async def go() -> list:
        inst = MQClientInstance(broker.namesrv_addr)
        await create_topic(inst, broker.broker_addr, topic, queues=1)
        consumer = PullConsumer(topic + "_C", inst)
        await consumer.start()
        try:
            mq = MessageQueue(topic=topic, broker_name=broker.broker_name, queue_id=0)
            for _ in range(100):
                got = (await consumer.pull(mq, "*", 0, 32)).messages
                if len(got) >= n:
                    return got
                await asyncio.sleep(0.1)
            raise AssertionError(f"pulled {len(got)} of {n} messages from {topic} in 10 s")
        finally:
            await consumer.shutdown()
            await inst.shutdown()

    return asyncio.run(asyncio.wait_for(go(), 60))


def _create(broker: BrokerProcess, topic: str) -> None:
    async def go() -> None:
        inst = MQClientInstance(broker.namesrv_addr)
        try:
            await create_topic(inst, broker.broker_addr, topic, queues=1)
        finally:
            await inst.shutdown()

    asyncio.run(go())


def test_a_gzip_body_is_stored_compressed_and_every_consumer_gets_the_original(process: BrokerProcess,
                                                                               tmp_path: Path) -> None:
    topic = "GzipT"
    _create(process, topic)
    assert process.grpc_addr is not None
    stub = service_pb2_grpc.MessagingServiceStub(channel(process.grpc_addr))
    assert send(stub, wire(topic, zlib.compress(ORIGINAL), pb.Encoding.GZIP, keys=["g1"])).code == pb.Code.OK
    # IDENTITY and UNSPECIFIED are plain bodies, as upstream (only GZIP sets COMPRESSED_FLAG)
    assert send(stub, wire(topic, b"plain-identity", pb.Encoding.IDENTITY, keys=["i1"])).code == pb.Code.OK
    assert send(stub, wire(topic, b"plain-unspecified", pb.Encoding.ENCODING_UNSPECIFIED,
                           keys=["u1"])).code == pb.Code.OK

    # a remoting consumer (Java's MessageDecoder rules): inflated, COMPRESSED_FLAG cleared once inflated
    got = {m.keys: m for m in _pull(process, topic, 3)}
    assert got["g1"].body == ORIGINAL and not got["g1"].sys_flag & COMPRESSED_FLAG
    assert got["i1"].body == b"plain-identity" and got["u1"].body == b"plain-unspecified"

    # a raw gRPC receiver: the body inflated, IDENTITY (upstream's default proxy decodes popped messages
    # with decompressBody on), as every other consumer gets it
    req = pb.ReceiveMessageRequest(group=R(name="GzipG"), message_queue=pb.MessageQueue(topic=R(name=topic), id=0),
                                   batch_size=8, invisible_duration=Duration(seconds=30),
                                   long_polling_timeout=Duration(seconds=5))
    items = list(stub.ReceiveMessage(req, metadata=MD, timeout=15))
    wires = {tuple(i.message.system_properties.keys): i.message for i in items if i.HasField("message")}
    gz = wires[("g1",)]
    assert gz.system_properties.body_encoding == pb.Encoding.IDENTITY and gz.body == ORIGINAL
    assert wires[("i1",)].system_properties.body_encoding == pb.Encoding.IDENTITY
    assert wires[("u1",)].system_properties.body_encoding == pb.Encoding.IDENTITY

    # the official client, from a group of its own
    home = tmp_path / "home"
    home.mkdir()
    out = run_scenario(process.grpc_addr, home, "simple_consume", topic=topic, group="GzipOfficial", expect=3)
    bodies = {tuple(m["keys"]): m["body"] for m in out["received"]}
    assert bodies[("g1",)] == ORIGINAL.decode() and bodies[("i1",)] == "plain-identity"


# ------------------------------------------------------------------------- the live maxMessageSize
@pytest.fixture
def small(tmp_path: Path) -> Iterator[RunningGrpcBroker]:
    home = tmp_path / "home"
    home.mkdir()
    running = start_grpc_broker(tmp_path / "store", home, {"maxMessageSize": "1024"})
    try:
        running.broker.create_or_update_topic("Lim", 1, 1)
        yield running
    finally:
        stop_grpc_broker(running)


def test_updated_max_message_size_applies_to_grpc_sends(small: RunningGrpcBroker) -> None:
    b = small.broker
    stub = service_pb2_grpc.MessagingServiceStub(channel(small.address))
    assert send(stub, wire("Lim", b"x" * 2000)).code == pb.Code.MESSAGE_BODY_TOO_LARGE
    b.update_broker_config({"maxMessageSize": str(8 << 20)})
    assert send(stub, wire("Lim", b"x" * (5 << 20))).code == pb.Code.OK  # raised: taken at once
    b.update_broker_config({"maxMessageSize": "1000"})
    wait_dispatched(b, "Lim", 0, 1)  # the 5 MiB send's dispatch, or it lands after `before` is read
    before = b.get_max_offset("Lim", 0)
    got = send(stub, wire("Lim", b"x" * 1001))  # lowered: the specific code, not BAD_REQUEST
    assert got.code == pb.Code.MESSAGE_BODY_TOO_LARGE and "1001" in got.message and "1000" in got.message
    assert b.get_max_offset("Lim", 0) == before
    assert send(stub, wire("Lim", b"x" * 1000)).code == pb.Code.OK


def test_producer_settings_carry_the_live_max_message_size(small: RunningGrpcBroker) -> None:
    """The official producer takes publishing.max_body_size as its own limit: raised after start, a
    2000-byte body must go through (it used to be refused client-side against the start-up 1024)."""
    small.broker.update_broker_config({"maxMessageSize": "8192"})
    out = small.client("produce", topic="Lim", count=1, prefix="y" * 2000)
    assert out["errors"] == [] and len(out["sent"]) == 1
    wait_all_dispatched(small.broker)  # the send is answered before the reput thread puts it in the queue
    assert small.broker.get_max_offset("Lim", 0) == 1


def test_broker_size_refusals_keep_their_grpc_codes(small: RunningGrpcBroker) -> None:
    # properties the broker can only refuse at the store (a trace context past the 32767-byte cap)
    stub = service_pb2_grpc.MessagingServiceStub(channel(small.address))
    got = send(stub, wire("Lim", b"x", trace_context="t" * 40_000))
    assert got.code == pb.Code.MESSAGE_PROPERTIES_TOO_LARGE and "32767" in got.message
    assert small.broker.get_max_offset("Lim", 0) == 0
    # a limit lowered between the endpoint's check and the store's: still MESSAGE_BODY_TOO_LARGE
    assert _rpc_error(BodyTooLargeError("message body size 9 exceeds maxMessageSize 8")).code == \
        pb.Code.MESSAGE_BODY_TOO_LARGE
    assert _rpc_error(PropertiesTooLargeError("properties size 40000 exceeds 32767 bytes")).code == \
        pb.Code.MESSAGE_PROPERTIES_TOO_LARGE
