"""Every request code the name server and the broker serve, exercised once with raw frames against a
real server on 127.0.0.1 (in-process, free ports), plus the special answers of spec A.5."""

from __future__ import annotations

import json
import struct
import time

from net_util import RawClient, records

from broker_core.remoting import RemotingCommand, RequestCode, ResponseCode, SerializeType, fastjson
from broker_core.remoting.bodies import (
    ClusterInfo,
    ConsumerConnection,
    ConsumerData,
    ConsumeStats,
    GetConsumerListByGroupResponseBody,
    GroupList,
    HeartbeatData,
    KVTable,
    LockBatchResponseBody,
    MessageQueue,
    ProducerData,
    ResetOffsetBody,
    SubscriptionData,
    TopicList,
    TopicRouteData,
    TopicStatsTable,
)
from broker_core.remoting.headers import SendMessageRequestHeaderV2
from broker_core.store.codec.batch import BatchItem, encode_batch
from broker_core.store.codec.properties import encode_properties

RC = RequestCode
OK = ResponseCode.SUCCESS


def create_topic(bc: RawClient, topic: str, queues: int = 2, **extra: str):
    return bc.call(RC.UPDATE_AND_CREATE_TOPIC, {"topic": topic, "defaultTopic": "TBW102", "readQueueNums": str(queues),
                                                "writeQueueNums": str(queues), "perm": "6",
                                                "topicFilterType": "SINGLE_TAG", **extra})


def send(bc: RawClient, topic: str, body: bytes, queue_id: int = 0, props: dict[str, str] | None = None,
         code: int = RC.SEND_MESSAGE_V2, sys_flag: int = 0, group: str = "P"):
    h = SendMessageRequestHeaderV2(a=group, b=topic, c="TBW102", d=4, e=queue_id, f=sys_flag, g=int(time.time() * 1000),
                                   h=0, i=encode_properties(props or {}))
    return bc.call(code, h.to_ext_fields(), body)


def dispatched(bc: RawClient, topic: str, queue_id: int, count: int) -> None:
    """Wait until dispatch (reput, asynchronous after the put) made ``count`` messages readable."""
    deadline = time.time() + 10
    while int(bc.call(RC.GET_MAX_OFFSET, {"topic": topic, "queueId": str(queue_id)}).ext_fields["offset"]) < count:
        assert time.time() < deadline, f"{topic}/{queue_id} never reached {count} messages"
        time.sleep(0.02)


def pull(bc, topic, queue_id=0, offset=0, group="G", sys_flag=0, suspend_ms=0, sub="*", sub_version=0):
    """PULL_MESSAGE with its own subscription ``sub`` (SUBSCRIPTION flag); ``sub=None``: without one, as
    Java push consumers pull (the group's heartbeat subscription of at least ``sub_version`` applies)."""
    if sub is not None:
        sys_flag |= 0x4
    ext = {"consumerGroup": group, "topic": topic, "queueId": str(queue_id), "queueOffset": str(offset),
           "maxMsgNums": "32", "sysFlag": str(sys_flag), "commitOffset": "0", "suspendTimeoutMillis": str(suspend_ms),
           "subVersion": str(sub_version)}
    if sub is not None:
        ext |= {"subscription": sub, "expressionType": "TAG"}
    return bc.call(RC.PULL_MESSAGE, ext, timeout=30)


def test_unknown_code_and_oneway(broker_setup):
    _, _, ns, bc = broker_setup
    for client in (ns, bc):
        r = client.call(4242)
        assert (r.code, r.remark) == (ResponseCode.REQUEST_CODE_NOT_SUPPORTED, " request type 4242 not supported")
        assert r.is_response
    # a header without a code is code 0 (fastjson's int default), answered as Apache does, not closed
    for client in (ns, bc):
        client.send_raw(struct.pack(">ii", 4 + 22, 22) + b'{"opaque":91,"flag":0}')
        r = client.recv(timeout=5)
        assert r is not None and (r.code, r.remark, r.opaque) == (ResponseCode.REQUEST_CODE_NOT_SUPPORTED,
                                                                 " request type 0 not supported", 91)
    # a oneway request gets no answer, not even for an unknown code or an error; the next call is answered
    bc.send(RemotingCommand.request(4242, opaque=77, oneway=True))
    bc.send(RemotingCommand.request(RC.GET_TOPIC_CONFIG, {}, opaque=78, oneway=True))  # missing header field
    r = bc.call(RC.GET_BROKER_RUNTIME_INFO)
    assert r.code == OK and not bc.inbox
    # a oneway UPDATE_CONSUMER_OFFSET is applied without an answer
    create_topic(bc, "OW")
    assert bc.call(RC.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, {}, json.dumps({"groupName": "G"}).encode()).code == OK
    bc.send(RemotingCommand.request(RC.UPDATE_CONSUMER_OFFSET, {"consumerGroup": "G", "topic": "OW", "queueId": "0",
                                                                "commitOffset": "0"}, opaque=79, oneway=True))
    r = bc.call(RC.QUERY_CONSUMER_OFFSET, {"consumerGroup": "G", "topic": "OW", "queueId": "0"})
    assert (r.code, r.ext_fields["offset"]) == (OK, "0") and not bc.inbox


