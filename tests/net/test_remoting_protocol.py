"""The pure protocol package against the spec's vectors (A.7 worked example, D.1 signature) and the
fastjson dialect quirks (A.6)."""

from __future__ import annotations

import struct

import pytest

from broker_core.auth.signer import remoting_content, remoting_signature
from broker_core.remoting import (
    FrameDecoder,
    FrameError,
    FrameTooLargeError,
    HeaderError,
    LanguageCode,
    RemotingCommand,
    RequestCode,
    SerializeType,
    decode_frame,
    encode_frame,
    fastjson,
)
from broker_core.remoting.bodies import (
    BrokerData,
    ClusterInfo,
    ConsumeStats,
    HeartbeatData,
    LockBatchRequestBody,
    MessageQueue,
    OffsetWrapper,
    QueueData,
    ResetOffsetBody,
    TopicRouteData,
)
from broker_core.remoting.body_base import BodyError
from broker_core.remoting.headers import (
    GetRouteInfoRequestHeader,
    PullMessageRequestHeader,
    SendMessageRequestHeaderV2,
)

A7_JSON_HEADER = (b'{"code":105,"extFields":{"topic":"TopicTest"},"flag":0,"language":"JAVA","opaque":1,'
                  b'"serializeTypeCurrentRPC":"JSON","version":479}')
A7_JSON_FRAME = bytes.fromhex(
    "00000087" "00000083"
    "7b22636f6465223a3130352c226578744669656c6473223a7b22746f706963223a22546f70696354657374227d2c"
    "22666c6167223a302c226c616e6775616765223a224a415641222c226f7061717565223a312c2273657269616c69"
    "7a655479706543757272656e74525043223a224a534f4e222c2276657273696f6e223a3437397d")
A7_BINARY_FRAME = bytes.fromhex(
    "0000002d" "01000029" "0069" "00" "01df" "00000001" "00000000" "00000000"
    "00000014" "0005" "746f706963" "00000009" "546f70696354657374")


def _a7_request(serialize_type: SerializeType) -> RemotingCommand:
    cmd = RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC,
                                  GetRouteInfoRequestHeader(topic="TopicTest").to_ext_fields(), opaque=1,
                                  serialize_type=serialize_type)
    cmd.language = LanguageCode.JAVA
    return cmd


def test_worked_example_json_frame_bytes():
    assert len(A7_JSON_HEADER) == 131
    assert A7_JSON_FRAME[8:] == A7_JSON_HEADER
    assert encode_frame(_a7_request(SerializeType.JSON)) == A7_JSON_FRAME


def test_worked_example_binary_frame_bytes():
    assert encode_frame(_a7_request(SerializeType.ROCKETMQ)) == A7_BINARY_FRAME


@pytest.mark.parametrize("frame", [A7_JSON_FRAME, A7_BINARY_FRAME])
def test_worked_example_decodes(frame):
    (cmd,) = FrameDecoder().feed(frame)
    assert cmd.code == 105 and cmd.opaque == 1 and cmd.flag == 0 and cmd.version == 479
    assert cmd.language == LanguageCode.JAVA and cmd.body == b""
    assert GetRouteInfoRequestHeader.from_ext_fields(cmd.ext_fields).topic == "TopicTest"
    assert not cmd.is_response and not cmd.is_oneway


def test_response_keeps_opaque_and_type_and_sets_flag():
    req = _a7_request(SerializeType.ROCKETMQ)
    resp = req.response(17, "No topic route info in name server for the topic: TopicTest")
    assert resp.opaque == 1 and resp.is_response and resp.serialize_type == SerializeType.ROCKETMQ
    (back,) = FrameDecoder().feed(encode_frame(resp))
    assert back.code == 17 and back.remark.startswith("No topic route") and back.flag == 1


