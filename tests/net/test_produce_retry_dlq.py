"""Retries and dead letters on the wire: SEND_MESSAGE / V2 to %RETRY%group (handleRetryAndDLQ), the
maxReconsumeTimes of clients older than V3_4_9 (ignored: the group's retryMaxTimes applies), and
CONSUMER_SEND_MSG_BACK of a BatchCQ item named by its originMsgId."""

from __future__ import annotations

import time

from net_util import RawClient

from broker_core.broker.broker import Broker
from broker_core.remoting import RemotingCommand, RequestCode, ResponseCode
from broker_core.remoting.codes import CURRENT_VERSION
from broker_core.remoting.headers import SendMessageRequestHeader, SendMessageRequestHeaderV2
from broker_core.store.codec.batch import BatchItem
from broker_core.store.codec.message import MessageExt
from broker_core.store.codec.properties import encode_properties
from tests.waiting import wait_dispatched

RC = RequestCode
OLD = 10  # a client before V3_4_9 (ordinal 121)


def _call(bc: RawClient, code: int, ext: dict[str, str], body: bytes = b"", version: int = CURRENT_VERSION):
    cmd = RemotingCommand.request(code, ext, body, opaque=int(time.monotonic_ns() % 1_000_000_000))
    cmd.version = version
    bc.send(cmd)
    while True:
        got = bc.recv()
        assert got is not None
        if got.is_response and got.opaque == cmd.opaque:
            return got


def _messages(b: Broker, group: str, topic: str, count: int) -> list[MessageExt]:
    """The messages of queue 0 once the first ``count`` are dispatched."""
    wait_dispatched(b, topic, 0, count)
    return b.pull_message(group, topic, 0, 0, 32).messages


def _send_to_retry(bc: RawClient, group: str, body: bytes, reconsume: int, max_reconsume: int | None,
                   version: int = CURRENT_VERSION, v2: bool = False):
    props = encode_properties({"RETRY_TOPIC": "Orig", "UNIQ_KEY": "AABBCCDD0011223344556677889900" + body.hex()[:2]})
    h = SendMessageRequestHeader(producer_group="P", topic="%RETRY%" + group, default_topic="TBW102",
                                 default_topic_queue_nums=4, queue_id=0, sys_flag=0, born_timestamp=1, flag=0,
                                 properties=props, reconsume_times=reconsume, unit_mode=False,
                                 max_reconsume_times=max_reconsume)
    if v2:
        return _call(bc, RC.SEND_MESSAGE_V2, SendMessageRequestHeaderV2.from_v1(h).to_ext_fields(), body, version)
    return _call(bc, RC.SEND_MESSAGE, h.to_ext_fields(), body, version)


def test_send_to_the_retry_topic_past_the_maximum_lands_in_the_dlq(broker_setup) -> None:
    _servers, broker, _ns, bc = broker_setup
    broker.create_or_update_subscription_group("RtG", retry_max_times=20, retry_queue_nums=1)
    assert _send_to_retry(bc, "RtG", b"\x01v1", 17, 16).code == ResponseCode.SUCCESS
    assert _send_to_retry(bc, "RtG", b"\x02v2", 17, 16, v2=True).code == ResponseCode.SUCCESS
    dead = _messages(broker, "RtG", "%DLQ%RtG", 2)
    assert [(m.body, m.reconsume_times) for m in dead] == [(b"\x01v1", 17), (b"\x02v2", 17)]
    assert dead[0].properties["DLQ_ORIGIN_TOPIC"] == "Orig"
    # an old client's maxReconsumeTimes is not trusted: the group's 20 applies, 17 is a retry
    assert _send_to_retry(bc, "RtG", b"\x03old", 17, 16, version=OLD).code == ResponseCode.SUCCESS
    assert [m.body for m in _messages(broker, "RtG", "%RETRY%RtG", 1)] == [b"\x03old"]
    # no header maximum: the group's retryMaxTimes
    assert _send_to_retry(bc, "RtG", b"\x04grp", 21, None).code == ResponseCode.SUCCESS
    assert _messages(broker, "RtG", "%DLQ%RtG", 3)[-1].body == b"\x04grp"


