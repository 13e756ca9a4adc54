"""Hostile request contents against a real ``mqbroker``: header numbers out of their Java type, malformed
batch and JSON bodies, fastjson's booleans, and one connection flooding the others.

Why a subprocess: what matters is what a client sees on the wire and that the broker's own output
has no traceback (a traceback per bad request is a log flood and leaks Python names to clients).
"""

from __future__ import annotations

import itertools
import json
import struct
import threading
import time
from collections.abc import Iterator

import pytest
from net_util import Mqbroker, RawClient

from broker_core.remoting import RemotingCommand, RequestCode, ResponseCode, encode_frame

TOPIC = "HostileT"
MAX_MESSAGE_SIZE = 64 * 1024
_ids = itertools.count()
PY_EXCEPTIONS = ("Traceback", "RecursionError", "RecordError", "ValueError", "AttributeError", "TypeError",
                 "UnicodeDecodeError", "JsonDialectError", "KeyError")


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Mqbroker]:
    root = tmp_path_factory.mktemp("hostile")
    conf = root / "broker.conf"
    conf.write_text(f"brokerName=broker-a\nflushDiskType=ASYNC_FLUSH\nmaxMessageSize={MAX_MESSAGE_SIZE}\n")
    m = Mqbroker(root / "store", "--grpc-port", "0", config=conf)
    try:
        c = RawClient(m.broker_addr)
        ext = {"topic": TOPIC, "defaultTopic": "TBW102", "readQueueNums": "4", "writeQueueNums": "4", "perm": "6",
               "topicFilterType": "SINGLE_TAG"}
        assert c.call(RequestCode.UPDATE_AND_CREATE_TOPIC, ext).code == ResponseCode.SUCCESS
        c.close()
        yield m
    finally:
        m.stop()


@pytest.fixture
def bc(broker: Mqbroker) -> Iterator[RawClient]:
    """A broker connection; what the broker printed during the test must hold no traceback."""
    seen = len(broker.lines)
    c = RawClient(broker.broker_addr)
    try:
        yield c
    finally:
        c.close()
    time.sleep(0.05)  # let the output reader catch up
    printed = "\n".join(broker.lines[seen:])
    assert "Traceback" not in printed, printed[-3000:]


def one_line_error(r: RemotingCommand, code: int, *names: str) -> None:
    assert r.code == code, (r.code, r.remark)
    remark = r.remark or ""
    assert "\n" not in remark and all(n in remark for n in names), remark
    assert not any(e in remark for e in PY_EXCEPTIONS), remark


# -- 1. header numbers are parsed by their Java type -------------------------------------------------
def offset_ext(queue_id: str = "0", commit_offset: str = "5", group: str = "CG_hostile") -> dict[str, str]:
    return {"consumerGroup": group, "topic": TOPIC, "queueId": queue_id, "commitOffset": commit_offset}


def create_group(bc: RawClient, group: str) -> None:
    """UPDATE_AND_CREATE_SUBSCRIPTIONGROUP: a commit is refused for a group nobody created."""
    r = bc.call(RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, {}, json.dumps({"groupName": group}).encode())
    assert r.code == ResponseCode.SUCCESS, r.remark


@pytest.mark.parametrize("field, value", [
    ("commitOffset", "99999999999999999999"),  # past a Java long: was stored and persisted
    ("commitOffset", "9223372036854775808"),
    ("commitOffset", "1_0"),  # Python's int() takes it, Long.parseLong does not
    ("commitOffset", " 7"),
    ("commitOffset", "0x10"),
    ("queueId", "2147483648"),  # queueId is a Java int
    ("queueId", "-2147483649"),
])
def test_header_number_outside_its_java_type_is_refused_and_not_stored(bc, field, value):
    group = f"CG_num_{next(_ids)}"
    create_group(bc, group)  # so the refusal is the number's, not the group's
    ext = offset_ext(group=group) | {field: value}
    one_line_error(bc.call(RequestCode.UPDATE_CONSUMER_OFFSET, ext), ResponseCode.SYSTEM_ERROR, f"<{field}>")
    q = bc.call(RequestCode.QUERY_CONSUMER_OFFSET, {"consumerGroup": group, "topic": TOPIC, "queueId": "0",
                                                    "setZeroIfNotFound": "false"})
    assert q.code == ResponseCode.QUERY_NOT_FOUND, (q.code, q.ext_fields)


@pytest.mark.parametrize("value, stored", [("+12", 12), ("-0", 0), ("\u0661\u0662", 12), ("9223372036854775807", 2**63 - 1)])
def test_header_numbers_java_accepts_are_accepted(bc, value, stored):
    """Long.parseLong takes a leading '+' and any Unicode decimal digits (Character.digit), so do we."""
    group = f"CG_ok_{next(_ids)}"
    create_group(bc, group)
    assert bc.call(RequestCode.UPDATE_CONSUMER_OFFSET, offset_ext(commit_offset=value, group=group)).code == 0
    q = bc.call(RequestCode.QUERY_CONSUMER_OFFSET, {"consumerGroup": group, "topic": TOPIC, "queueId": "0"})
    assert (q.code, q.ext_fields.get("offset")) == (ResponseCode.SUCCESS, str(stored))


