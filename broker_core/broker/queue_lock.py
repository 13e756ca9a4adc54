"""4.x orderly consumption: per-queue locks a client holds while it consumes (RebalanceLockManager).

Why: an orderly push consumer only consumes a queue it holds the broker lock for; the lock is
renewed every 20 s and expires ``rebalanceLockMaxLiveTime`` (60 s) after the last renewal, so a
crashed client's queues move on (seed 003). Time comes from the injected clock.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass


@dataclass(frozen=True, order=True, slots=True)
class MessageQueue:
    """MessageQueue natural order: topic, brokerName, queueId."""

    topic: str
    broker_name: str
    queue_id: int


@dataclass(slots=True)
class LockEntry:
    client_id: str
    last_update_timestamp: int


class RebalanceLockManager:
    def __init__(self, clock: Callable[[], int], lock_max_live_time_ms: int = 60_000) -> None:
        self.clock = clock
        self.lock_max_live_time_ms = lock_max_live_time_ms
        self._table: dict[str, dict[MessageQueue, LockEntry]] = {}
        self._lock = threading.Lock()

    def _expired(self, entry: LockEntry, now: int) -> bool:
        return now - entry.last_update_timestamp > self.lock_max_live_time_ms

    def try_lock_batch(self, group: str, mqs: Iterable[MessageQueue], client_id: str) -> set[MessageQueue]:
        """Lock (or renew) every queue that is free, expired or already ours; return those we hold."""
        now = self.clock()
        locked: set[MessageQueue] = set()
        with self._lock:
            table = self._table.setdefault(group, {})
            for mq in mqs:
                entry = table.get(mq)
                if entry is None:
                    table[mq] = LockEntry(client_id, now)
                    locked.add(mq)
                elif entry.client_id == client_id or self._expired(entry, now):
                    entry.client_id = client_id
                    entry.last_update_timestamp = now
                    locked.add(mq)
        return locked

    def unlock_batch(self, group: str, mqs: Iterable[MessageQueue], client_id: str) -> set[MessageQueue]:
        """Release the queues ``client_id`` holds; queues held by others are left alone."""
        released: set[MessageQueue] = set()
        with self._lock:
            table = self._table.get(group)
            if not table:
                return released
            for mq in mqs:
                entry = table.get(mq)
                if entry is not None and entry.client_id == client_id:
                    del table[mq]
                    released.add(mq)
        return released

    def owner(self, group: str, mq: MessageQueue) -> str | None:
        """The client holding a live lock on ``mq``, or None."""
        entry = self._table.get(group, {}).get(mq)
        if entry is None or self._expired(entry, self.clock()):
            return None
        return entry.client_id

    def is_lock_all_expired(self, group: str) -> bool:
        now = self.clock()
        return all(self._expired(e, now) for e in self._table.get(group, {}).values())

    def locks(self, group: str) -> dict[MessageQueue, str]:
        now = self.clock()
        return {mq: e.client_id for mq, e in self._table.get(group, {}).items() if not self._expired(e, now)}
