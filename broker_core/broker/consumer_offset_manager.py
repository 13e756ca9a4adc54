"""Committed, pulled and admin-reset consumer offsets per ``topic@group`` (ConsumerOffsetManager).

Why: commits arrive constantly from many consumers, so they live in memory and reach
``config/consumerOffset.json`` periodically (flushConsumerOffsetInterval) and at shutdown, always
atomically. A server-side reset is remembered separately until the queue is pulled again, so a
consumer's in-flight commit of an old offset cannot undo it (RIP-48).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

from broker_core.store.config_file import ConfigWriteError
from broker_core.store.consumer_offset_file import (
    TOPIC_GROUP_SEPARATOR,
    OffsetTable,
    read_consumer_offsets,
    split_topic_at_group,
    write_consumer_offsets,
)
from broker_core.store.topic_config import DataVersion


def topic_at_group(topic: str, group: str) -> str:
    return topic + TOPIC_GROUP_SEPARATOR + group


class ConsumerOffsetManager:
    def __init__(self, config_dir: Path, clock: Callable[[], int], read_only: bool = False,
                 before_write: Callable[[], None] | None = None) -> None:
        self.config_dir = Path(config_dir)
        self.clock = clock
        self.read_only = read_only
        # Run between the snapshot and its write (the broker's: flush the commitlog). Why: an offset
        # commits consumption of records that may still be only in the page cache (ASYNC_FLUSH); written
        # ahead of them, after a power cut it pointed past the queue's recovered end, and the messages
        # put again at those offsets were skipped (for the revive group: checkpoints of popped messages
        # never replayed, so those messages never came back).
        self.before_write = before_write
        self.offset_table: OffsetTable = {}
        self.pull_offset_table: OffsetTable = {}
        self.reset_offset_table: OffsetTable = {}
        self.last_commit_time: dict[str, dict[int, int]] = {}
        self.data_version = DataVersion()
        self._lock = threading.RLock()
        self._persist_lock = threading.Lock()
        self._dirty = False

    def load(self) -> None:
        table, version = read_consumer_offsets(self.config_dir)
        with self._lock:
            self.offset_table = table
            self.data_version = version

    def persist(self, force: bool = False) -> bool:
        """Write the file when something changed (or ``force``); False when nothing was written."""
        if self.read_only:
            return False
        # Persists take turns from snapshot to write (the flush thread's and a reset's forced one on
        # a request thread): otherwise the older snapshot could be written last, with nothing dirty
        # left to write the newer one again. Commits only wait for ``_lock``, not for the write.
        with self._persist_lock:
            with self._lock:
                if not (self._dirty or force):
                    return False
                snapshot = {k: dict(v) for k, v in self.offset_table.items()}
                self.data_version.next_version(self.clock())
                version = DataVersion(self.data_version.counter, self.data_version.state_version,
                                      self.data_version.timestamp)
                self._dirty = False
            try:
                if self.before_write is not None:
                    self.before_write()
                write_consumer_offsets(self.config_dir, snapshot, version)
            except BaseException:
                with self._lock:  # not on disk: the next flush tries again
                    self._dirty = True
                raise
        return True

    @contextmanager
    def change(self, keys: Iterable[str]) -> Iterator[None]:
        """An admin change (reset, clone) of the ``topic@group`` entries ``keys`` that counts only once
        consumerOffset.json holds it: when the file cannot be written (a full disk) every queue the
        body changed is put back as it was, unless a consumer's commit has moved it since, and the
        ``ConfigWriteError`` goes on. Why: a reset reported as failed must not go on steering the
        consumers it was meant for (nor vanish at the next restart after it did)."""
        keys = list(dict.fromkeys(keys))
        tables = (self.offset_table, self.reset_offset_table, self.pull_offset_table)
        with self._lock:
            before = [[dict(t.get(k, {})) for t in tables] for k in keys]
        yield
        with self._lock:
            after = [[dict(t.get(k, {})) for t in tables] for k in keys]
        try:
            self.persist(force=True)
        except ConfigWriteError:
            with self._lock:
                for key, was, now in zip(keys, before, after, strict=True):
                    for table, old_q, new_q in zip(tables, was, now, strict=True):
                        _undo(table, key, old_q, new_q)
            raise

    # -- commits ---------------------------------------------------------------------------------
    def commit_offset(self, group: str, topic: str, queue_id: int, offset: int) -> None:
        key = topic_at_group(topic, group)
        with self._lock:
            self.offset_table.setdefault(key, {})[queue_id] = offset
            self.last_commit_time.setdefault(key, {})[queue_id] = self.clock()
            self._dirty = True

    def commit_pull_offset(self, group: str, topic: str, queue_id: int, offset: int) -> None:
        with self._lock:
            self.pull_offset_table.setdefault(topic_at_group(topic, group), {})[queue_id] = offset

    def query_offset(self, group: str, topic: str, queue_id: int) -> int:
        """The reset offset if one is pending, else the committed offset, else -1."""
        key = topic_at_group(topic, group)
        reset = self.reset_offset_table.get(key)
        if reset is not None and queue_id in reset:
            return reset[queue_id]
        return self.offset_table.get(key, {}).get(queue_id, -1)

    def query_pull_offset(self, group: str, topic: str, queue_id: int) -> int:
        pulled = self.pull_offset_table.get(topic_at_group(topic, group), {}).get(queue_id)
        return pulled if pulled is not None else self.query_offset(group, topic, queue_id)

    def query_offsets(self, group: str, topic: str) -> dict[int, int]:
        return dict(self.offset_table.get(topic_at_group(topic, group), {}))

    def last_commit_timestamp(self, group: str, topic: str, queue_id: int) -> int:
        return self.last_commit_time.get(topic_at_group(topic, group), {}).get(queue_id, 0)

    # -- admin reset -----------------------------------------------------------------------------
    def assign_reset_offset(self, group: str, topic: str, queue_id: int, offset: int) -> None:
        key = topic_at_group(topic, group)
        with self._lock:
            self.reset_offset_table.setdefault(key, {})[queue_id] = offset
            self.offset_table.setdefault(key, {})[queue_id] = offset
            self.pull_offset_table.get(key, {}).pop(queue_id, None)
            self._dirty = True

    def has_offset_reset(self, group: str, topic: str, queue_id: int) -> bool:
        return queue_id in self.reset_offset_table.get(topic_at_group(topic, group), {})

    def query_then_erase_reset_offset(self, group: str, topic: str, queue_id: int) -> int | None:
        with self._lock:
            return self.reset_offset_table.get(topic_at_group(topic, group), {}).pop(queue_id, None)

    # -- bulk ------------------------------------------------------------------------------------
    def clean_offset_by_topic(self, topic: str) -> None:
        with self._lock:
            for table in (self.offset_table, self.pull_offset_table, self.reset_offset_table, self.last_commit_time):
                for key in [k for k in table if (split_topic_at_group(k) or ("", ""))[0] == topic]:
                    del table[key]
            self._dirty = True

    def remove_offset(self, group: str) -> None:
        with self._lock:
            for table in (self.offset_table, self.pull_offset_table, self.reset_offset_table, self.last_commit_time):
                for key in [k for k in table if (split_topic_at_group(k) or ("", ""))[1] == group]:
                    del table[key]
            self._dirty = True

    def clone_offset(self, src_group: str, dst_group: str, topic: str) -> dict[int, int]:
        with self._lock:
            offsets = self.offset_table.get(topic_at_group(topic, src_group))
            if offsets is None:
                return {}
            self.offset_table[topic_at_group(topic, dst_group)] = dict(offsets)
            self._dirty = True
            return dict(offsets)

    def which_topic_by_consumer(self, group: str) -> set[str]:
        return {tg[0] for k in list(self.offset_table) if (tg := split_topic_at_group(k)) and tg[1] == group}

    def which_group_by_topic(self, topic: str) -> set[str]:
        return {tg[1] for k in list(self.offset_table) if (tg := split_topic_at_group(k)) and tg[0] == topic}


def _undo(table: OffsetTable, key: str, before: dict[int, int], after: dict[int, int]) -> None:
    """``table[key]`` back from ``after`` to ``before``, queue by queue, where it still holds ``after``."""
    queues = table.get(key)
    for qid in before.keys() | after.keys():
        current = None if queues is None else queues.get(qid)
        if current != after.get(qid):
            continue  # moved since (a commit): that is newer than both
        if qid in before:
            table.setdefault(key, {})[qid] = before[qid]
        elif queues is not None:
            queues.pop(qid, None)
    if key in table and not table[key]:
        del table[key]