def test_queue_id_beyond_the_topic_is_accepted_as_java_does(bc):
    """ConsumerManageProcessor.updateConsumerOffset checks group, topic and nulls, never the queue id."""
    create_group(bc, "CG_qid")
    for qid in ("9999", "-1"):
        r = bc.call(RequestCode.UPDATE_CONSUMER_OFFSET, offset_ext(queue_id=qid, group="CG_qid"))
        assert r.code == ResponseCode.SUCCESS, r.remark


def test_pop_invisible_time_past_a_long_is_refused(bc):
    ext = {"consumerGroup": "CG_pop", "topic": TOPIC, "queueId": "-1", "maxMsgNums": "1",
           "invisibleTime": "99999999999999999999", "pollTime": "0", "bornTime": "0", "initMode": "0",
           "expType": "TAG", "exp": "*"}
    one_line_error(bc.call(RequestCode.POP_MESSAGE, ext), ResponseCode.SYSTEM_ERROR, "<invisibleTime>", "long")


# -- 2. SEND_BATCH_MESSAGE bodies --------------------------------------------------------------------
def batch_ext() -> dict[str, str]:
    return {"producerGroup": "PG", "topic": TOPIC, "defaultTopic": "TBW102", "defaultTopicQueueNums": "4",
            "queueId": "0", "sysFlag": "0", "bornTimestamp": str(int(time.time() * 1000)), "flag": "0",
            "properties": "", "batch": "true"}


def batch_item(body: bytes = b"", props: bytes = b"") -> bytes:
    return struct.pack(">iiiii", 22 + len(body) + len(props), 0, 0, 0, len(body)) + body + \
        struct.pack(">h", len(props)) + props


@pytest.mark.parametrize("body", [b"not a batch", batch_item(b"x")[:10], batch_item(b"x") + b"\0" * 30,
                                  struct.pack(">iiiii", -1, 0, 0, 0, 0) + b"\0\0"],
                         ids=["garbage", "truncated", "trailing-zeros", "negative-size"])
def test_malformed_batch_body_is_message_illegal_in_one_line(bc, body):
    one_line_error(bc.call(RequestCode.SEND_BATCH_MESSAGE, batch_ext(), body), ResponseCode.MESSAGE_ILLEGAL,
                   "malformed")


