"""ACL 2.0 on the gRPC endpoint where a caller claims what is not its own: a client id (any caller
may put any ``x-mq-client-id`` in its headers) and empty resource names, through raw stubs."""

from __future__ import annotations

import queue
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from broker_core.auth.converter import acl_from_info
from broker_core.auth.signer import format_date_time, sign_grpc_metadata
from broker_core.net.grpc_v2.stubs import pb, service_pb2_grpc

from .conftest import RunningGrpcBroker, start_grpc_broker, stop_grpc_broker

R = pb.Resource


def _start(root: Path, **props: str) -> RunningGrpcBroker:
    (root / "home").mkdir()
    running = start_grpc_broker(root / "store", root / "home", {
        "authenticationEnabled": "true", "authorizationEnabled": "true", "transactionTimeOut": "1000",
        "transactionCheckInterval": "500", **props})
    b = running.broker
    b.create_or_update_topic("Secure", 1, 1)
    b.create_or_update_topic("TxT", 1, 1, attributes={"+message.type": "TRANSACTION"})
    b.auth_manager.create_user("alice", "alice-secret")
    b.auth_manager.create_acl(acl_from_info({"subject": "User:alice", "policies": [{
        "policyType": "Custom", "entries": [
            {"resource": "Topic:Secure", "actions": ["Pub", "Sub"], "decision": "Allow"},
            {"resource": "Topic:TxT", "actions": ["Pub", "Sub"], "decision": "Allow"},
            {"resource": "Group:G-alice", "actions": ["Sub"], "decision": "Allow"}]}]}))
    return running


@pytest.fixture
def acl_broker(tmp_path: Path) -> Iterator[RunningGrpcBroker]:
    running = _start(tmp_path)
    try:
        yield running
    finally:
        stop_grpc_broker(running)


def _stub(running: RunningGrpcBroker) -> service_pb2_grpc.MessagingServiceStub:
    """A stub on a connection of its own (no subchannel shared with the test's other stubs): the
    stateful strategy's verdicts belong to one connection."""
    channel = grpc.insecure_channel(running.address, options=[("grpc.use_local_subchannel_pool", 1)])
    return service_pb2_grpc.MessagingServiceStub(channel)


def _md(user: str, secret: str, client_id: str) -> tuple[tuple[str, str], ...]:
    return tuple(sign_grpc_metadata(user, secret, format_date_time()).items()) + (
        ("x-mq-client-id", client_id), ("x-mq-language", "PYTHON"))


def _message(topic: str, body: bytes, mtype: int = pb.MessageType.NORMAL) -> object:
    system = pb.SystemProperties(message_id=uuid.uuid4().hex.upper(), message_type=mtype,
                                 body_encoding=pb.Encoding.IDENTITY)
    return pb.Message(topic=R(name=topic), body=body, system_properties=system)


def _send(stub: service_pb2_grpc.MessagingServiceStub, md: tuple, message: object) -> object:
    return stub.SendMessage(pb.SendMessageRequest(messages=[message]), metadata=md, timeout=10).status


class _Telemetry:
    """One Telemetry stream: commands go in through ``put``, what the broker sends is collected."""

    def __init__(self, stub: service_pb2_grpc.MessagingServiceStub, md: tuple, seconds: float) -> None:
        self._out: queue.Queue[object | None] = queue.Queue()
        self.received: list[object] = []
        self.ended = threading.Event()
        self._call = stub.Telemetry(iter(self._out.get, None), metadata=md, timeout=seconds)
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        try:
            for command in self._call:
                self.received.append(command)
        except grpc.RpcError:
            pass
        finally:
            self.ended.set()

    def put(self, command: object) -> None:
        self._out.put(command)

    def close(self) -> None:
        self._out.put(None)
        self._call.cancel()
        self.ended.wait(5)


def _producer_settings(topic: str) -> object:
    return pb.TelemetryCommand(settings=pb.Settings(client_type=pb.ClientType.PRODUCER,
                                                    publishing=pb.Publishing(topics=[R(name=topic)])))


