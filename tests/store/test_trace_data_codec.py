"""TraceDataEncoder's layout: what Java tracing clients write into RMQ_SYS_TRACE_TOPIC, and ours."""

from __future__ import annotations

import pytest

from broker_core.store.codec.trace_data import (
    TraceBean,
    TraceContext,
    TraceDataError,
    TraceType,
    decode_trace_data,
    encode_context,
)

A, B = "\x01", "\x02"


def test_decodes_java_written_pub_and_sub_contexts() -> None:
    pub = A.join(["Pub", "1700000000000", "DefaultRegion", "PG", "T", "MSGID1", "null", "k1 k2", "10.0.0.1:10911",
                  "12", "3", "0", "OFFSETID", "true"]) + B
    sub_before = A.join(["SubBefore", "1700000000100", "DefaultRegion", "CG", "REQ", "MSGID1", "0", "k1 k2"]) + B
    sub_after_4x = A.join(["SubAfter", "REQ", "MSGID1", "7", "false", "k1 k2", "4"]) + B
    sub_after_5x = A.join(["SubAfter", "REQ", "MSGID1", "7", "true", "k1 k2", "0", "1700000000200", "CG"]) + B
    ctxs = decode_trace_data(pub + sub_before + sub_after_4x + sub_after_5x)
    assert [c.trace_type for c in ctxs] == [TraceType.Pub, TraceType.SubBefore, TraceType.SubAfter, TraceType.SubAfter]
    p = ctxs[0]
    assert (p.time_stamp, p.group_name, p.cost_time, p.success) == (1700000000000, "PG", 3, True)
    assert (p.beans[0].offset_msg_id, p.beans[0].tags, p.beans[0].body_length) == ("OFFSETID", "null", 12)
    assert (ctxs[2].success, ctxs[2].context_code, ctxs[2].group_name) == (False, 4, "")
    assert (ctxs[3].time_stamp, ctxs[3].group_name, ctxs[3].cost_time) == (1700000000200, "CG", 7)


def test_our_contexts_round_trip_and_name_their_keys() -> None:
    bean = TraceBean(topic="T", msg_id="U1", offset_msg_id="O1", tags=None, keys="a b", store_host="h:1",
                     body_length=5)
    pub = TraceContext(TraceType.Pub, 1, "DefaultRegion", "PG", cost_time=2, beans=[bean])
    after = TraceContext(TraceType.SubAfter, 3, "DefaultRegion", "CG", cost_time=4, success=False,
                         request_id="R", context_code=2, beans=[bean])
    text_pub, keys = encode_context(pub)
    assert keys == ["U1", "a", "b"] and text_pub.split(A)[6] == "null" and text_pub.endswith("true" + B)
    text_after, _ = encode_context(after)
    back = decode_trace_data(text_pub + text_after)
    assert back[0].beans[0].offset_msg_id == "O1" and back[0].cost_time == 2
    assert (back[1].success, back[1].context_code, back[1].time_stamp, back[1].group_name) == (False, 2, 3, "CG")


def test_a_damaged_context_is_named() -> None:
    with pytest.raises(TraceDataError, match="Pub trace context: field 1 \\(timestamp\\)"):
        decode_trace_data(A.join(["Pub", "x", "r", "g", "t", "m", "t", "k", "h", "1", "1", "0", "true"]) + B)
    with pytest.raises(TraceDataError, match="SubBefore trace context has 3 fields"):
        decode_trace_data(A.join(["SubBefore", "1", "r"]) + B)
    assert decode_trace_data("Unknown" + A + "x" + B) == []
