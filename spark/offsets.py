"""Offset outputs of a rebuild: per-queue min/max, consumerOffset.json repair, offsets by time.

Why: after a crash or a manual copy, committed consumer offsets can point beyond a queue's max
(consumers would stall or get OFFSET_ILLEGAL) or below its min (they would re-read deleted data).
The rebuild knows every queue's true range from the commitlog, so it clamps each committed offset
into ``[min, max]`` and reports each change. The delay levels' offsets (delayOffset.json) and the timer's queue offset
(the timer checkpoint) are offsets into SCHEDULE_TOPIC_XXXX and rmq_sys_wheel_timer: checked the same
way, or a delay level or the timer would wait for messages its queue will only get after that many
new ones. The by-time table lets ``resetOffsetByTime`` answer
from a small JSON file instead of binary-searching every consume queue.
"""

from __future__ import annotations

import bisect
import time
from dataclasses import dataclass
from pathlib import Path

from broker_core.store.config_file import read_config_json, write_config_json
from broker_core.store.dispatch import SCHEDULE_TOPIC
from broker_core.store.schedule.delay_offset import DELAY_OFFSET_FILE, DelayOffsetTable
from broker_core.store.schedule.schedule_message_service import delay_level_to_queue_id
from broker_core.store.timer.convert import TIMER_TOPIC
from broker_core.store.timer.timer_checkpoint import TimerCheckpoint

from .queues import QueueResult

RMQOPS_DIR = "rmqops"
QUEUE_OFFSET_TABLE = "queueOffsetTable.json"
OFFSET_TIME_TABLE = "offsetTimeTable.json"


@dataclass(frozen=True, slots=True)
class OffsetChange:
    key: str  # topic@group
    queue_id: int
    old: int
    new: int
    min_offset: int
    max_offset: int

    # the file holding it (consumerOffset.json, delayOffset.json, timercheck) and how it names it there
    source: str = "consumerOffset.json"
    name: str = ""

    @property
    def reason(self) -> str:
        return "above max" if self.old > self.max_offset else "below min"

    @property
    def where(self) -> str:
        return f"{self.key} q{self.queue_id}" + (f" ({self.source} {self.name})" if self.name else "")


def queue_ranges(results: list[QueueResult]) -> dict[tuple[str, int], tuple[int, int]]:
    return {(r.topic, r.queue_id): (r.min_offset, r.max_offset) for r in results}


def repair_consumer_offsets(config_dir: Path, ranges: dict[tuple[str, int], tuple[int, int]],
                            write: bool) -> list[OffsetChange]:
    """Clamp every committed offset in consumerOffset.json into its queue's [min, max].

    A queue with no records in the commitlog and none kept (kept_queues) has range [0, 0]. With ``write`` the file is rewritten
    atomically in fastjson's dialect (keeping ``.bak``) only if something changed.
    """
    path = config_dir / "consumerOffset.json"
    obj = read_config_json(path)
    if not obj:
        return []
    table = obj.get("offsetTable") or {}
    changes: list[OffsetChange] = []
    new_table: dict[str, dict[int, int]] = {}
    for key, per_queue in table.items():
        topic = key.rsplit("@", 1)[0] if "@" in key else key
        fixed: dict[int, int] = {}
        for qid_raw, off_raw in (per_queue or {}).items():
            qid = int(qid_raw)
            off = int(off_raw)
            lo, hi = ranges.get((topic, qid), (0, 0))
            new = min(max(off, lo), hi)
            if new != off:
                changes.append(OffsetChange(key, qid, off, new, lo, hi))
            fixed[qid] = new
        new_table[key] = fixed
    if write and changes:
        dv = dict(obj.get("dataVersion") or {})
        dv["counter"] = int(dv.get("counter", 0)) + 1
        dv["timestamp"] = int(time.time() * 1000)
        dv.setdefault("stateVersion", 0)
        out = {"dataVersion": {k: dv[k] for k in sorted(dv)}}
        if "groupTopicMap" in obj:
            out["groupTopicMap"] = obj["groupTopicMap"]
        out["offsetTable"] = new_table
        for k, v in obj.items():
            if k not in out:
                out[k] = v
        write_config_json(path, out)
    return changes


