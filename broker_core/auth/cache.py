"""A small bounded, expiring decision cache for the stateful strategies.

Why this module exists: RocketMQ's stateful strategies cache a decision per connection (Caffeine,
expire-after-write, maximum size); both our authenticator and authorizer need the same behaviour
with an injectable clock so tests never sleep.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

from broker_core.auth.config import Strategy

V = TypeVar("V")


class DecisionCache(Generic[V]):
    def __init__(self, max_entries: int, ttl_ms: int, clock: Callable[[], int]) -> None:
        self.max_entries = max(1, max_entries)
        self.ttl_ms = ttl_ms
        self._clock = clock
        self._entries: OrderedDict[Hashable, tuple[int, V]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: Hashable) -> V | None:
        with self._lock:
            item = self._entries.get(key)
            if item is None:
                return None
            written, value = item
            if self._clock() - written >= self.ttl_ms:
                del self._entries[key]
                return None
            return value

    def put(self, key: Hashable, value: V) -> None:
        with self._lock:
            self._entries.pop(key, None)
            self._entries[key] = (self._clock(), value)
            while len(self._entries) > self.max_entries:
                self._entries.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()

    def remove_channel(self, channel_id: str) -> None:
        """Drop everything a closed connection cached (keys start with the channel id)."""
        with self._lock:
            for key in [k for k in self._entries if isinstance(k, tuple) and k and k[0] == channel_id]:
                del self._entries[key]

    def __len__(self) -> int:
        return len(self._entries)


def stateful_cache(strategy: Strategy, max_entries: int, ttl_ms: int,
                   clock: Callable[[], int] | None) -> DecisionCache | None:
    """The STATEFUL strategy's cache; None for STATELESS (every request is evaluated again)."""
    if strategy is not Strategy.STATEFUL:
        return None
    if clock is None:
        raise ValueError("the stateful strategy needs a clock")
    return DecisionCache(max_entries, ttl_ms, clock)


class CachedDecisions:
    """What the authenticator and the authorizer do with their cache when users or connections go."""

    _cache: DecisionCache | None

    def invalidate(self) -> None:
        """Forget every cached result (called when any user changes)."""
        if self._cache is not None:
            self._cache.clear()

    def forget_channel(self, channel_id: str) -> None:
        if self._cache is not None:
            self._cache.remove_channel(channel_id)
