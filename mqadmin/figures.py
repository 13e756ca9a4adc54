"""The dashboard's figures (issue 14) as typed values, read from GET_BROKER_RUNTIME_INFO.

Why a module: the broker publishes them as extra keys of its runtime info (the map RocketMQ already
extends with timer and schedule keys), so they reach the Admin over every transport; here those
strings become typed values once, for ``Admin.store_positions`` / ``timer_backlog`` /
``delay_levels`` / ``transaction_backlog``. A broker that does not publish a key (e.g. a Java
broker) yields zeros or None, never a guess.
"""

from __future__ import annotations

from dataclasses import dataclass

TIMER_DUE_BUCKETS = ("10s", "1m", "10m", "1h", "later")
"""The due-in histogram's buckets, nearest first (TimerBacklogInfo.due keys)."""


@dataclass(frozen=True)
class StorePositionsInfo:
    """Commitlog range, flushed and dispatched positions, checkpoint store times (Overview screen)."""

    commit_log_min_offset: int
    commit_log_max_offset: int
    flushed_offset: int
    dispatch_behind_bytes: int
    physic_msg_timestamp: int
    logics_msg_timestamp: int

    @property
    def unflushed_bytes(self) -> int:
        return max(0, self.commit_log_max_offset - self.flushed_offset)


@dataclass(frozen=True)
class TimerBacklogInfo:
    """The timer wheel: what waits, when it is due, how fast it moves and how late the dequeue is."""

    pending: int
    due: dict[str, int]
    enqueue_tps: float
    dequeue_tps: float
    dequeue_behind_ms: int
    enqueue_behind_messages: int
    enqueue_behind_ms: int
    curr_read_time_ms: int
    timer_log_max_offset: int
    # never delivered since the broker started: retention deleted their commitlog records before they were due
    lost_to_retention: int = 0


@dataclass(frozen=True)
class DelayLevelInfo:
    """One 4.x delay level (SCHEDULE_TOPIC_XXXX queue level-1): delivered offset against queue end."""

    level: int
    delay_ms: int
    offset: int
    max_offset: int
    next_due_ms: int | None

    @property
    def queue_id(self) -> int:
        return self.level - 1

    @property
    def pending(self) -> int:
        return max(0, self.max_offset - self.offset)


@dataclass(frozen=True)
class TransactionBacklogInfo:
    """Half and op queue entries the check service has not reached, and halves awaiting a decision."""

    half_depth: int
    op_depth: int
    pending_check: int


@dataclass(frozen=True)
class QueueLag:
    """One queue of a group's progress, with what pop and FIFO add (in-flight, blocked)."""

    topic: str
    broker_name: str
    queue_id: int
    broker_offset: int
    consumer_offset: int
    inflight: int
    blocked: bool
    last_timestamp: int

    @property
    def diff(self) -> int:
        return max(0, self.broker_offset - max(self.consumer_offset, 0))


@dataclass(frozen=True)
class GroupLag:
    """A consumer group's lag on every topic it consumes, plus its retry and dead-letter backlog."""

    group: str
    queues: list[QueueLag]
    retry_depth: int
    dlq_depth: int

    @property
    def total_lag(self) -> int:
        return sum(q.diff for q in self.queues)

    @property
    def inflight(self) -> int:
        return sum(q.inflight for q in self.queues)

    @property
    def blocked_queues(self) -> list[QueueLag]:
        return [q for q in self.queues if q.blocked]

    @property
    def topics(self) -> list[str]:
        return sorted({q.topic for q in self.queues})


def _int(info: dict[str, str], key: str) -> int:
    try:
        return int(float(info.get(key, "0") or 0))
    except ValueError:
        return 0


def _float(info: dict[str, str], key: str) -> float:
    try:
        return float((info.get(key, "0") or "0").split()[0])
    except ValueError:
        return 0.0


def store_positions_from(info: dict[str, str]) -> StorePositionsInfo:
    return StorePositionsInfo(_int(info, "commitLogMinOffset"), _int(info, "commitLogMaxOffset"),
                              _int(info, "commitLogFlushedOffset"), _int(info, "dispatchBehindBytes"),
                              _int(info, "checkpointPhysicMsgTimestamp"), _int(info, "checkpointLogicsMsgTimestamp"))


def timer_backlog_from(info: dict[str, str]) -> TimerBacklogInfo | None:
    """None when the broker runs no timer wheel (timerWheelEnable off, or a read-only look at none)."""
    if info.get("timerWheelEnable") != "true":
        return None
    return TimerBacklogInfo(
        pending=_int(info, "timerCongestNum"), due={b: _int(info, f"timerDueIn_{b}") for b in TIMER_DUE_BUCKETS},
        enqueue_tps=_float(info, "timerEnqueueTps"), dequeue_tps=_float(info, "timerDequeueTps"),
        dequeue_behind_ms=_int(info, "timerDequeueBehindMs"), enqueue_behind_messages=_int(info, "timerOffsetBehind"),
        enqueue_behind_ms=_int(info, "timerEnqueueBehindMs"), curr_read_time_ms=_int(info, "timerCurrReadTimeMs"),
        timer_log_max_offset=_int(info, "timerLogMaxOffset"),
        lost_to_retention=_int(info, "timerDequeueGetMsgMiss"))


def delay_levels_from(info: dict[str, str]) -> list[DelayLevelInfo]:
    """``scheduleLevel_<n>`` = ``delayMs,offset,maxOffset,nextDueMs`` (-1: nothing due), by level."""
    levels = []
    for key, value in info.items():
        if not key.startswith("scheduleLevel_"):
            continue
        try:
            level = int(key.removeprefix("scheduleLevel_"))
            delay, offset, max_offset, due = (int(x) for x in value.split(","))
        except ValueError:
            continue
        levels.append(DelayLevelInfo(level, delay, offset, max_offset, due if due >= 0 else None))
    return sorted(levels, key=lambda d: d.level)


def transaction_backlog_from(info: dict[str, str]) -> TransactionBacklogInfo:
    return TransactionBacklogInfo(_int(info, "transactionHalfDepth"), _int(info, "transactionOpDepth"),
                                  _int(info, "transactionHalfPending"))