def test_send_back_of_an_old_client_uses_the_group_maximum(broker_setup) -> None:
    _servers, broker, _ns, bc = broker_setup
    broker.create_or_update_topic("SbT", 1, 1)
    broker.create_or_update_subscription_group("SbG", retry_max_times=16, retry_queue_nums=1)
    sent = broker.send_message("SbT", b"fail-me", queue_id=0)
    fields = {"offset": str(sent.commit_log_offset), "group": "SbG", "delayLevel": "0", "originTopic": "SbT",
              "maxReconsumeTimes": "0"}
    assert _call(bc, RC.CONSUMER_SEND_MSG_BACK, fields, version=OLD).code == ResponseCode.SUCCESS
    wait_dispatched(broker, "SCHEDULE_TOPIC_XXXX", 2, 1)  # level 3 + reconsume 0: a retry
    assert broker.get_topic("%DLQ%SbG") is None  # reconsume 0 < the group's 16, not the DLQ
    assert _call(bc, RC.CONSUMER_SEND_MSG_BACK, fields).code == ResponseCode.SUCCESS  # a new client's 0 applies
    assert [m.body for m in _messages(broker, "SbG", "%DLQ%SbG", 1)] == [b"fail-me"]


def test_send_back_of_a_batchcq_item_by_origin_msg_id(broker_setup) -> None:
    _servers, broker, _ns, bc = broker_setup
    broker.create_or_update_topic("BcqT", 1, 1, attributes="+queue.type=BatchCQ")
    broker.create_or_update_subscription_group("BcqG", retry_queue_nums=1)
    broker.send_batch("BcqT", [BatchItem(b"b1"), BatchItem(b"b2"), BatchItem(b"b3")], {"UNIQ_KEY": "BATCHKEY"},
                      queue_id=0)
    items = _messages(broker, "BcqG", "BcqT", 3)
    fields = {"offset": str(items[1].commit_log_offset), "group": "BcqG", "delayLevel": "-1", "originTopic": "BcqT",
              "originMsgId": items[1].uniq_key, "maxReconsumeTimes": "16"}
    assert _call(bc, RC.CONSUMER_SEND_MSG_BACK, fields).code == ResponseCode.SUCCESS
    [dead] = _messages(broker, "BcqG", "%DLQ%BcqG", 1)
    assert dead.body == b"b2" and dead.uniq_key == items[1].uniq_key
    # an item the request does not name cannot be sent back: an error, and nothing is written
    fields["originMsgId"] = "NOT-AN-ITEM"
    r = _call(bc, RC.CONSUMER_SEND_MSG_BACK, fields)
    assert r.code == ResponseCode.SYSTEM_ERROR and "inner batch" in (r.remark or "")
    assert broker.get_max_offset("%DLQ%BcqG", 0) == 1


def test_a_read_only_retry_topic_refuses_every_send_back_dlq_bound_ones_too(broker_setup) -> None:
    """Java's consumerSendMsgBack creates %RETRY%group and checks it is writable before it decides on the
    DLQ, so a read-only retry topic answers NO_PERMISSION for a delayLevel -1 (or an exhausted) send-back
    too; here the DLQ was picked first and took the message. A refused send-back stores nothing."""
    _servers, broker, _ns, bc = broker_setup
    broker.create_or_update_topic("RoT", 1, 1)
    broker.create_or_update_subscription_group("RoG", retry_max_times=16, retry_queue_nums=1)
    broker.create_or_update_topic("%RETRY%RoG", 1, 1, perm=4)
    sent = broker.send_message("RoT", b"fail-me", queue_id=0)
    before = broker.store.get_max_phy_offset()
    for delay_level, max_times in (("-1", "16"), ("0", "0"), ("0", "16")):
        fields = {"offset": str(sent.commit_log_offset), "group": "RoG", "delayLevel": delay_level,
                  "originTopic": "RoT", "maxReconsumeTimes": max_times}
        r = _call(bc, RC.CONSUMER_SEND_MSG_BACK, fields)
        assert (r.code, r.remark) == (ResponseCode.NO_PERMISSION, "the topic[%RETRY%RoG] sending message is forbidden")
    assert broker.get_topic("%DLQ%RoG") is None
    assert broker.store.get_max_phy_offset() == before