def repair_delay_offsets(config_dir: Path, ranges: dict[tuple[str, int], tuple[int, int]],
                         write: bool) -> list[OffsetChange]:
    """Clamp each delay level's offset in delayOffset.json into its SCHEDULE_TOPIC_XXXX queue's [min, max].

    The broker clamps too when it loads the file, but only for a queue it has; the rebuild's ranges are
    the truth, and the change is reported. With ``write`` the file is rewritten (DelayOffsetTable: its
    fastjson shape, atomically) only if something changed."""
    table = DelayOffsetTable(config_dir)
    table.load()
    changes: list[OffsetChange] = []
    for level, off in sorted(table.offset_table.items()):
        qid = delay_level_to_queue_id(level)
        lo, hi = ranges.get((SCHEDULE_TOPIC, qid), (0, 0))
        new = min(max(off, lo), hi)
        if new != off:
            changes.append(OffsetChange(SCHEDULE_TOPIC, qid, off, new, lo, hi, DELAY_OFFSET_FILE, f"level {level}"))
            table.update(level, new)
    if write and changes:
        table.persist(int(time.time() * 1000))
    return changes


TIMER_CHECKPOINT = "timercheck"


def read_timer_checkpoint(config_dir: Path) -> TimerCheckpoint | None:
    """The timer checkpoint, read-only; None when it is missing or damaged (the timer recovers without
    it, so neither the rebuild's kept queues nor its clamping believe it then)."""
    path = config_dir / TIMER_CHECKPOINT
    if not path.is_file():
        return None
    cp = TimerCheckpoint(path, read_only=True)
    return cp if cp.problem is None else None


def repair_timer_offsets(config_dir: Path, ranges: dict[tuple[str, int], tuple[int, int]],
                         write: bool) -> list[OffsetChange]:
    """Clamp the timer checkpoint's lastTimerQueueOffset and masterTimerQueueOffset into rmq_sys_wheel_timer
    queue 0's [min, max]; a damaged or missing checkpoint is left alone (the timer recovers without it)."""
    cp = read_timer_checkpoint(config_dir)
    if cp is None:
        return []
    lo, hi = ranges.get((TIMER_TOPIC, 0), (0, 0))
    changes = [OffsetChange(TIMER_TOPIC, 0, off, min(max(off, lo), hi), lo, hi, TIMER_CHECKPOINT, field)
               for field, off in (("lastTimerQueueOffset", cp.last_timer_queue_offset),
                                  ("masterTimerQueueOffset", cp.master_timer_queue_offset))
               if min(max(off, lo), hi) != off]
    if write and changes:
        cp = TimerCheckpoint(config_dir / TIMER_CHECKPOINT)
        try:
            cp.last_timer_queue_offset = min(max(cp.last_timer_queue_offset, lo), hi)
            cp.master_timer_queue_offset = min(max(cp.master_timer_queue_offset, lo), hi)
            cp.update_data_version(cp.state_version)
        finally:
            cp.close()
    return changes


def write_offset_tables(store_root: Path, results: list[QueueResult], granularity_ms: int) -> tuple[Path, Path]:
    """Write ``rmqops/queueOffsetTable.json`` and ``rmqops/offsetTimeTable.json`` atomically."""
    minmax: dict[str, dict[int, dict[str, int | str]]] = {}
    times: dict[str, dict[int, list[list[int]]]] = {}
    for r in sorted(results, key=lambda r: (r.topic, r.queue_id)):
        minmax.setdefault(r.topic, {})[r.queue_id] = {"cqType": r.cq_type, "maxOffset": r.max_offset,
                                                      "maxPhysicOffset": r.max_phy_offset,
                                                      "minOffset": r.min_offset}
        times.setdefault(r.topic, {})[r.queue_id] = [[b, o] for b, o in r.time_table]
    d = store_root / RMQOPS_DIR
    p1 = d / QUEUE_OFFSET_TABLE
    p2 = d / OFFSET_TIME_TABLE
    write_config_json(p1, {"queues": minmax})
    write_config_json(p2, {"granularityMs": granularity_ms, "queues": times})
    return p1, p2


def offset_at_time(time_table: list[tuple[int, int]] | list[list[int]], timestamp: int, max_offset: int,
                   granularity_ms: int) -> int:
    """Reset-by-time answer from a queue's table: the first offset of the bucket holding ``timestamp``.

    This is at or before the first message stored at ``timestamp`` (never after it), so a reset
    re-delivers at most one bucket of messages and never skips one. In a gap between buckets: the next
    bucket's first offset; past the last bucket: the max offset.
    """
    if not time_table:
        return max_offset
    starts = [b for b, _ in time_table]
    i = bisect.bisect_right(starts, timestamp) - 1
    if i < 0:
        return time_table[0][1]
    if timestamp >= starts[i] + granularity_ms:  # in a gap after bucket i: the next bucket starts later
        return time_table[i + 1][1] if i + 1 < len(starts) else max_offset
    return time_table[i][1]
