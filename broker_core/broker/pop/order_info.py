"""FIFO pop state per ``topic@group`` and queue (ConsumerOrderInfoManager, seed 000, spec §10.5).

Why: in pop mode any consumer may pop any queue, so the broker itself must refuse to hand out the
next messages of an orderly queue while the previous batch is in flight. Each popped batch is kept
as an OrderInfo (delta-encoded offsets, ack bitmap, per-offset consume counts and next-visible
times); ``check_block`` gates pops, ``commit_and_next`` records acks and yields the offset to commit.
The table is persisted as ``config/consumerOrderInfo.json`` in fastjson's dialect.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from broker_core.store.config_file import read_config_json, write_config_json

FILE_NAME = "consumerOrderInfo.json"
TOPIC_GROUP_SEPARATOR = "@"
CLEAN_SPAN_FROM_LAST = 24 * 3600 * 1000


def build_offset_list(queue_offsets: list[int]) -> list[int]:
    """OrderInfo#buildOffsetList: first offset absolute, the others as distances from it."""
    if len(queue_offsets) == 1:
        return list(queue_offsets)
    first = queue_offsets[0]
    return [first] + [o - first for o in queue_offsets[1:]]


def queue_offset_at(offset_list: list[int], index: int) -> int:
    return offset_list[0] if index == 0 else offset_list[0] + offset_list[index]


@dataclass(slots=True)
class OrderInfo:
    pop_time: int
    invisible_time: int | None
    offset_list: list[int]
    last_consume_timestamp: int
    commit_offset_bit: int = 0
    attempt_id: str | None = None
    offset_next_visible_time: dict[int, int] | None = None
    offset_consumed_count: dict[int, int] | None = None

    @property
    def size(self) -> int:
        return len(self.offset_list)

    def queue_offset(self, index: int) -> int:
        return queue_offset_at(self.offset_list, index)

    def queue_offsets(self) -> list[int]:
        return [self.queue_offset(i) for i in range(self.size)]

    def is_not_ack(self, index: int) -> bool:
        return not self.commit_offset_bit >> index & 1

    def is_done(self) -> bool:
        return all(not self.is_not_ack(i) for i in range(self.size))

    def consumed_count(self, queue_offset: int) -> int:
        return (self.offset_consumed_count or {}).get(queue_offset, 0)

    def next_visible_time(self, index: int) -> int:
        base = self.pop_time + (self.invisible_time or 0)
        if self.offset_next_visible_time:
            return self.offset_next_visible_time.get(self.queue_offset(index), base)
        return base

    def need_block(self, attempt_id: str | None, current_invisible_time: int, now_ms: int) -> bool:
        """OrderInfo#needBlock: an un-acked offset still inside its invisible time blocks the queue,
        unless the pop retries with the batch's own attempt id (lost-response recovery)."""
        if not self.offset_list:
            return False
        if self.attempt_id is not None and self.attempt_id == attempt_id:
            return False
        if self.invisible_time is None or self.invisible_time <= 0:
            self.invisible_time = current_invisible_time
        return any(self.is_not_ack(i) and now_ms < self.next_visible_time(i) for i in range(self.size))

    def lock_free_timestamp(self, now_ms: int) -> int | None:
        """When the queue stops blocking (None: never recorded an invisible time)."""
        if not self.offset_list:
            return None
        for i in range(self.size):
            if self.is_not_ack(i):
                if self.invisible_time is None or self.invisible_time <= 0:
                    return None
                t = self.next_visible_time(i)
                if now_ms < t:
                    return t
        return now_ms

    def next_offset(self) -> int:
        """OrderInfo#getNextOffset: the first un-acked offset, or one past the batch when all acked."""
        if not self.offset_list:
            return -2
        for i in range(self.size):
            if self.is_not_ack(i):
                return self.queue_offset(i)
        return self.queue_offset(self.size - 1) + 1

    def merge_offset_consumed_count(self, pre_attempt_id: str | None, pre_offset_list: list[int],
                                    prev: dict[int, int] | None) -> None:
        """Offsets delivered again count one more consumption; a same-attempt retry counts nothing."""
        prev = prev or {}
        if pre_attempt_id is not None and pre_attempt_id == self.attempt_id:
            self.offset_consumed_count = dict(prev)
            return
        before = {queue_offset_at(pre_offset_list, i) for i in range(len(pre_offset_list))}
        counts: dict[int, int] = {}
        for i in range(self.size):
            qo = self.queue_offset(i)
            if qo in before:
                counts[qo] = prev.get(qo, 0) + 1
        self.offset_consumed_count = counts

    def to_json(self) -> dict[str, Any]:
        obj: dict[str, Any] = {"a": self.attempt_id, "cm": self.commit_offset_bit, "i": self.invisible_time,
                               "l": self.last_consume_timestamp, "o": list(self.offset_list),
                               "oc": None if self.offset_consumed_count is None else dict(self.offset_consumed_count),
                               "ot": None if self.offset_next_visible_time is None
                               else dict(self.offset_next_visible_time),
                               "popTime": self.pop_time}
        return {k: v for k, v in obj.items() if v is not None}

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> OrderInfo:
        def int_map(m: Any) -> dict[int, int] | None:
            return None if m is None else {int(k): int(v) for k, v in dict(m).items()}

        inv = obj.get("i", obj.get("invisibleTime"))
        return cls(int(obj.get("popTime", 0)), None if inv is None else int(inv),
                   [int(o) for o in obj.get("o", obj.get("offsetList")) or []],
                   int(obj.get("l", obj.get("lastConsumeTimestamp", 0))),
                   int(obj.get("cm", obj.get("commitOffsetBit", 0))),
                   obj.get("a", obj.get("attemptId")),
                   int_map(obj.get("ot", obj.get("offsetNextVisibleTime"))),
                   int_map(obj.get("oc", obj.get("offsetConsumedCount"))))


