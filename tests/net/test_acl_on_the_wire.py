"""ACL 2.0 on the remoting path (spec D): with authentication on, every broker request is verified;
a missing/unknown/wrong credential is refused with NO_PERMISSION and RocketMQ's remark, and the
AUTH_* codes administer users and ACLs that authorization then enforces. The name server does not
authenticate (as RocketMQ's does not)."""

from __future__ import annotations

import json

import pytest
from harness import Servers
from net_util import RawClient

from broker_core.auth.signer import sign_remoting
from broker_core.net.wire_convert import parse_properties_text
from broker_core.remoting import RequestCode, ResponseCode
from broker_core.remoting.headers import SendMessageRequestHeaderV2

RC = RequestCode
OK = ResponseCode.SUCCESS
ROOT = {"username": "rocketmq", "password": "12345678"}


class Signed:
    def __init__(self, client: RawClient, ak: str, sk: str) -> None:
        self.client, self.ak, self.sk = client, ak, sk

    def call(self, code: int, ext: dict[str, str] | None = None, body: bytes = b""):
        return self.client.call(code, sign_remoting(ext or {}, body, self.ak, self.sk), body)


@pytest.fixture
def acl(tmp_path):
    s = Servers(tmp_path)
    try:
        _, _, addr = s.add_broker(props={"authenticationEnabled": "true", "authorizationEnabled": "true",
                                         "initAuthenticationUser": json.dumps(ROOT)})
        c = RawClient(addr)
        try:
            yield s, c, Signed(c, "rocketmq", "12345678")
        finally:
            c.close()
    finally:
        s.close()


def send_v2(topic: str) -> dict[str, str]:
    return SendMessageRequestHeaderV2(a="P", b=topic, c="TBW102", d=4, e=0, f=0, g=1, h=0).to_ext_fields()


def test_unsigned_unknown_and_badly_signed_requests_are_refused(acl):
    _, c, root = acl
    r = c.call(RC.GET_BROKER_RUNTIME_INFO)
    assert (r.code, r.remark) == (ResponseCode.NO_PERMISSION, "username cannot be null.")
    r = Signed(c, "ghost", "x").call(RC.GET_BROKER_RUNTIME_INFO)
    assert (r.code, r.remark) == (ResponseCode.NO_PERMISSION, "User:ghost is not found.")
    r = Signed(c, "rocketmq", "wrong-secret").call(RC.GET_BROKER_RUNTIME_INFO)
    assert (r.code, r.remark) == (ResponseCode.NO_PERMISSION, "check signature failed.")
    # a tampered body breaks the signature too
    ext = sign_remoting(send_v2("T"), b"original", "rocketmq", "12345678")
    r = c.call(RC.SEND_MESSAGE_V2, ext, b"tampered")
    assert (r.code, r.remark) == (ResponseCode.NO_PERMISSION, "check signature failed.")
    assert root.call(RC.GET_BROKER_RUNTIME_INFO).code == OK