def test_missing_required_header_is_system_error(broker_setup):
    _, _, ns, bc = broker_setup
    r = bc.call(RC.GET_TOPIC_CONFIG, {})
    assert (r.code, r.remark) == (ResponseCode.SYSTEM_ERROR, "the custom field <topic> is null")
    r = ns.call(RC.GET_ROUTEINFO_BY_TOPIC, {})
    assert r.code == ResponseCode.SYSTEM_ERROR


def test_namesrv_codes(broker_setup):
    _, broker, ns, bc = broker_setup
    info = ClusterInfo.from_json(ns.call(RC.GET_BROKER_CLUSTER_INFO).body)
    addr = broker.config.broker_addr
    assert info.cluster_addr_table == {"DefaultCluster": ["broker-a"]}
    assert info.broker_addr_table["broker-a"].broker_addrs == {0: addr}
    assert create_topic(bc, "NsT", 3).code == OK
    r = ns.call(RC.GET_ROUTEINFO_BY_TOPIC, {"topic": "NsT"})
    assert b'"0":"' in r.body  # version 479 >= V4_9_4: browser-compatible keys
    route = TopicRouteData.from_json(r.body)
    assert [(q.broker_name, q.read_queue_nums, q.write_queue_nums, q.perm) for q in route.queue_datas] == \
        [("broker-a", 3, 3, 6)]
    old = RemotingCommand.request(RC.GET_ROUTEINFO_BY_TOPIC, {"topic": "NsT"}, opaque=5)
    old.version = 400
    ns.send(old)
    assert b"{0:" in ns.recv().body  # old clients get fastjson's default dialect
    missing = ns.call(RC.GET_ROUTEINFO_BY_TOPIC, {"topic": "Nope"})
    assert missing.code == ResponseCode.TOPIC_NOT_EXIST
    assert missing.remark.startswith("No topic route info in name server for the topic: Nope\nSee https://")
    topics = TopicList.from_json(ns.call(RC.GET_ALL_TOPIC_LIST_FROM_NAMESERVER).body).topic_list
    assert {"NsT", "TBW102", "DefaultCluster", "broker-a"} <= set(topics)
    by_cluster = TopicList.from_json(ns.call(RC.GET_TOPICS_BY_CLUSTER, {"cluster": "DefaultCluster"}).body)
    assert "NsT" in by_cluster.topic_list
    # KV config (ORDER_TOPIC_CONFIG), which also shows up as the route's orderTopicConf when the name
    # server's orderMessageEnable is on (Apache's ClientRequestProcessor; off by default)
    kv = {"namespace": "ORDER_TOPIC_CONFIG", "key": "NsT"}
    assert ns.call(RC.PUT_KV_CONFIG, kv | {"value": "broker-a:3"}).code == OK
    assert ns.call(RC.GET_KV_CONFIG, kv).ext_fields["value"] == "broker-a:3"
    assert "orderTopicConf" not in json.loads(ns.call(RC.GET_ROUTEINFO_BY_TOPIC, {"topic": "NsT"}).body)
    assert ns.call(RC.UPDATE_NAMESRV_CONFIG, {}, b"orderMessageEnable=true\n").code == OK
    assert json.loads(ns.call(RC.GET_ROUTEINFO_BY_TOPIC, {"topic": "NsT"}).body)["orderTopicConf"] == "broker-a:3"
    assert KVTable.from_json(ns.call(RC.GET_KVLIST_BY_NAMESPACE, {"namespace": "ORDER_TOPIC_CONFIG"}).body).table == \
        {"NsT": "broker-a:3"}
    assert ns.call(RC.DELETE_KV_CONFIG, kv).code == OK
    r = ns.call(RC.GET_KV_CONFIG, kv)
    assert (r.code, r.remark) == (ResponseCode.QUERY_NOT_FOUND, "No config item, Namespace: ORDER_TOPIC_CONFIG Key: NsT")
    assert ns.call(RC.DELETE_TOPIC_IN_NAMESRV, {"topic": "NsT", "clusterName": "DefaultCluster"}).code == OK
    assert ns.call(RC.GET_ROUTEINFO_BY_TOPIC, {"topic": "NsT"}).code == ResponseCode.TOPIC_NOT_EXIST
    # a broker that says goodbye leaves the routes at once
    un = {"brokerName": "broker-a", "brokerAddr": addr, "clusterName": "DefaultCluster", "brokerId": "0"}
    assert ns.call(RC.UNREGISTER_BROKER, un).code == OK
    assert ClusterInfo.from_json(ns.call(RC.GET_BROKER_CLUSTER_INFO).body).broker_addr_table == {}


def test_register_broker_crc_checked(servers):
    ns = RawClient(servers.namesrv_addr)
    try:
        h = {"brokerName": "b", "brokerAddr": "127.0.0.1:1", "clusterName": "C", "haServerAddr": "", "brokerId": "0",
             "bodyCrc32": "12345"}
        r = ns.call(RC.REGISTER_BROKER, h, b"{}")
        assert (r.code, r.remark) == (ResponseCode.SYSTEM_ERROR, "crc32 not match")
    finally:
        ns.close()


