"""The messages a push consumer holds for one queue, and what offset it may commit.

Why a sorted table: in concurrent mode messages of a queue finish out of order; the committed offset
must be the lowest one still in flight (or one past the highest seen when none is), so a crash never
skips an unconsumed message. In orderly mode messages are taken strictly in offset order and the
queue must hold a broker lock (renewed periodically, expiring after 60 s on the broker) while
consuming.
"""

from __future__ import annotations

import asyncio
import bisect
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from broker_core.store.codec.message import MessageExt

# A broker lock lives 60 s after its last renewal; the client treats its own view as stale after 30 s.
REBALANCE_LOCK_MAX_LIVE_MS = 30_000


@dataclass
class ProcessQueue:
    dropped: bool = False
    locked: bool = False
    last_lock_ms: int = 0
    last_pull_ms: int = field(default_factory=lambda: int(time.time() * 1000))
    last_consume_ms: int = field(default_factory=lambda: int(time.time() * 1000))
    try_unlock_times: int = 0
    _offsets: list[int] = field(default_factory=list)
    _msgs: dict[int, MessageExt] = field(default_factory=dict)
    _max_offset: int = -1
    _consuming: dict[int, MessageExt] = field(default_factory=dict)  # orderly: taken, not committed
    consume_lock: asyncio.Lock = field(default_factory=asyncio.Lock)  # held while a batch is consumed
    # Java's msgSize: the body bytes of every message held, kept as messages come and go so that the
    # flow control before each pull (pullThresholdSizeForQueue) does not sum the whole queue
    _size: int = 0
    # concurrent mode: when the listener call of each message held began (Java's CONSUME_START_TIME
    # property), what consumeTimeout is measured from
    _consume_start_ms: dict[int, int] = field(default_factory=dict)

    # ---------------------------------------------------------------- shared
    def put(self, msgs: Sequence[MessageExt]) -> None:
        for m in msgs:
            off = m.queue_offset
            if off in self._msgs or off in self._consuming:
                continue
            bisect.insort(self._offsets, off)
            self._msgs[off] = m
            self._size += len(m.body)
            if off > self._max_offset:
                self._max_offset = off

    @property
    def count(self) -> int:
        return len(self._msgs) + len(self._consuming)

    @property
    def max_offset(self) -> int:
        return self._max_offset

    def cached_offsets(self) -> list[int]:
        """Offsets of every message held (waiting or being consumed), ascending."""
        return sorted([*self._offsets, *self._consuming])

    def cached_bytes(self) -> int:
        """The body bytes of every message held (Java's ProcessQueue.msgSize)."""
        return self._size

    # ---------------------------------------------------------------- concurrent mode
    def remove(self, msgs: Sequence[MessageExt]) -> int:
        """Forget consumed messages; the offset to commit (-1 when nothing was ever put, or when the queue
        was dropped: its batches finishing late must not move the offset of the queue's next owner, nor
        undo a reset — Java skips the commit of a dropped ProcessQueue)."""
        for m in msgs:
            off = m.queue_offset
            self._consume_start_ms.pop(off, None)
            if (held := self._msgs.pop(off, None)) is not None:
                self._size -= len(held.body)
                i = bisect.bisect_left(self._offsets, off)
                if i < len(self._offsets) and self._offsets[i] == off:
                    del self._offsets[i]
        if self.dropped:
            return -1
        if self._offsets:
            return self._offsets[0]
        return self._max_offset + 1 if self._max_offset >= 0 else -1

    def consume_started(self, msgs: Sequence[MessageExt], now_ms: int | None = None) -> None:
        """The listener call of ``msgs`` begins now (Java sets CONSUME_START_TIME on each message)."""
        now = int(time.time() * 1000) if now_ms is None else now_ms
        for m in msgs:
            if m.queue_offset in self._msgs:
                self._consume_start_ms[m.queue_offset] = now

    def first_expired(self, timeout_ms: float, now_ms: int | None = None) -> MessageExt | None:
        """The lowest message held when its listener call began over ``timeout_ms`` ago, else None: the
        one pinning the committed offset (Java's cleanExpiredMsg looks at msgTreeMap's first entry only)."""
        if not self._offsets:
            return None
        first = self._offsets[0]
        started = self._consume_start_ms.get(first)
        now = int(time.time() * 1000) if now_ms is None else now_ms
        if started is None or now - started <= timeout_ms:
            return None
        return self._msgs[first]

    # ---------------------------------------------------------------- orderly mode
    def take(self, batch: int) -> list[MessageExt]:
        """The next ``batch`` messages in offset order, moved to the consuming set."""
        taken: list[MessageExt] = []
        while self._offsets and len(taken) < batch:
            off = self._offsets.pop(0)
            m = self._msgs.pop(off)
            self._consuming[off] = m
            taken.append(m)
        return taken

    def commit(self) -> int:
        """The taken messages succeeded: the offset after the highest of them (-1 when none, or when the
        queue was dropped meanwhile: nothing of a dropped queue is committed)."""
        self._size -= sum(len(m.body) for m in self._consuming.values())
        if not self._consuming or self.dropped:
            self._consuming.clear()
            return -1
        nxt = max(self._consuming) + 1
        self._consuming.clear()
        return nxt

    def rollback(self) -> None:
        """The taken messages failed: put them back to be taken again first (SUSPEND_CURRENT_QUEUE)."""
        for off, m in self._consuming.items():
            bisect.insort(self._offsets, off)
            self._msgs[off] = m
        self._consuming.clear()

    def lock_expired(self, now_ms: int | None = None) -> bool:
        now = int(time.time() * 1000) if now_ms is None else now_ms
        return now - self.last_lock_ms > REBALANCE_LOCK_MAX_LIVE_MS