def test_auth_admin_codes_and_authorization(acl):
    _, c, root = acl
    user = {"username": "alice", "password": "pw-alice", "userType": "Normal"}
    assert root.call(RC.AUTH_CREATE_USER, {"username": "alice"}, json.dumps(user).encode()).code == OK
    r = root.call(RC.AUTH_CREATE_USER, {"username": "alice"}, json.dumps(user).encode())
    assert (r.code, r.remark) == (ResponseCode.NO_PERMISSION, "The user is existed")
    got = json.loads(root.call(RC.AUTH_GET_USER, {"username": "alice"}).body)
    assert (got["username"], got["userType"]) == ("alice", "Normal")
    assert root.call(RC.AUTH_GET_USER, {"username": "nobody"}).body == b""
    listed = json.loads(root.call(RC.AUTH_LIST_USER, {"filter": "ali"}).body)
    assert [u["username"] for u in listed] == ["alice"]
    assert root.call(RC.AUTH_UPDATE_USER, {"username": "alice"}, json.dumps({"password": "pw2"}).encode()).code == OK
    alice = Signed(c, "alice", "pw2")
    # alice may create nothing until an ACL allows it; the refusal names her and the resource
    topic = {"topic": "AliceT", "defaultTopic": "TBW102", "readQueueNums": "1", "writeQueueNums": "1", "perm": "6",
             "topicFilterType": "SINGLE_TAG"}
    r = alice.call(RC.UPDATE_AND_CREATE_TOPIC, topic)
    assert r.code == ResponseCode.NO_PERMISSION and "User:alice" in r.remark and "Topic:AliceT" in r.remark
    assert root.call(RC.UPDATE_AND_CREATE_TOPIC, topic).code == OK
    acl_body = {"subject": "User:alice", "policies": [{"entries": [
        {"resource": "Topic:AliceT", "actions": ["Pub"], "decision": "Allow"}]}]}
    assert root.call(RC.AUTH_CREATE_ACL, {"subject": "User:alice"}, json.dumps(acl_body).encode()).code == OK
    assert alice.call(RC.SEND_MESSAGE_V2, send_v2("AliceT"), b"hi").code == OK
    r = alice.call(RC.SEND_MESSAGE_V2, send_v2("Other"), b"hi")
    assert r.code == ResponseCode.NO_PERMISSION
    upd = {"subject": "User:alice", "policies": [{"entries": [
        {"resource": "Topic:Other", "actions": ["Pub"], "decision": "Deny"}]}]}
    assert root.call(RC.AUTH_UPDATE_ACL, {"subject": "User:alice"}, json.dumps(upd).encode()).code == OK
    got = json.loads(root.call(RC.AUTH_GET_ACL, {"subject": "User:alice"}).body)
    assert sorted(e["resource"] for e in got["policies"][0]["entries"]) == ["Topic:AliceT", "Topic:Other"]
    assert len(json.loads(root.call(RC.AUTH_LIST_ACL, {"subjectFilter": "alice"}).body)) == 1
    # a Normal user cannot administer users (Cluster [Update])
    r = alice.call(RC.AUTH_CREATE_USER, {"username": "eve"}, json.dumps({"username": "eve", "password": "x"}).encode())
    assert r.code == ResponseCode.NO_PERMISSION
    assert root.call(RC.AUTH_DELETE_ACL, {"subject": "User:alice", "resource": "Topic:Other"}).code == OK
    r = root.call(RC.AUTH_DELETE_ACL, {"subject": "User:nobody"})
    assert (r.code, r.remark) == (ResponseCode.NO_PERMISSION, "The subject is not exist.")
    assert root.call(RC.AUTH_DELETE_USER, {"username": "alice"}).code == OK
    r = alice.call(RC.SEND_MESSAGE_V2, send_v2("AliceT"), b"hi")
    assert (r.code, r.remark) == (ResponseCode.NO_PERMISSION, "User:alice is not found.")


def test_name_server_does_not_authenticate(acl):
    servers, _, _ = acl
    ns = RawClient(servers.namesrv_addr)
    try:
        assert ns.call(RC.GET_BROKER_CLUSTER_INFO).code == OK
        assert ns.call(RC.GET_BROKER_CLUSTER_INFO, sign_remoting({}, b"", "any", "thing")).code == OK
    finally:
        ns.close()


def test_broker_config_has_every_key_and_masks_credentials(acl):
    """GET_BROKER_CONFIG answers with broker, store and auth keys (what updateBrokerConfig may change), but
    it needs authentication only: a normal user must not read the initial admin's password there."""
    _, c, root = acl
    user = {"username": "bob", "password": "pw-bob", "userType": "Normal"}
    assert root.call(RC.AUTH_CREATE_USER, {"username": "bob"}, json.dumps(user).encode()).code == OK
    r = Signed(c, "bob", "pw-bob").call(RC.GET_BROKER_CONFIG)
    assert r.code == OK
    config = parse_properties_text(r.body)
    assert config["brokerName"] and config["fileReservedTime"] == "72" and config["flushDiskType"]  # store keys
    assert config["authenticationEnabled"] == "true"  # auth keys
    assert config["initAuthenticationUser"] == "***" and b"12345678" not in r.body


