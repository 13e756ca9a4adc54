"""Timer messages (RocketMQ 5.x wheel timer): TimerWheel, TimerLog, timer checkpoint, timer service.

The byte layouts are in ``broker_core.store.codec.timer_format``; this package owns the files and the
services that move messages through ``rmq_sys_wheel_timer``, the wheel and back to their real topic.
"""

from broker_core.store.timer.timer_checkpoint import TimerCheckpoint
from broker_core.store.timer.timer_log import TimerLog, TimerLogError
from broker_core.store.timer.timer_wheel import TimerWheel, TimerWheelError

__all__ = ["TimerCheckpoint", "TimerLog", "TimerLogError", "TimerWheel", "TimerWheelError"]
