"""The batch admin codes Apache's own mqadmin sends, raw against a real broker: UPDATE_AND_CREATE_TOPIC_LIST
(18, updateTopicList), UPDATE_AND_CREATE_SUBSCRIPTIONGROUP_LIST (225, updateSubGroupList) and
GET_BROKER_CONSUME_STATS (317, brokerConsumeStats). The broker answered each "request type N not
supported", so Java's mqadmin failed against it. A list is applied whole or (one entry refused) not at all.
"""

from __future__ import annotations

import json

from net_util import RawClient
from test_server_codes import create_topic, dispatched, send

from broker_core.remoting import RequestCode, ResponseCode
from broker_core.remoting.bodies import (
    ConsumerData,
    ConsumeStatsList,
    HeartbeatData,
    MessageQueue,
    SubscriptionData,
)

RC = RequestCode
OK, INVALID, SYSTEM_ERROR = ResponseCode.SUCCESS, ResponseCode.INVALID_PARAMETER, ResponseCode.SYSTEM_ERROR


def topic_list(bc: RawClient, *configs: dict[str, object]):
    return bc.call(RC.UPDATE_AND_CREATE_TOPIC_LIST, {}, json.dumps({"topicConfigList": list(configs)}).encode())


def group_list(bc: RawClient, *configs: dict[str, object]):
    return bc.call(RC.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP_LIST, {},
                   json.dumps({"groupConfigList": list(configs)}).encode())


def topic_config(bc: RawClient, topic: str) -> dict[str, object] | None:
    r = bc.call(RC.GET_TOPIC_CONFIG, {"topic": topic})
    return json.loads(r.body) if r.code == OK else None


def test_topic_list_creates_every_topic_and_routes_them(broker_setup):
    _, _, ns, bc = broker_setup
    r = topic_list(bc, {"topicName": "L1", "readQueueNums": 2, "writeQueueNums": 2, "perm": 6},
                   {"topicName": "L2", "readQueueNums": 1, "writeQueueNums": 1, "perm": 6, "order": True,
                    "attributes": {"+queue.type": "BatchCQ"}})
    assert r.code == OK, r.remark
    assert topic_config(bc, "L1")["readQueueNums"] == 2
    l2 = topic_config(bc, "L2")
    assert (l2["order"], l2["attributes"]) == (True, {"queue.type": "BatchCQ"})
    for t in ("L1", "L2"):  # registered with the name server before the answer, as after code 17
        assert ns.call(RC.GET_ROUTEINFO_BY_TOPIC, {"topic": t}).code == OK, t
    # an entry as the broker already has it does not stop the others (Apache's broker answers SUCCESS
    # at the first unchanged entry and writes none of the list)
    r = topic_list(bc, {"topicName": "L1", "readQueueNums": 2, "writeQueueNums": 2, "perm": 6},
                   {"topicName": "L3", "readQueueNums": 4, "writeQueueNums": 4, "perm": 6})
    assert r.code == OK and topic_config(bc, "L3")["writeQueueNums"] == 4


def test_topic_list_with_one_bad_entry_changes_nothing(broker_setup):
    _, broker, _, bc = broker_setup
    assert create_topic(bc, "Kept", 2).code == OK
    send(bc, "Kept", b"x", 0)
    dispatched(bc, "Kept", 0, 1)
    before = topic_config(bc, "Kept")
    good = [{"topicName": "New1", "readQueueNums": 1, "writeQueueNums": 1, "perm": 6},
            {"topicName": "Kept", "readQueueNums": 8, "writeQueueNums": 8, "perm": 6}]
    cases = [
        ({"topicName": "bad topic!", "perm": 6}, INVALID, "contains illegal characters"),
        ({"topicName": "TBW102", "perm": 6}, INVALID, "The topic[TBW102] is conflict with system topic."),
        ({"topicName": "M", "attributes": {"+message.type": "MIXED"}}, INVALID, "MIXED message type is not supported."),
        ({"topicName": "Q", "readQueueNums": 1, "writeQueueNums": 1, "perm": 99}, INVALID, "perm"),
        ({"topicName": "A", "attributes": {"queue.type": "BatchCQ"}}, SYSTEM_ERROR, "must start with + or -"),
        # a queue.type change of a topic holding messages, found after the other entries were planned
        ({"topicName": "Kept", "attributes": {"+queue.type": "BatchCQ"}}, ResponseCode.SYSTEM_ERROR,
         "unchangeable attribute. key: queue.type"),
    ]
    for bad, code, remark in cases:
        r = topic_list(bc, *good, bad)
        assert r.code == code and remark in (r.remark or ""), (bad, r.code, r.remark)
        assert topic_config(bc, "New1") is None, bad
        assert topic_config(bc, "Kept") == before, bad
    assert broker.get_topic("New1") is None
    # a body that is not a CreateTopicListRequestBody: refused in one line naming the field
    for body, remark in ((b"", "CreateTopicListRequestBody: the request has no body"),
                         (b"{}", "CreateTopicListRequestBody: missing field topicConfigList"),
                         (b'{"topicConfigList":[{"perm":6}]}',
                          "CreateTopicListRequestBody.topicConfigList[0]: missing field topicName")):
        r = bc.call(RC.UPDATE_AND_CREATE_TOPIC_LIST, {}, body)
        assert (r.code, r.remark) == (SYSTEM_ERROR, remark)
    assert topic_list(bc).code == OK  # an empty list: nothing to do