def test_a_telemetry_stream_without_credentials_gets_no_check_back_of_the_client_id_it_claims(acl_broker):
    """The stream was joined to the claimed client's session before anything was checked, so it received
    that producer's transaction check-backs, message body included, with no valid credentials."""
    client_id = "victim@1@0@abc"
    legit = _Telemetry(_stub(acl_broker), _md("alice", "alice-secret", client_id), 30)
    legit.put(_producer_settings("TxT"))
    deadline = time.monotonic() + 10
    while not legit.received and time.monotonic() < deadline:
        time.sleep(0.05)
    assert legit.received and legit.received[0].status.code == pb.Code.OK, legit.received
    legit.close()

    intruder = _Telemetry(_stub(acl_broker), _md("mallory", "guess", client_id), 8)
    try:
        half = _send(_stub(acl_broker), _md("alice", "alice-secret", client_id),
                     _message("TxT", b"SECRET-PAYLOAD", pb.MessageType.TRANSACTION))
        assert half.code == pb.Code.OK, half
        intruder.ended.wait(6)  # the broker checks the half back after ~1 s, every 0.5 s
        check_backs = [c for c in intruder.received if c.HasField("recover_orphaned_transaction_command")]
        assert check_backs == [], "an unauthenticated stream received a transaction check-back"
        assert intruder.received and intruder.received[0].status.code == pb.Code.UNAUTHORIZED, intruder.received
        assert "mallory" in intruder.received[0].status.message
        assert intruder.ended.is_set(), "the refused stream stayed open"
    finally:
        intruder.close()


def test_stateful_verdicts_belong_to_the_connection_not_to_the_claimed_client_id(tmp_path):
    """The stateful strategy cached verdicts under the x-mq-client-id header: after one good request with
    a client id, a wrong secret with the same id was accepted (it sent and received), and one forged
    request with another id locked its real owner out for the cache's lifetime."""
    running = _start(tmp_path, authenticationStrategy=(
        "org.apache.rocketmq.auth.authentication.strategy.StatefulAuthenticationStrategy"))
    try:
        assert _send(_stub(running), _md("alice", "alice-secret", "app@1"), _message("Secure", b"ok")).code == pb.Code.OK
        forged = _send(_stub(running), _md("alice", "not-the-secret", "app@1"), _message("Secure", b"forged"))
        assert forged.code == pb.Code.UNAUTHORIZED, forged
        locked = _send(_stub(running), _md("alice", "not-the-secret", "app2@1"), _message("Secure", b"forged"))
        assert locked.code == pb.Code.UNAUTHORIZED
        owner = _send(_stub(running), _md("alice", "alice-secret", "app2@1"), _message("Secure", b"owner"))
        assert owner.code == pb.Code.OK, owner
        b = running.broker
        assert b.store.wait_for_dispatch()
        assert b.get_max_offset("Secure", 0) == 2  # "ok" and "owner", nothing forged
    finally:
        stop_grpc_broker(running)


@pytest.mark.parametrize("rpc", ["SendMessage", "ReceiveMessage", "QueryRoute", "QueryAssignment",
                                 "ChangeInvisibleDuration"])
def test_an_empty_topic_or_group_is_refused_in_band(acl_broker, rpc, caplog):
    """With ACL on, an empty name (a raw client; the official ones check it first) raised a ValueError:
    the call failed with gRPC UNKNOWN and the broker logged a traceback per call."""
    stub, md = _stub(acl_broker), _md("alice", "alice-secret", "raw@1")
    if rpc == "SendMessage":
        got = _send(stub, md, _message("", b"x"))
    elif rpc == "ReceiveMessage":
        req = pb.ReceiveMessageRequest(group=R(name=""), message_queue=pb.MessageQueue(topic=R(name="Secure"), id=0),
                                       batch_size=1)
        got = list(stub.ReceiveMessage(req, metadata=md, timeout=10))[0].status
    elif rpc == "QueryRoute":
        got = stub.QueryRoute(pb.QueryRouteRequest(topic=R(name="")), metadata=md, timeout=10).status
    elif rpc == "QueryAssignment":
        got = stub.QueryAssignment(pb.QueryAssignmentRequest(topic=R(name=""), group=R(name="G-alice")),
                                   metadata=md, timeout=10).status
    else:
        req = pb.ChangeInvisibleDurationRequest(group=R(name=""), topic=R(name="Secure"),
                                                receipt_handle="0 1 30000 0 0 broker-a 0 0 0")
        got = stub.ChangeInvisibleDuration(req, metadata=md, timeout=10).status
    assert got.code != pb.Code.OK and got.message, got
    assert not [r for r in caplog.records if r.exc_info], "a traceback was logged"
