"""ScheduleMessageService: deliver delay-level messages from SCHEDULE_TOPIC_XXXX when they fall due.

Why it works the way it does (RocketMQ ``ScheduleMessageService``, synchronous delivery mode):
each level ``n`` owns queue ``n-1``. Messages of one level share one delay, so a queue is in due-time
order and the walk can stop at the first unit that is not due yet. The due time is the CQ tagsCode
written at dispatch (spec §5.2), so nothing has to be read from the commitlog until delivery.
Progress is an offset per level, kept in memory and persisted to ``config/delayOffset.json`` every
``flushDelayOffsetInterval`` and at shutdown: a crash re-delivers at most what was delivered since the
last persist (at-least-once, as RocketMQ), a clean restart delivers every message exactly once.
A message whose REAL_TOPIC was deleted after it was stored is passed over, not delivered
(``deleted_topics``: a topic made again under the name starts empty; RocketMQ has no such check).

``tick()`` does one full pass at the injected clock's time (tests drive it with a fake clock);
``start()`` runs the same pass on a background thread every ``poll_interval_ms``.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from broker_core.common.round_failures import RoundFailures
from broker_core.store.codec.message import MessageExt, MessageInner
from broker_core.store.codec.properties import (
    PROPERTY_DELAY_TIME_LEVEL,
    PROPERTY_REAL_QUEUE_ID,
    PROPERTY_REAL_TOPIC,
    PROPERTY_TIMER_DELAY_SEC,
    PROPERTY_TIMER_DELIVER_MS,
)
from broker_core.store.commit_log import PutMessageResult
from broker_core.store.deleted_topics import deleted_since_stored
from broker_core.store.dispatch import SCHEDULE_TOPIC
from broker_core.store.schedule.delay_offset import DelayOffsetTable

if TYPE_CHECKING:
    from broker_core.store.message_store import MessageStore

log = logging.getLogger("rmqops.schedule")

# A real topic of a delay message must never be the half topic (RocketMQ discards such messages).
RMQ_SYS_TRANS_HALF_TOPIC = "RMQ_SYS_TRANS_HALF_TOPIC"
# tagsCode values at or below this are ConsumeQueueExt addresses, not due times (spec §5.2).
_MAX_EXT_ADDRESS = -2_147_483_649
DELAY_FOR_A_WHILE_MS = 100  # RocketMQ's poll period when nothing is due
_UNITS_PER_READ = 32
_DELIVERED, _SKIPPED, _BLOCKED = "delivered", "skipped", "blocked"
# Keys removed from the map when a delay message is re-emitted (spec §11.2).
_TIME_UP_REMOVED_KEYS = (PROPERTY_DELAY_TIME_LEVEL, PROPERTY_TIMER_DELIVER_MS, PROPERTY_TIMER_DELAY_SEC)

PutMessage = Callable[[MessageInner], PutMessageResult]


def delay_level_to_queue_id(level: int) -> int:
    return level - 1


def queue_id_to_delay_level(queue_id: int) -> int:
    return queue_id + 1


def message_time_up(msg: MessageExt) -> MessageInner:
    """The message to put back into its real topic/queue once its delay has elapsed.

    Keeps body, flag, sysFlag, born/store hosts, born time, reconsume times and every property except
    DELAY / TIMER_DELIVER_MS / TIMER_DELAY_SEC (Java keeps REAL_TOPIC/REAL_QID too). Java serializes
    the properties before clearing those keys (spec §1.9 quirk); we write the cleaned map, which the
    spec allows, and which keeps a re-put from being delayed a second time.
    Raises ValueError when the record lacks a usable REAL_TOPIC / REAL_QID.
    """
    props = dict(msg.properties)
    for key in _TIME_UP_REMOVED_KEYS:
        props.pop(key, None)
    topic = props.get(PROPERTY_REAL_TOPIC)
    if not topic:
        raise ValueError(f"schedule message at commitlog offset {msg.commit_log_offset} has no REAL_TOPIC")
    qid_text = props.get(PROPERTY_REAL_QUEUE_ID)
    try:
        queue_id = int(qid_text) if qid_text is not None else -1
    except ValueError:
        queue_id = -1
    if queue_id < 0:
        raise ValueError(f"schedule message at commitlog offset {msg.commit_log_offset} has a bad REAL_QID "
                         f"{qid_text!r}")
    return MessageInner(topic=topic, body=msg.body, properties=props, queue_id=queue_id, flag=msg.flag,
                        sys_flag=msg.sys_flag, born_timestamp=msg.born_timestamp, born_host=msg.born_host,
                        store_host=msg.store_host, reconsume_times=msg.reconsume_times)


@dataclass(slots=True)
class ScheduleStats:
    """One level's progress: what a dashboard or ``brokerStatus`` shows."""

    level: int
    queue_id: int
    delay_ms: int
    offset: int
    max_offset: int
    next_due_ms: int | None
    delivered: int

    @property
    def pending(self) -> int:
        return max(0, self.max_offset - self.offset)


