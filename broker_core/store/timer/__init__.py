"""Timer messages (RocketMQ 5.x wheel timer): TimerWheel, TimerLog, timer checkpoint, timer service.

The byte layouts are in ``broker_core.store.codec.timer_format``; this package owns the files and the
services that move messages through ``rmq_sys_wheel_timer``, the wheel and back to their real topic.
``timer_message_store`` is imported lazily by callers (it depends on the store layer).
"""

from broker_core.store.timer.convert import (
    TIMER_TOPIC,
    TimerMessageIllegal,
    build_delete_key,
    convert_to_timer_message,
    normalize_deliver_ms,
    strip_timer_properties,
)
from broker_core.store.timer.timer_checkpoint import TimerCheckpoint
from broker_core.store.timer.timer_log import TimerLog, TimerLogError
from broker_core.store.timer.timer_wheel import TimerWheel, TimerWheelError

__all__ = [
    "TIMER_TOPIC",
    "TimerCheckpoint",
    "TimerLog",
    "TimerLogError",
    "TimerMessageIllegal",
    "TimerWheel",
    "TimerWheelError",
    "build_delete_key",
    "convert_to_timer_message",
    "normalize_deliver_ms",
    "strip_timer_properties",
]
