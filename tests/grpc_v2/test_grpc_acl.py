"""ACL 2.0 over gRPC: the authorization header is verified and every RPC is authorized (spec 2.1/2.2)."""

from __future__ import annotations

import pytest

from broker_core.auth.converter import acl_from_info

from .conftest import start_grpc_broker, stop_grpc_broker


@pytest.fixture
def acl_broker(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    running = start_grpc_broker(tmp_path / "store", home, {"authenticationEnabled": "true",
                                                          "authorizationEnabled": "true"})
    b = running.broker
    b.create_or_update_topic("Secure", 2, 2)
    b.create_or_update_topic("Other", 2, 2)
    b.auth_manager.create_user("alice", "alice-secret")
    b.auth_manager.create_acl(acl_from_info({"subject": "User:alice", "policies": [{
        "policyType": "Custom", "entries": [
            {"resource": "Topic:Secure", "actions": ["Pub", "Sub"], "decision": "Allow"},
            {"resource": "Group:G-alice", "actions": ["Sub"], "decision": "Allow"}]}]}))
    try:
        yield running
    finally:
        stop_grpc_broker(running)


def test_right_credentials_produce_and_consume(acl_broker):
    sent = acl_broker.client("produce", topic="Secure", count=3, ak="alice", sk="alice-secret")
    assert len(sent["sent"]) == 3 and not sent["errors"]
    got = acl_broker.client("simple_consume", topic="Secure", group="G-alice", expect=3, ak="alice",
                            sk="alice-secret")
    assert {m["id"] for m in got["received"]} == set(sent["sent"])


def test_wrong_secret_is_unauthorized_and_stores_nothing(acl_broker):
    out = acl_broker.client("produce", topic="Secure", count=1, ak="alice", sk="wrong")
    # The client cannot even fetch the route: QueryRoute answers UNAUTHORIZED (40100).
    assert out["sent"] == [] and "route" in out["errors"][0]
    assert "40100, check signature failed." in acl_broker.client_log()
    out = acl_broker.client("produce", topic="Secure", count=1)  # no credentials at all
    assert out["sent"] == [] and "40100, username cannot be null." in acl_broker.client_log()
    assert acl_broker.broker.get_max_offset("Secure", 0) + acl_broker.broker.get_max_offset("Secure", 1) == 0


def test_authenticated_but_not_authorized(acl_broker):
    out = acl_broker.client("produce", topic="Other", count=1, ak="alice", sk="alice-secret")
    assert out["sent"] == [] and "route" in out["errors"][0]
    assert "40100" in acl_broker.client_log() and "Topic:Other" in acl_broker.client_log()
    got = acl_broker.client("simple_consume", topic="Secure", group="G-bob", expect=1, timeout=4, ak="alice",
                            sk="alice-secret")
    assert got["received"] == [] and any("Unauthorized" in e for e in got["errors"])


def test_a_send_of_two_topics_is_refused_before_anything_is_stored(acl_broker):
    """The proxy takes one topic a SendMessage request. Alice may publish to Secure, not to Other: her request
    with one message for each used to store the Secure one, then answer UNAUTHORIZED with no entries (a
    client retrying it stored it twice). Now the whole request is refused and nothing is stored."""
    import uuid

    import grpc

    from broker_core.auth.signer import format_date_time, sign_grpc_metadata
    from broker_core.net.grpc_v2.stubs import pb, service_pb2_grpc

    def message(topic: str) -> object:
        system = pb.SystemProperties(message_id=uuid.uuid4().hex.upper(), message_type=pb.MessageType.NORMAL,
                                     body_encoding=pb.Encoding.IDENTITY)
        return pb.Message(topic=pb.Resource(name=topic), body=b"m", system_properties=system)

    stub = service_pb2_grpc.MessagingServiceStub(grpc.insecure_channel(acl_broker.address))
    signed = tuple(sign_grpc_metadata("alice", "alice-secret", format_date_time()).items()) + (
        ("x-mq-client-id", "acl-test@1"), ("x-mq-language", "PYTHON"))
    mixed = stub.SendMessage(pb.SendMessageRequest(messages=[message("Secure"), message("Other")]),
                             metadata=signed, timeout=10)
    assert (mixed.status.code, mixed.status.message) == (pb.Code.MESSAGE_CORRUPTED, "topic in message is not same")
    both = stub.SendMessage(pb.SendMessageRequest(messages=[message("Secure"), message("Secure")]),
                            metadata=signed, timeout=10)
    assert both.status.code == pb.Code.OK and len(both.entries) == 2
    b = acl_broker.broker
    assert b.store.wait_for_dispatch()  # the sends are answered once in the commitlog; the queues follow
    assert sum(b.get_max_offset("Secure", q) for q in (0, 1)) == 2  # only the two of the allowed request


@pytest.mark.parametrize("whitelist", ["apache.rocketmq.v2.QueryRouteRequest,apache.rocketmq.v2.SendMessageRequest",
                                       "QueryRoute, SendMessage"])
def test_the_authorization_whitelist_takes_apaches_grpc_request_names_and_bare_rpc_names(tmp_path, whitelist):
    """Apache names a gRPC call in its whitelists (and audit log) by its request message's full protobuf
    name; a whitelist copied from an Apache broker did nothing here, where calls went by their bare RPC
    name. Both now let alice publish to a topic no policy of hers allows."""
    home = tmp_path / "home"
    home.mkdir()
    running = start_grpc_broker(tmp_path / "store", home, {"authenticationEnabled": "true",
                                                          "authorizationEnabled": "true",
                                                          "authorizationWhitelist": whitelist})
    try:
        running.broker.create_or_update_topic("Other", 2, 2)
        running.broker.auth_manager.create_user("alice", "alice-secret")
        out = running.client("produce", topic="Other", count=2, ak="alice", sk="alice-secret")
        assert len(out["sent"]) == 2 and not out["errors"], out
    finally:
        stop_grpc_broker(running)


def test_every_rpcs_request_code_is_its_request_messages_full_name():
    from broker_core.auth.config import grpc_request_code
    from broker_core.net.grpc_v2.stubs import service_pb2

    methods = service_pb2.DESCRIPTOR.services_by_name["MessagingService"].methods
    assert methods and all(grpc_request_code(m.name) == m.input_type.full_name for m in methods)
