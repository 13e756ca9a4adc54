"""ACL 2.0 on the broker-wide reads and the requests the broker relays to a consumer (spec D.4, RocketMQ's
@RocketMQAction / @RocketMQResource on their headers): GET_PRODUCER_CONNECTION_LIST (204) and
VIEW_BROKER_STATS_DATA (315) demand Cluster [Get]; GET_SUBSCRIPTIONGROUP_CONFIG (352) and
GET_CONSUMER_RUNNING_INFO (307) Group [Get]; INVOKE_BROKER_TO_GET_CONSUMER_STATUS (223) Topic + Group
[Get]; CONSUME_MESSAGE_DIRECTLY (309) Group + Topic [Sub]; QUERY_CONSUME_QUEUE (321) Topic [Get] and, when
named, Group [Get]. They used to need only a valid signature, so any user could read others' group
configs and connections and make the broker push commands (even a message to consume) to their consumers.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from harness import Servers
from net_util import REPO, RawClient

from broker_core.auth.signer import sign_remoting
from broker_core.remoting import RemotingCommand, RequestCode, ResponseCode
from broker_core.remoting.bodies import ConsumerData, HeartbeatData, ProducerData, SubscriptionData

RC = RequestCode
OK, NO_PERMISSION = ResponseCode.SUCCESS, ResponseCode.NO_PERMISSION
ROOT = ("rocketmq", "12345678")
T, G, PG, VICTIM = "T1", "G", "PG", "victim@1"


class Signed:
    def __init__(self, client: RawClient, ak: str, sk: str) -> None:
        self.client, self.ak, self.sk = client, ak, sk

    def ext(self, fields: dict[str, str]) -> dict[str, str]:
        return sign_remoting(fields, b"", self.ak, self.sk)

    def call(self, code: int, fields: dict[str, str], body: bytes = b""):
        return self.client.call(code, sign_remoting(fields, body, self.ak, self.sk), body)


def _user(root: Signed, name: str, password: str, entries: list[tuple[str, list[str]]]) -> None:
    user = {"username": name, "password": password, "userType": "Normal"}
    assert root.call(RC.AUTH_CREATE_USER, {"username": name}, json.dumps(user).encode()).code == OK
    acl = {"subject": f"User:{name}", "policies": [{"entries": [
        {"resource": r, "actions": acts, "decision": "Allow"} for r, acts in entries]}]}
    assert root.call(RC.AUTH_CREATE_ACL, {"subject": f"User:{name}"}, json.dumps(acl).encode()).code == OK


@pytest.fixture
def world(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """A broker with ACL on, topic T1 holding one message, a victim client (producer PG, consumer G of T1)
    heartbeating as the super user, nob (Topic:T1 Get only) and ops (what these requests need)."""
    monkeypatch.setenv("ROCKETMQ_LOG_HOME", str(tmp_path / "logs"))
    s = Servers(tmp_path)
    clients: list[RawClient] = []
    try:
        broker, _, addr = s.add_broker(props={
            "authenticationEnabled": "true", "authorizationEnabled": "true",
            "initAuthenticationUser": json.dumps({"username": ROOT[0], "password": ROOT[1]})})
        clients += [RawClient(addr), RawClient(addr), RawClient(addr)]
        root, victim = Signed(clients[0], *ROOT), Signed(clients[1], *ROOT)
        topic = {"topic": T, "defaultTopic": "TBW102", "readQueueNums": "1", "writeQueueNums": "1", "perm": "6",
                 "topicFilterType": "SINGLE_TAG"}
        assert root.call(RC.UPDATE_AND_CREATE_TOPIC, topic).code == OK
        _user(root, "nob", "nobpw", [(f"Topic:{T}", ["Get"])])
        _user(root, "ops", "opspw", [("Cluster:DefaultCluster", ["Get"]), (f"Group:{G}", ["Get", "Sub"]),
                                     (f"Topic:{T}", ["Get", "Sub"])])
        _user(root, "gsub", "gsubpw", [(f"Group:{G}", ["Sub"])])
        hb = HeartbeatData(client_id=VICTIM, producer_data_set=[ProducerData(group_name=PG)],
                           consumer_data_set=[ConsumerData(group_name=G, subscription_data_set=[
                               SubscriptionData(topic=T, sub_string="*")])])
        assert victim.call(RC.HEART_BEAT, {}, hb.to_json()).code == OK
        msg_id = broker.send_message(T, b"hello", queue_id=0).msg_id
        yield broker, addr, s.namesrv_addr, clients, msg_id
    finally:
        for c in clients:
            c.close()
        s.close()


def _requests(msg_id: str) -> dict[int, dict[str, str]]:
    return {
        RC.GET_PRODUCER_CONNECTION_LIST: {"producerGroup": PG},
        RC.GET_SUBSCRIPTIONGROUP_CONFIG: {"group": G},
        RC.VIEW_BROKER_STATS_DATA: {"statsName": "TOPIC_PUT_NUMS", "statsKey": T},
        RC.INVOKE_BROKER_TO_GET_CONSUMER_STATUS: {"topic": T, "group": G},
        RC.GET_CONSUMER_RUNNING_INFO: {"consumerGroup": G, "clientId": VICTIM, "jstackEnable": "false"},
        RC.CONSUME_MESSAGE_DIRECTLY: {"consumerGroup": G, "clientId": VICTIM, "msgId": msg_id, "topic": T},
        RC.QUERY_CONSUME_QUEUE: {"topic": T, "queueId": "0", "index": "0", "count": "1", "consumerGroup": G},
    }


# what each request's refusal names for nob (who may Get Topic:T1 and nothing else), and the action
REFUSED_ON = {
    RC.GET_PRODUCER_CONNECTION_LIST: ("Cluster:DefaultCluster", "Get"),
    RC.GET_SUBSCRIPTIONGROUP_CONFIG: (f"Group:{G}", "Get"),
    RC.VIEW_BROKER_STATS_DATA: ("Cluster:DefaultCluster", "Get"),
    RC.INVOKE_BROKER_TO_GET_CONSUMER_STATUS: (f"Group:{G}", "Get"),
    RC.GET_CONSUMER_RUNNING_INFO: (f"Group:{G}", "Get"),
    RC.CONSUME_MESSAGE_DIRECTLY: (f"Group:{G}", "Sub"),
    RC.QUERY_CONSUME_QUEUE: (f"Group:{G}", "Get"),
}


def _audit(broker) -> str:
    broker.auth_manager.audit.flush()
    path = Path(os.environ["ROCKETMQ_LOG_HOME"]) / "auth_audit.log"
    return path.read_text(encoding="utf-8") if path.exists() else ""


def _nothing_relayed(victim: RawClient) -> bool:
    try:
        got = victim.recv(0.5)
    except TimeoutError:
        return True
    return got is None


def test_a_user_without_permission_is_refused_and_nothing_reaches_the_consumer(world):
    broker, _, _, (_, victim, conn), msg_id = world
    nob = Signed(conn, "nob", "nobpw")
    for code, fields in _requests(msg_id).items():
        resource, action = REFUSED_ON[code]
        r = nob.call(code, fields)
        assert (r.code, r.remark) == (
            NO_PERMISSION, f"User:nob has no permission to access {resource} from 127.0.0.1, no matched policies."
        ), code
        line = (f"[AUTHORIZATION] Subject = User:nob is Deny Action = {action} from sourceIp = 127.0.0.1 "
                f"on resource = {resource} for request = {int(code)}.")
        assert line in _audit(broker), code
    assert _nothing_relayed(victim)


def test_consume_directly_without_a_topic_checks_the_messages_own_topic(world):
    """A raw client leaving the topic out must not push a topic's message with the group's Sub alone."""
    _, _, _, (_, victim, conn), msg_id = world
    r = Signed(conn, "gsub", "gsubpw").call(RC.CONSUME_MESSAGE_DIRECTLY,
                                             {"consumerGroup": G, "clientId": VICTIM, "msgId": msg_id})
    assert (r.code, r.remark) == (
        NO_PERMISSION, f"User:gsub has no permission to access Topic:{T} from 127.0.0.1, no matched policies.")
    assert _nothing_relayed(victim)


def _relayed_call(asker: Signed, victim: RawClient, code: int, fields: dict[str, str], expect: int,
                  answer_body: bytes) -> RemotingCommand:
    """``asker`` sends ``code``; the victim gets the broker's ``expect`` request and answers it."""
    ask = RemotingCommand.request(code, asker.ext(fields), opaque=4242 + code)
    asker.client.send(ask)
    relayed = victim.recv(10)
    assert relayed is not None and relayed.code == expect and not relayed.is_response
    victim.send(relayed.response(body=answer_body))
    answer = asker.client.recv(10)
    assert answer is not None and answer.opaque == ask.opaque
    return answer


