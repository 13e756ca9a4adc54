"""Several instances of one app, and instances that leave: the broker must not keep depending on one
client (transaction check-backs rotate over the live producers; a consumer that leaves gives its
auto-renewed messages back at once)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from google.protobuf.duration_pb2 import Duration

from broker_core.net.grpc_v2 import server as grpc_server
from broker_core.net.grpc_v2.stubs import pb, service_pb2_grpc
from tests.waiting import wait_all_dispatched, wait_for

from .conftest import RunningGrpcBroker, start_grpc_broker, stop_grpc_broker


def test_check_backs_rotate_so_the_instance_that_owns_the_transaction_is_asked(grpc_broker: RunningGrpcBroker,
                                                                               tmp_path: Path) -> None:
    grpc_broker.broker.create_or_update_topic("TxTopic", 2, 2, attributes={"+message.type": "TRANSACTION"})
    ready, stop = tmp_path / "ready", tmp_path / "stop"
    first: dict = {}

    def undecided_instance() -> None:  # started first: upstream would still ask the other instance
        first.update(grpc_broker.client("transaction_checker", topic="TxTopic", check="unknown",
                                        ready_file=str(ready), stop_file=str(stop), timeout=60, limit=90))

    t = threading.Thread(target=undecided_instance)
    t.start()
    try:
        wait_for(ready.exists, "the first producer started", 30)
        owner = grpc_broker.client("transaction", topic="TxTopic", mode="open", check="commit", prefix="owned",
                                   timeout=20)
    finally:
        stop.touch()
        t.join(90)
    assert owner["id"] in owner["checked"], (owner, first)
    got = grpc_broker.client("simple_consume", topic="TxTopic", group="TxG", expect=1, timeout=15)["received"]
    assert [m["body"] for m in got] == ["owned-0"]


def _md(client_id: str) -> tuple[tuple[str, str], ...]:
    return ("x-mq-client-id", client_id), ("x-mq-language", "PYTHON"), ("x-mq-client-version", "5.1.2")


def _stub(port: int) -> service_pb2_grpc.MessagingServiceStub:
    return service_pb2_grpc.MessagingServiceStub(grpc.insecure_channel(f"127.0.0.1:{port}"))


def _receive(stub: Any, client_id: str, *, auto_renew: bool) -> list[Any]:
    """One ReceiveMessage of group Workers on topic Jobs: a push consumer's (auto_renew), else a simple
    consumer's with a 30 s invisible time."""
    req = pb.ReceiveMessageRequest(group=pb.Resource(name="Workers"),
                                   message_queue=pb.MessageQueue(topic=pb.Resource(name="Jobs"), id=-1),
                                   batch_size=1, auto_renew=auto_renew, long_polling_timeout=Duration(seconds=5))
    if not auto_renew:
        req.invisible_duration.CopyFrom(Duration(seconds=30))
    return [r.message for r in stub.ReceiveMessage(req, metadata=_md(client_id), timeout=10) if r.HasField("message")]


def _held_by_a_push_consumer(running: RunningGrpcBroker, stub: Any) -> None:
    """job-1 is in flight at push consumer crashed@1 (registered by its heartbeat), which never acks."""
    running.broker.create_or_update_topic("Jobs", 1, 1)
    running.broker.send_message("Jobs", b"job-1")
    wait_all_dispatched(running.broker)
    settings = pb.Settings(client_type=pb.ClientType.PUSH_CONSUMER, subscription=pb.Subscription(
        group=pb.Resource(name="Workers"), subscriptions=[pb.SubscriptionEntry(topic=pb.Resource(name="Jobs"))]))
    answers = stub.Telemetry(iter([pb.TelemetryCommand(settings=settings)]), metadata=_md("crashed@1"), timeout=10)
    assert next(answers).status.code == pb.Code.OK  # a heartbeat is recognized once Settings came
    beat = stub.Heartbeat(pb.HeartbeatRequest(group=pb.Resource(name="Workers"),
                                              client_type=pb.ClientType.PUSH_CONSUMER), metadata=_md("crashed@1"))
    assert beat.status.code == pb.Code.OK
    assert [m.body for m in _receive(stub, "crashed@1", auto_renew=True)] == [b"job-1"]


