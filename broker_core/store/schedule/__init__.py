"""Delay-level messages (RocketMQ 4.x ``ScheduleMessageService``): SCHEDULE_TOPIC_XXXX queues -> real topics.

The broker's put hook parks a message with ``DELAY=n`` in queue ``n-1`` of ``SCHEDULE_TOPIC_XXXX``; the
store's dispatch writes its due time as the CQ tagsCode (spec §5.2); this package walks each level's
queue and re-puts due messages to their real topic, remembering progress in ``config/delayOffset.json``.
"""

from broker_core.store.schedule.delay_offset import DelayOffsetTable
from broker_core.store.schedule.schedule_message_service import (
    ScheduleMessageService,
    ScheduleStats,
    delay_level_to_queue_id,
    message_time_up,
    queue_id_to_delay_level,
)

__all__ = ["DelayOffsetTable", "ScheduleMessageService", "ScheduleStats", "delay_level_to_queue_id",
           "message_time_up", "queue_id_to_delay_level"]
