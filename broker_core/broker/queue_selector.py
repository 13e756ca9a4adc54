"""Write-queue selection: explicit, round robin, or by message group / sharding key.

Why: FIFO needs every message of one group in one queue. RocketMQ's proxy maps a message group to
``writeQueues[Hashing.consistentHash(group.hashCode(), n)]`` (Guava's jump consistent hash), so the
same function here puts a group where a Java proxy would, and few groups move when queues are added.
"""

from __future__ import annotations

import itertools
import random
import threading

from broker_core.store.codec.hashing import java_string_hash

_MASK64 = (1 << 64) - 1
_LCG_MULTIPLIER = 2862933555777941757


def consistent_hash(input_value: int, buckets: int) -> int:
    """Guava ``Hashing.consistentHash(long, int)`` (Lamping & Veach jump hash with Guava's LCG)."""
    if buckets <= 0:
        raise ValueError(f"buckets must be positive, got {buckets}")
    state = input_value & _MASK64
    candidate = 0
    while True:
        state = (_LCG_MULTIPLIER * state + 1) & _MASK64
        next_double = ((state >> 33) + 1) / float(1 << 31)
        nxt = int((candidate + 1) / next_double)
        if 0 <= nxt < buckets:
            candidate = nxt
        else:
            return candidate


def queue_for_message_group(message_group: str, write_queue_nums: int) -> int:
    """The queue id a message group (sharding key) always lands in."""
    return consistent_hash(java_string_hash(message_group), write_queue_nums)


class RoundRobinSelector:
    """Spreads messages without a group over the write queues (per topic), from a random start.

    Why random: Apache's broker picks a random queue for a request without one, and Java's producer
    starts its round robin at a random queue; starting at 0 put every message of a short-lived
    sender (each embedded ``mqadmin sendMessage`` is one) in queue 0."""

    def __init__(self) -> None:
        self._counters: dict[str, itertools.count] = {}
        self._lock = threading.Lock()

    def select(self, topic: str, write_queue_nums: int) -> int:
        with self._lock:
            counter = self._counters.setdefault(topic, itertools.count(random.randrange(1 << 16)))
            return next(counter) % write_queue_nums
