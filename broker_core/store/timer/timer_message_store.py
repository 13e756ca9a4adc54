"""The timer service: ``rmq_sys_wheel_timer`` → TimerLog + wheel → the real topic (RocketMQ 5.x).

Why it looks like this. Apache RocketMQ's ``TimerMessageStore`` runs five threads (enqueue get/put,
dequeue get/get-message/put) linked by queues. Here the same steps run in one deterministic
``tick()``, so a test with a fake clock can drive it exactly; ``start()`` only calls ``tick()`` from
a thread for real use. What is kept from Java, because the files and the recovery depend on it:

* enqueue reads queue 0 of the timer topic from ``currQueueOffset``; a target at or beyond the roll
  window gets a ROLL unit in a nearer slot (half the window if the excess is under a third of it,
  else the whole window); a TIMER_DEL_UNIQKEY message gets a DELETE unit (slot count − 1); a target
  already behind the write pointer is delivered at once with TIMER_ENQUEUE_MS = Long.MAX_VALUE;
* a slot fires once the write pointer is past it; its chain is walked from ``lastPos`` through
  ``prevPos``, deletes are collected first, the rest are re-put oldest first to REAL_TOPIC/REAL_QID
  (properties kept, REAL_TOPIC/REAL_QID included, plus TIMER_ENQUEUE_MS/TIMER_DEQUEUE_MS) or, for
  ROLL units, back into the timer topic with TIMER_ROLL_TIMES + 1; a message whose REAL_TOPIC was
  deleted after it was stored is neither (``deleted_topics``; RocketMQ has no such check);
* the checkpoint and recovery follow Java (rescan from ``lastTimerLogFlushPos`` − one file,
  revise the queue offset from the last unit, bound the read pointer to one wheel lap).

One difference on purpose: when the clock has jumped ahead by more than a tick (a fake clock, or
a paused process), the write pointer is moved forward slot by slot (jumping over empty ones) instead
of straight to now. Each slot is then handled as if the service had been running all along, so
messages that roll over during the catch-up still come out in delivery order.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from broker_core.common.round_failures import RoundFailures
from broker_core.store.codec.hashing import java_string_hash
from broker_core.store.codec.hotpath import decode_dispatch_fields
from broker_core.store.codec.message import MessageExt, MessageInner
from broker_core.store.codec.properties import (
    PROPERTY_REAL_QUEUE_ID,
    PROPERTY_REAL_TOPIC,
    PROPERTY_TIMER_DEL_UNIQKEY,
    PROPERTY_TIMER_DEQUEUE_MS,
    PROPERTY_TIMER_ENQUEUE_MS,
    PROPERTY_TIMER_OUT_MS,
    PROPERTY_TIMER_ROLL_TIMES,
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
    get_property,
)
from broker_core.store.codec.timer_format import (
    BLANK_MAGIC_CODE,
    DEFAULT_SLOTS_TOTAL,
    MAGIC_DEFAULT,
    MAGIC_DELETE,
    MAGIC_ROLL,
    MIN_BLANK_LEN,
    TIMER_BLANK_SLOTS,
    UNIT_SIZE,
    is_magic_ok,
    java_div,
)
from broker_core.store.commit_log import PutMessageResult
from broker_core.store.deleted_topics import deleted_since_stored
from broker_core.store.timer.convert import TIMER_TOPIC, build_delete_key
from broker_core.store.timer.timer_checkpoint import TimerCheckpoint
from broker_core.store.timer.timer_log import TimerLog
from broker_core.store.timer.timer_wheel import IGNORE, TimerWheel

if TYPE_CHECKING:
    from broker_core.store.message_store import MessageStore
    from broker_core.store.store_config import StoreConfig

log = logging.getLogger("rmqops.store.timer")

LONG_MAX = (1 << 63) - 1
#: Backlog buckets by time until a message is due (its own slot fires): upper bound in ms (None =
#: unbounded). The names are brokerStatus' timerDueIn_* keys.
BACKLOG_BUCKETS: tuple[tuple[str, int | None], ...] = (
    ("10s", 10_000), ("1m", 60_000), ("10m", 600_000), ("1h", 3_600_000), ("later", None))
#: Past the last bounded bucket everything is "later": slots firing further out need no look at units.
_BACKLOG_HORIZON_MS = max(bound for _, bound in BACKLOG_BUCKETS if bound is not None)
_BACKLOG_LAST = BACKLOG_BUCKETS[-1][0]
_RATE_WINDOW_MS = 60_000
_CLEAN_TIMER_LOG_INTERVAL_MS = 30_000
_ENQUEUE_BATCH = 256
#: Put statuses after which the message is not retried (Java PUT_NO_RETRY). The flush timeouts are
#: here too: the record is in the commitlog, so a retry would only duplicate it.
_NO_RETRY = {"MESSAGE_ILLEGAL", "PROPERTIES_SIZE_EXCEEDED", "WHEEL_TIMER_NOT_ENABLE", "WHEEL_TIMER_MSG_ILLEGAL",
             "FLUSH_DISK_TIMEOUT", "FLUSH_SLAVE_TIMEOUT"}


def _status_name(result: PutMessageResult) -> str:
    return str(result.status)


class ReputRefused(OSError):
    """A re-put the store refused with a status worth retrying (a full disk: SERVICE_NOT_AVAILABLE).

    An OSError because it is an operating condition, not a bug: ``RoundFailures`` reports it as one
    line without a traceback, like the full disk of any other background round.
    """


def _refusal(offset_py: int, status: str, remark: str) -> ReputRefused:
    """The retryable refusal of the re-put of the timer message at ``offset_py``, as RoundFailures'
    text: equal for every retry of the same message, so the retries are counted, not logged."""
    why = f" ({remark})" if remark else ""
    return ReputRefused(f"{status}{why} for the timer message at commitlog offset {offset_py}; will retry")


def _due_bucket(due_in_ms: int) -> str:
    """The BACKLOG_BUCKETS name for a message whose own slot fires ``due_in_ms`` from now."""
    for name, bound in BACKLOG_BUCKETS:
        if bound is not None and due_in_ms <= bound:
            return name
    return _BACKLOG_LAST


def _format_ms(ms: int) -> str:
    """A wheel time as the operator reads it (local time, as the broker's other log lines)."""
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ms / 1000))