def test_produce_and_consume_codes(broker_setup):
    _, broker, _, bc = broker_setup
    assert create_topic(bc, "T", 2).code == OK
    r = send(bc, "T", b"hello", 1, {"TAGS": "a", "KEYS": "k1 k2", "UNIQ_KEY": "U1"})
    assert r.code == OK and r.ext_fields["queueId"] == "1" and r.ext_fields["queueOffset"] == "0"
    assert r.ext_fields["transactionId"] == "U1"
    offset_msg_id = r.ext_fields["msgId"]
    v1 = {"producerGroup": "P", "topic": "T", "defaultTopic": "TBW102", "defaultTopicQueueNums": "4", "queueId": "1",
          "sysFlag": "0", "bornTimestamp": "1", "flag": "0", "properties": encode_properties({"TAGS": "b"})}
    assert bc.call(RC.SEND_MESSAGE, v1, b"second").ext_fields["queueOffset"] == "1"
    batch = encode_batch([BatchItem(b"b1", {"TAGS": "a"}), BatchItem(b"b2", {"TAGS": "a"})])
    rb = send(bc, "T", batch, 1, code=RC.SEND_BATCH_MESSAGE)
    assert rb.code == OK and rb.ext_fields["queueOffset"] == "2" and rb.ext_fields["msgId"].count(",") == 1
    # pull everything, then only tag a (subscription in the request)
    dispatched(bc, "T", 1, 4)
    r = pull(bc, "T", 1)
    assert (r.code, r.remark, r.ext_fields["nextBeginOffset"], r.ext_fields["maxOffset"]) == (OK, "FOUND", "4", "4")
    assert [m.body for m in records(r.body)] == [b"hello", b"second", b"b1", b"b2"]
    r = pull(bc, "T", 1, sys_flag=0x4, sub="a")
    assert [m.body for m in records(r.body)] == [b"hello", b"b1", b"b2"]
    r = pull(bc, "T", 1, offset=4)
    assert (r.code, r.ext_fields["nextBeginOffset"]) == (ResponseCode.PULL_NOT_FOUND, "4")
    r = pull(bc, "T", 1, offset=99)
    assert r.code == ResponseCode.PULL_OFFSET_MOVED
    # offsets
    q = {"topic": "T", "queueId": "1"}
    assert bc.call(RC.GET_MAX_OFFSET, q).ext_fields["offset"] == "4"
    assert bc.call(RC.GET_MIN_OFFSET, q).ext_fields["offset"] == "0"
    assert bc.call(RC.SEARCH_OFFSET_BY_TIMESTAMP, q | {"timestamp": "0"}).ext_fields["offset"] == "0"
    cq = {"consumerGroup": "G", "topic": "T", "queueId": "1"}
    r = bc.call(RC.QUERY_CONSUMER_OFFSET, cq | {"setZeroIfNotFound": "false"})
    assert r.code == ResponseCode.QUERY_NOT_FOUND
    assert bc.call(RC.UPDATE_CONSUMER_OFFSET, cq | {"commitOffset": "3"}).code == OK
    assert bc.call(RC.QUERY_CONSUMER_OFFSET, cq).ext_fields["offset"] == "3"
    # reads by offset id / key / unique key
    view = bc.call(RC.VIEW_MESSAGE_BY_ID, {"topic": "T", "offset": str(int(offset_msg_id[16:], 16))})
    assert view.code == OK and records(view.body)[0].body == b"hello"
    r = bc.call(RC.VIEW_MESSAGE_BY_ID, {"offset": "999999999"})
    assert (r.code, r.remark) == (ResponseCode.SYSTEM_ERROR, "can not find message by the offset, 999999999")
    # an offset in the last bytes of the last record (a mistyped msgId) is "not found" too; it was
    # answered with a CorruptDataError naming the server's commitlog path, as if the store were damaged
    last = records(bc.call(RC.VIEW_MESSAGE_BY_ID, {"offset": str(int(rb.ext_fields["msgId"][-16:], 16))}).body)[0]
    assert last.body == b"b2"
    for tail in (last.commit_log_offset + last.store_size - 7, last.commit_log_offset + last.store_size - 1):
        r = bc.call(RC.VIEW_MESSAGE_BY_ID, {"offset": str(tail)})
        assert (r.code, r.remark) == (ResponseCode.SYSTEM_ERROR, f"can not find message by the offset, {tail}"), r
    deadline = time.time() + 10
    while True:  # the index is written by dispatch, just after the put
        found = bc.call(RC.QUERY_MESSAGE, {"topic": "T", "key": "k2", "maxNum": "64", "beginTimestamp": "0",
                                           "endTimestamp": str(2**63 - 1), "_UNIQUE_KEY_QUERY": "false"})
        if found.code == OK or time.time() > deadline:
            break
        time.sleep(0.05)
    assert [m.body for m in records(found.body)] == [b"hello"]
    uq = bc.call(RC.QUERY_MESSAGE, {"topic": "T", "key": "U1", "maxNum": "1", "beginTimestamp": "0",
                                    "endTimestamp": str(2**63 - 1), "_UNIQUE_KEY_QUERY": "true"})
    assert records(uq.body)[0].body == b"hello"
    none = bc.call(RC.QUERY_MESSAGE, {"topic": "T", "key": "zz", "maxNum": "64", "beginTimestamp": "0",
                                      "endTimestamp": "1", "_UNIQUE_KEY_QUERY": "false"})
    assert (none.code, none.remark) == (ResponseCode.QUERY_NOT_FOUND, "can not find message, maybe time range not correct")
    # retry: send the failed message back -> %RETRY%G
    r = bc.call(RC.CONSUMER_SEND_MSG_BACK, {"offset": str(int(offset_msg_id[16:], 16)), "group": "G",
                                            "delayLevel": "-1", "originTopic": "T"})
    assert r.code == OK
    dispatched(bc, "%DLQ%G", 0, 1)