def _redelivered_to_another_consumer(stub: Any, within_s: float) -> list[Any]:
    deadline = time.monotonic() + within_s
    got: list[Any] = []
    while not got and time.monotonic() < deadline:
        got = _receive(stub, "other@2", auto_renew=False)
    return got


def test_a_terminated_push_consumer_gives_its_messages_back_to_the_group(grpc_broker: RunningGrpcBroker) -> None:
    stub = _stub(grpc_broker.port)
    _held_by_a_push_consumer(grpc_broker, stub)
    bye = stub.NotifyClientTermination(pb.NotifyClientTerminationRequest(group=pb.Resource(name="Workers")),
                                       metadata=_md("crashed@1"))
    assert bye.status.code == pb.Code.OK
    # renewed, it would stay invisible for 60 s and then up to 3 h; given back, it is visible in ~1 s
    got = _redelivered_to_another_consumer(stub, 12)
    assert [(m.body, m.system_properties.delivery_attempt) for m in got] == [(b"job-1", 2)]


@pytest.fixture
def short_expiry(tmp_path: Path) -> Iterator[RunningGrpcBroker]:
    home = tmp_path / "home"
    home.mkdir()
    running = start_grpc_broker(tmp_path / "store", home, channel_expired_ms=2_000)
    try:
        yield running
    finally:
        stop_grpc_broker(running)


def test_a_push_consumer_that_stops_heartbeating_gives_its_messages_back(short_expiry: RunningGrpcBroker,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """A killed client sends nothing: its session expires (at the next expiry scan, every 10 s; here every
    housekeeping round, 1 s, as the expiry itself is 2 s here) and what it held is released."""
    monkeypatch.setattr(grpc_server, "SESSION_SCAN_EVERY", 1)
    stub = _stub(short_expiry.port)
    _held_by_a_push_consumer(short_expiry, stub)
    got = _redelivered_to_another_consumer(stub, 25)
    assert [(m.body, m.system_properties.delivery_attempt) for m in got] == [(b"job-1", 2)]
    assert short_expiry.endpoint.service.sessions.get("crashed@1") is None


def test_a_push_consumer_without_settings_keeps_its_messages_until_it_terminates(
        grpc_broker: RunningGrpcBroker) -> None:
    """After a broker restart the official client receives and heartbeats for up to 300 s before it
    re-sends its Settings: what it holds stays with it (renewed) until it says it leaves."""
    stub = _stub(grpc_broker.port)
    grpc_broker.broker.create_or_update_topic("Jobs", 1, 1)
    grpc_broker.broker.send_message("Jobs", b"job-1")
    wait_all_dispatched(grpc_broker.broker)
    assert [m.body for m in _receive(stub, "restarted@1", auto_renew=True)] == [b"job-1"]
    beat = stub.Heartbeat(pb.HeartbeatRequest(group=pb.Resource(name="Workers"),
                                              client_type=pb.ClientType.PUSH_CONSUMER), metadata=_md("restarted@1"))
    assert beat.status.code == pb.Code.UNRECOGNIZED_CLIENT_TYPE  # as upstream: no Settings, not recognized
    assert _redelivered_to_another_consumer(stub, 4) == []  # it was given back after ~1 s and delivered again
    bye = stub.NotifyClientTermination(pb.NotifyClientTerminationRequest(group=pb.Resource(name="Workers")),
                                       metadata=_md("restarted@1"))
    assert bye.status.code == pb.Code.UNRECOGNIZED_CLIENT_TYPE
    got = _redelivered_to_another_consumer(stub, 12)
    assert [(m.body, m.system_properties.delivery_attempt) for m in got] == [(b"job-1", 2)]