def _wrap_i32(value: int) -> int:
    """Java ``(int)`` cast of a long."""
    value &= 0xFFFFFFFF
    return value - (1 << 32) if value & 0x80000000 else value


@dataclass(slots=True)
class TickResult:
    """What one ``tick()`` did (all counts are messages / units)."""

    enqueued: int = 0  # units appended to the TimerLog (normal, roll and delete units)
    delivered: int = 0  # re-put to their real topic (including expired-on-arrival ones)
    expired_on_enqueue: int = 0  # of ``delivered``: already due when read from the timer topic
    rolled: int = 0  # re-put into the timer topic with TIMER_ROLL_TIMES + 1
    cancelled: int = 0  # skipped because a delete unit of the same slot names them
    dropped: int = 0  # refused by the store without retry, or unreadable timer-topic records
    deleted_topic: int = 0  # not delivered: REAL_TOPIC was deleted after the message was stored
    missing: int = 0  # the commitlog no longer has the record a unit points at
    missing_first: tuple[int, int] | None = None  # (offsetPy, sizePy) of the first of them (the tick's WARN)
    slots: int = 0  # wheel slots that fired with content
    blocked: bool = False  # a retryable put failure stopped the dequeue; the next tick resumes


@dataclass(slots=True)
class TimerBacklog:
    """Operator figures: how much is waiting, when it is due, how fast and how late it moves."""

    now_ms: int
    pending: int  # live count of the wheel from the read pointer on (Java getAllCongestNum)
    enqueue_behind_messages: int  # in the timer topic, not yet in the wheel
    enqueue_behind_ms: int  # age of the oldest such message
    dequeue_behind_ms: int  # now − read pointer
    due: dict[str, int] = field(default_factory=dict)  # pending by time until each message is due
    enqueue_rate: float = 0.0  # units per second over the last minute
    dequeue_rate: float = 0.0  # messages put per second over the last minute
    curr_read_time_ms: int = 0
    curr_write_time_ms: int = 0
    queue_offset: int = 0
    timer_log_min_offset: int = 0
    timer_log_max_offset: int = 0
    # timer messages never delivered since the start: their commitlog record was gone (retention deleted it)
    # when the wheel read it; Java's dequeue_get_msg_miss
    missing: int = 0


