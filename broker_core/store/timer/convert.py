"""Broker-side conversion of a message with a delivery time into the timer topic (spec §8.6).

Why a pure function: the broker decides, before the store sees a message, whether it is parked in
``rmq_sys_wheel_timer`` (Java ``HookUtils.handleScheduleMessage`` / ``transformTimerMessage``). Keeping
that decision free of I/O and of the clock makes it testable on its own and lets the send path,
the gRPC adapter and the tests share it.
"""

from __future__ import annotations

import dataclasses
import re

from broker_core.store.codec.message import MessageInner
from broker_core.store.codec.properties import (
    PROPERTY_DELAY_TIME_LEVEL,
    PROPERTY_REAL_QUEUE_ID,
    PROPERTY_REAL_TOPIC,
    PROPERTY_TIMER_DEL_UNIQKEY,
    PROPERTY_TIMER_DELAY_MS,
    PROPERTY_TIMER_DELAY_SEC,
    PROPERTY_TIMER_DELIVER_MS,
    PROPERTY_TIMER_OUT_MS,
)
from broker_core.store.codec.sys_flag import (
    TRANSACTION_COMMIT_TYPE,
    TRANSACTION_NOT_TYPE,
    TRANSACTION_TYPE_MASK,
)
from broker_core.store.codec.timer_format import DEFAULT_PRECISION_MS, DEFAULT_TIMER_MAX_DELAY_SEC

TIMER_TOPIC = "rmq_sys_wheel_timer"
TIMER_PROPERTY_KEYS = (PROPERTY_TIMER_DELIVER_MS, PROPERTY_TIMER_DELAY_SEC, PROPERTY_TIMER_DELAY_MS)

_JAVA_LONG = re.compile(r"[+-]?\d+")
_LONG_MIN, _LONG_MAX = -(1 << 63), (1 << 63) - 1


class TimerMessageIllegal(ValueError):
    """The timer properties cannot be honoured (Java ``WHEEL_TIMER_MSG_ILLEGAL``): unparsable value,
    delay beyond ``timerMaxDelaySec``, or a delete (recall) request whose time has already passed."""


def _parse_long(name: str, value: str) -> int:
    """Java ``Long.parseLong`` of property ``name``: optional sign and ASCII digits only, within the i64 range."""
    if not _JAVA_LONG.fullmatch(value):
        raise TimerMessageIllegal(f"{name} must be an integer, got {value!r}")
    n = int(value)
    if not _LONG_MIN <= n <= _LONG_MAX:
        raise TimerMessageIllegal(f"{name} is out of the range of a Java long, got {value!r}")
    return n


def delay_time_level(msg: MessageInner) -> int:
    """Java ``Message.getDelayTimeLevel``: the ``DELAY`` property as an int, 0 when absent."""
    value = msg.properties.get(PROPERTY_DELAY_TIME_LEVEL)
    if value is None:
        return 0
    try:
        return int(value)
    except ValueError:
        return 0


def is_timer_message(msg: MessageInner) -> bool:
    """Has a delivery time, is not in the timer topic yet, and was not normalized already."""
    if msg.topic == TIMER_TOPIC or PROPERTY_TIMER_OUT_MS in msg.properties:
        return False
    return any(k in msg.properties for k in TIMER_PROPERTY_KEYS)


def strip_timer_properties(msg: MessageInner) -> MessageInner:
    """A copy without TIMER_DELIVER_MS / TIMER_DELAY_SEC / TIMER_DELAY_MS.

    A message with a delay level ignores its timer properties (the level wins) and Java drops them
    before the delay-level conversion (§11.2); the broker calls this in that case.
    """
    if not any(k in msg.properties for k in TIMER_PROPERTY_KEYS):
        return msg
    props = {k: v for k, v in msg.properties.items() if k not in TIMER_PROPERTY_KEYS}
    return dataclasses.replace(msg, properties=props)


def normalize_deliver_ms(deliver_ms: int, precision_ms: int = DEFAULT_PRECISION_MS) -> int:
    """TIMER_OUT_MS for a requested time: the slot that fires at or just after it.

    A slot fires one precision after its start, so a time on a slot boundary goes to the previous
    slot and any other time to the slot it falls in.
    """
    if deliver_ms % precision_ms == 0:
        return deliver_ms - precision_ms
    return deliver_ms // precision_ms * precision_ms


def convert_to_timer_message(msg: MessageInner, now_ms: int, precision_ms: int = DEFAULT_PRECISION_MS,
                             max_delay_sec: int = DEFAULT_TIMER_MAX_DELAY_SEC) -> MessageInner | None:
    """The message as it must be stored in ``rmq_sys_wheel_timer`` queue 0, or None to store it as is.

    None when: the transaction type is PREPARED/ROLLBACK, it carries a delay level (see
    ``strip_timer_properties``), it is already a timer-topic message or has TIMER_OUT_MS, it has no
    timer property, or its delivery time is not in the future. Priority of the properties is
    TIMER_DELAY_SEC, TIMER_DELAY_MS, then TIMER_DELIVER_MS. The input is never modified.

    Raises ``TimerMessageIllegal`` where Java answers WHEEL_TIMER_MSG_ILLEGAL.
    """
    tran_type = msg.sys_flag & TRANSACTION_TYPE_MASK
    if tran_type not in (TRANSACTION_NOT_TYPE, TRANSACTION_COMMIT_TYPE):
        return None
    if delay_time_level(msg) > 0 or not is_timer_message(msg):
        return None
    props = msg.properties
    if (sec := props.get(PROPERTY_TIMER_DELAY_SEC)) is not None:
        deliver_ms = now_ms + _parse_long(PROPERTY_TIMER_DELAY_SEC, sec) * 1000
    elif (ms := props.get(PROPERTY_TIMER_DELAY_MS)) is not None:
        deliver_ms = now_ms + _parse_long(PROPERTY_TIMER_DELAY_MS, ms)
    else:
        deliver_ms = _parse_long(PROPERTY_TIMER_DELIVER_MS, props[PROPERTY_TIMER_DELIVER_MS])
    if deliver_ms <= now_ms:
        if PROPERTY_TIMER_DEL_UNIQKEY in props:
            raise TimerMessageIllegal("a timer delete request must target a future time")
        return None
    if deliver_ms - now_ms > max_delay_sec * 1000:
        raise TimerMessageIllegal(
            f"delay {deliver_ms - now_ms} ms exceeds timerMaxDelaySec {max_delay_sec}")
    new_props = dict(props)
    new_props[PROPERTY_TIMER_OUT_MS] = str(normalize_deliver_ms(deliver_ms, precision_ms))
    new_props[PROPERTY_REAL_TOPIC] = msg.topic
    new_props[PROPERTY_REAL_QUEUE_ID] = str(msg.queue_id)
    return dataclasses.replace(msg, topic=TIMER_TOPIC, queue_id=0, properties=new_props)


def build_delete_key(real_topic: str, uniq_key: str) -> str:
    """Value of TIMER_DEL_UNIQKEY that cancels the timer message ``uniq_key`` of ``real_topic``."""
    return f"{real_topic}+{uniq_key}"
