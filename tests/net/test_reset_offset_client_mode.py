"""INVOKE_BROKER_TO_RESET_OFFSET (222) on a broker with useServerSideResetOffset=false (client mode), with
raw frames against real servers on 127.0.0.1, as Apache's Broker2Client.resetOffset answers it: the broker
computes the table per write queue, sends RESET_CONSUMER_CLIENT_OFFSET (220, oneway) to every online
consumer of the group and stores nothing itself; no consumer online is CONSUMER_NOT_ONLINE (206).

And the embedded reset (Broker.reset_offset, what mqadmin runs on a local store) in client mode commits
the offsets instead of leaving server-side reset entries, which would rewind the group the day the setting
is turned back on.
"""

from __future__ import annotations

import itertools

import pytest
from net_util import RawClient
from test_server_codes import create_topic, dispatched, pull, send

from broker_core.remoting import LanguageCode, RemotingCommand, RequestCode, ResponseCode, fastjson
from broker_core.remoting.bodies import (
    ConsumerData,
    HeartbeatData,
    MessageQueue,
    ResetOffsetBody,
    SubscriptionData,
)

RC = RequestCode
OK = ResponseCode.SUCCESS
_opaque = itertools.count(50_000)


@pytest.fixture
def client_mode(servers):
    """(broker, broker client, broker address) of a broker in client mode with topic T (2 queues, 3 messages each)."""
    broker, _server, addr = servers.add_broker(props={"useServerSideResetOffset": "false"})
    bc = RawClient(addr)
    try:
        create_topic(bc, "T", 2)
        for qid in (0, 1):
            for i in range(3):
                assert send(bc, "T", f"m{qid}{i}".encode(), qid).code == OK
            dispatched(bc, "T", qid, 3)
        yield broker, bc, addr
    finally:
        bc.close()


def call(bc: RawClient, code: int, ext: dict[str, str], body: bytes = b"", *, version: int | None = None,
         language: LanguageCode | None = None) -> RemotingCommand:
    """A request with a chosen client version or language (RawClient.call sends the defaults)."""
    cmd = RemotingCommand.request(code, ext, body, opaque=next(_opaque))
    if version is not None:
        cmd.version = version
    if language is not None:
        cmd.language = language
    bc.send(cmd)
    while True:
        got = bc.recv()
        assert got is not None, "connection closed before the answer"
        if got.is_response and got.opaque == cmd.opaque:
            return got


def commit(bc: RawClient, group: str, qid: int, offset: int) -> None:
    """The group consumed queue ``qid`` up to ``offset``: it pulled (which creates the group, as a commit
    alone never does) and committed, without staying online (a pull registers no consumer)."""
    assert pull(bc, "T", qid, group=group).code == OK
    r = bc.call(RC.UPDATE_CONSUMER_OFFSET, {"consumerGroup": group, "topic": "T", "queueId": str(qid),
                                            "commitOffset": str(offset)})
    assert r.code == OK, r.remark


def heartbeat(bc: RawClient, group: str, client_id: str, version: int | None = None) -> None:
    hb = HeartbeatData(client_id=client_id, consumer_data_set=[ConsumerData(
        group_name=group, consume_type="CONSUME_PASSIVELY", message_model="CLUSTERING",
        consume_from_where="CONSUME_FROM_LAST_OFFSET", subscription_data_set=[SubscriptionData(topic="T")])])
    assert call(bc, RC.HEART_BEAT, {}, hb.to_json(), version=version).code == OK


def reset(bc: RawClient, group: str, timestamp: int, force: bool = True, **kw: object) -> RemotingCommand:
    ext = {"topic": "T", "group": group, "timestamp": str(timestamp), "isForce": str(force).lower(),
           "queueId": "-1", "offset": "-1"}
    return call(bc, RC.INVOKE_BROKER_TO_RESET_OFFSET, ext, **kw)  # type: ignore[arg-type]


def next_request(client: RawClient) -> RemotingCommand:
    """The next request the broker sends on this connection (responses of earlier calls skipped)."""
    while True:
        got = client.recv(10)
        assert got is not None
        if not got.is_response:
            return got


def mq(qid: int) -> MessageQueue:
    return MessageQueue(topic="T", broker_name="broker-a", queue_id=qid)


def test_no_consumer_online_is_consumer_not_online(client_mode):
    broker, bc, _ = client_mode
    commit(bc, "G", 0, 3)
    commit(bc, "G", 1, 3)
    r = reset(bc, "G", 0)
    assert r.code == ResponseCode.CONSUMER_NOT_ONLINE
    assert r.remark == "Consumer not online, so can not reset offset, Group: G Topic: T Timestamp: 0"
    # nothing moved, nothing left behind for a later server-side mode
    assert [broker.query_offset("G", "T", q) for q in (0, 1)] == [3, 3]
    assert not any(broker.offset_manager.has_offset_reset("G", "T", q) for q in (0, 1))