def test_decoder_byte_by_byte_and_many_frames_in_one_chunk():
    body_cmd = RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, {"b": "T"}, b"\x00hello\xff", opaque=7)
    stream = A7_JSON_FRAME + encode_frame(body_cmd) + A7_BINARY_FRAME
    dec = FrameDecoder()
    got = []
    for i in range(len(stream)):
        got += dec.feed(stream[i:i + 1])
    assert [c.code for c in got] == [105, 310, 105]
    assert got[1].body == b"\x00hello\xff" and dec.pending == 0
    assert [c.opaque for c in FrameDecoder().feed(stream)] == [1, 7, 1]


def test_decoder_keeps_half_frame_pending():
    dec = FrameDecoder()
    assert dec.feed(A7_JSON_FRAME[:50]) == []
    assert dec.pending == 50
    assert len(dec.feed(A7_JSON_FRAME[50:])) == 1


def test_oversize_frame_refused_before_buffering():
    dec = FrameDecoder(max_frame_length=1024)
    with pytest.raises(FrameTooLargeError, match="exceeds the frame limit 1024"):
        dec.feed(struct.pack(">i", 2000))
    # the default limit is RocketMQ's 16 MiB
    with pytest.raises(FrameTooLargeError):
        FrameDecoder().feed(struct.pack(">ii", 16 * 1024 * 1024 - 3, 0))


@pytest.mark.parametrize("bad, match", [
    (struct.pack(">ii", 2, 0), "below the 4-byte header mark"),
    (struct.pack(">ii", 8, 100) + b"\0\0\0\0", "headerLen 100 exceeds"),
    (struct.pack(">ii", 7, 3) + b"{x}", "not valid UTF-8 JSON"),
    (struct.pack(">ii", 6, 2) + b"[]", "not an object"),
    (struct.pack(">ii", 16, 12) + b'{"code":"a"}', "'code' must be an integer"),
    (struct.pack(">ii", 23, 19) + b'{"code":2147483648}', "'code' must be an integer"),
    (struct.pack(">ii", 20, 16) + b'{"opaque":"1.5"}', "'opaque' must be an integer"),
    (struct.pack(">ii", 8, (5 << 24) | 4) + b"{}{}", "unknown serialize type 5"),
    (struct.pack(">ii", 9, (1 << 24) | 5) + b"\0" * 5, "shorter than the fixed 21"),
])
def test_bad_headers_name_the_problem(bad, match):
    with pytest.raises(FrameError, match=match):
        FrameDecoder().feed(bad)


def test_a_header_nested_too_deeply_is_a_frame_error():
    """100,000 levels: the JSON scanner's RecursionError escaped the decoder, and the server logged a
    traceback for every such connection instead of closing it with one line."""
    deep = b"[" * 100_000 + b"]" * 100_000
    with pytest.raises(FrameError, match="nested too deeply"):
        FrameDecoder().feed(struct.pack(">ii", len(deep) + 4, len(deep)) + deep)


def test_binary_header_duplicate_keys_last_wins_and_large_code_refused():
    cmd = RemotingCommand.request(11, {"topic": "A"}, serialize_type=SerializeType.ROCKETMQ)
    frame = bytearray(encode_frame(cmd))
    # append a second "topic" entry by hand
    extra = struct.pack(">h", 5) + b"topic" + struct.pack(">i", 1) + b"B"
    header_len = (struct.unpack_from(">i", frame, 4)[0] & 0xFFFFFF) + len(extra)
    ext_len_pos = 8 + 17  # fixed part (17 bytes, remark empty) ends at the extLen word
    ext_len = struct.unpack_from(">i", frame, ext_len_pos)[0] + len(extra)
    frame[ext_len_pos:ext_len_pos + 4] = struct.pack(">i", ext_len)
    frame += extra
    frame[0:8] = struct.pack(">ii", 4 + header_len, (1 << 24) | header_len)
    assert decode_frame(bytes(frame[4:])).ext_fields == {"topic": "B"}
    with pytest.raises(ValueError, match="int16"):
        encode_frame(RemotingCommand.request(RequestCode.POP_MESSAGE, serialize_type=SerializeType.ROCKETMQ))