class ConsumerOrderInfoManager:
    """The order-info table; callers serialize per queue (PopService holds its lock around calls)."""

    def __init__(self, config_dir: Path, clock: Callable[[], int],
                 topic_queue_nums: Callable[[str], int | None] | None = None,
                 before_write: Callable[[], None] | None = None) -> None:
        self.path = Path(config_dir) / FILE_NAME
        self.clock = clock
        # Run between the snapshot and its write (the broker flushes the commitlog): the offsets it
        # holds in flight are then on disk before the file that names them.
        self.before_write = before_write
        # For autoClean: read queue count of a topic, None when the topic no longer exists.
        self.topic_queue_nums = topic_queue_nums
        self.table: dict[str, dict[int, OrderInfo]] = {}
        self._lock = threading.RLock()
        self._persist_lock = threading.Lock()  # one writer at a time: never an older snapshot last
        self._dirty = False

    @staticmethod
    def build_key(topic: str, group: str) -> str:
        return topic + TOPIC_GROUP_SEPARATOR + group

    def get(self, topic: str, group: str, queue_id: int) -> OrderInfo | None:
        return self.table.get(self.build_key(topic, group), {}).get(queue_id)

    # -- the seed-000 operations -----------------------------------------------------------------
    def update(self, attempt_id: str | None, is_retry: bool, topic: str, group: str, queue_id: int, pop_time: int,
               invisible_time: int, msg_queue_offsets: list[int]) -> tuple[OrderInfo, str]:
        """Record a popped batch; returns it and its orderCountInfo string (ExtraInfoUtil format)."""
        with self._lock:
            qs = self.table.setdefault(self.build_key(topic, group), {})
            old = qs.get(queue_id)
            info = OrderInfo(pop_time, invisible_time, build_offset_list(msg_queue_offsets), self.clock(), 0,
                             attempt_id)
            if old is not None:
                info.merge_offset_consumed_count(old.attempt_id, old.offset_list, old.offset_consumed_count)
            qs[queue_id] = info
            self._dirty = True
        retry = "1" if is_retry else "0"
        items = []
        counts = info.offset_consumed_count
        min_count = 0
        if counts:
            for off, n in counts.items():
                items.append(f"{retry} qo{queue_id}%{off} {n}")
            min_count = min(counts.values()) if len(counts) == info.size else 0
        # Old pop SDKs read the queue-level entry: the smallest consume count of the batch.
        items.append(f"{retry} {queue_id} {min_count}")
        return info, ";".join(items)

    def check_block(self, attempt_id: str | None, topic: str, group: str, queue_id: int, invisible_time: int) -> bool:
        with self._lock:
            info = self.get(topic, group, queue_id)
            return info is not None and info.need_block(attempt_id, invisible_time, self.clock())

    def clear_block(self, topic: str, group: str, queue_id: int) -> bool:
        with self._lock:
            qs = self.table.get(self.build_key(topic, group))
            if qs is None or queue_id not in qs:
                return False
            del qs[queue_id]
            self._dirty = True
            return True

    def drop_topic(self, topic: str) -> dict[str, dict[int, OrderInfo]]:
        """Forget ``topic``'s queues for every group (the topic was deleted); returns what went, for
        ``restore`` when the deletion does not happen after all."""
        prefix = topic + TOPIC_GROUP_SEPARATOR
        with self._lock:
            dropped = {key: self.table.pop(key) for key in [key for key in self.table if key.startswith(prefix)]}
            if dropped:
                self._dirty = True
            return dropped

    def restore(self, dropped: dict[str, dict[int, OrderInfo]]) -> None:
        """Put back what ``drop_topic`` took, where nothing has taken its place since."""
        with self._lock:
            for key, queues in dropped.items():
                self.table.setdefault(key, {}).update({q: i for q, i in queues.items() if q not in self.table[key]})
            self._dirty = True

    def commit_and_next(self, topic: str, group: str, queue_id: int, queue_offset: int, pop_time: int) -> int:
        """Set the ack bit; -1 illegal offset, -2 stale pop time (nothing changed), else offset to commit."""
        with self._lock:
            qs = self.table.get(self.build_key(topic, group))
            if qs is None or qs.get(queue_id) is None:
                return queue_offset + 1
            info = qs[queue_id]
            if not info.offset_list:
                return -1
            if pop_time != info.pop_time:
                return -2
            for i in range(info.size):
                if info.queue_offset(i) == queue_offset:
                    break
            else:
                return -1
            info.commit_offset_bit |= 1 << i
            self._dirty = True
            return info.next_offset()

    def update_next_visible_time(self, topic: str, group: str, queue_id: int, queue_offset: int, pop_time: int,
                                 next_visible_time: int) -> bool:
        with self._lock:
            info = self.get(topic, group, queue_id)
            if info is None or pop_time != info.pop_time:
                return False
            if info.offset_next_visible_time is None:
                info.offset_next_visible_time = {}
            info.offset_next_visible_time[queue_offset] = next_visible_time
            self._dirty = True
            return True

    # -- persistence -----------------------------------------------------------------------------
    def auto_clean(self) -> None:
        """Drop queues not popped for a day, and entries whose topic or queue no longer exists."""
        now = self.clock()
        with self._lock:
            for key in list(self.table):
                qs = self.table[key]
                topic = key.split(TOPIC_GROUP_SEPARATOR, 1)[0]
                nums = self.topic_queue_nums(topic) if self.topic_queue_nums is not None else -1
                if nums is None or not qs:
                    del self.table[key]
                    self._dirty = True
                    continue
                for qid in list(qs):
                    if (0 <= nums <= qid) or now - qs[qid].last_consume_timestamp > CLEAN_SPAN_FROM_LAST:
                        del qs[qid]
                        self._dirty = True

    def to_json(self) -> dict[str, Any]:
        with self._lock:
            return {"table": {key: {qid: info.to_json() for qid, info in qs.items()}
                              for key, qs in self.table.items()}}

    def load(self) -> None:
        obj = read_config_json(self.path)
        table: dict[str, dict[int, OrderInfo]] = {}
        for key, qs in ((obj or {}).get("table") or {}).items():
            table[str(key)] = {int(qid): OrderInfo.from_json(info) for qid, info in (qs or {}).items()}
        with self._lock:
            self.table = table
            self._dirty = False

    def persist(self, force: bool = False) -> bool:
        with self._persist_lock:
            with self._lock:
                if not (self._dirty or force):
                    return False
                self.auto_clean()
                snapshot = self.to_json()
                self._dirty = False
            try:
                if self.before_write is not None:
                    self.before_write()
                write_config_json(self.path, snapshot)
            except BaseException:
                with self._lock:  # not on disk: the next round tries again
                    self._dirty = True
                raise
            return True