def test_a_new_groups_offset_and_a_commit_for_an_unknown_group(broker_setup):
    """As ConsumerManageProcessor: a group with no stored offset gets 0 only from a queue that still
    holds its message 0 (an empty queue answered 0 too), and a commit never creates a group."""
    _, _, _, bc = broker_setup
    create_topic(bc, "NEWG", 2)
    assert send(bc, "NEWG", b"first", 0).code == OK
    dispatched(bc, "NEWG", 0, 1)
    assert bc.call(RC.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, {}, json.dumps({"groupName": "NG"}).encode()).code == OK
    ask = {"consumerGroup": "NG", "topic": "NEWG"}
    r = bc.call(RC.QUERY_CONSUMER_OFFSET, ask | {"queueId": "0"})
    assert (r.code, r.ext_fields["offset"]) == (OK, "0")
    r = bc.call(RC.QUERY_CONSUMER_OFFSET, ask | {"queueId": "1"})
    assert (r.code, r.remark) == (ResponseCode.QUERY_NOT_FOUND,
                                  "Not found, V3_0_6_SNAPSHOT maybe this group consumer boot first")
    r = bc.call(RC.QUERY_CONSUMER_OFFSET, ask | {"queueId": "0", "setZeroIfNotFound": "false"})
    assert (r.code, r.remark) == (ResponseCode.QUERY_NOT_FOUND,
                                  "Not found, do not set to zero, maybe this group boot first")
    # a mistyped group in a commit is refused; it does not become a group holding offsets
    r = bc.call(RC.UPDATE_CONSUMER_OFFSET, {"consumerGroup": "NG-typo", "topic": "NEWG", "queueId": "0",
                                            "commitOffset": "1"})
    assert (r.code, r.remark) == (ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, "Group NG-typo not exist!")
    r = bc.call(RC.GET_SUBSCRIPTIONGROUP_CONFIG, {"group": "NG-typo"})
    assert r.code == ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST
    r = bc.call(RC.UPDATE_CONSUMER_OFFSET, ask | {"queueId": "0", "commitOffset": "1"})
    assert r.code == OK
    assert bc.call(RC.QUERY_CONSUMER_OFFSET, ask | {"queueId": "0"}).ext_fields["offset"] == "1"


def test_long_poll_pull_is_woken_by_a_send(broker_setup):
    servers, _, _, bc = broker_setup
    create_topic(bc, "LP", 1)
    other = RawClient(bc.sock.getpeername()[0] + ":" + str(bc.sock.getpeername()[1]))
    try:
        start = time.monotonic()
        cmd = RemotingCommand.request(RC.PULL_MESSAGE, {
            "consumerGroup": "G", "topic": "LP", "queueId": "0", "queueOffset": "0", "maxMsgNums": "32",
            "sysFlag": "6", "commitOffset": "0", "suspendTimeoutMillis": "20000", "subVersion": "0",
            "subscription": "*", "expressionType": "TAG"}, opaque=555)
        bc.send(cmd)
        time.sleep(0.3)
        assert not bc.inbox
        assert send(other, "LP", b"wake").code == OK  # another connection goes on while the pull waits
        r = bc.recv(15)
        assert r.opaque == 555 and r.code == OK and records(r.body)[0].body == b"wake"
        assert time.monotonic() - start < 10
        # a suspended pull with nothing to read answers PULL_NOT_FOUND after its timeout
        r = pull(bc, "LP", offset=1, sys_flag=2, suspend_ms=300)
        assert r.code == ResponseCode.PULL_NOT_FOUND
    finally:
        other.close()


