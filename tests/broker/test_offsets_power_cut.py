"""Consumer offsets never reach the disk ahead of the messages they count (page_cache_model.DiskImage).

Why: a consumer commits an offset for messages that, with ASYNC_FLUSH, may still be only in the page
cache; consumerOffset.json is written every flushConsumerOffsetInterval with fsync. After a power
cut the queue ended before the committed offset, and the messages put again at those offsets were
skipped by the group (for the revive group, checkpoints of popped messages were never replayed).
The broker now flushes the commitlog between the offsets' snapshot and its write.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from page_cache_model import DiskImage

from broker_core.broker.broker import Broker

from .conftest import FakeClock, small_config


def test_a_committed_offset_survives_only_with_its_messages(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    image = DiskImage().install(monkeypatch)
    root, clock = tmp_path / "store", FakeClock()
    broker = Broker(root, small_config(), clock=clock)
    broker.create_or_update_topic("T", 1, 1)
    broker.create_or_update_subscription_group("G")
    for i in range(10):
        broker.send_message("T", b"m%d" % i, queue_id=0)
    got = broker.pull_message("G", "T", 0, 0, 32)
    assert len(got.messages) == 10
    broker.commit_offset("G", "T", 0, got.next_begin_offset)
    broker.offset_manager.persist()  # the offset flush thread's round; the commitlog's own flush has not run
    image.power_off(root)
    broker.shutdown()
    image.cut(root)
    broker = Broker(root, small_config(), clock=clock)
    try:
        committed = broker.query_offset("G", "T", 0)
        assert committed == 10
        assert broker.store.get_max_offset_in_queue("T", 0) >= committed  # the messages it counts are there
        broker.send_message("T", b"after", queue_id=0)
        assert [bytes(m.body) for m in broker.pull_message("G", "T", 0, committed, 32).messages] == [b"after"]
    finally:
        broker.shutdown()