def _binary_frame(ext: list[tuple[bytes, bytes]], remark: bytes = b"", code: int = 105) -> bytes:
    """A ROCKETMQ header built by hand, so entries our encoder would never write can be sent."""
    entries = b"".join(struct.pack(">h", len(k)) + k + struct.pack(">i", len(v)) + v for k, v in ext)
    header = (struct.pack(">hBhiii", code, 0, 479, 1, 0, len(remark)) + remark +
              struct.pack(">i", len(entries)) + entries)
    return struct.pack(">ii", 4 + len(header), (1 << 24) | len(header)) + header


def test_binary_header_zero_length_string_is_null():
    """Java's RocketMQSerializable.readStr returns null for a zero-length string, so an empty topic is
    a missing one ("the custom field <topic> is null", SYSTEM_ERROR); we read it as "" and answered
    TOPIC_NOT_EXIST for the topic ''. A null value also replaces an earlier one of the same key (the
    map keeps the last put), and a null key is never looked up."""
    [cmd] = FrameDecoder().feed(_binary_frame([(b"topic", b"")]))
    assert cmd.ext_fields == {} and cmd.remark is None
    with pytest.raises(HeaderError, match=r"^the custom field <topic> is null$"):
        GetRouteInfoRequestHeader.from_ext_fields(cmd.ext_fields)
    [cmd] = FrameDecoder().feed(_binary_frame([(b"topic", b"A"), (b"topic", b""), (b"", b"x"), (b"k", b"v")]))
    assert cmd.ext_fields == {"k": "v"}


def test_binary_header_invalid_utf8_is_replaced_not_a_closed_connection():
    """Netty's readCharSequence(len, UTF_8) decodes with U+FFFD for bytes that are not UTF-8 and the
    request goes on; we closed the connection ("ROCKETMQ header has invalid UTF-8 at byte 0")."""
    [cmd] = FrameDecoder().feed(_binary_frame([(b"topic", b"T\xff\xfe"), (b"\xffk", b"v")], remark=b"r\xc3"))
    assert cmd.ext_fields == {"topic": "T\ufffd\ufffd", "\ufffdk": "v"} and cmd.remark == "r\ufffd"


@pytest.mark.parametrize("header", [b'{"code":105}', b'{"code":105,"version":null}'])
def test_json_header_without_version_is_version_0(header):
    """Java's RemotingCommand has ``int version = 0`` and fastjson leaves it when the field is absent
    or null, so such a sender is older than V4_9_4 (routes in fastjson's own dialect, no GO_AWAY); we
    took it for the current version (479)."""
    [cmd] = FrameDecoder().feed(struct.pack(">ii", len(header) + 4, len(header)) + header)
    assert cmd.version == 0


def test_json_header_with_invalid_utf8_still_closes_the_connection():
    """Unlike the binary form, Java refuses this one: fastjson's parseObject(byte[]) returns null for
    bytes that are not UTF-8 (after trying them as gzip), headerDecode throws and NettyDecoder closes."""
    header = b'{"code":105,"extFields":{"topic":"T\xff"}}'
    with pytest.raises(FrameError, match="not valid UTF-8 JSON"):
        FrameDecoder().feed(struct.pack(">ii", len(header) + 4, len(header)) + header)


def test_json_header_tolerates_unknown_fields_and_numeric_ext_values():
    header = b'{"code":34,"opaque":5,"flag":2,"language":"NODE_JS","extFields":{"n":3,"b":true},"zzz":[1]}'
    cmd = decode_frame(struct.pack(">i", len(header)) + header)
    assert cmd.is_oneway and cmd.language == LanguageCode.NODE_JS and cmd.ext_fields == {"n": "3", "b": "true"}


