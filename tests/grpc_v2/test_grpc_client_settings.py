"""What a gRPC client's Settings decide, as upstream's proxy (ClientActivity, GrpcClientSettingsManager)
does, through raw stubs: the Settings a client sent over Telemetry are its identity for later Heartbeats
and its NotifyClientTermination (a client that never sent any is not recognized), Settings that cannot
register the client end the Telemetry stream with a gRPC error, and a registered client is listed with
a version consumerConnection can name."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import grpc
import pytest

from broker_core.net.grpc_v2.stubs import pb, service_pb2_grpc
from broker_core.remoting.codes import CURRENT_VERSION
from broker_core.remoting.mqversion import version_desc

from .conftest import RunningGrpcBroker, grpc_broker_running, messaging_stub

R = pb.Resource


@pytest.fixture(scope="module")
def running(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningGrpcBroker]:
    with grpc_broker_running(tmp_path_factory.mktemp("grpc-settings")) as broker:
        broker.broker.create_or_update_topic("SetT", 1, 1)
        yield broker


@pytest.fixture(scope="module")
def stub(running: RunningGrpcBroker) -> service_pb2_grpc.MessagingServiceStub:
    return messaging_stub(running)


def md(client_id: str, version: str = "5.1.2") -> tuple[tuple[str, str], ...]:
    return (("x-mq-client-id", client_id), ("x-mq-language", "PYTHON"), ("x-mq-client-version", version))


def consumer_settings(group: str, client_type: int = pb.ClientType.SIMPLE_CONSUMER) -> Any:
    return pb.Settings(client_type=client_type, subscription=pb.Subscription(
        group=R(name=group), subscriptions=[pb.SubscriptionEntry(
            topic=R(name="SetT"), expression=pb.FilterExpression(type=pb.FilterType.TAG, expression="*"))]))


def telemetry(stub: service_pb2_grpc.MessagingServiceStub, client_id: str, settings: Any,
              version: str = "5.1.2") -> Any:
    """The first command the server answers Settings with; a gRPC error ending the stream is raised."""
    def commands() -> Iterator[Any]:
        yield pb.TelemetryCommand(settings=settings)
        time.sleep(1)

    for answer in stub.Telemetry(commands(), metadata=md(client_id, version), timeout=10):
        return answer
    raise AssertionError("the stream ended without an answer")


def online(running: RunningGrpcBroker, group: str) -> list[str]:
    info = running.broker.consumer_connection(group)
    return info.client_ids() if info is not None else []


@pytest.mark.parametrize("client_type", [pb.ClientType.PRODUCER, pb.ClientType.CLIENT_TYPE_UNSPECIFIED, 99])
def test_subscription_settings_from_a_client_that_is_no_consumer_end_the_stream(running, stub, client_type):
    """ClientActivity#buildConsumeType throws for any type but PUSH_CONSUMER and SIMPLE_CONSUMER: the stream
    fails (INTERNAL); it was answered OK and the client was registered nowhere."""
    group = f"GNotConsumer{client_type}"
    with pytest.raises(grpc.RpcError) as e:
        telemetry(stub, f"notconsumer{client_type}@1", consumer_settings(group, client_type))
    name = {pb.ClientType.PRODUCER: "PRODUCER", pb.ClientType.CLIENT_TYPE_UNSPECIFIED: "CLIENT_TYPE_UNSPECIFIED",
            99: "UNRECOGNIZED"}[client_type]
    assert e.value.code() == grpc.StatusCode.INTERNAL
    assert e.value.details().endswith(f"Client type is not consumer, type: {name}")
    assert online(running, group) == []
    # and these settings were not kept: a heartbeat is still not recognized
    beat = stub.Heartbeat(pb.HeartbeatRequest(group=R(name=group), client_type=pb.ClientType.SIMPLE_CONSUMER),
                          metadata=md(f"notconsumer{client_type}@1"), timeout=5)
    assert beat.status.code == pb.Code.UNRECOGNIZED_CLIENT_TYPE


def test_settings_with_neither_publishing_nor_subscription_end_the_stream(running, stub):
    """processAndWriteClientSettings: onError(INVALID_ARGUMENT), not an in-band status on an open stream."""
    with pytest.raises(grpc.RpcError) as e:
        telemetry(stub, "nopubsub@1", pb.Settings(client_type=pb.ClientType.PRODUCER))
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert e.value.details() == "there is no publishing or subscription data in settings"


def test_heartbeat_and_termination_need_the_client_s_settings_and_use_their_client_type(running, stub):
    """A Heartbeat from a client that never sent Settings registered an online POP consumer with no
    subscriptions (and created its group); upstream answers UNRECOGNIZED_CLIENT_TYPE and, once Settings
    came, goes by their client type, not the request's."""
    b = running.broker
    group = "GNoSettings"
    for request_type in (pb.ClientType.PUSH_CONSUMER, pb.ClientType.SIMPLE_CONSUMER, pb.ClientType.PRODUCER):
        beat = stub.Heartbeat(pb.HeartbeatRequest(group=R(name=group), client_type=request_type),
                              metadata=md("nosettings@1"), timeout=5)
        assert beat.status.code == pb.Code.UNRECOGNIZED_CLIENT_TYPE
        assert beat.status.message == "cannot find client settings for this client"
    bye = stub.NotifyClientTermination(pb.NotifyClientTerminationRequest(group=R(name=group)),
                                       metadata=md("nosettings@1"), timeout=5)
    assert (bye.status.code, bye.status.message) == (pb.Code.UNRECOGNIZED_CLIENT_TYPE,
                                                     "cannot find client settings for this client")
    assert online(running, group) == [] and b.get_subscription_group(group) is None

    assert telemetry(stub, "nosettings@1", consumer_settings(group)).status.code == pb.Code.OK
    assert online(running, group) == ["nosettings@1"]
    b.client_registry.channel_closed(next(iter(b.consumer_connection(group).channels)))
    assert online(running, group) == []
    # the request says PRODUCER; the Settings said SIMPLE_CONSUMER: the consumer is registered again
    beat = stub.Heartbeat(pb.HeartbeatRequest(group=R(name=group), client_type=pb.ClientType.PRODUCER),
                          metadata=md("nosettings@1"), timeout=5)
    assert beat.status.code == pb.Code.OK and online(running, group) == ["nosettings@1"]
    info = b.consumer_connection(group)
    assert [s.topic for s in info.subscriptions.values()] == ["SetT"]
    bye = stub.NotifyClientTermination(pb.NotifyClientTerminationRequest(group=R(name=group)),
                                       metadata=md("nosettings@1"), timeout=5)
    assert bye.status.code == pb.Code.OK and online(running, group) == []
    # termination removed the settings
    again = stub.NotifyClientTermination(pb.NotifyClientTerminationRequest(group=R(name=group)),
                                         metadata=md("nosettings@1"), timeout=5)
    assert again.status.code == pb.Code.UNRECOGNIZED_CLIENT_TYPE


@pytest.mark.parametrize(("header", "expected"), [("5.1.2", version_desc(CURRENT_VERSION)), ("", "V5_3_3"),
                                                  ("v5_0_0", "V5_0_0")])
def test_a_grpc_client_is_listed_with_the_version_its_header_names_or_the_current_one(running, stub, header,
                                                                                       expected):
    """ClientActivity#parseClientVersion: the x-mq-client-version header as a Version name, else the current
    version; it was 0, which consumerConnection printed as V3_0_0_SNAPSHOT."""
    name = header.replace(".", "_") or "none"
    group, client_id = f"GVersion-{name}", f"version-{name}@1"
    assert telemetry(stub, client_id, consumer_settings(group), header).status.code == pb.Code.OK
    clients = running.broker.consumer_connection(group).channels.values()
    assert [(c.client_id, version_desc(c.version)) for c in clients] == [(client_id, expected)]