def test_pop_ack_change_invisible_batch_ack(broker_setup):
    _, _, _, bc = broker_setup
    create_topic(bc, "PT", 1)
    for i in range(4):
        send(bc, "PT", f"m{i}".encode())
    dispatched(bc, "PT", 0, 4)
    pop = {"consumerGroup": "PG", "topic": "PT", "queueId": "-1", "maxMsgNums": "2", "invisibleTime": "60000",
           "pollTime": "1000", "bornTime": str(int(time.time() * 1000)), "initMode": "0"}
    r = bc.call(RC.POP_MESSAGE, pop)
    assert r.code == OK, r.remark
    got = records(r.body)
    assert [m.body for m in got] == [b"m0", b"m1"]  # (pop long-polls until dispatch shows them)
    pop_time, revive_qid = r.ext_fields["popTime"], r.ext_fields["reviveQid"]
    extra = f"0 {pop_time} 60000 {revive_qid} 0 broker-a 0"
    r = bc.call(RC.ACK_MESSAGE, {"consumerGroup": "PG", "topic": "PT", "queueId": "0", "extraInfo": extra,
                                 "offset": str(got[0].queue_offset)})
    assert r.code == OK
    r = bc.call(RC.CHANGE_MESSAGE_INVISIBLETIME, {"consumerGroup": "PG", "topic": "PT", "queueId": "0",
                                                  "extraInfo": extra, "offset": str(got[1].queue_offset),
                                                  "invisibleTime": "1000"})
    assert r.code == OK and r.ext_fields["invisibleTime"] == "1000"
    r = bc.call(RC.POP_MESSAGE, pop)
    got2 = records(r.body)
    assert [m.body for m in got2] == [b"m2", b"m3"]
    body = {"brokerName": "broker-a", "acks": [{"c": "PG", "t": "PT", "r": "0", "so": got2[0].queue_offset,
                                                "q": 0, "rq": int(r.ext_fields["reviveQid"]),
                                                "pt": int(r.ext_fields["popTime"]), "it": 60000, "b": "Aw=="}]}
    assert bc.call(RC.BATCH_ACK_MESSAGE, {}, json.dumps(body).encode()).code == OK
    bad = bc.call(RC.ACK_MESSAGE, {"consumerGroup": "PG", "topic": "PT", "queueId": "0", "extraInfo": "1 2",
                                   "offset": "0"})
    assert bad.code == ResponseCode.MESSAGE_ILLEGAL


