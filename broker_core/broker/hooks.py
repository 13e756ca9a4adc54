"""Put hooks: how a message is rewritten before the store sees it (RocketMQ HookUtils + SendMessageProcessor).

Why hooks: a delay-level message, a timer message and a transactional prepare are all stored as
ordinary records in a system topic, carrying their real destination in ``REAL_TOPIC``/``REAL_QID``.
Every put path (client sends, retries, delay delivery, commits) must apply the same rewrite, so the
Broker runs these functions on every put (``Broker.put_message_hooks``). A hook returns the message
to store instead, or None to leave it unchanged; it never modifies its input. It raises a
``PutMessageHookError`` subclass where RocketMQ answers a put with an error status.

Register, in this order (``build_put_message_hooks`` returns exactly this):
  1. ``handle_schedule_message`` (timer conversion, then delay-level conversion), as RocketMQ's
     ``handleScheduleMessage`` hook.
``transaction_prepare_hook`` is NOT a put hook: like SendMessageProcessor, only the client send path
uses it (via ``TransactionalMessageService.prepare_message``); internal puts of messages that still
carry ``TRAN_MSG`` (retries of committed messages) must stay ordinary messages.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from broker_core.broker.transaction.transactional_message_util import (
    RMQ_SYS_TRANS_HALF_TOPIC,
    is_transaction_prepare_message,
    parse_half_message_inner,
)
from broker_core.store.codec.message import MessageInner
from broker_core.store.codec.properties import (
    PROPERTY_DELAY_TIME_LEVEL,
    PROPERTY_REAL_QUEUE_ID,
    PROPERTY_REAL_TOPIC,
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
from broker_core.store.dispatch import SCHEDULE_TOPIC
from broker_core.store.schedule import delay_level_to_queue_id
from broker_core.store.store_config import DEFAULT_DELAY_LEVELS, StoreConfig, parse_delay_levels

PutMessageHook = Callable[[MessageInner], MessageInner | None]

DEFAULT_MAX_DELAY_LEVEL = len(parse_delay_levels(DEFAULT_DELAY_LEVELS))
_TIMER_KEYS = (PROPERTY_TIMER_DELIVER_MS, PROPERTY_TIMER_DELAY_SEC, PROPERTY_TIMER_DELAY_MS)


class PutMessageHookError(ValueError):
    """A hook refuses the message; ``status`` is the RocketMQ PutMessageStatus name to answer with."""

    status = "MESSAGE_ILLEGAL"


class DelayLevelIllegal(PutMessageHookError):
    """``DELAY`` is not an integer (Java's getDelayTimeLevel throws NumberFormatException)."""


class TimerNotEnabled(PutMessageHookError):
    status = "WHEEL_TIMER_NOT_ENABLE"


class TimerMessageIllegal(PutMessageHookError):
    status = "WHEEL_TIMER_MSG_ILLEGAL"


class TimerFlowControl(PutMessageHookError):
    """The message's wheel slot holds more than timerCongestNumEachSlot messages (Apache ``isReject``)."""

    status = "WHEEL_TIMER_FLOW_CONTROL"


#: ``deliver_ms -> refuse?``: the timer store's flow control for the slot a new timer message would join
TimerReject = Callable[[int], bool]


def flow_control_remark(congest_num_each_slot: int) -> str:
    """Apache SendMessageProcessor's remark for WHEEL_TIMER_FLOW_CONTROL, word for word."""
    limit = congest_num_each_slot
    return (f"timer message is under flow control, max num limit is {limit * 2} or the current value is greater "
            f"than {limit} and less than {limit * 2}, trigger random flow control")


class TransactionMessageRejected(PutMessageHookError):
    """rejectTransactionMessage is set; the send path answers NO_PERMISSION."""

    status = "NO_PERMISSION"


def get_delay_time_level(msg: MessageInner) -> int:
    """Java ``Message.getDelayTimeLevel``: the DELAY property as an int, 0 when absent."""
    text = msg.properties.get(PROPERTY_DELAY_TIME_LEVEL)
    if text is None:
        return 0
    try:
        return int(text)
    except ValueError:
        raise DelayLevelIllegal(f"DELAY must be an integer delay level, got {text!r}") from None


def _schedulable(msg: MessageInner) -> bool:
    """A plain or committed message; not a half (its delay or timer applies to the committed message:
    moved into the delay or timer topic, a half could never be committed, and was lost when it came
    back with the half topic as its real topic)."""
    return (msg.sys_flag & TRANSACTION_TYPE_MASK) in (TRANSACTION_NOT_TYPE, TRANSACTION_COMMIT_TYPE) \
        and msg.topic != RMQ_SYS_TRANS_HALF_TOPIC


def schedule_message_hook(msg: MessageInner, max_delay_level: int = DEFAULT_MAX_DELAY_LEVEL) -> MessageInner | None:
    """DELAY=n (n > 0) -> SCHEDULE_TOPIC_XXXX queue n-1 with REAL_TOPIC/REAL_QID (transformDelayLevelMessage).

    Levels above the table's maximum are clamped to it (DELAY is rewritten). DELAY <= 0 means no
    delay: the retry/DLQ paths set 0 (or -1) exactly so that a DLQ message is stored directly.
    Timer properties are dropped when a level is set (the level wins, HookUtils.checkIfTimerMessage).
    PREPARED/ROLLBACK records and messages already in SCHEDULE_TOPIC_XXXX are left alone.
    """
    if not _schedulable(msg) or msg.topic == SCHEDULE_TOPIC:
        return None
    level = get_delay_time_level(msg)
    if level <= 0:
        return None
    level = min(level, max_delay_level)
    props = {k: v for k, v in msg.properties.items() if k not in _TIMER_KEYS}
    props[PROPERTY_DELAY_TIME_LEVEL] = str(level)
    props[PROPERTY_REAL_TOPIC] = msg.topic
    props[PROPERTY_REAL_QUEUE_ID] = str(msg.queue_id)
    return dataclasses.replace(msg, topic=SCHEDULE_TOPIC, queue_id=delay_level_to_queue_id(level), properties=props)


def timer_message_hook(msg: MessageInner, now_ms: int, precision_ms: int = 1000, max_delay_sec: int = 3 * 86400,
                       timer_wheel_enable: bool = True, timer_reject: TimerReject | None = None,
                       congest_num_each_slot: int = 2**31 - 1) -> MessageInner | None:
    """TIMER_DELIVER_MS / TIMER_DELAY_SEC / TIMER_DELAY_MS -> rmq_sys_wheel_timer (transformTimerMessage).

    The conversion itself is the timer package's ``convert_to_timer_message``. ``timer_reject`` is the
    wheel's flow control, asked with the slot time (TIMER_OUT_MS) as Apache's HookUtils asks isReject:
    without it timerCongestNumEachSlot was shown but a slot took any number of messages.
    """
    from broker_core.store.timer import convert

    if not _schedulable(msg) or msg.topic == convert.TIMER_TOPIC or get_delay_time_level(msg) > 0:
        return None
    if not convert.is_timer_message(msg):
        return None
    if not timer_wheel_enable:
        raise TimerNotEnabled("accurate timer message is not enabled, timerWheelEnable is false")
    try:
        converted = convert.convert_to_timer_message(msg, now_ms, precision_ms, max_delay_sec)
    except convert.TimerMessageIllegal as e:
        raise TimerMessageIllegal(str(e)) from e
    if converted is not None and timer_reject is not None \
            and timer_reject(int(converted.properties[PROPERTY_TIMER_OUT_MS])):
        raise TimerFlowControl(flow_control_remark(congest_num_each_slot))
    return converted


def handle_schedule_message(msg: MessageInner, now_ms: int, max_delay_level: int = DEFAULT_MAX_DELAY_LEVEL,
                            precision_ms: int = 1000, max_delay_sec: int = 3 * 86400,
                            timer_wheel_enable: bool = True, timer_reject: TimerReject | None = None,
                            congest_num_each_slot: int = 2**31 - 1) -> MessageInner | None:
    """RocketMQ's ``handleScheduleMessage`` hook: timer conversion, else delay-level conversion."""
    converted = timer_message_hook(msg, now_ms, precision_ms, max_delay_sec, timer_wheel_enable, timer_reject,
                                   congest_num_each_slot)
    if converted is not None:
        return converted
    return schedule_message_hook(msg, max_delay_level)


def build_put_message_hooks(store_config: StoreConfig, clock: Callable[[], int],
                            timer_reject: TimerReject | None = None) -> list[PutMessageHook]:
    """The hooks to append to ``Broker.put_message_hooks``, bound to the store's settings and clock.

    timerMaxDelaySec and timerWheelEnable are read at every message, as HookUtils reads the live
    MessageStoreConfig: updateBrokerConfig changes them on the running broker. The wheel itself starts
    with the broker, so a wheel switched on later still refuses until a restart (its messages would
    wait in rmq_sys_wheel_timer with nothing to deliver them). The delay levels and the wheel's
    precision are fixed at start (the schedule service's queues, the wheel's slots). ``timer_reject`` is
    the running wheel's flow control (``TimerMessageStore.is_reject``), None without a wheel."""
    max_level = len(parse_delay_levels(store_config.message_delay_level))
    precision = store_config.timer_precision_ms
    wheel_started = store_config.timer_wheel_enable

    def handle_schedule_message_hook(msg: MessageInner) -> MessageInner | None:
        enabled = store_config.timer_wheel_enable
        try:
            return handle_schedule_message(msg, clock(), max_level, precision, store_config.timer_max_delay_sec,
                                           enabled and wheel_started, timer_reject,
                                           store_config.timer_congest_num_each_slot)
        except TimerNotEnabled:
            if enabled:
                raise TimerNotEnabled("accurate timer message is not enabled: timerWheelEnable was false when the "
                                      "broker started, and the timer wheel starts with the broker (restart it)") \
                    from None
            raise

    return [handle_schedule_message_hook]


def transaction_prepare_hook(msg: MessageInner, reject_transaction_message: bool = False) -> MessageInner | None:
    """Client send path only: the half form of a transactional prepare, or None for other messages.

    Equivalent to ``TransactionalMessageService.prepare_message`` minus the put and the metrics;
    use it when the send path needs the half message itself (e.g. to run other checks first).
    """
    if msg.topic == RMQ_SYS_TRANS_HALF_TOPIC or not is_transaction_prepare_message(msg):
        return None
    if reject_transaction_message:
        raise TransactionMessageRejected("sending transaction message is forbidden on this broker "
                                         "(rejectTransactionMessage=true)")
    return parse_half_message_inner(msg)