def test_no_signed_in_user_can_switch_acl_off_over_the_network(acl):
    """UPDATE_BROKER_CONFIG needs authentication only (as RocketMQ's). It used to apply ACL keys to the
    running broker: a Normal user with no ACL turned authentication off, then anyone acted as the Super
    user with a wrong secret, or turned both switches off and locked everyone out. ACL keys are refused
    on a running broker (the config file, read at start, is where they change); other keys still work."""
    _, c, root = acl
    user = {"username": "nop", "password": "pw-nop", "userType": "Normal"}
    assert root.call(RC.AUTH_CREATE_USER, {"username": "nop"}, json.dumps(user).encode()).code == OK
    nop = Signed(c, "nop", "pw-nop")
    for caller in (nop, root):
        for key in ("authenticationEnabled", "authorizationEnabled", "authenticationWhitelist"):
            r = caller.call(RC.UPDATE_BROKER_CONFIG, {}, f"{key}=false\n".encode())
            assert r.code == ResponseCode.NO_PERMISSION and r.remark.startswith(f"{key} cannot be changed on a "
                                                                                 "running broker"), r.remark
    r = Signed(c, "rocketmq", "WRONG").call(RC.AUTH_LIST_USER, {"filter": ""})
    assert (r.code, r.remark) == (ResponseCode.NO_PERMISSION, "check signature failed.")
    assert root.call(RC.AUTH_LIST_USER, {"filter": ""}).code == OK
    config = parse_properties_text(root.call(RC.GET_BROKER_CONFIG).body)
    assert (config["authenticationEnabled"], config["authorizationEnabled"]) == ("true", "true")
    assert nop.call(RC.UPDATE_BROKER_CONFIG, {}, b"maxReconsumeTimes=5\n").code == OK


def test_a_v1_send_to_a_retry_topic_is_checked_against_the_retry_topics_group(acl):
    """SEND_MESSAGE (V1) to %RETRY%g1 was checked as Group:<producerGroup> [Sub]: bob, who may consume only
    his own group gb, put messages into g1's retry queue by naming gb as producerGroup, and g1's consumers
    got them as retries. Apache takes the V1 group from the ext field ``group`` (a V1 header has none), else
    the retry topic's group; SEND_MESSAGE_V2 takes field ``a`` (its producer group), as here."""
    _, c, root = acl
    user = {"username": "bob", "password": "pw-bob", "userType": "Normal"}
    assert root.call(RC.AUTH_CREATE_USER, {"username": "bob"}, json.dumps(user).encode()).code == OK
    acl_body = {"subject": "User:bob", "policies": [{"entries": [
        {"resource": "Group:gb", "actions": ["Sub"], "decision": "Allow"}]}]}
    assert root.call(RC.AUTH_CREATE_ACL, {"subject": "User:bob"}, json.dumps(acl_body).encode()).code == OK
    bob = Signed(c, "bob", "pw-bob")
    v1 = SendMessageRequestHeaderV2(a="gb", b="%RETRY%g1", c="TBW102", d=1, e=0, f=0, g=1, h=0,
                                    j=1).to_v1().to_ext_fields()
    r = bob.call(RC.SEND_MESSAGE, v1, b"not yours")
    assert r.code == ResponseCode.NO_PERMISSION, (r.code, r.remark)
    assert "Group:g1" in r.remark, r.remark
    # his own group's retry topic, and a V1 header naming the group in ``group`` as Apache reads it
    r = bob.call(RC.SEND_MESSAGE, {**v1, "topic": "%RETRY%gb"}, b"mine")
    assert r.code == OK, (r.code, r.remark)
    r = bob.call(RC.SEND_MESSAGE, {**v1, "group": "gb"}, b"named")
    assert r.code == OK, (r.code, r.remark)