def test_client_codes_and_broker_to_client_notify(broker_setup):
    servers, _, _, bc = broker_setup
    create_topic(bc, "CT", 2)
    other = RawClient(servers.brokers[0][1].ctx.broker.config.broker_addr)
    try:
        def heartbeat(client, cid):
            hb = HeartbeatData(client_id=cid, consumer_data_set=[_consumer("CG", "CT")])
            return client.call(RC.HEART_BEAT, {}, hb.to_json())
        send(bc, "CT", b"x", 0, {"TAGS": "TagB"})
        send(bc, "CT", b"y", 0, {"TAGS": "TagA"})
        dispatched(bc, "CT", 0, 2)
        # a pull without its own subscription before any heartbeat: refused, not answered with everything
        r = pull(bc, "CT", group="CG", sub=None)
        assert (r.code, r.body) == (ResponseCode.SUBSCRIPTION_NOT_EXIST, b""), r
        assert "group info not exist" in r.remark
        r = heartbeat(bc, "c1")
        assert r.code == OK and r.ext_fields["IS_SUPPORT_HEART_BEAT_V2"] == "true"
        ids = GetConsumerListByGroupResponseBody.from_json(bc.call(RC.GET_CONSUMER_LIST_BY_GROUP,
                                                                   {"consumerGroup": "CG"}).body)
        assert ids.consumer_id_list == ["c1"]
        heartbeat(other, "c2")  # c1 is told the group changed, on its own connection
        note = bc.recv(10)
        assert note.code == RC.NOTIFY_CONSUMER_IDS_CHANGED and note.is_oneway and not note.is_response
        assert note.ext_fields == {"consumerGroup": "CG"}
        conn = ConsumerConnection.from_json(bc.call(RC.GET_CONSUMER_CONNECTION_LIST, {"consumerGroup": "CG"}).body)
        assert sorted(c.client_id for c in conn.connection_set) == ["c1", "c2"]
        assert conn.subscription_table["CT"].sub_string == "TagA"
        # a pull without its own subscription uses the registered one (TagA) ...
        assert [m.body for m in records(pull(bc, "CT", group="CG", sub=None).body)] == [b"y"]
        # ... unless the client has a newer one than its heartbeats declared, or none for that topic
        r = pull(bc, "CT", group="CG", sub=None, sub_version=1)
        assert r.code == ResponseCode.SUBSCRIPTION_NOT_LATEST and "not latest" in r.remark
        create_topic(bc, "CT2", 1)
        r = pull(bc, "CT2", group="CG", sub=None)
        assert r.code == ResponseCode.SUBSCRIPTION_NOT_EXIST and "subscription not exist" in r.remark
        # queue locks
        lock = {"consumerGroup": "CG", "clientId": "c1",
                "mqSet": [{"topic": "CT", "brokerName": "broker-a", "queueId": 0}]}
        locked = LockBatchResponseBody.from_json(bc.call(RC.LOCK_BATCH_MQ, {}, json.dumps(lock).encode()).body)
        assert locked.lock_ok_mq_set == [MessageQueue(topic="CT", broker_name="broker-a", queue_id=0)]
        lock2 = dict(lock, clientId="c2")
        assert LockBatchResponseBody.from_json(other.call(RC.LOCK_BATCH_MQ, {}, json.dumps(lock2).encode()).body) \
            .lock_ok_mq_set == []
        assert bc.call(RC.UNLOCK_BATCH_MQ, {}, json.dumps(lock).encode()).code == OK
        assert bc.call(RC.UNREGISTER_CLIENT, {"clientID": "c1", "consumerGroup": "CG"}).code == OK
        other.close()
        deadline = time.time() + 5
        while time.time() < deadline:  # closing c2's connection removes it too
            r = bc.call(RC.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": "CG"})
            if r.code != OK:
                break
            time.sleep(0.05)
        assert (r.code, r.remark) == (ResponseCode.SYSTEM_ERROR, "no consumer for this group, CG")
        r = bc.call(RC.GET_CONSUMER_CONNECTION_LIST, {"consumerGroup": "CG"})
        assert (r.code, r.remark) == (ResponseCode.CONSUMER_NOT_ONLINE, "the consumer group[CG] not online")
    finally:
        other.close()


def _consumer(group: str, topic: str) -> ConsumerData:
    return ConsumerData(group_name=group, subscription_data_set=[
        SubscriptionData(topic=topic, sub_string="TagA", tags_set=["TagA"], code_set=[2598919])])


def test_admin_codes(broker_setup):
    _, broker, ns, bc = broker_setup
    assert create_topic(bc, "AT", 2, attributes="+queue.type=BatchCQ").code == OK
    bad = create_topic(bc, "bad topic!")
    assert bad.code == ResponseCode.INVALID_PARAMETER
    tc = json.loads(bc.call(RC.GET_TOPIC_CONFIG, {"topic": "AT"}).body)
    assert (tc["topicName"], tc["readQueueNums"], tc["attributes"]) == ("AT", 2, {"queue.type": "BatchCQ"})
    r = bc.call(RC.GET_TOPIC_CONFIG, {"topic": "Nope"})
    assert (r.code, r.remark) == (ResponseCode.TOPIC_NOT_EXIST, "No topic in this broker. topic: Nope")
    all_topics = fastjson.loads(bc.call(RC.GET_ALL_TOPIC_CONFIG).body)
    assert "AT" in all_topics["topicConfigTable"]
    send(bc, "AT", b"1", 1)
    dispatched(bc, "AT", 1, 1)
    stats = TopicStatsTable.from_json(bc.call(RC.GET_TOPIC_STATS_INFO, {"topic": "AT"}).body)
    mq1 = MessageQueue(topic="AT", broker_name="broker-a", queue_id=1)
    assert stats.offset_table[mq1].max_offset == 1
    # groups
    group = {"groupName": "AG", "retryMaxTimes": 3, "consumeBroadcastEnable": False}
    assert bc.call(RC.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, {}, json.dumps(group).encode()).code == OK
    g = json.loads(bc.call(RC.GET_SUBSCRIPTIONGROUP_CONFIG, {"group": "AG"}).body)
    assert (g["groupName"], g["retryMaxTimes"]) == ("AG", 3)
    allg = fastjson.loads(bc.call(RC.GET_ALL_SUBSCRIPTIONGROUP_CONFIG).body)
    assert "AG" in allg["subscriptionGroupTable"]
    # offsets and stats of the group
    bc.call(RC.UPDATE_CONSUMER_OFFSET, {"consumerGroup": "AG", "topic": "AT", "queueId": "1", "commitOffset": "0"})
    cs = ConsumeStats.from_json(bc.call(RC.GET_CONSUME_STATS, {"consumerGroup": "AG", "topic": "AT"}).body)
    assert (cs.offset_table[mq1].broker_offset, cs.offset_table[mq1].consumer_offset) == (1, 0)
    who = GroupList.from_json(bc.call(RC.QUERY_TOPIC_CONSUME_BY_WHO, {"topic": "AT"}).body)
    assert who.group_list == ["AG"]
    assert TopicList.from_json(bc.call(RC.QUERY_TOPICS_BY_CONSUMER, {"group": "AG"}).body).topic_list == ["AT"]
    reset = bc.call(RC.INVOKE_BROKER_TO_RESET_OFFSET, {"topic": "AT", "group": "AG", "timestamp": "-1",
                                                       "isForce": "true", "queueId": "-1", "offset": "-1"})
    assert reset.code == OK
    assert ResetOffsetBody.from_json(reset.body).offset_table[mq1] == 1
    # broker info and config
    kv = KVTable.from_json(bc.call(RC.GET_BROKER_RUNTIME_INFO).body).table
    assert kv["brokerName"] == "broker-a" and kv["brokerVersionDesc"] == "V5_3_3"
    cfg = bc.call(RC.GET_BROKER_CONFIG)
    assert b"brokerName=broker-a\n" in cfg.body and "version" in cfg.ext_fields
    # deletes; as in RocketMQ (deleteTopicWithBrokerRegistration=false) the topic stays in the name server's
    # routes until DELETE_TOPIC_IN_NAMESRV, which mqadmin deleteTopic sends after the brokers'
    assert bc.call(RC.DELETE_SUBSCRIPTIONGROUP, {"groupName": "AG", "cleanOffset": "true"}).code == OK
    assert bc.call(RC.GET_SUBSCRIPTIONGROUP_CONFIG, {"group": "AG"}).code == ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST
    assert ns.call(RC.GET_ROUTEINFO_BY_TOPIC, {"topic": "AT"}).code == OK
    assert bc.call(RC.DELETE_TOPIC_IN_BROKER, {"topic": "AT"}).code == OK
    assert broker.get_topic("AT") is None
    assert ns.call(RC.GET_ROUTEINFO_BY_TOPIC, {"topic": "AT"}).code == OK
    assert ns.call(RC.DELETE_TOPIC_IN_NAMESRV, {"topic": "AT", "clusterName": "DefaultCluster"}).code == OK
    assert ns.call(RC.GET_ROUTEINFO_BY_TOPIC, {"topic": "AT"}).code == ResponseCode.TOPIC_NOT_EXIST


def test_transaction_end_and_check_back(broker_setup):
    _, broker, _, bc = broker_setup
    create_topic(bc, "TX", 1)
    hb = HeartbeatData(client_id="p1", producer_data_set=[ProducerData(group_name="TP")])
    assert bc.call(RC.HEART_BEAT, {}, hb.to_json()).code == OK
    half = send(bc, "TX", b"half", 0, {"TRAN_MSG": "true", "PGROUP": "TP", "UNIQ_KEY": "TXU1"}, sys_flag=0x4, group="TP")
    assert half.code == OK
    assert broker.get_max_offset("TX", 0) == 0  # not visible yet
    # the broker asks the producer (oneway, on the producer's connection) ...
    broker.transaction_service.check_listener(broker.store.look_message_by_offset(
        int(half.ext_fields["msgId"][16:], 16)), "TP")
    check = bc.recv(10)
    assert check.code == RC.CHECK_TRANSACTION_STATE and check.is_oneway
    assert check.ext_fields["transactionId"] == "TXU1"
    assert records(check.body)[0].topic == "TX"
    # ... which commits with END_TRANSACTION (oneway as Java sends it)
    end = {"producerGroup": "TP", "tranStateTableOffset": check.ext_fields["tranStateTableOffset"],
           "commitLogOffset": check.ext_fields["commitLogOffset"], "commitOrRollback": "8",
           "fromTransactionCheck": "true", "msgId": "TXU1", "transactionId": "TXU1", "topic": "TX"}
    bc.send(RemotingCommand.request(RC.END_TRANSACTION, end, opaque=9, oneway=True))
    deadline = time.time() + 10
    while broker.get_max_offset("TX", 0) == 0 and time.time() < deadline:
        time.sleep(0.05)
    assert broker.get_max_offset("TX", 0) == 1
    assert [m.body for m in records(pull(bc, "TX").body)] == [b"half"]


def test_binary_header_requests_get_binary_answers(broker_setup):
    _, _, ns, _ = broker_setup
    r = ns.call(RC.GET_BROKER_CLUSTER_INFO, serialize_type=SerializeType.ROCKETMQ)
    assert r.serialize_type == SerializeType.ROCKETMQ and r.code == OK
    # and the raw bytes on the wire carry type 1 in the high byte
    ns.send_raw(struct.pack(">ii", 25, (1 << 24) | 21) + struct.pack(">hBhiii", 106, 0, 479, 4242, 0, 0) +
                struct.pack(">i", 0))
    raw = ns.recv()
    assert raw.opaque == 4242 and raw.serialize_type == SerializeType.ROCKETMQ


def _binary_route_request(topic: bytes, opaque: int) -> bytes:
    entry = struct.pack(">h", 5) + b"topic" + struct.pack(">i", len(topic)) + topic
    header = struct.pack(">hBhiii", RC.GET_ROUTEINFO_BY_TOPIC, 0, 479, opaque, 0, 0) + struct.pack(">i", len(entry)) + entry
    return struct.pack(">ii", 4 + len(header), (1 << 24) | len(header)) + header


def test_binary_header_empty_and_non_utf8_strings_are_answered_as_java_does(broker_setup):
    """A zero-length binary string is null in Java (the required topic is missing: SYSTEM_ERROR), and
    bytes that are not UTF-8 become U+FFFD; we answered TOPIC_NOT_EXIST for '' and closed the
    connection on the second."""
    _, _, ns, _ = broker_setup
    ns.send_raw(_binary_route_request(b"", 71))
    r = ns.recv()
    assert (r.opaque, r.code, r.remark) == (71, ResponseCode.SYSTEM_ERROR, "the custom field <topic> is null")
    ns.send_raw(_binary_route_request(b"T\xff", 72))
    r = ns.recv()
    assert (r.opaque, r.code) == (72, ResponseCode.TOPIC_NOT_EXIST)
    assert r.remark.startswith("No topic route info in name server for the topic: T\ufffd\n")


def test_json_header_without_version_gets_the_old_route_dialect(broker_setup):
    """No ``version`` is Java's default 0, below V4_9_4: the route comes in fastjson's own form
    (``{0:"addr"}``), as for a 4.9.3 client; we answered standard JSON as to the current version."""
    _, _, ns, bc = broker_setup
    assert create_topic(bc, "NoVer", 1).code == OK
    header = json.dumps({"code": RC.GET_ROUTEINFO_BY_TOPIC, "opaque": 81, "extFields": {"topic": "NoVer"}}).encode()
    ns.send_raw(struct.pack(">ii", 4 + len(header), len(header)) + header)
    r = ns.recv()
    assert (r.opaque, r.code) == (81, OK) and b'"brokerAddrs":{0:"' in r.body


def test_broker_config_update_and_earliest_store_time(broker_setup):
    _, _, ns, bc = broker_setup
    create_topic(bc, "ET", 1)
    q = {"topic": "ET", "queueId": "0"}
    assert bc.call(RC.GET_EARLIEST_MSG_STORETIME, q).ext_fields["timestamp"] == "-1"
    before = int(time.time() * 1000)
    send(bc, "ET", b"first")
    dispatched(bc, "ET", 0, 1)
    assert int(bc.call(RC.GET_EARLIEST_MSG_STORETIME, q).ext_fields["timestamp"]) >= before - 1000
    r = bc.call(RC.UPDATE_BROKER_CONFIG, {}, b"rocketmqHome=/tmp\n")
    assert (r.code, r.remark) == (ResponseCode.NO_PERMISSION, "Can not update config in black list.")
    assert bc.call(RC.UPDATE_BROKER_CONFIG, {}, b"brokerPermission=4\nnotAKey=1\n").code == OK
    assert b"brokerPermission=4\n" in bc.call(RC.GET_BROKER_CONFIG).body
    route = TopicRouteData.from_json(ns.call(RC.GET_ROUTEINFO_BY_TOPIC, {"topic": "ET"}).body)
    assert route.queue_datas[0].perm == 4  # re-registered read-only at once


def test_producer_connections_and_consumer_running_info_relay(broker_setup):
    servers, broker, _, bc = broker_setup
    consumer = RawClient(broker.config.broker_addr)
    try:
        hb = HeartbeatData(client_id="cid-9", producer_data_set=[ProducerData(group_name="PG9")],
                           consumer_data_set=[_consumer("CG9", "TBW102")])
        assert consumer.call(RC.HEART_BEAT, {}, hb.to_json()).code == OK
        pc = json.loads(bc.call(RC.GET_PRODUCER_CONNECTION_LIST, {"producerGroup": "PG9"}).body)
        assert [c["clientId"] for c in pc["connectionSet"]] == ["cid-9"]
        assert bc.call(RC.GET_PRODUCER_CONNECTION_LIST, {"producerGroup": "nope"}).code == ResponseCode.SYSTEM_ERROR
        # the broker relays GET_CONSUMER_RUNNING_INFO to the client and the client's answer back
        ask = RemotingCommand.request(RC.GET_CONSUMER_RUNNING_INFO, {"consumerGroup": "CG9", "clientId": "cid-9",
                                                                     "jstackEnable": "false"}, opaque=31)
        bc.send(ask)
        relayed = consumer.recv(10)
        assert relayed.code == RC.GET_CONSUMER_RUNNING_INFO and not relayed.is_response
        consumer.send(relayed.response(body=b'{"properties":{"PROP_CONSUME_TYPE":"CONSUME_PASSIVELY"}}'))
        answer = bc.recv(10)
        assert answer.opaque == 31 and answer.code == OK and b"PROP_CONSUME_TYPE" in answer.body
        r = bc.call(RC.GET_CONSUMER_RUNNING_INFO, {"consumerGroup": "CG9", "clientId": "ghost"})
        assert (r.code, r.remark) == (ResponseCode.SYSTEM_ERROR, "The Consumer <CG9> <ghost> not online")
        # a client that never answers: the remark says so (it ended in "failed: " with nothing after)
        r = bc.call(RC.GET_CONSUMER_RUNNING_INFO, {"consumerGroup": "CG9", "clientId": "cid-9"})
        assert (r.code, r.remark) == (ResponseCode.SYSTEM_ERROR,
                                      "invoke consumer <CG9> <cid-9> failed: no answer within 5 s")
    finally:
        consumer.close()


def test_the_served_codes_are_the_documented_ones(broker_setup):
    """The README's table of served codes is what the dispatch tables hold (nothing silently dropped)."""
    servers, _, _, _ = broker_setup
    broker_codes = set(servers.brokers[0][1].served_codes)
    assert broker_codes == {
        10, 310, 320, 11, 12, 33, 36, 37, 200050, 200051, 200151, 200053,
        34, 35, 46, 38, 203, 204, 41, 42, 307, 223, 309,
        14, 15, 29, 30, 31, 32, 208, 222, 300, 314, 343,
        17, 18, 215, 21, 351, 202, 200, 225, 207, 201, 352, 28, 26, 25, 317, 321, 306, 316, 329, 401, 315,
        *range(3001, 3011)}
    assert set(servers.namesrv.server.handlers) == {100, 101, 102, 103, 104, 105, 106, 205, 206, 216, 219, 224, 327,
                                                    318, 319}