def test_a_permitted_user_is_still_served(world):
    _, _, _, (_, victim, conn), msg_id = world
    ops = Signed(conn, "ops", "opspw")
    req = _requests(msg_id)
    pc = json.loads(ops.call(RC.GET_PRODUCER_CONNECTION_LIST, req[RC.GET_PRODUCER_CONNECTION_LIST]).body)
    assert [c["clientId"] for c in pc["connectionSet"]] == [VICTIM]
    r = ops.call(RC.GET_SUBSCRIPTIONGROUP_CONFIG, req[RC.GET_SUBSCRIPTIONGROUP_CONFIG])
    assert r.code == OK and json.loads(r.body)["groupName"] == G
    r = ops.call(RC.VIEW_BROKER_STATS_DATA, req[RC.VIEW_BROKER_STATS_DATA])
    assert r.code == OK and r.body
    r = ops.call(RC.QUERY_CONSUME_QUEUE, req[RC.QUERY_CONSUME_QUEUE])
    assert r.code == OK and json.loads(r.body)["maxQueueIndex"] == 1
    r = _relayed_call(ops, victim, RC.GET_CONSUMER_RUNNING_INFO, req[RC.GET_CONSUMER_RUNNING_INFO],
                      RC.GET_CONSUMER_RUNNING_INFO, b'{"properties":{"PROP_CONSUME_TYPE":"CONSUME_PASSIVELY"}}')
    assert r.code == OK and b"PROP_CONSUME_TYPE" in r.body
    r = _relayed_call(ops, victim, RC.INVOKE_BROKER_TO_GET_CONSUMER_STATUS,
                      req[RC.INVOKE_BROKER_TO_GET_CONSUMER_STATUS], RC.GET_CONSUMER_STATUS_FROM_CLIENT,
                      b'{"messageQueueTable":{}}')
    assert r.code == OK and VICTIM in json.loads(r.body)["consumerTable"]
    r = _relayed_call(ops, victim, RC.CONSUME_MESSAGE_DIRECTLY, req[RC.CONSUME_MESSAGE_DIRECTLY],
                      RC.CONSUME_MESSAGE_DIRECTLY, b'{"consumeResult":"CR_SUCCESS","order":false}')
    assert r.code == OK and b"CR_SUCCESS" in r.body


