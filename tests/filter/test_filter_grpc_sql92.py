"""SQL92 filters over gRPC v2: an empty expression is ILLEGAL_FILTER_EXPRESSION saying so (it was read as
"*" and refused with a parse error about a '*' the client never sent), and ReceiveMessage does not
consult enablePropertyFilter, as Apache's proxy (FilterAPI.build, then POP) does not."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from google.protobuf.duration_pb2 import Duration

from broker_core.net.grpc_v2.stubs import pb, service_pb2_grpc
from tests.grpc_v2.conftest import RunningGrpcBroker, grpc_broker_running, messaging_stub

MD = (("x-mq-client-id", "filters@1@0@abc"), ("x-mq-language", "PYTHON"), ("x-mq-client-version", "5.1.2"))
R = pb.Resource


@pytest.fixture(scope="module")
def running(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningGrpcBroker]:
    with grpc_broker_running(tmp_path_factory.mktemp("grpc-sql92"), {"enablePropertyFilter": "false"}) as broker:
        b = broker.broker
        b.create_or_update_topic("GS", 1, 1)
        for i in range(4):
            b.send_message("GS", b"m%d" % i, {"n": str(i), "TAGS": f"T{i % 2}"})
        yield broker


@pytest.fixture(scope="module")
def stub(running: RunningGrpcBroker) -> service_pb2_grpc.MessagingServiceStub:
    return messaging_stub(running)


def receive(stub, group: str, expression: str, kind: int) -> tuple[object, list[bytes]]:
    req = pb.ReceiveMessageRequest(group=R(name=group), message_queue=pb.MessageQueue(topic=R(name="GS"), id=0),
                                   filter_expression=pb.FilterExpression(type=kind, expression=expression),
                                   batch_size=32, invisible_duration=Duration(seconds=30),
                                   long_polling_timeout=Duration(seconds=1))
    items = list(stub.ReceiveMessage(req, metadata=MD, timeout=10))
    return items[0].status, sorted(i.message.body for i in items if i.HasField("message"))


def pull(stub, group: str, expression: str, kind: int) -> tuple[object, list[bytes]]:
    req = pb.PullMessageRequest(group=R(name=group), message_queue=pb.MessageQueue(topic=R(name="GS"), id=0),
                                filter_expression=pb.FilterExpression(type=kind, expression=expression),
                                offset=0, batch_size=32)
    items = list(stub.PullMessage(req, metadata=MD, timeout=10))
    return items[0].status, [i.message.body for i in items if i.HasField("message")]


@pytest.mark.parametrize("expression", ["", "   "])
def test_an_empty_sql92_expression_is_an_illegal_filter_expression(stub, expression):
    for call in (receive, pull):
        st, got = call(stub, "GE", expression, pb.FilterType.SQL)
        assert st.code == pb.Code.ILLEGAL_FILTER_EXPRESSION, st
        assert "SQL92 expression is empty" in st.message and "'*'" not in st.message
        assert got == []


def test_an_empty_tag_expression_takes_every_message(stub):
    st, got = receive(stub, "GT", "", pb.FilterType.TAG)
    assert st.code == pb.Code.OK and got == [b"m0", b"m1", b"m2", b"m3"]


def test_receive_filters_by_sql92_with_enable_property_filter_off(stub):
    st, got = receive(stub, "GQ", "n >= 2", pb.FilterType.SQL)
    assert st.code == pb.Code.OK and got == [b"m2", b"m3"]