def test_batch_over_max_message_size_is_refused_with_the_size_sent(bc):
    body = batch_item() * (MAX_MESSAGE_SIZE // 22 + 10)  # many empty items: costly to decode for nothing
    r = bc.call(RequestCode.SEND_BATCH_MESSAGE, batch_ext(), body)
    one_line_error(r, ResponseCode.MESSAGE_ILLEGAL, f"batch body size {len(body)}", str(MAX_MESSAGE_SIZE))


# -- 3. JSON bodies that do not decode -------------------------------------------------------------
DEEP = b"[" * 5000 + b"]" * 5000


@pytest.mark.parametrize("code, body, names", [
    (RequestCode.HEART_BEAT, DEEP, ("nesting",)),
    (RequestCode.LOCK_BATCH_MQ, DEEP, ("nesting",)),
    (RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, DEEP, ("nesting",)),
    (RequestCode.SET_MESSAGE_REQUEST_MODE, DEEP, ("nesting",)),
    (RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, b"\x00\xff", ("UTF-8",)),
    (RequestCode.UPDATE_BROKER_CONFIG, b"brokerPermission=6\n\xff\xfe=1", ("UTF-8",)),
], ids=["heartbeat-deep", "lock-deep", "subgroup-deep", "request-mode-deep", "subgroup-not-utf8",
        "broker-config-not-utf8"])
def test_undecodable_body_is_one_line_system_error(bc, code, body, names):
    one_line_error(bc.call(code, {}, body), ResponseCode.SYSTEM_ERROR, *names)


def test_undecodable_register_body_on_the_name_server(broker):
    seen = len(broker.lines)
    ns = RawClient(broker.namesrv_addr)
    try:
        ext = {"brokerName": "b-x", "brokerAddr": "127.0.0.1:1", "clusterName": "C", "haServerAddr": "",
               "brokerId": "0"}
        one_line_error(ns.call(RequestCode.REGISTER_BROKER, ext, DEEP), ResponseCode.SYSTEM_ERROR, "nesting")
    finally:
        ns.close()
    time.sleep(0.05)
    assert "Traceback" not in "\n".join(broker.lines[seen:])


def group_config(bc: RawClient, group: str) -> dict[str, object] | None:
    r = bc.call(RequestCode.GET_SUBSCRIPTIONGROUP_CONFIG, {"group": group})
    if r.code == ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST:
        return None
    assert r.code == ResponseCode.SUCCESS, r.remark
    return json.loads(r.body)


@pytest.mark.parametrize("field, value", [
    ("retryQueueNums", "abc"), ("retryQueueNums", [1]), ("retryQueueNums", 10**12), ("brokerId", {"a": 1}),
    ("attributes", [1]), ("attributes", "x"), ("subscriptionDataSet", "zzz"), ("groupSysFlag", "7x"),
    ("groupRetryPolicy", {"type": "CUSTOMIZED", "customizedRetryPolicy": "x"}),
])
def test_subscription_group_value_of_the_wrong_type_is_refused_and_not_stored(bc, field, value):
    group = f"G_bad_{next(_ids)}"
    body = json.dumps({"groupName": group, field: value}).encode()
    one_line_error(bc.call(RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, {}, body), ResponseCode.SYSTEM_ERROR,
                   field)
    assert group_config(bc, group) is None


def test_subscription_group_null_keeps_the_default_as_fastjson_does(bc):
    body = json.dumps({"groupName": "G_null", "retryMaxTimes": None, "consumeEnable": None}).encode()
    assert bc.call(RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, {}, body).code == ResponseCode.SUCCESS
    cfg = group_config(bc, "G_null")
    assert cfg is not None and (cfg["retryMaxTimes"], cfg["consumeEnable"]) == (16, True)


# -- 4. booleans as fastjson reads them ------------------------------------------------------------
@pytest.mark.parametrize("field, value, expect", [
    ("consumeEnable", "false", False), ("consumeEnable", "FALSE", False), ("consumeEnable", "0", False),
    ("consumeEnable", 0, False), ("consumeEnable", 2, False),  # BooleanCodec: an int is true only when 1
    ("consumeBroadcastEnable", "False", False), ("consumeFromMinEnable", "N", False),
    ("notifyConsumerIdsChangedEnable", "false", False), ("consumeMessageOrderly", "true", True),
    ("consumeMessageOrderly", "TRUE", True), ("consumeMessageOrderly", "1", True), ("consumeMessageOrderly", 1, True),
    ("consumeMessageOrderly", "Y", True),
])
def test_subscription_group_booleans_follow_fastjson(bc, field, value, expect):
    group = f"G_bool_{next(_ids)}"
    body = json.dumps({"groupName": group, field: value}).encode()
    assert bc.call(RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, {}, body).code == ResponseCode.SUCCESS
    cfg = group_config(bc, group)
    assert cfg is not None and cfg[field] is expect


@pytest.mark.parametrize("value", ["nope", "no", [True], {"a": 1}])
def test_subscription_group_boolean_fastjson_refuses_is_an_error_naming_the_field(bc, value):
    group = f"G_badbool_{next(_ids)}"
    body = json.dumps({"groupName": group, "consumeEnable": value}).encode()
    one_line_error(bc.call(RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, {}, body), ResponseCode.SYSTEM_ERROR,
                   "consumeEnable", "boolean")
    assert group_config(bc, group) is None


# -- 5. one connection cannot starve the others ----------------------------------------------------
@pytest.mark.parametrize("target, code, ext", [
    ("broker", RequestCode.GET_MAX_OFFSET, {"topic": TOPIC, "queueId": "0"}),  # worker threads
    ("namesrv", RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": TOPIC}),  # all on the event loop
])
def test_a_pipelining_connection_does_not_make_another_wait_behind_its_backlog(broker, target, code, ext):
    """Another client's request is answered after a few of the flooder's, not after its whole backlog.
    Counted in the flooder's answers (not seconds) so a slow machine does not change the verdict:
    before, a 256 KiB read (~1,500 requests) was dispatched at once and its Broker calls filled one
    FIFO worker queue, so the other client waited behind ~1,000 of them."""
    addr = broker.broker_addr if target == "broker" else broker.namesrv_addr
    seen = len(broker.lines)
    n = 6000
    flood = RawClient(addr, timeout=60)
    other = RawClient(addr, timeout=60)
    got = [0]
    done = threading.Event()

    def read_flood() -> None:
        while got[0] < n:
            if flood.recv(60) is None:
                break
            got[0] += 1
        done.set()

    reader = threading.Thread(target=read_flood, daemon=True)
    try:
        reader.start()
        flood.send_raw(b"".join(encode_frame(RemotingCommand.request(code, ext, opaque=i)) for i in range(n)))
        deadline = time.monotonic() + 30
        while got[0] < 200 and time.monotonic() < deadline:  # the flood is being served: now ask
            time.sleep(0.001)
        waits = []
        for _ in range(5):
            before = got[0]
            assert other.call(code, ext).code == ResponseCode.SUCCESS
            waits.append(got[0] - before)
            if got[0] > n - 1500:
                break
        assert done.wait(60) and got[0] == n
        assert max(waits) < 300, waits  # was ~1,000+; now a few turns of 16 (plus the 8 workers)
    finally:
        flood.close()
        other.close()
    assert "Traceback" not in "\n".join(broker.lines[seen:])


def test_the_broker_still_answers_normally(bc):
    r = bc.call(RequestCode.SEND_MESSAGE, batch_ext() | {"batch": "false"}, b"hello")
    assert r.code == ResponseCode.SUCCESS, r.remark