def test_running_info_reaches_only_a_consumer_of_the_named_group(world):
    """Group:G [Get] must not reach another group's client: the client id is looked up within G (it was
    looked up among all clients, so naming G and another group's client id relayed to that client)."""
    _, addr, _, (_, _, conn), _ = world
    other = RawClient(addr)
    try:
        hb = HeartbeatData(client_id="other@2", consumer_data_set=[ConsumerData(group_name="H", subscription_data_set=[
            SubscriptionData(topic=T, sub_string="*")])])
        assert Signed(other, *ROOT).call(RC.HEART_BEAT, {}, hb.to_json()).code == OK
        r = Signed(conn, "ops", "opspw").call(RC.GET_CONSUMER_RUNNING_INFO,
                                              {"consumerGroup": G, "clientId": "other@2", "jstackEnable": "false"})
        assert (r.code, r.remark) == (ResponseCode.SYSTEM_ERROR, f"The Consumer <{G}> <other@2> not online")
        assert _nothing_relayed(other)
    finally:
        other.close()


def test_mqadmin_producer_connection_as_a_user_without_permission(world):
    _, _, ns, _, _ = world
    env = dict(os.environ, PYTHONPATH=str(REPO))
    env.pop("NAMESRV_ADDR", None)
    r = subprocess.run([sys.executable, "-m", "mqadmin.app", "producerConnection", "-n", ns, "-g", PG, "-t", T,
                        "--ak", "nob", "--sk", "nobpw"], capture_output=True, text=True, env=env, cwd=REPO,
                       timeout=120)
    out = r.stdout + r.stderr
    assert r.returncode == 1, out
    assert "User:nob has no permission to access Cluster:DefaultCluster" in out and "Traceback" not in out
    r = subprocess.run([sys.executable, "-m", "mqadmin.app", "producerConnection", "-n", ns, "-g", PG, "-t", T,
                        "--ak", "ops", "--sk", "opspw"], capture_output=True, text=True, env=env, cwd=REPO,
                       timeout=120)
    assert r.returncode == 0 and VICTIM in r.stdout, r.stdout + r.stderr