class ScheduleMessageService:
    def __init__(self, store: MessageStore, put_message: PutMessage | None = None,
                 config_dir: str | Path | None = None, delay_levels: list[int] | None = None,
                 clock: Callable[[], int] | None = None, flush_delay_offset_interval: int | None = None,
                 poll_interval_ms: int = DELAY_FOR_A_WHILE_MS) -> None:
        """``put_message`` is how due messages re-enter the broker (the Broker's internal put, which
        applies its put hooks); by default the store's own ``put_message``. ``delay_levels`` are
        milliseconds per level (index 0 = level 1) and must be the table the store dispatches with."""
        self.store = store
        self.put_message: PutMessage = put_message or store.put_message
        self.delay_levels = list(delay_levels if delay_levels is not None else store.delay_levels_ms)
        if not self.delay_levels:
            raise ValueError("messageDelayLevel defines no level")
        self.clock = clock or store.clock
        self.flush_delay_offset_interval = (flush_delay_offset_interval if flush_delay_offset_interval is not None
                                            else store.config.flush_delay_offset_interval)
        self.poll_interval_ms = poll_interval_ms
        self.offsets = DelayOffsetTable(config_dir if config_dir is not None else store.config_dir)
        self.delivered: dict[int, int] = dict.fromkeys(range(1, len(self.delay_levels) + 1), 0)
        self.failed_puts = 0
        self.skipped = 0
        self.deleted_topic_dropped = 0  # due messages whose REAL_TOPIC was deleted after they were stored
        self._reput_failures: dict[int, RoundFailures] = {}  # per level: a full disk fails every pass
        self._lock = threading.Lock()
        self._loaded = False
        self._last_persist_ms: int | None = None
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()

    # -- levels -----------------------------------------------------------------------------------
    @property
    def max_delay_level(self) -> int:
        return len(self.delay_levels)

    def delay_of(self, level: int) -> int:
        return self.delay_levels[level - 1]

    def compute_deliver_timestamp(self, level: int, store_timestamp: int) -> int:
        if 1 <= level <= self.max_delay_level:
            return store_timestamp + self.delay_levels[level - 1]
        return store_timestamp + 1000

    # -- lifecycle --------------------------------------------------------------------------------
    def load(self) -> None:
        """Read delayOffset.json and pull offsets back inside their queues (RocketMQ correctDelayOffset)."""
        with self._lock:
            self.offsets.load()
            for level in range(1, self.max_delay_level + 1):
                current = self.offsets.get(level)
                if current is None:
                    continue
                corrected = self._clamp(level, current)
                if corrected != current:
                    log.error("delay level %d: offset %d outside its queue, corrected to %d", level, current,
                              corrected)
                    self.offsets.update(level, corrected)
            self._loaded = True

    def start(self) -> ScheduleMessageService:
        if self._thread is not None:
            return self
        if not self._loaded:
            self.load()
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="ScheduleMessageService", daemon=True)
        self._thread.start()
        return self

    def shutdown(self) -> None:
        """Stop the thread and persist the offsets: the file always exists after a shutdown, as with
        RocketMQ; rewritten only when it changed (the same bytes again would only fail on a full disk)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None
        if self._loaded:
            self.persist(force=not self.offsets.path.exists())

    def _run(self) -> None:
        failures = RoundFailures(log, "schedule message delivery")
        while not self._stop.is_set():
            try:
                self.tick()
            except Exception as e:
                failures.failed(e)
            else:
                failures.succeeded()
            self._stop.wait(self.poll_interval_ms / 1000)

    def persist(self, force: bool = False) -> bool:
        """Write delayOffset.json, the commitlog flushed first: an offset says the messages before it
        were re-put to their topics, and written ahead of those re-puts (ASYNC_FLUSH) a power cut
        lost the delayed messages for good."""
        now = self.clock()
        self._last_persist_ms = now
        return self.offsets.persist(now, force=force, before_write=self.store.flush_commit_log)

    # -- delivery ---------------------------------------------------------------------------------
    def tick(self, now: int | None = None) -> int:
        """Deliver everything due at ``now`` (default: the clock); returns how many were re-put."""
        if not self._loaded:
            self.load()
        now = self.clock() if now is None else now
        with self._lock:
            delivered = sum(self._deliver_level(level, now) for level in range(1, self.max_delay_level + 1))
        if self._last_persist_ms is None:
            self._last_persist_ms = now
        elif now - self._last_persist_ms >= self.flush_delay_offset_interval:
            self.persist()
        return delivered

    def _clamp(self, level: int, offset: int) -> int:
        qid = delay_level_to_queue_id(level)
        if (SCHEDULE_TOPIC, qid) not in self.store.consume_queues:
            return offset
        lo = self.store.get_min_offset_in_queue(SCHEDULE_TOPIC, qid)
        hi = self.store.get_max_offset_in_queue(SCHEDULE_TOPIC, qid)
        return min(max(offset, lo), hi)

    def _deliver_level(self, level: int, now: int) -> int:
        qid = delay_level_to_queue_id(level)
        if (SCHEDULE_TOPIC, qid) not in self.store.consume_queues:
            return 0
        start = self.offsets.get(level) or 0
        offset = self._clamp(level, start)
        if offset != start:
            log.error("delay level %d: offset %d outside its queue, reset to %d", level, start, offset)
            self.offsets.update(level, offset)
        max_offset = self.store.get_max_offset_in_queue(SCHEDULE_TOPIC, qid)
        delivered = 0
        while offset < max_offset:
            units = self.store.get_units(SCHEDULE_TOPIC, qid, offset, _UNITS_PER_READ)
            if not units:
                break
            for unit in units:
                if unit.queue_offset < offset:
                    continue
                due = self._due_time(level, unit.tags_code, unit.phy_offset, unit.size, now)
                if due > now:
                    return delivered
                outcome = self._deliver_unit(level, unit.queue_offset, unit.phy_offset, unit.size)
                if outcome is _BLOCKED:
                    return delivered  # retry this offset on the next pass
                if outcome is _DELIVERED:
                    delivered += 1
                offset = unit.queue_offset + unit.batch_num
                self.offsets.update(level, offset)
        return delivered

    def _due_time(self, level: int, tags_code: int, phy: int, size: int, now: int) -> int:
        if tags_code <= _MAX_EXT_ADDRESS:
            store_ts = self.store.commit_log.pickup_store_timestamp(phy, size)
            tags_code = self.compute_deliver_timestamp(level, store_ts)
        # A due time further away than the level's delay means the clock went back: deliver now.
        if tags_code > now + self.delay_of(level):
            return now
        return tags_code

    def _deliver_unit(self, level: int, queue_offset: int, phy: int, size: int) -> str:
        """Re-put one message: _DELIVERED, _SKIPPED (unreadable / malformed) or _BLOCKED (put failed)."""
        msg = self.store.look_message_by_offset(phy, size)
        if msg is None:
            log.warning("delay level %d offset %d: no message at commitlog offset %d, skipped", level,
                     queue_offset, phy)
            self.skipped += 1
            return _SKIPPED
        try:
            inner = message_time_up(msg)
        except ValueError as e:
            log.error("delay level %d offset %d: %s; skipped", level, queue_offset, e)
            self.skipped += 1
            return _SKIPPED
        if inner.topic == RMQ_SYS_TRANS_HALF_TOPIC:
            log.error("[BUG] delay message at commitlog offset %d targets %s; discarded", phy, inner.topic)
            self.skipped += 1
            return _SKIPPED
        if deleted_since_stored(self.store.dispatch_filter, inner.topic, phy):
            # A topic made again under the name must not get it; the record stays in the commitlog and
            # the level's offset moves past it (no retry).
            log.warning("delay level %d offset %d: message %s at commitlog offset %d not delivered: its topic %s "
                        "was deleted after it was stored", level, queue_offset, msg.uniq_key, phy, inner.topic)
            self.deleted_topic_dropped += 1
            return _SKIPPED
        failures = self._reput_failures.get(level)
        if failures is None:
            failures = self._reput_failures[level] = RoundFailures(log, f"delay level {level} re-put")
        try:
            result = self.put_message(inner)
        except Exception as e:
            failures.failed(e)
            result = None
        if result is None or not result.ok:
            self.failed_puts += 1
            if result is not None:
                # retried every pass (100 ms) until it works: logged once a minute, and when it works again
                failures.failed_with(f"offset {queue_offset} to {inner.topic} returned {result.status.value} "
                                     f"{result.remark}")
            return _BLOCKED
        failures.succeeded()
        self.delivered[level] = self.delivered.get(level, 0) + 1
        return _DELIVERED

    # -- figures ----------------------------------------------------------------------------------
    def stats(self) -> list[ScheduleStats]:
        out = []
        for level in range(1, self.max_delay_level + 1):
            qid = delay_level_to_queue_id(level)
            offset = self.offsets.get(level) or 0
            max_offset = self.store.get_max_offset_in_queue(SCHEDULE_TOPIC, qid)
            next_due = None
            if offset < max_offset:
                units = self.store.get_units(SCHEDULE_TOPIC, qid, offset, 1)
                if units:
                    u = units[0]
                    next_due = (u.tags_code if u.tags_code > _MAX_EXT_ADDRESS else self.compute_deliver_timestamp(
                        level, self.store.commit_log.pickup_store_timestamp(u.phy_offset, u.size)))
            out.append(ScheduleStats(level, qid, self.delay_of(level), offset, max_offset, next_due,
                                     self.delivered.get(level, 0)))
        return out

    def running_stats(self) -> dict[str, str]:
        """RocketMQ's ``scheduleMessageOffset_<level>`` = ``"<offset>,<maxOffset>"`` entries (brokerStatus)."""
        return {f"scheduleMessageOffset_{level}": f"{offset},{self.store.get_max_offset_in_queue(SCHEDULE_TOPIC, level - 1)}"
                for level, offset in sorted(self.offsets.offset_table.items())}
