"""Queues whose records retention deleted: a rebuild keeps their offsets instead of renumbering them.

Why: Apache RocketMQ never renumbers a queue. Retention (deleteExpiredFile) deletes commitlog files,
then only the consume queue files wholly below the new min offset, never a queue's last file, so a
queue whose every record went keeps its max offset and its min moves up to it (correctMinOffset):
``min = max = old max``. The next message gets that offset, and everything holding an offset of it
(consumerOffset.json, delayOffset.json for SCHEDULE_TOPIC_XXXX, the timer checkpoint for
rmq_sys_wheel_timer, broadcasting consumers' local offsets, pop checkpoints) stays right. A rebuild
walks the commitlog, finds no record of such a queue, and used to drop it: the broker then started
it at 0 while delayOffset.json and the timer checkpoint still said 3, so the next 3 delayed or timer
messages were never delivered, and consumer offsets were clamped to 0.

Source of truth, since one rebuilds when the old queue files may be damaged: the commitlog decides
every queue it has records of. For a queue it has none of, the rebuild keeps the highest offset any
file vouches for:

* the existing CQ/BCQ files, loaded read-only as the broker recovers them (damaged units and what
  follows them are not read): the end of their last unit whose record lies below the commitlog's
  min offset (retention deleted it, as Apache's kept last file shows). Units at or past the log end
  are not evidence: Apache's recovery truncates them (truncateDirtyLogicFiles);
* only when retention has deleted records (the commitlog's min offset is above 0), the offsets
  committed against the queue: consumerOffset.json, delayOffset.json (level N is queue N - 1 of
  SCHEDULE_TOPIC_XXXX) and the timer checkpoint's lastTimerQueueOffset / masterTimerQueueOffset
  (rmq_sys_wheel_timer queue 0; not believed when the checkpoint is damaged). Each says offsets up to
  it were handed out, also when the queue files that showed it are lost. With a min of 0 the
  commitlog still holds every record ever written, so such an offset points past the log end and is
  clamped, as before. Topics deleted (config/deletedTopics.json) are not brought back.

Erring high is the safe side: a max above the real one only leaves offsets no message has; one below
it makes whoever holds a higher offset skip that many new messages.

The rebuilt queue holds one unit at ``max - 1`` (a BCQ unit: its batch ends at ``max``) pointing
below the commitlog's min, so the broker's recovery reads max and correct_min_offset moves min up to
it, as for Apache's kept file. That unit is the old last unit when the files had it, else a
placeholder (commitlog offset 0, size 1: below the min, never read; not a pre-blank filler, whose
size 2^31-1 would make the queue's max physical offset skip every new record below 2 GiB).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from broker_core.store.batch_consume_queue import BatchConsumeQueue
from broker_core.store.config_file import read_config_json
from broker_core.store.consume_queue import ConsumeQueue, ConsumeQueueBase
from broker_core.store.dispatch import SCHEDULE_TOPIC
from broker_core.store.schedule.delay_offset import DelayOffsetTable
from broker_core.store.schedule.schedule_message_service import delay_level_to_queue_id
from broker_core.store.timer.convert import TIMER_TOPIC
from broker_core.store.topic_config import BATCH_CQ

from .offsets import TIMER_CHECKPOINT, read_timer_checkpoint
from .queues import BCQ_DIR, CQ_DIR, QueueResult, existing_queues

# (commitlog offset, size, tagsCode, store time, batch size) of a placeholder unit: below any min > 0
PLACEHOLDER_UNIT = (0, 1, 0, 0, 1)


@dataclass(frozen=True, slots=True)
class KeptQueue:
    """A queue the commitlog has no record of, kept at ``max_offset`` (min = max)."""

    topic: str
    queue_id: int
    cq_type: str  # "SimpleCQ" | "BatchCQ"
    max_offset: int
    # (commitlog offset, size, tagsCode, store time, batch size) of the unit written at the queue's end
    last_unit: tuple[int, int, int, int, int]
    source: str  # which file vouched for max_offset (for the report)

    def result(self, files: int) -> QueueResult:
        """The queue's range as the rest of the rebuild sees a rebuilt one (no units of live records)."""
        return QueueResult(self.topic, self.queue_id, self.cq_type, 0, self.max_offset, self.max_offset,
                           self.last_unit[0] + (self.last_unit[1] if self.cq_type != "BatchCQ" else 0), files)


