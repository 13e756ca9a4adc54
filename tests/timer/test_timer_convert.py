"""§8.6: the broker-side conversion of a message with a delivery time into rmq_sys_wheel_timer."""

from __future__ import annotations

import pytest

from broker_core.store.codec.message import MessageInner
from broker_core.store.timer import (
    TIMER_TOPIC,
    TimerMessageIllegal,
    convert_to_timer_message,
    normalize_deliver_ms,
    strip_timer_properties,
)

NOW = 1700000000000


def _msg(props: dict[str, str], topic: str = "TopicTest", queue_id: int = 3, sys_flag: int = 0) -> MessageInner:
    return MessageInner(topic=topic, body=b"b", properties=dict(props), queue_id=queue_id, sys_flag=sys_flag)


def test_vector_deliver_ms() -> None:
    # §13.8: TIMER_DELIVER_MS 1700000010500 -> TIMER_OUT_MS 1700000010000
    src = _msg({"UNIQ_KEY": "U1", "TIMER_DELIVER_MS": "1700000010500"})
    out = convert_to_timer_message(src, NOW, 1000)
    assert out is not None and out is not src
    assert (out.topic, out.queue_id) == (TIMER_TOPIC, 0)
    assert out.properties == {"UNIQ_KEY": "U1", "TIMER_DELIVER_MS": "1700000010500",
                              "TIMER_OUT_MS": "1700000010000", "REAL_TOPIC": "TopicTest", "REAL_QID": "3"}
    assert src.topic == "TopicTest" and "TIMER_OUT_MS" not in src.properties  # input untouched
    assert out.body == src.body


def test_normalization() -> None:
    assert normalize_deliver_ms(1700000010500, 1000) == 1700000010000
    assert normalize_deliver_ms(1700000010000, 1000) == 1700000009000  # on the boundary: the slot before
    assert normalize_deliver_ms(1700000010001, 1000) == 1700000010000
    assert normalize_deliver_ms(1250, 100) == 1200
    assert normalize_deliver_ms(1200, 100) == 1100


def test_priority_sec_then_ms_then_deliver() -> None:
    props = {"TIMER_DELIVER_MS": str(NOW + 50_000), "TIMER_DELAY_MS": "20500", "TIMER_DELAY_SEC": "7"}
    assert convert_to_timer_message(_msg(props), NOW).properties["TIMER_OUT_MS"] == str(NOW + 6000)
    del props["TIMER_DELAY_SEC"]
    assert convert_to_timer_message(_msg(props), NOW).properties["TIMER_OUT_MS"] == str(NOW + 20_000)
    del props["TIMER_DELAY_MS"]
    assert convert_to_timer_message(_msg(props), NOW).properties["TIMER_OUT_MS"] == str(NOW + 49_000)


def test_not_converted() -> None:
    assert convert_to_timer_message(_msg({"TAGS": "a"}), NOW) is None
    assert convert_to_timer_message(_msg({"TIMER_DELIVER_MS": str(NOW)}), NOW) is None  # due now: real topic
    assert convert_to_timer_message(_msg({"TIMER_DELAY_MS": "-5"}), NOW) is None
    assert convert_to_timer_message(_msg({"TIMER_DELAY_MS": "5000", "TIMER_OUT_MS": "1"}), NOW) is None
    assert convert_to_timer_message(_msg({"TIMER_DELAY_MS": "5000"}, topic=TIMER_TOPIC), NOW) is None
    assert convert_to_timer_message(_msg({"TIMER_DELAY_MS": "5000", "DELAY": "3"}), NOW) is None
    # transaction half (PREPARED 0x4) and rollback (0xC) are not timed; commit (0x8) is
    assert convert_to_timer_message(_msg({"TIMER_DELAY_MS": "5000"}, sys_flag=0x4), NOW) is None
    assert convert_to_timer_message(_msg({"TIMER_DELAY_MS": "5000"}, sys_flag=0xC), NOW) is None
    assert convert_to_timer_message(_msg({"TIMER_DELAY_MS": "5000"}, sys_flag=0x8), NOW) is not None


def test_illegal() -> None:
    with pytest.raises(TimerMessageIllegal):
        convert_to_timer_message(_msg({"TIMER_DELAY_SEC": "soon"}), NOW)
    with pytest.raises(TimerMessageIllegal):
        convert_to_timer_message(_msg({"TIMER_DELAY_MS": "1.5"}), NOW)
    with pytest.raises(TimerMessageIllegal):  # beyond timerMaxDelaySec (3 days)
        convert_to_timer_message(_msg({"TIMER_DELAY_MS": str(259_200_000 + 1)}), NOW)
    assert convert_to_timer_message(_msg({"TIMER_DELAY_MS": str(259_200_000)}), NOW) is not None
    with pytest.raises(TimerMessageIllegal):
        convert_to_timer_message(_msg({"TIMER_DELAY_MS": "100"}), NOW, max_delay_sec=0)
    with pytest.raises(TimerMessageIllegal):  # a delete request for a time already past
        convert_to_timer_message(_msg({"TIMER_DELIVER_MS": str(NOW - 1), "TIMER_DEL_UNIQKEY": "T+U"}), NOW)


def test_strip_for_delay_level() -> None:
    src = _msg({"DELAY": "3", "TIMER_DELAY_SEC": "5", "TIMER_DELIVER_MS": "9", "TIMER_DELAY_MS": "1", "K": "v"})
    out = strip_timer_properties(src)
    assert out.properties == {"DELAY": "3", "K": "v"}
    assert "TIMER_DELAY_SEC" in src.properties
    plain = _msg({"K": "v"})
    assert strip_timer_properties(plain) is plain
