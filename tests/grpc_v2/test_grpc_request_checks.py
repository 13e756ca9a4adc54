"""Requests upstream's proxy refuses as a whole before the broker acts on them."""

from __future__ import annotations

import time
import uuid

import grpc
from google.protobuf.duration_pb2 import Duration

from broker_core.net.grpc_v2.stubs import pb, service_pb2_grpc
from tests.waiting import wait_all_dispatched

from .conftest import RunningGrpcBroker

MD = (("x-mq-client-id", "checks@1@0@abc"), ("x-mq-language", "PYTHON"), ("x-mq-client-version", "5.1.2"))


def _stub(port: int) -> service_pb2_grpc.MessagingServiceStub:
    return service_pb2_grpc.MessagingServiceStub(grpc.insecure_channel(f"127.0.0.1:{port}"))


def test_a_receive_without_an_invisible_time_is_refused_and_pops_nothing(grpc_broker: RunningGrpcBroker) -> None:
    b = grpc_broker.broker
    b.create_or_update_topic("Inv", 1, 1)
    b.send_message("Inv", b"kept")
    wait_all_dispatched(b)
    # the official client leaves the duration out when asked for 0 s
    zero = grpc_broker.client("simple_consume", topic="Inv", group="InvG", expect=1, invisible=0, timeout=3)
    assert zero["received"] == [] and zero["errors"], zero
    assert all("40011" in e or "ILLEGAL_INVISIBLE_TIME" in e for e in zero["errors"]), zero
    req = pb.ReceiveMessageRequest(group=pb.Resource(name="InvG"),
                                   message_queue=pb.MessageQueue(topic=pb.Resource(name="Inv"), id=0),
                                   batch_size=1, long_polling_timeout=Duration(seconds=5))
    items = list(_stub(grpc_broker.port).ReceiveMessage(req, metadata=MD, timeout=10))
    assert items[0].status.code == pb.Code.ILLEGAL_INVISIBLE_TIME and "absent" in items[0].status.message
    assert not [i for i in items if i.HasField("message")]
    # nothing was popped: the message is there at its first attempt
    got = grpc_broker.client("simple_consume", topic="Inv", group="InvG", expect=1, timeout=15)["received"]
    assert [(m["body"], m["attempt"]) for m in got] == [("kept", 1)]


def _wire(topic: str, body: bytes, mtype: int = pb.MessageType.NORMAL) -> object:
    system = pb.SystemProperties(message_id=uuid.uuid4().hex.upper(), message_type=mtype,
                                 body_encoding=pb.Encoding.IDENTITY)
    return pb.Message(topic=pb.Resource(name=topic), body=body, system_properties=system)


def test_one_bad_message_refuses_the_whole_send_and_stores_nothing(grpc_broker: RunningGrpcBroker) -> None:
    b = grpc_broker.broker
    b.create_or_update_topic("Many", 1, 1)
    stub = _stub(grpc_broker.port)

    def send(*messages: object) -> object:
        return stub.SendMessage(pb.SendMessageRequest(messages=list(messages)), metadata=MD, timeout=10)

    empty = send(_wire("Many", b"ok-1"), _wire("Many", b""), _wire("Many", b"ok-2"))
    assert empty.status.code == pb.Code.MESSAGE_BODY_EMPTY and "message 2 of 3" in empty.status.message, empty
    assert not empty.entries
    # the message type is checked for every message too (a DELAY one on a NORMAL topic)
    delayed = _wire("Many", b"later")
    delayed.system_properties.delivery_timestamp.FromMilliseconds(int(time.time() * 1000) + 60_000)
    typed = send(_wire("Many", b"ok-1"), delayed)
    assert typed.status.code == pb.Code.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE, typed
    assert b.get_max_offset("Many", 0) == 0
    # a request of valid messages stores them all
    both = send(_wire("Many", b"ok-1"), _wire("Many", b"ok-2"))
    assert both.status.code == pb.Code.OK and [e.status.code for e in both.entries] == [pb.Code.OK] * 2
    wait_all_dispatched(b)
    assert b.get_max_offset("Many", 0) == 2