def test_group_list_creates_every_group_or_none(broker_setup):
    _, _, _, bc = broker_setup
    r = group_list(bc, {"groupName": "G1", "retryMaxTimes": 3}, {"groupName": "G2", "consumeEnable": False})
    assert r.code == OK, r.remark
    g1 = json.loads(bc.call(RC.GET_SUBSCRIPTIONGROUP_CONFIG, {"group": "G1"}).body)
    g2 = json.loads(bc.call(RC.GET_SUBSCRIPTIONGROUP_CONFIG, {"group": "G2"}).body)
    assert (g1["retryMaxTimes"], g2["consumeEnable"]) == (3, False)
    for bad, code, remark in (({"groupName": "bad group!"}, INVALID, "illegal"),
                              ({"groupName": "G4", "retryQueueNums": -1}, INVALID, "retryQueueNums must be"),
                              ({"retryMaxTimes": 1}, SYSTEM_ERROR,
                               "SubscriptionGroupList.groupConfigList[2]: missing field groupName")):
        r = group_list(bc, {"groupName": "G1", "retryMaxTimes": 9}, {"groupName": "G3"}, bad)
        assert r.code == code and remark in (r.remark or ""), (bad, r.code, r.remark)
        assert bc.call(RC.GET_SUBSCRIPTIONGROUP_CONFIG, {"group": "G3"}).code == \
            ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, bad
        assert json.loads(bc.call(RC.GET_SUBSCRIPTIONGROUP_CONFIG, {"group": "G1"}).body)["retryMaxTimes"] == 3
    r = bc.call(RC.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP_LIST, {}, b"{}")
    assert (r.code, r.remark) == (SYSTEM_ERROR, "SubscriptionGroupList: missing field groupConfigList")


def test_broker_consume_stats_lists_every_group_and_topic(broker_setup):
    _, broker, _, bc = broker_setup
    assert create_topic(bc, "CT", 2).code == OK
    assert create_topic(bc, "OT", 1, order="true").code == OK
    for q in (0, 0, 0, 1):
        send(bc, "CT", b"m", q)
    send(bc, "OT", b"o", 0)
    dispatched(bc, "CT", 0, 3)
    dispatched(bc, "OT", 0, 1)
    assert group_list(bc, {"groupName": "CG"}, {"groupName": "OG"}).code == OK  # Apache lists the groups it has
    for group, topic, qid, offset in (("CG", "CT", 0, 2), ("CG", "OT", 0, 1), ("OG", "OT", 0, 0)):
        bc.call(RC.UPDATE_CONSUMER_OFFSET, {"consumerGroup": group, "topic": topic, "queueId": str(qid),
                                            "commitOffset": str(offset)})
    r = bc.call(RC.GET_BROKER_CONSUME_STATS, {"isOrder": "false"})
    assert r.code == OK, r.remark
    body = ConsumeStatsList.from_json(r.body)
    assert body.broker_addr == broker.config.broker_addr
    by_group = {g: stats for entry in body.consume_stats_list for g, stats in entry.items()}
    assert {"CG", "OG"} <= set(by_group)
    ct, ot = by_group["CG"]  # topics in name order; every write queue of each
    q0, q1 = (MessageQueue(topic="CT", broker_name="broker-a", queue_id=i) for i in (0, 1))
    assert (ct.offset_table[q0].broker_offset, ct.offset_table[q0].consumer_offset) == (3, 2)
    assert ct.offset_table[q0].last_timestamp > 0
    assert (ct.offset_table[q1].broker_offset, ct.offset_table[q1].consumer_offset) == (1, 0)
    assert set(ot.offset_table) == {MessageQueue(topic="OT", broker_name="broker-a", queue_id=0)}
    # max - committed over every listed queue: CG 1 + 1 + 0, OG 1
    assert body.total_diff == 3
    # isOrder: orderly topics only
    body = ConsumeStatsList.from_json(bc.call(RC.GET_BROKER_CONSUME_STATS, {"isOrder": "true"}).body)
    by_group = {g: stats for entry in body.consume_stats_list for g, stats in entry.items()}
    assert [set(s.offset_table) for s in by_group["CG"]] == [{MessageQueue(topic="OT", broker_name="broker-a",
                                                                          queue_id=0)}]
    assert body.total_diff == 1
    # a group whose online consumers subscribe to something: only those topics (Apache's findSubscriptionData)
    hb = HeartbeatData(client_id="c@1", consumer_data_set=[ConsumerData(group_name="CG", subscription_data_set=[
        SubscriptionData(topic="CT", sub_string="*")])])
    assert bc.call(RC.HEART_BEAT, {}, hb.to_json()).code == OK
    body = ConsumeStatsList.from_json(bc.call(RC.GET_BROKER_CONSUME_STATS, {"isOrder": "false"}).body)
    by_group = {g: stats for entry in body.consume_stats_list for g, stats in entry.items()}
    assert [{mq.topic for mq in s.offset_table} for s in by_group["CG"]] == [{"CT"}]
    # isOrder is required (Apache's @CFNotNull)
    r = bc.call(RC.GET_BROKER_CONSUME_STATS, {})
    assert (r.code, r.remark) == (SYSTEM_ERROR, "the custom field <isOrder> is null")
