"""Which queue a message is sent to.

Why these rules: Java's default producer walks the write queues round-robin from a random start and,
on a retry, avoids the broker that just failed (fault avoidance in its simplest form). Ordered sends
pick a queue from a sharding key so every message of one key lands in one queue, in order.
"""

from __future__ import annotations

import hashlib
import itertools
import random
from collections.abc import Sequence

from broker_core.remoting.bodies import MessageQueue


class RoundRobinSelector:
    """One counter per topic, as Java's TopicPublishInfo.sendWhichQueue: with one counter for all, an
    application alternating two 4-queue topics sent each to only two of its queues."""

    def __init__(self) -> None:
        self._counters: dict[str, itertools.count[int]] = {}

    def select(self, queues: Sequence[MessageQueue], last_broker: str | None = None) -> MessageQueue:
        if not queues:
            raise ValueError("no writable queue")
        topic = queues[0].topic
        counter = self._counters.get(topic)
        if counter is None:
            counter = self._counters[topic] = itertools.count(random.randrange(1 << 16))
        start = next(counter)
        n = len(queues)
        if last_broker is not None:
            for i in range(n):
                mq = queues[(start + i) % n]
                if mq.broker_name != last_broker:
                    return mq
        return queues[start % n]


def select_by_key(queues: Sequence[MessageQueue], sharding_key: str) -> MessageQueue:
    """A stable queue for a key (first 4 bytes of its MD5 modulo the queue count)."""
    if not queues:
        raise ValueError("no writable queue")
    h = int.from_bytes(hashlib.md5(sharding_key.encode("utf-8")).digest()[:4], "big")
    return queues[h % len(queues)]
