"""Receipt handles and revive-log records in RocketMQ's exact formats."""

from __future__ import annotations

import json

import pytest

from broker_core.broker.pop.pop_ck import AckMsg, PopCheckPoint, ReviveRecordError
from broker_core.broker.pop.receipt_handle import (
    InvalidReceiptHandleError,
    ReceiptHandle,
    build_pop_retry_topic,
    parse_normal_topic,
    topic_type_of,
)


def test_decode_the_spec_example_and_encode_it_back() -> None:
    text = "0 1795318300742 15000 0 0 broker-a 0 0 123456"
    h = ReceiptHandle.decode(text)
    assert (h.start_offset, h.retrieve_time, h.invisible_time, h.revive_queue_id, h.topic_type, h.broker_name,
            h.queue_id, h.offset, h.commit_log_offset) == (0, 1795318300742, 15000, 0, "0", "broker-a", 0, 0, 123456)
    assert h.encode() == text
    assert h.extra_info() == "0 1795318300742 15000 0 0 broker-a 0 0"
    assert h.next_visible_time == 1795318315742
    assert not h.is_order and not h.is_retry_topic


def test_eight_field_extra_info_has_no_commit_log_offset() -> None:
    h = ReceiptHandle.decode("5 1000 30000 999 0 broker-b 3 7")
    assert h.commit_log_offset == -1 and h.is_order and h.queue_id == 3 and h.offset == 7


def test_build_takes_the_topic_type_from_the_popped_topic() -> None:
    v1 = build_pop_retry_topic("T", "G", False)
    v2 = build_pop_retry_topic("T", "G", True)
    assert (v1, v2) == ("%RETRY%G_T", "%RETRY%G+T")
    assert [topic_type_of(t) for t in ("T", v1, v2, "%RETRY%G")] == ["0", "1", "2", "1"]
    h = ReceiptHandle.build(4, 100, 200, 1, v2, "b", 0, 6, 999)
    assert h.encode() == "4 100 200 1 2 b 0 6 999"
    assert h.real_topic("T", "G") == v2 and h.is_retry_topic
    assert parse_normal_topic(v1, "G") == "T" and parse_normal_topic(v2, "G") == "T"
    assert parse_normal_topic("T", "G") == "T"


@pytest.mark.parametrize(("text", "needle"), [
    ("", "empty"),
    ("1 2 3 4 0 b 0", "at least 8"),
    ("x 2 3 4 0 b 0 1", "startOffset"),
    ("1 2 3 4 7 b 0 1", "topicType"),
    ("1 2 3 4 0 b 0 1 5 6", "at most 9"),
    ("1 2 3 4 0  0 1", "brokerName"),
    ("1 2 -3 4 0 b 0 1", "invisibleTime"),
])
def test_malformed_handles_are_refused_with_the_reason(text: str, needle: str) -> None:
    with pytest.raises(InvalidReceiptHandleError) as e:
        ReceiptHandle.decode(text)
    assert needle in str(e.value)


def test_checkpoint_record_round_trip_and_uniq_key() -> None:
    ck = PopCheckPoint(10, 1_700_000_000_000, 30_000, 2, "T", "G", "broker-a", [0, 1, 3], bit_map=0b010,
                       revive_offset=5)
    body = ck.encode()
    obj = json.loads(body)
    assert list(obj) == sorted(obj)  # fastjson orders bean properties alphabetically
    assert obj["so"] == 10 and obj["n"] == 3 and obj["d"] == [0, 1, 3] and obj["bm"] == 2 and obj["c"] == "G"
    assert obj["reviveTime"] == 1_700_000_030_000 and "rp" not in obj
    back = PopCheckPoint.decode(body)
    assert back.queue_offset_diff == [0, 1, 3] and back.unacked_offsets() == [10, 13]
    assert back.index_of_ack(13) == 2 and back.index_of_ack(12) == -1
    assert ck.uniq_id() == "T@2@10@G@1700000000000@broker-a@ck"


def test_old_checkpoints_without_a_diff_list_cover_a_contiguous_range() -> None:
    ck = PopCheckPoint.decode(b'{"so":4,"pt":1,"it":2,"n":3,"q":0,"t":"T","c":"G"}')
    assert ck.queue_offset_diff == [0, 1, 2] and ck.unacked_offsets() == [4, 5, 6]


def test_ack_and_batch_ack_records() -> None:
    ack = AckMsg(12, 10, "G", "T", 1, 99, "broker-a")
    assert ack.uniq_id() == "T@1@12@G@99@broker-a@ack" and ack.tag == "ack"
    assert AckMsg.decode(ack.encode(), False) == ack
    back = AckMsg(-1, 10, "G", "T", 1, 99, "broker-a", [10, 11])
    assert back.uniq_id() == "T@1@[10, 11]@G@99@bAck" and back.tag == "bAck"
    assert json.loads(back.encode())["aol"] == [10, 11]
    assert AckMsg.decode(back.encode(), True).offsets == [10, 11]
    # Long names are accepted as fastjson's alternateNames.
    assert AckMsg.decode(b'{"ackOffset":3,"startOffset":1,"consumerGroup":"G","topic":"T","queueId":0,'
                         b'"popTime":5}', False).ack_offset == 3
    with pytest.raises(ReviveRecordError):
        AckMsg.decode(b"not json", False)