def test_batch_admin_codes_under_acl(world):
    """GET_BROKER_CONSUME_STATS (317) reads every group's progress: Cluster [Get], as Apache's header says.
    UPDATE_AND_CREATE_TOPIC_LIST (18) asks Topic [Create] of every entry, as UPDATE_AND_CREATE_TOPIC (17)
    asks of its one (Apache's broker asks nothing for the list); refused, none is created.
    UPDATE_AND_CREATE_SUBSCRIPTIONGROUP_LIST (225) needs a signature only, as 200 does."""
    broker, _, _, (_, _, conn), _ = world
    root, nob, ops = Signed(conn, *ROOT), Signed(conn, "nob", "nobpw"), Signed(conn, "ops", "opspw")
    r = nob.call(RC.GET_BROKER_CONSUME_STATS, {"isOrder": "false"})
    assert (r.code, r.remark) == (
        NO_PERMISSION, "User:nob has no permission to access Cluster:DefaultCluster from 127.0.0.1, no matched policies.")
    assert ("Subject = User:nob is Deny Action = Get from sourceIp = 127.0.0.1 on resource = Cluster:DefaultCluster "
            "for request = 317.") in _audit(broker)
    r = ops.call(RC.GET_BROKER_CONSUME_STATS, {"isOrder": "false"})
    assert r.code == OK and b"consumeStatsList" in r.body

    _user(root, "maker", "makerpw", [("Topic:Mine*", ["Create"])])
    maker = Signed(conn, "maker", "makerpw")

    def topics(*names: str) -> bytes:
        return json.dumps({"topicConfigList": [{"topicName": n, "perm": 6} for n in names]}).encode()

    r = maker.call(RC.UPDATE_AND_CREATE_TOPIC_LIST, {}, topics("Mine1", "Theirs"))
    assert (r.code, r.remark) == (
        NO_PERMISSION, "User:maker has no permission to access Topic:Theirs from 127.0.0.1, no matched policies.")
    assert broker.get_topic("Mine1") is None and broker.get_topic("Theirs") is None
    assert maker.call(RC.UPDATE_AND_CREATE_TOPIC_LIST, {}, topics("Mine1", "Mine2")).code == OK
    assert broker.get_topic("Mine2") is not None

    groups = json.dumps({"groupConfigList": [{"groupName": "NG1"}, {"groupName": "NG2"}]}).encode()
    unsigned = conn.call(RC.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP_LIST, {}, groups)
    assert unsigned.code != OK and broker.get_subscription_group("NG1") is None
    assert nob.call(RC.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP_LIST, {}, groups).code == OK
    assert broker.get_subscription_group("NG2") is not None