def test_typed_headers_required_fields_and_v2_names():
    with pytest.raises(HeaderError, match="the custom field <topic> is null"):
        GetRouteInfoRequestHeader.from_ext_fields({})
    with pytest.raises(HeaderError, match="queueOffset"):
        PullMessageRequestHeader.from_ext_fields({"consumerGroup": "G", "topic": "T", "queueId": "0",
                                                  "queueOffset": "x", "maxMsgNums": "1", "sysFlag": "0",
                                                  "commitOffset": "0", "suspendTimeoutMillis": "0",
                                                  "subVersion": "0"})
    v2 = SendMessageRequestHeaderV2.from_ext_fields({"a": "P", "b": "T", "c": "TBW102", "d": "4", "e": "1",
                                                     "f": "0", "g": "123", "h": "0", "i": "TAGS\x01x\x02",
                                                     "m": "true", "unknown": "ignored"})
    v1 = v2.to_v1()
    assert (v1.producer_group, v1.topic, v1.queue_id, v1.batch, v1.properties) == ("P", "T", 1, True, "TAGS\x01x\x02")
    assert SendMessageRequestHeaderV2.from_v1(v1) == v2


def test_signature_vector_over_our_ext_fields():
    ext = GetRouteInfoRequestHeader(topic="TopicTest").to_ext_fields() | {"AccessKey": "rocketmq2"}
    assert remoting_content(ext) == b"rocketmq2TopicTest"
    assert remoting_signature("12345678", remoting_content(ext)) == "GeeGoP9mRvDhoVp4PD5omX0prgE="


# -- body dialect ----------------------------------------------------------------------------------
ROUTE = TopicRouteData(
    broker_datas=[BrokerData(cluster="DefaultCluster", broker_name="broker-a",
                             broker_addrs={0: "10.0.0.1:10911", 1: "10.0.0.2:10911"})],
    queue_datas=[QueueData(broker_name="broker-a", read_queue_nums=8, write_queue_nums=8, perm=6)])


def test_route_data_browser_compatible_matches_spec_b10():
    assert ROUTE.to_json(browser_compatible=True) == (
        b'{"brokerDatas":[{"brokerAddrs":{"0":"10.0.0.1:10911","1":"10.0.0.2:10911"},"brokerName":"broker-a",'
        b'"cluster":"DefaultCluster","enableActingMaster":false}],"filterServerTable":{},"queueDatas":'
        b'[{"brokerName":"broker-a","perm":6,"readQueueNums":8,"topicSysFlag":0,"writeQueueNums":8}]}')


def test_route_data_default_dialect_unquoted_keys_round_trip():
    raw = ROUTE.to_json()
    assert b'{0:"10.0.0.1:10911",1:"10.0.0.2:10911"}' in raw
    assert TopicRouteData.from_json(raw) == ROUTE
    assert TopicRouteData.from_json(ROUTE.to_json(browser_compatible=True)) == ROUTE


def test_message_queue_keyed_maps_use_object_keys():
    mq = MessageQueue(topic="T", broker_name="broker-a", queue_id=0)
    stats = ConsumeStats(offset_table={mq: OffsetWrapper(broker_offset=10, consumer_offset=7,
                                                         last_timestamp=1700000000000, pull_offset=9)})
    assert stats.to_json() == (b'{"consumeTps":0.0,"offsetTable":{{"brokerName":"broker-a","queueId":0,"topic":"T"}:'
                               b'{"brokerOffset":10,"consumerOffset":7,"lastTimestamp":1700000000000,"pullOffset":9}}}')
    assert ConsumeStats.from_json(stats.to_json()) == stats
    reset = ResetOffsetBody.from_json(b'{"offsetTable":{{"brokerName":"b","queueId":3,"topic":"T"}:123}}')
    assert reset.offset_table == {MessageQueue(topic="T", broker_name="b", queue_id=3): 123}


