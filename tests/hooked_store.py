"""Helpers for delay-level and transaction tests: a fake clock, a small real MessageStore, the Broker-style put with hooks."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from broker_core.broker.hooks import build_put_message_hooks
from broker_core.broker.put_pipeline import PutPipeline
from broker_core.store.codec.message import MessageInner
from broker_core.store.commit_log import PutMessageResult
from broker_core.store.message_store import MessageStore
from broker_core.store.store_config import StoreConfig

T0 = 1_700_000_000_000


class FakeClock:
    def __init__(self, now: int = T0) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now

    def advance(self, ms: int) -> int:
        self.now += ms
        return self.now


def small_config() -> StoreConfig:
    return StoreConfig(mapped_file_size_commit_log=4 * 1024 * 1024, mapped_file_size_consume_queue=2000 * 20,
                       max_hash_slot_num=2000, max_index_num=8000)


def open_store(root: Path, clock: FakeClock) -> MessageStore:
    store = MessageStore(root, small_config(), clock=clock)
    store.open()
    return store


def broker_put(store: MessageStore, clock: Callable[[], int]) -> Callable[[MessageInner], PutMessageResult]:
    """What Broker.put_message_internal does: the Broker's own put pipeline (put hooks, then the store)."""
    return PutPipeline(store, build_put_message_hooks(store.config, clock)).put