def test_group_without_offsets_and_unknown_topic_are_refused_as_apache(client_mode):
    _, bc, _ = client_mode
    heartbeat(bc, "NEW", "c1")
    r = reset(bc, "NEW", 0)
    assert (r.code, r.remark) == (ResponseCode.SYSTEM_ERROR, "THe consumer group <NEW> not exist")
    r = call(bc, RC.INVOKE_BROKER_TO_RESET_OFFSET, {"topic": "NOPE", "group": "NEW", "timestamp": "0",
                                                    "isForce": "true"})
    assert r.code == ResponseCode.TOPIC_NOT_EXIST
    assert r.remark == "[reset-offset] reset offset failed, no topic in this broker. topic=NOPE"


def test_online_consumers_are_sent_the_table_and_the_broker_stores_nothing(client_mode):
    broker, bc, addr = client_mode
    other = RawClient(addr)
    try:
        commit(bc, "G", 0, 3)
        commit(bc, "G", 1, 1)
        heartbeat(bc, "G", "c1")
        heartbeat(other, "G", "c2")
        # not forced, to the max offset (timestamp -1): a queue only ever moves backwards, so both stay
        r = reset(bc, "G", -1, force=False)
        assert r.code == OK, r.remark
        assert ResetOffsetBody.from_json(r.body).offset_table == {mq(0): 3, mq(1): 1}
        assert ResetOffsetBody.from_json(next_request(bc).body).offset_table == {mq(0): 3, mq(1): 1}
        assert ResetOffsetBody.from_json(next_request(other).body).offset_table == {mq(0): 3, mq(1): 1}
        # forced, to a time before every message: each client connection is told, oneway
        r = reset(bc, "G", 0)
        assert ResetOffsetBody.from_json(r.body).offset_table == {mq(0): 0, mq(1): 0}
        for client in (bc, other):
            req = next_request(client)
            assert req.code == RC.RESET_CONSUMER_CLIENT_OFFSET and req.is_oneway
            assert (req.ext_fields["topic"], req.ext_fields["group"], req.ext_fields["timestamp"]) == ("T", "G", "0")
            assert ResetOffsetBody.from_json(req.body).offset_table == {mq(0): 0, mq(1): 0}
        # Apache's broker does not commit in client mode: the consumers do, once they moved
        assert [broker.query_offset("G", "T", q) for q in (0, 1)] == [3, 1]
        assert not any(broker.offset_manager.has_offset_reset("G", "T", q) for q in (0, 1))
    finally:
        other.close()


def test_a_cpp_request_sends_the_table_as_a_list(client_mode):
    _, bc, _ = client_mode
    commit(bc, "G", 0, 3)
    commit(bc, "G", 1, 3)
    heartbeat(bc, "G", "c1")
    r = reset(bc, "G", 0, language=LanguageCode.CPP)
    assert ResetOffsetBody.from_json(r.body).offset_table == {mq(0): 0, mq(1): 0}  # the answer: a map as always
    body = fastjson.loads(next_request(bc).body)
    assert sorted(body["offsetTable"], key=lambda e: e["queueId"]) == [
        {"brokerName": "broker-a", "offset": 0, "queueId": q, "topic": "T"} for q in (0, 1)]


def test_a_client_older_than_3_0_7_is_refused(client_mode):
    _, bc, _ = client_mode
    commit(bc, "G", 0, 3)
    commit(bc, "G", 1, 3)
    heartbeat(bc, "G", "c1", version=27)
    r = reset(bc, "G", 0)
    assert (r.code, r.remark) == (ResponseCode.SYSTEM_ERROR, "the client does not support this feature. "
                                                             "version=V3_0_6")


def test_embedded_reset_in_client_mode_commits_and_turning_server_side_on_does_not_rewind(client_mode):
    broker, bc, _ = client_mode
    commit(bc, "G", 0, 3)
    broker.reset_offset("G", "T", 0, queue_id=0)  # what mqadmin resetOffsetByTime does on a local store
    assert broker.query_offset("G", "T", 0) == 0
    assert not broker.offset_manager.has_offset_reset("G", "T", 0)
    commit(bc, "G", 0, 3)  # the group consumes again meanwhile, up to the end
    broker.update_broker_config({"useServerSideResetOffset": "true"})
    r = pull(bc, "T", 0, offset=3, group="G")
    assert r.code != ResponseCode.PULL_OFFSET_MOVED, "a stale client-mode reset rewound the group"
    assert broker.query_offset("G", "T", 0) == 3