def test_cluster_info_from_java_text_and_heartbeat_from_spec_example():
    info = ClusterInfo.from_json(b'{"brokerAddrTable":{"broker-a":{"brokerAddrs":{0:"127.0.0.1:10911"},'
                                 b'"brokerName":"broker-a","cluster":"C"}},"clusterAddrTable":{"C":["broker-a"]}}')
    assert info.broker_addr_table["broker-a"].broker_addrs == {0: "127.0.0.1:10911"}
    hb = HeartbeatData.from_json(
        b'{"clientID":"10.0.0.5@12345#1","consumerDataSet":[{"consumeFromWhere":"CONSUME_FROM_LAST_OFFSET",'
        b'"consumeType":"CONSUME_PASSIVELY","groupName":"G","messageModel":"CLUSTERING","subscriptionDataSet":'
        b'[{"classFilterMode":false,"codeSet":[2598919],"expressionType":"TAG","subString":"TagA",'
        b'"subVersion":1700000000000,"tagsSet":["TagA"],"topic":"T"}],"unitMode":false}],'
        b'"heartbeatFingerprint":0,"producerDataSet":[{"groupName":"P"}],"withoutSub":false}')
    assert hb.client_id == "10.0.0.5@12345#1"
    assert hb.consumer_data_set[0].subscription_data_set[0].tags_set == ["TagA"]
    assert hb.producer_data_set[0].group_name == "P"


@pytest.mark.parametrize("text", [b"{", b'{"a":}', b"{1:2", b'{"a":1} x', b"\xff"])
def test_fastjson_reader_rejects_broken_text_with_offset(text):
    with pytest.raises(fastjson.JsonDialectError, match="offset"):
        fastjson.loads(text)


def test_body_shape_errors_name_the_field():
    with pytest.raises(BodyError, match=r"TopicRouteData.queueDatas\[0\].readQueueNums"):
        TopicRouteData.from_json(b'{"queueDatas":[{"brokerName":"b","readQueueNums":"x","writeQueueNums":1,"perm":6}]}')
    # numbers that do not parse, or do not fit, are body errors too (mqadmin turns those into one line; a
    # bare ValueError or OverflowError escaped it as a traceback)
    with pytest.raises(BodyError, match=r"ConsumeStats.consumeTps: expected a number, got 'x'"):
        ConsumeStats.from_json(b'{"offsetTable":{},"consumeTps":"x"}')
    with pytest.raises(BodyError, match=r"ConsumeStats.consumeTps: expected a number"):
        ConsumeStats.from_json(b'{"offsetTable":{},"consumeTps":' + b"9" * 400 + b"}")
    with pytest.raises(BodyError, match=r"TopicRouteData.queueDatas\[0\].perm: expected an integer"):
        TopicRouteData.from_json(b'{"queueDatas":[{"brokerName":"b","readQueueNums":1,"writeQueueNums":1,'
                                 b'"perm":1e999}]}')
    # a required field that is missing (or null) is named as the sender spells it, not as Python does
    with pytest.raises(BodyError, match=r"^LockBatchRequestBody: missing field consumerGroup$"):
        LockBatchRequestBody.from_json(b'{"clientId":"c","mqSet":[{"topic":"T","brokerName":"b","queueId":1}]}')
    with pytest.raises(BodyError, match=r"^LockBatchRequestBody: missing field clientId, consumerGroup$"):
        LockBatchRequestBody.from_json(b'{"consumerGroup":null}')


@pytest.mark.parametrize("header, fields", [
    (b"{}", (0, 0, 0)),
    (b'{"opaque":1,"flag":0}', (0, 1, 0)),
    (b'{"code":"28","opaque":"7","flag":null}', (28, 7, 0)),
    (b'{"code":-1,"opaque":" 12 "}', (-1, 12, 0)),
])
def test_json_int_fields_are_read_as_fastjson_reads_them(header, fields):
    """A header without ``code`` is code 0 and a quoted number is that number, as fastjson fills Java's
    int fields: Apache answers such a request (code 0: "request type 0 not supported"); we closed
    the connection."""
    [cmd] = FrameDecoder().feed(struct.pack(">ii", len(header) + 4, len(header)) + header)
    assert (cmd.code, cmd.opaque, cmd.flag) == fields