class TimerMessageStore:
    """Timer service over a ``MessageStore``; owns ``timerwheel``, ``timerlog/`` and ``config/timercheck``.

    Opening recovers (as Java ``load``/``recover``); ``tick()`` does all due work for the clock's
    current time; ``flush()`` persists; ``shutdown()`` persists and closes.
    """

    def __init__(self, message_store: MessageStore, root: str | Path | None = None, config: StoreConfig | None = None,
                 clock: Callable[[], int] | None = None, should_running_dequeue: bool = True,
                 put_message_hook: Callable[[MessageInner], PutMessageResult] | None = None) -> None:
        self.message_store = message_store
        self.config = config if config is not None else message_store.config
        self.root = Path(root if root is not None else message_store.root)
        self.clock: Callable[[], int] = clock or message_store.clock
        self.read_only = message_store.read_only
        self.should_running_dequeue = should_running_dequeue
        self.put_message_hook = put_message_hook
        cfg = self.config
        self.precision_ms = cfg.timer_precision_ms
        self.slots_total = DEFAULT_SLOTS_TOTAL
        roll = cfg.timer_roll_window_slot
        if roll > self.slots_total - TIMER_BLANK_SLOTS or roll < 2:
            roll = self.slots_total - TIMER_BLANK_SLOTS
        self.timer_roll_window_slots = roll
        self.flush_interval_ms = cfg.timer_flush_interval_ms
        self._get_message = message_store.commit_log.get_message
        self._get_data = message_store.commit_log.get_data
        # REAL_TOPIC -> Java hashCode for the TimerLog's metric field; topics are few, a put is not
        self._topic_hashes: dict[str, int] = {}
        self._lock = threading.RLock()
        self.timer_wheel = TimerWheel(self.root / "timerwheel", self.slots_total, self.precision_ms,
                                      read_only=self.read_only)
        try:
            self.timer_log = TimerLog.of_store(self.root / "timerlog", cfg.mapped_file_size_timer_log,
                                               read_only=self.read_only)
            try:
                self.timer_checkpoint = TimerCheckpoint(self.root / "config" / "timercheck",
                                                        read_only=self.read_only, clock=self.clock,
                                                        max_read_time_ahead_ms=self.slots_total * self.precision_ms)
            except BaseException:
                self.timer_log.close(flush=False)
                raise
        except BaseException:
            self.timer_wheel.close(flush=False)
            raise
        self.curr_read_time_ms = 0
        self.curr_write_time_ms = 0
        self.commit_read_time_ms = 0
        self.curr_queue_offset = 0
        self.commit_queue_offset = 0
        self._last_commit_read_time_ms = 0
        self._last_commit_queue_offset = 0
        self._resume: tuple[int, int] | None = None  # (slot time, next normal unit index)
        self.enqueue_count = 0
        self.dequeue_count = 0
        self.deleted_topic_dropped = 0  # since start: due messages whose topic was deleted after they were stored
        # Re-puts made since the last flush: the commitlog must hold them on disk before the
        # checkpoint's read time says their slots are done (see flush).
        self._reputs_since_flush = False
        self._last_flush_ms = self.clock()
        # (clock, enqueue_count, dequeue_count) after each tick; rates are taken over the last minute
        self._rate_samples: deque[tuple[int, int, int]] = deque([(self._last_flush_ms, 0, 0)])
        self._last_clean_ms = self._last_flush_ms
        self.missing_total = 0  # see TimerBacklog.missing
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._closed = False
        # a refused re-put is retried every tick (ten times a second): said once a minute, and once
        # more when a re-put works again; timed by the store's clock so a fake clock drives it
        self._reput_failures = RoundFailures(log, "timer re-put", clock=self._clock_s)
        # backlog(): (slot time, lastPos, num) -> ((own due ms, signed count), ...) of the slot's ROLL
        # units; a chain only grows (a new unit is a new lastPos), so an entry never goes stale
        self._roll_due_cache: dict[tuple[int, int, int], tuple[tuple[int, int], ...]] = {}
        self.recover()

    # ---- recovery ---------------------------------------------------------------------------

    def format_time_ms(self, time_ms: int) -> int:
        return java_div(time_ms, self.precision_ms) * self.precision_ms

    def _clock_s(self) -> float:
        """The store's clock in seconds, for ``RoundFailures`` (which counts its minute in seconds)."""
        return self.clock() / 1000

    def recover(self) -> None:
        """Java ``recover``: re-link slots from the TimerLog, then restore both pointers."""
        cp = self.timer_checkpoint
        now = self.clock()
        if self.read_only:
            self.curr_queue_offset = min(cp.last_timer_queue_offset, cp.master_timer_queue_offset)
            process_offset = self.timer_log.max_offset
        else:
            last_flush_pos = cp.last_timer_log_flush_pos
            if self.timer_log.file_offsets:
                last_flush_pos -= self.timer_log.file_size
            process_offset = self._recover_and_revise(max(last_flush_pos, 0), check=True)
            self.timer_log.flushed_where = process_offset
            queue_offset = self._revise_queue_offset(process_offset)
            current = cp.last_timer_queue_offset if queue_offset == -1 else queue_offset + 1
            if queue_offset == -1 and process_offset < cp.last_timer_log_flush_pos:
                # Every unit the checkpoint says reached the disk is gone (an emptied or deleted timer
                # log). Java resumes at the checkpoint's queue offset, and the messages those units
                # held were never delivered; wheeling the queue again from its start delivers them
                # (and again those already delivered) instead of losing them.
                log.warning("timer log %s ends at %d, before the %d bytes timer checkpoint %s says were on disk, "
                            "and no unit is left to say how far %s was wheeled: wheeling it again from its "
                            "first message", self.timer_log.directory, process_offset,
                            cp.last_timer_log_flush_pos, cp.path, TIMER_TOPIC)
                current = 0
            if cp.problem is not None and queue_offset != -1:
                # the timer log says how far the queue was wheeled; the file's zero (or garbage)
                # masterTimerQueueOffset would wheel every timer message of the queue again
                self.curr_queue_offset = current
            else:
                self.curr_queue_offset = min(current, cp.master_timer_queue_offset)
        ms = self.message_store
        if ms.find_consume_queue(TIMER_TOPIC, 0) is not None:
            min_off = ms.get_min_offset_in_queue(TIMER_TOPIC, 0)
            max_off = ms.get_max_offset_in_queue(TIMER_TOPIC, 0)
            if self.curr_queue_offset < min_off:
                log.warning("timer queue offset %d below the queue's min %d", self.curr_queue_offset, min_off)
                self.curr_queue_offset = min_off
            elif self.curr_queue_offset > max_off and self.read_only and cp.problem is None \
                    and ms.beside_live_writer():
                # The running broker wrote this checkpoint after the open read the queue (it wheeled
                # messages the open's queue does not have yet): the queue's end is as far as it got.
                self.curr_queue_offset = max_off
            elif self.curr_queue_offset > max_off:
                log.warning("timer queue offset %d beyond the queue's max %d", self.curr_queue_offset, max_off)
                # a damaged checkpoint's offset past the queue's end is garbage, not progress: wheeling from
                # the end would skip every message not wheeled yet, so the queue is wheeled from its start
                self.curr_queue_offset = min_off if cp.problem is not None else max_off
        oldest = self.format_time_ms(now) - (self.slots_total - TIMER_BLANK_SLOTS) * self.precision_ms
        # a damaged checkpoint's read time is not believed (zero or negative ones were raised to the
        # oldest slot anyway; one far ahead stopped every delivery): the wheel is read again from its
        # oldest slot, as Java does without a checkpoint
        self.curr_read_time_ms = oldest if cp.problem is not None else self.format_time_ms(cp.last_read_time_ms)
        if self.curr_read_time_ms < oldest:
            self.curr_read_time_ms = oldest
        if not self.read_only:  # an inspection shows the read time the checkpoint holds, as it is
            self._bound_read_time_to_clock(now)
        if not self.read_only:
            # slots pointing past a truncated TimerLog: re-link from their first unit
            min_first = self.timer_wheel.check_phy_pos(self.curr_read_time_ms, process_offset)
            if min_first < process_offset:
                log.warning("timer recheck from %d (valid TimerLog ends at %d)", min_first, process_offset)
                self._recover_and_revise(min_first, check=False)
            gone = self.timer_wheel.clear_slots_from(self.curr_read_time_ms, process_offset)
            if gone:
                log.warning("timer recovery: %d wheel slot(s) led only to timer log units past its valid end at %d, "
                            "which are gone: cleared (new units will be written there; %s is wheeled again after "
                            "the last unit left)", gone, process_offset, TIMER_TOPIC)
        if cp.problem is not None:
            self._warn_checkpoint_unusable(process_offset)
        self.commit_read_time_ms = self.curr_read_time_ms
        self.commit_queue_offset = self.curr_queue_offset
        # Java moves the write pointer to "now" when the services start (maybeMoveWriteTime)
        self.curr_write_time_ms = max(self.curr_write_time_ms, self.format_time_ms(now))
        if not self.read_only:
            self._prepare_checkpoint()
        log.info("timer recovered: read=%d write=%d queueOffset=%d timerLog=%d", self.curr_read_time_ms,
                 self.curr_write_time_ms, self.curr_queue_offset, process_offset)

    def _bound_read_time_to_clock(self, now: int) -> None:
        """A read time ahead of the clock's slot (but within the wheel, else the checkpoint is damaged)
        comes from a clock set back since the checkpoint was written: read from the clock's slot.

        Why: the read pointer only ever follows the write pointer, which is the clock's slot, so the
        wheel skipped every slot between the clock and that read time: the timer messages due there were
        never delivered. Reading them from now delivers them; the cost is that messages of those slots
        delivered before the clock went back are delivered again."""
        clock_slot = self.format_time_ms(now)
        if self.curr_read_time_ms <= clock_slot:
            return
        log.warning("timer checkpoint %s: read time %s is %d ms ahead of the clock (was it set back?): the timer "
                    "wheel is read from now, so timer messages delivered between the two may be delivered again",
                    self.timer_checkpoint.path, _format_ms(self.curr_read_time_ms), self.curr_read_time_ms - now)
        self.curr_read_time_ms = clock_slot

    def _warn_checkpoint_unusable(self, process_offset: int) -> None:
        """One line naming ``config/timercheck`` when the store holds timer messages it cannot place.

        Why: without the checkpoint's read time the wheel is read from its oldest slot (7 days back),
        as Java does, so timer messages already delivered are delivered again; that silent replay
        looked like a client bug. A new store (no timer log, nothing in the timer queue) says nothing.
        """
        ms = self.message_store
        queued = (ms.get_max_offset_in_queue(TIMER_TOPIC, 0)
                  if ms.find_consume_queue(TIMER_TOPIC, 0) is not None else 0)
        if process_offset <= 0 and queued <= 0:
            return
        log.warning("timer checkpoint %s is %s: the timer wheel is read again from %s and %s from queue offset "
                    "%d, so timer messages already delivered may be delivered again",
                    self.timer_checkpoint.path, self.timer_checkpoint.problem,
                    _format_ms(self.curr_read_time_ms), TIMER_TOPIC, self.curr_queue_offset)

    def _recover_and_revise(self, begin_offset: int, check: bool) -> int:
        wheel = self.timer_wheel

        def relink(pos: int, _magic: int, delivery_ms: int) -> None:
            wheel.revise_slot(delivery_ms, IGNORE, pos, True)

        return self.timer_log.recover(begin_offset, relink, check=check)

    def _revise_queue_offset(self, process_offset: int) -> int:
        """Timer-topic queue offset of the message behind the last unit, checked against the CQ."""
        last_unit = self._last_unit_before(process_offset)
        if last_unit < 0:
            return -1
        try:
            offset_py, size_py = self.timer_log.read_offset_py(last_unit)
        except IndexError:
            return -1
        msg = self._read_message(offset_py, size_py)
        if msg is None:
            return -1
        ms = self.message_store
        if ms.find_consume_queue(TIMER_TOPIC, msg.queue_id) is None:
            return msg.queue_offset
        tmp = msg.queue_offset
        for _ in range(20_000):
            if tmp < 0:
                break
            units = ms.get_units(TIMER_TOPIC, msg.queue_id, tmp, 1)
            if units and units[0].queue_offset == tmp:
                if units[0].phy_offset == offset_py and units[0].size == size_py:
                    return tmp
            tmp -= 1
        return msg.queue_offset

    def _last_unit_before(self, end: int) -> int:
        """Position of the last unit of the timer log whose valid data ends at ``end``; -1 if none.

        Why not just ``end - UNIT_SIZE``: at a file boundary the bytes before ``end`` are the BLANK
        that closed the file (a roll whose next file a full disk could not hold leaves the log ending
        there), and the last unit is the one before that BLANK. Giving up there kept the checkpoint's
        stale queue offset, and every message enqueued since it was written was wheeled, and
        delivered, a second time after a kill -9.
        """
        timer_log = self.timer_log
        size = timer_log.file_size
        if end <= timer_log.min_offset:
            return -1
        if end % size:
            return end - UNIT_SIZE if end - UNIT_SIZE >= timer_log.min_offset else -1
        file_start = end - size
        # the last place a unit fits with the BLANK after it; an append of several units may end earlier
        pos = file_start + ((size - MIN_BLANK_LEN) // UNIT_SIZE - 1) * UNIT_SIZE
        while pos >= max(file_start, timer_log.min_offset):
            try:
                unit_size, _prev, magic = timer_log.read_unit_fields(pos)[:3]
            except IndexError:
                return -1
            if unit_size == UNIT_SIZE and magic != BLANK_MAGIC_CODE and is_magic_ok(magic):
                return pos
            pos -= UNIT_SIZE
        return -1

    # ---- helpers ----------------------------------------------------------------------------

    def _read_message(self, offset_py: int, size_py: int, read_body: bool = True) -> MessageExt | None:
        """The commitlog record a unit points at, or None when it is gone or damaged.

        Goes to the commitlog directly (the record is bounds-checked there anyway); the enqueue reads
        without the body, which it never needs unless the message is already due."""
        try:
            return self._get_message(offset_py, size_py, read_body)
        except Exception:  # a damaged record must not stop the wheel
            log.exception("cannot read timer message at commitlog offset %d", offset_py)
            return None

    def _check_writable(self) -> None:
        if self.read_only:
            raise PermissionError("timer store is open read-only")
        if self._closed:
            raise RuntimeError("timer store is shut down")

    def _timer_queue_max(self) -> int:
        return self.message_store.get_max_offset_in_queue(TIMER_TOPIC, 0)

    # ---- enqueue ----------------------------------------------------------------------------

    def _enqueue(self, result: TickResult) -> None:
        """Move every message of timer-topic queue 0 past ``curr_queue_offset`` into the wheel."""
        ms = self.message_store
        if ms.find_consume_queue(TIMER_TOPIC, 0) is None:
            return
        min_off = ms.get_min_offset_in_queue(TIMER_TOPIC, 0)
        if self.curr_queue_offset < min_off:
            log.warning("timer queue offset %d below the queue's min %d", self.curr_queue_offset, min_off)
            self.curr_queue_offset = min_off
        try:
            while True:
                units = ms.get_units(TIMER_TOPIC, 0, self.curr_queue_offset, _ENQUEUE_BATCH)
                units = [u for u in units if u.queue_offset >= self.curr_queue_offset]
                if not units:
                    break
                for unit in units:
                    msg = self._read_message(unit.phy_offset, unit.size, read_body=False)
                    if msg is None:
                        self._missed(result, unit.phy_offset, unit.size)
                    elif not self._enqueue_one(unit.phy_offset, unit.size, msg, result):
                        result.blocked = True  # retry this offset on the next tick
                        return
                    self.curr_queue_offset = unit.queue_offset + 1
        finally:
            # Also when a unit could not be written (a full disk raises DiskFullError): what was
            # wheeled before it is committed, so the next checkpoint does not name an older offset
            # and a restart does not wheel (deliver) those messages again.
            self.commit_queue_offset = self.curr_queue_offset

    def _enqueue_one(self, offset_py: int, size_py: int, msg: MessageExt, result: TickResult) -> bool:
        """Wheel one message (or deliver it if already due); False if a put must be retried."""
        out_ms = msg.properties.get(PROPERTY_TIMER_OUT_MS)  # decoded once; do_enqueue reads two more
        try:
            delayed_time = int(out_ms) if out_ms is not None else None
        except ValueError:
            delayed_time = None
        if delayed_time is None:
            log.warning("timer message at %d has no valid TIMER_OUT_MS (%r); skipped", offset_py, out_ms)
            result.dropped += 1
            return True
        if self.should_running_dequeue and delayed_time < self.curr_write_time_ms:
            # already due: straight to the real topic, marked as never enqueued
            full = self._read_message(offset_py, size_py)  # the enqueue read skipped the body
            if full is None:
                self._missed(result, offset_py, size_py)
                return True
            msg = full
            status = self._deliver(msg, LONG_MAX, roll=False, result=result)
            if status == "ok":
                result.expired_on_enqueue += 1
            return status != "retry"
        self.do_enqueue(offset_py, size_py, delayed_time, msg)
        result.enqueued += 1
        return True

    def do_enqueue(self, offset_py: int, size_py: int, delayed_time: int, msg: MessageExt) -> int:
        """Append the unit for one timer message and link it into its slot; returns its position."""
        write_time = self.curr_write_time_ms
        window = self.timer_roll_window_slots * self.precision_ms
        magic = MAGIC_DEFAULT
        if delayed_time - write_time >= window:
            magic |= MAGIC_ROLL
            if delayed_time - write_time - window < self.timer_roll_window_slots // 3 * self.precision_ms:
                delayed_time = write_time + self.timer_roll_window_slots // 2 * self.precision_ms
            else:
                delayed_time = write_time + window
        is_delete = msg.get_property(PROPERTY_TIMER_DEL_UNIQKEY) is not None
        if is_delete:
            magic |= MAGIC_DELETE
        real_topic = msg.get_property(PROPERTY_REAL_TOPIC)
        if real_topic:
            topic_hash = self._topic_hashes.get(real_topic)
            if topic_hash is None:
                if len(self._topic_hashes) >= 4096:
                    self._topic_hashes.clear()
                topic_hash = self._topic_hashes[real_topic] = java_string_hash(real_topic)
        else:
            topic_hash = 0
        self.timer_wheel.reserve_slot(delayed_time)  # a full disk refuses here, before the log unit is written
        slot = self.timer_wheel.get_slot(delayed_time)
        pos = self.timer_log.append_unit(slot.last_pos, magic, write_time, _wrap_i32(delayed_time - write_time),
                                         offset_py, size_py, topic_hash)
        self.timer_wheel.put_slot(delayed_time, slot.first_pos if slot.first_pos != -1 else pos, pos,
                                  slot.num - 1 if is_delete else slot.num + 1, slot.magic)
        self.enqueue_count += 1
        return pos

    # ---- dequeue ----------------------------------------------------------------------------

    def _dequeue_slot(self, slot_time: int, result: TickResult) -> bool:
        """Fire one slot. Returns False if a retryable put failure must stop the dequeue here."""
        slot = self.timer_wheel.get_slot(slot_time)
        if slot.time_ms == -1:
            return True
        # units as raw field tuples (TimerLogUnit order): 1 prevPos, 2 magic, 3 currWriteTimeMs,
        # 5 offsetPy, 6 sizePy
        deletes = []
        normals = []
        for unit in self._slot_units(slot_time, slot.last_pos):
            magic = unit[2]
            if magic & MAGIC_DELETE and not magic & MAGIC_ROLL:
                deletes.append(unit)
            else:
                normals.append(unit)
        normals.reverse()  # oldest first, as Java's addFirst
        result.slots += 1
        delete_keys: set[str] = set()
        for unit in deletes:
            msg = self._read_message(unit[5], unit[6], read_body=False)
            if msg is None:
                self._missed(result, unit[5], unit[6])
                continue
            key = msg.get_property(PROPERTY_TIMER_DEL_UNIQKEY)
            if key is not None:
                delete_keys.add(key)
        start = 0
        if self._resume is not None and self._resume[0] == slot_time:
            start = self._resume[1]
        self._resume = None
        read_message = self._read_message
        deliver = self._deliver
        for index in range(start, len(normals)):
            unit = normals[index]
            msg = read_message(unit[5], unit[6])
            if msg is None:
                self._missed(result, unit[5], unit[6])
                continue
            if delete_keys:
                uniq = msg.get_property(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
                real_topic = msg.get_property(PROPERTY_REAL_TOPIC)
                if uniq is not None and build_delete_key(str(real_topic), uniq) in delete_keys:
                    result.cancelled += 1
                    continue
            status = deliver(msg, unit[3], bool(unit[2] & MAGIC_ROLL), result)
            if status == "retry":
                self._resume = (slot_time, index)
                result.blocked = True
                return False
        return True

    def _slot_units(self, slot_time: int, last_pos: int) -> list[tuple[int, int, int, int, int, int, int, int, int]]:
        """A slot's units, newest first, as ``read_unit_fields`` tuples: its chain from ``last_pos``
        back through ``prevPos``. A damaged chain (a link outside the TimerLog or forward) ends the walk
        there: what was read is still handled, as Java does.

        Read-only, a link past the log's end is first looked for in what a live writer appended since
        the log was scanned (the wheel is read live); one still beyond it while a running broker holds
        the store is a unit it is writing, not damage: the walk ends there quietly."""
        units = []
        read_unit = self.timer_log.read_unit_fields
        pos = last_pos
        while pos != -1:
            try:
                unit = read_unit(pos)
            except IndexError:
                if self.read_only and pos >= self.timer_log.max_offset and self.timer_log.follow_writer():
                    continue
                if not (self.read_only and pos >= self.timer_log.max_offset
                        and self.message_store.beside_live_writer()):
                    log.warning("slot %d links to %d, outside the TimerLog", slot_time, pos)
                break
            units.append(unit)
            prev_pos = unit[1]
            if prev_pos >= pos:  # chains only point backwards; anything else is damage
                log.warning("slot %d: unit %d links forward to %d", slot_time, pos, prev_pos)
                break
            pos = prev_pos
        return units

    def convert(self, msg: MessageExt, enqueue_time: int, roll: bool) -> MessageInner:
        """The message to put when a unit fires (Java ``convert`` + ``convertMessage``).

        The stored properties keep REAL_TOPIC / REAL_QID (Java clears them from the map only after
        the properties string was built) and gain TIMER_ENQUEUE_MS / TIMER_DEQUEUE_MS.
        """
        props = dict(msg.properties)
        if enqueue_time != -1:
            props[PROPERTY_TIMER_ENQUEUE_MS] = str(enqueue_time)
        if roll:
            props[PROPERTY_TIMER_ROLL_TIMES] = str(int(props.get(PROPERTY_TIMER_ROLL_TIMES, "0")) + 1)
        props[PROPERTY_TIMER_DEQUEUE_MS] = str(self.clock())
        if roll:
            topic, queue_id = msg.topic, msg.queue_id
        else:
            topic = props.get(PROPERTY_REAL_TOPIC) or msg.topic
            queue_id = int(props.get(PROPERTY_REAL_QUEUE_ID, msg.queue_id))
        return MessageInner(topic=topic, body=msg.body, properties=props, queue_id=queue_id, flag=msg.flag,
                            sys_flag=msg.sys_flag, born_timestamp=msg.born_timestamp, born_host=msg.born_host,
                            store_host=msg.store_host, reconsume_times=msg.reconsume_times)

    def _deliver(self, msg: MessageExt, enqueue_time: int, roll: bool, result: TickResult) -> str:
        """Put one fired message; returns "ok", "dropped" or "retry"."""
        # decode the properties once: convert() copies the same dict
        if not roll and msg.properties.get(PROPERTY_TIMER_DEL_UNIQKEY) is not None:
            return "dropped"  # a delete marker is never delivered (Java doPut: PUT_NO_RETRY)
        real_topic = msg.properties.get(PROPERTY_REAL_TOPIC)
        if deleted_since_stored(self.message_store.dispatch_filter, real_topic, msg.commit_log_offset):
            # Neither delivered nor rolled on: a topic made again under the name must not get it. The
            # record stays in the commitlog; the slot moves on (no retry).
            log.warning("timer message %s at commitlog offset %d not delivered: its topic %s was deleted after "
                        "it was stored", msg.properties.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX),
                        msg.commit_log_offset, real_topic)
            result.deleted_topic += 1
            self.deleted_topic_dropped += 1
            return "dropped"
        try:
            inner = self.convert(msg, enqueue_time, roll)
        except ValueError:
            log.warning("timer message at %d has a bad REAL_QID; dropped", msg.commit_log_offset)
            result.dropped += 1
            return "dropped"
        put = self.put_message_hook or self.message_store.put_message
        try:
            put_result = put(inner)
        except Exception as e:
            self._reput_failures.failed(e)
            return "retry"
        status = _status_name(put_result)
        if status == "PUT_OK" or status in _NO_RETRY:
            if status == "PUT_OK" or status.startswith("FLUSH_"):
                self._reput_failures.succeeded()
                self.dequeue_count += 1
                self._reputs_since_flush = True
                if roll:
                    result.rolled += 1
                else:
                    result.delivered += 1
                return "ok"
            log.warning("timer re-put of %d refused (%s); dropped", msg.commit_log_offset, status)
            result.dropped += 1
            return "dropped"
        self._reput_failures.failed(_refusal(msg.commit_log_offset, status, put_result.remark))
        return "retry"

    # ---- the loop ---------------------------------------------------------------------------

    def tick(self) -> TickResult:
        """Do everything due at ``clock()``: enqueue new timer messages, fire due slots, persist
        periodically. Deterministic: a fake clock fully controls what happens."""
        with self._lock:
            self._check_writable()
            result = TickResult()
            now = self.clock()
            try:
                self._turn_wheel(result, now)
            except OSError:
                self._warn_missing(result)
                # A full disk (a timer log file it cannot hold) fails every tick until there is room:
                # the checkpoint must still follow what was wheeled before, or a kill meanwhile
                # wheels (delivers) all of it again after the restart.
                self._flush_if_due(now)
                raise
            self._warn_missing(result)
            self._record_rates(now)
            if now - self._last_clean_ms >= _CLEAN_TIMER_LOG_INTERVAL_MS:
                self._last_clean_ms = now
                self.timer_log.delete_expired_files(self.message_store.get_min_phy_offset())
            self._flush_if_due(now)
            return result

    def _missed(self, result: TickResult, offset_py: int, size_py: int) -> None:
        """A timer message whose commitlog record is gone (retention deleted it before it was due): it is
        never delivered. Counted (Java's dequeue_get_msg_miss); the tick says so once (_warn_missing)."""
        result.missing += 1
        self.missing_total += 1
        if result.missing_first is None:
            result.missing_first = (offset_py, size_py)

    @staticmethod
    def _warn_missing(result: TickResult) -> None:
        """One WARN per tick for the timer messages lost to retention, with the first one's position.

        Why one: Java logs "Fail to read msg from commitLog offsetPy:{} sizePy:{}" per message, which for
        a wheel full of expired records is thousands of lines; the count and the first say the same."""
        if result.missing and result.missing_first is not None:
            log.warning("Fail to read msg from commitLog: %d timer message(s) not delivered, their commitlog "
                        "records are gone (retention deleted them); first at offsetPy:%d sizePy:%d",
                        result.missing, *result.missing_first)

    def _flush_if_due(self, now: int) -> None:
        if now - self._last_flush_ms >= self.flush_interval_ms:
            self.flush()

    def _turn_wheel(self, result: TickResult, now: int) -> None:
        """Enqueue new timer messages and fire the slots due at ``now`` (the body of ``tick``)."""
        prec = self.precision_ms
        target = self.format_time_ms(now)
        self._enqueue(result)
        if not self.should_running_dequeue:
            # a slave only builds the wheel; the master's checkpoint moves its read pointer
            self.curr_write_time_ms = max(self.curr_write_time_ms, target)
        while self.should_running_dequeue and not result.blocked:
            if self.curr_read_time_ms < self.curr_write_time_ms:
                if self._resume is not None:
                    slot_time: int | None = self._resume[0]
                else:
                    slot_time = self.timer_wheel.next_slot_time(self.curr_read_time_ms,
                                                                self.curr_write_time_ms)
                if slot_time is None:
                    self._move_read_time(self.curr_write_time_ms)
                    continue
                rolled_before = result.rolled
                if not self._dequeue_slot(slot_time, result):
                    self._move_read_time(slot_time)
                    break
                self._move_read_time(slot_time + prec)
                if result.rolled != rolled_before:
                    self._sync_dispatch()
                    self._enqueue(result)
                continue
            if self.curr_write_time_ms >= target:
                break
            # catch up: advance the write pointer to the next slot with content (or to now)
            if self.curr_queue_offset < self._timer_queue_max():
                self.curr_write_time_ms += prec
                self._enqueue(result)
                continue
            nxt = self.timer_wheel.next_slot_time(self.curr_write_time_ms, target)
            self.curr_write_time_ms = target if nxt is None else min(target, nxt + prec)

    def _move_read_time(self, time_ms: int) -> None:
        self.curr_read_time_ms = time_ms
        self.commit_read_time_ms = time_ms

    def _sync_dispatch(self) -> None:
        """Make rolled re-puts visible in the timer topic's consume queue before enqueueing again."""
        self.message_store.wait_for_dispatch(1.0)

    # ---- persistence ------------------------------------------------------------------------

    def _prepare_checkpoint(self) -> None:
        """Java ``prepareTimerCheckPoint``: copy the committed pointers into the checkpoint."""
        cp = self.timer_checkpoint
        cp.last_timer_log_flush_pos = self.timer_log.flushed_where
        cp.last_read_time_ms = self.commit_read_time_ms
        if self.should_running_dequeue:
            cp.master_timer_queue_offset = self.commit_queue_offset
            if (self.commit_read_time_ms != self._last_commit_read_time_ms
                    or self.commit_queue_offset != self._last_commit_queue_offset):
                cp.update_data_version(0)  # Java passes the store's stateMachineVersion: 0 without DLedger
                self._last_commit_read_time_ms = self.commit_read_time_ms
                self._last_commit_queue_offset = self.commit_queue_offset
        cp.last_timer_queue_offset = min(self.commit_queue_offset, cp.master_timer_queue_offset)

    def flush(self) -> None:
        """Persist TimerLog, wheel and checkpoint (in that order, so the checkpoint never claims
        more than the files hold).

        The commitlog first too when messages were delivered since the last flush: the checkpoint's
        read time says their slots are done, so after a power cut nothing delivers them again. With
        ASYNC_FLUSH their re-puts could still be in the page cache (a few small records wait up to
        flushCommitLogThoroughInterval), and a power cut lost messages that had been on disk since
        they were sent. RocketMQ's TimerFlushService does not wait for them.
        """
        with self._lock:
            if self.read_only or self._closed:
                return
            if self._reputs_since_flush:
                self.message_store.flush_commit_log()
                self._reputs_since_flush = False
            self.timer_log.flush()
            self.timer_wheel.flush()
            self._prepare_checkpoint()
            self.timer_checkpoint.flush()
            self._last_flush_ms = self.clock()

    # ---- background service -----------------------------------------------------------------

    def start(self, interval_s: float | None = None) -> TimerMessageStore:
        """Run ``tick()`` in a daemon thread (every 100 ms at 1 s precision, as Java polls)."""
        self._check_writable()
        if self._thread is not None:
            return self
        period = interval_s if interval_s is not None else 0.1 * self.precision_ms / 1000
        self._stop.clear()

        def run() -> None:
            # a full disk fails every tick: said once a minute, and when a tick works again
            failures = RoundFailures(log, "timer tick", clock=self._clock_s)
            while not self._stop.is_set():
                try:
                    self.tick()
                except Exception as e:
                    failures.failed(e)
                else:
                    failures.succeeded()
                self._stop.wait(period)

        self._thread = threading.Thread(target=run, name="TimerMessageStore", daemon=True)
        self._thread.start()
        return self

    def shutdown(self, flush: bool = True) -> None:
        """Stop the thread, persist (unless ``flush=False``, which is what a crash leaves) and close."""
        if self._closed:
            return
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)
            self._thread = None
        with self._lock:
            try:
                if flush and not self.read_only:
                    self.flush()
            finally:  # a failed flush still closes the files: the error is raised, nothing is left mapped
                self._closed = True
                self.timer_checkpoint.close(flush=False)
                self.timer_wheel.close(flush=False)
                self.timer_log.close(flush=False)

    close = shutdown

    def __enter__(self) -> TimerMessageStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()

    # ---- figures ----------------------------------------------------------------------------

    def _record_rates(self, now: int) -> None:
        samples = self._rate_samples
        samples.append((now, self.enqueue_count, self.dequeue_count))
        # keep one sample at or before the window start as the base of the rates
        while len(samples) > 2 and samples[1][0] <= now - _RATE_WINDOW_MS:
            samples.popleft()

    def _rates(self) -> tuple[float, float]:
        if len(self._rate_samples) < 2:
            return 0.0, 0.0
        t0, e0, d0 = self._rate_samples[0]
        t1, e1, d1 = self._rate_samples[-1]
        if t1 <= t0:
            return 0.0, 0.0
        secs = (t1 - t0) / 1000
        return (e1 - e0) / secs, (d1 - d0) / secs

    def get_all_congest_num(self) -> int:
        """Live messages in the wheel from the read pointer on (Java ``getAllCongestNum``)."""
        return self.timer_wheel.get_all_num(self.curr_read_time_ms)

    def get_congest_num(self, deliver_ms: int) -> int:
        return self.timer_wheel.get_num(deliver_ms)

    def is_reject(self, deliver_ms: int) -> bool:
        """Flow control for a new timer message (Java ``isReject``, ``timerCongestNumEachSlot``): the send
        hook asks it with the message's slot time. Past the limit a random share is refused, past twice
        the limit every one; the limit is read at each call, as Java reads the live store config."""
        congest = self.timer_wheel.get_num(deliver_ms)
        limit = self.config.timer_congest_num_each_slot
        if congest <= limit:
            return False
        if congest >= limit * 2:
            return True
        return random.randrange(1000) > 1000 * (congest - limit) / (limit + 0.1)

    def _count_due(self, now: int, due: dict[str, int]) -> int:
        """Add every pending message to ``due`` by its own due time; returns the pending total.

        Why not by slot: a ROLL unit only parks a message due hours or days away in a slot one roll
        window ahead (with a small timerRollWindowSlot, seconds ahead), to be re-put into the timer
        topic when that slot fires. Its TimerLog delayedTime is the parking slot's; the message's own
        due time is only in TIMER_OUT_MS of its commitlog copy. A unit is never due before its slot
        fires, so a slot firing past the last bounded bucket is all "later" unread; a nearer slot's
        chain is walked once (``_roll_due_cache``) and its ROLL units' records read.
        """
        prec = self.precision_ms
        cache = self._roll_due_cache
        used: dict[tuple[int, int, int], tuple[tuple[int, int], ...]] = {}
        pending = 0
        for _, slot in self.timer_wheel.iter_slots(self.curr_read_time_ms):
            pending += slot.num
            if slot.time_ms + prec - now > _BACKLOG_HORIZON_MS:
                due[_BACKLOG_LAST] += slot.num
                continue
            key = (slot.time_ms, slot.last_pos, slot.num)
            rolled = cache.get(key)
            if rolled is None:
                rolled = self._roll_due_times(slot.time_ms, slot.last_pos)
            used[key] = rolled
            rest = slot.num
            for due_ms, count in rolled:
                due[_due_bucket(due_ms + prec - now)] += count
                rest -= count
            due[_due_bucket(slot.time_ms + prec - now)] += rest
        self._roll_due_cache = used  # only slots still pending and near: the cache stays small
        return pending

    def _roll_due_times(self, slot_time: int, last_pos: int) -> tuple[tuple[int, int], ...]:
        """``(own due ms, signed count)`` of a slot's ROLL units, grouped by due time (TIMER_OUT_MS is
        on the precision grid, so many share one). A ROLL delete counts −1, as it does in the slot's
        num; a unit whose record cannot be read stays counted at the slot."""
        counts: dict[int, int] = {}
        for unit in self._slot_units(slot_time, last_pos):
            magic = unit[2]
            if not magic & MAGIC_ROLL:
                continue
            due_ms = self._timer_out_ms(unit[5], unit[6])
            if due_ms is not None:
                counts[due_ms] = counts.get(due_ms, 0) + (-1 if magic & MAGIC_DELETE else 1)
        return tuple(counts.items())

    def _timer_out_ms(self, offset_py: int, size_py: int) -> int | None:
        """TIMER_OUT_MS of the timer-topic record at ``offset_py`` (its own due time), or None.

        Only the properties string is looked at (the dispatch decoder, then one key): a full decode
        per ROLL unit was most of backlog()'s cost with 100k parked messages."""
        data = self._get_data(offset_py, size_py)
        fields = decode_dispatch_fields(data, 0, len(data)) if data is not None else None
        out_ms = get_property(fields[8], PROPERTY_TIMER_OUT_MS) if fields is not None else None
        try:
            return int(out_ms) if out_ms is not None else None
        except ValueError:
            return None

    def backlog(self) -> TimerBacklog:
        """Pending counts (total and by due bucket), rates and lag, from the wheel and the queue."""
        with self._lock:
            now = self.clock()
            due = {name: 0 for name, _ in BACKLOG_BUCKETS}
            pending = 0
            if not self._closed:
                pending = self._count_due(now, due)
            ms = self.message_store
            behind_msgs = max(0, self._timer_queue_max() - self.curr_queue_offset)
            behind_ms = 0
            if behind_msgs:
                ts = ms.get_message_store_timestamp(TIMER_TOPIC, 0, self.curr_queue_offset)
                if ts > 0:
                    behind_ms = max(0, now - ts)
            enq_rate, deq_rate = self._rates()
            return TimerBacklog(
                now_ms=now, pending=pending, enqueue_behind_messages=behind_msgs, enqueue_behind_ms=behind_ms,
                dequeue_behind_ms=max(0, now - self.curr_read_time_ms), due=due, enqueue_rate=enq_rate,
                dequeue_rate=deq_rate, curr_read_time_ms=self.curr_read_time_ms,
                curr_write_time_ms=self.curr_write_time_ms, queue_offset=self.curr_queue_offset,
                timer_log_min_offset=self.timer_log.min_offset, timer_log_max_offset=self.timer_log.max_offset,
                missing=self.missing_total)