def _expired_end(store_root: Path, topic: str, queue_id: int, batch: bool, file_size: int, min_phy: int
                 ) -> tuple[int, tuple[int, int, int, int, int]] | None:
    """(max offset, last unit) of an existing queue's units whose records lie below ``min_phy``; None
    when it has none (or cannot be read at all)."""
    root = store_root / (BCQ_DIR if batch else CQ_DIR)
    q: ConsumeQueueBase = (BatchConsumeQueue(topic, queue_id, root, file_size, read_only=True) if batch
                           else ConsumeQueue(topic, queue_id, root, file_size, read_only=True))
    best = None
    try:
        q.load()
        q.recover()
        for u in q.iter_all_units():
            if u.phy_offset >= min_phy:
                break  # the rest are not of deleted records: past the log end, or damage
            best = (u.queue_offset + u.batch_num, (u.phy_offset, u.size, u.tags_code, u.store_time, u.batch_num))
    except (ValueError, OSError):
        return None
    finally:
        q.close()
    return best


def committed_offsets(config_dir: Path) -> dict[tuple[str, int], tuple[int, str]]:
    """The highest offset committed per queue, and the file that says so: consumerOffset.json (every
    group), delayOffset.json and the timer checkpoint (unless damaged)."""
    out: dict[tuple[str, int], tuple[int, str]] = {}

    def put(topic: str, qid: int, off: int, source: str) -> None:
        if off > out.get((topic, qid), (0, ""))[0]:
            out[(topic, qid)] = (off, source)

    obj = read_config_json(config_dir / "consumerOffset.json") or {}
    for key, per_queue in (obj.get("offsetTable") or {}).items():
        topic = key.rsplit("@", 1)[0] if "@" in key else key
        for qid, off in (per_queue or {}).items():
            put(topic, int(qid), int(off), "consumerOffset.json")
    delay = DelayOffsetTable(config_dir)
    delay.load()
    for level, off in delay.offset_table.items():
        put(SCHEDULE_TOPIC, delay_level_to_queue_id(level), off, "delayOffset.json")
    cp = read_timer_checkpoint(config_dir)
    if cp is not None:
        put(TIMER_TOPIC, 0, max(cp.last_timer_queue_offset, cp.master_timer_queue_offset), TIMER_CHECKPOINT)
    return out


def kept_queues(store_root: Path, rebuilt: set[tuple[str, int]], queue_types: dict[str, str], min_phy: int,
                cq_file_size: int, bcq_file_size: int, deleted_topics: dict[str, int]) -> list[KeptQueue]:
    """Every queue with no record left in the commitlog whose offsets must survive the rebuild (see the
    module docstring for what vouches for them), by (topic, queueId)."""
    found: dict[tuple[str, int], KeptQueue] = {}
    types = {}
    for topic, qid, kind in existing_queues(store_root):
        if (topic, qid) in rebuilt or min_phy <= 0:
            continue
        types[(topic, qid)] = kind
        batch = kind == "BatchCQ"
        end = _expired_end(store_root, topic, qid, batch, bcq_file_size if batch else cq_file_size, min_phy)
        if end is not None and end[0] > 0:
            found[(topic, qid)] = KeptQueue(topic, qid, kind, end[0], end[1], f"{BCQ_DIR if batch else CQ_DIR} files")
    if min_phy > 0:
        for (topic, qid), (off, source) in committed_offsets(store_root / "config").items():
            if (topic, qid) in rebuilt or topic in deleted_topics or off <= 0:
                continue
            have = found.get((topic, qid))
            if have is not None and have.max_offset >= off:
                continue
            kind = types.get((topic, qid)) or ("BatchCQ" if queue_types.get(topic) == BATCH_CQ else "SimpleCQ")
            found[(topic, qid)] = KeptQueue(topic, qid, kind, off, PLACEHOLDER_UNIT, source)
    return [found[k] for k in sorted(found)]


def write_kept_queue(staging_root: Path, kept: KeptQueue, cq_file_size: int, bcq_file_size: int) -> int:
    """Write ``kept``'s queue into the staging directory: its one unit ending at max; returns its file count."""
    phy, size, tags, store_time, num = kept.last_unit
    if kept.cq_type == "BatchCQ":
        w: ConsumeQueueBase = BatchConsumeQueue(kept.topic, kept.queue_id, staging_root / BCQ_DIR, bcq_file_size)
        w.put_message_position_info(phy, size, tags, kept.max_offset - num, store_time, num)
    else:
        w = ConsumeQueue(kept.topic, kept.queue_id, staging_root / CQ_DIR, cq_file_size)
        w.put_message_position_info(phy, size, tags, kept.max_offset - 1)
    w.flush()
    files = w.file_count()
    w.close()
    return files
