"""A deleted topic's pop state goes with it: a topic made again under that name starts clean.

Why: FIFO order info and the revive checkpoints name queue offsets. Kept after deleteTopic, they were
read against the new topic's queues: its orderly queue stayed blocked by the old batch for that
batch's invisible time, and revive put the new topic's messages at the old popped offsets into the
retry topic, so a consumer got messages it had never popped a second time.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from page_cache_model import DiskImage

from broker_core.broker.broker import Broker
from broker_core.broker.pop.pop_service import PopStatus
from broker_core.broker.topic_manager import TopicManager

from .conftest import FakeClock, small_config


def test_an_orderly_queue_of_a_topic_made_again_is_not_blocked_by_the_old_batch(make_broker) -> None:
    b = make_broker()
    b.create_or_update_topic("T", 1, 1)
    b.create_or_update_subscription_group("F", consume_message_orderly=True)
    for i in range(3):
        b.send_message("T", b"old%d" % i, queue_id=0)
    assert len(b.pop_message("F", "T", max_msgs=3, invisible_time_ms=60_000, order=True).messages) == 3
    assert b.delete_topic("T")
    b.create_or_update_topic("T", 1, 1)
    b.send_message("T", b"new", queue_id=0)
    got = b.pop_message("F", "T", max_msgs=3, invisible_time_ms=60_000, order=True)
    assert got.status is PopStatus.FOUND and [bytes(m.body) for m in got.messages] == [b"new"]


def test_revive_does_not_bring_back_messages_of_the_topic_made_again(make_broker, clock: FakeClock) -> None:
    b = make_broker()
    b.create_or_update_topic("T", 1, 1)
    b.create_or_update_subscription_group("G")
    b.send_message("T", b"old", queue_id=0)
    assert len(b.pop_message("G", "T", invisible_time_ms=1_000).messages) == 1  # never acked
    assert b.delete_topic("T")
    b.create_or_update_topic("T", 1, 1)
    b.send_message("T", b"new", queue_id=0)  # at queue offset 0, as the old popped message was
    first = b.pop_message("G", "T", invisible_time_ms=60_000)
    assert [bytes(m.body) for m in first.messages] == [b"new"]
    clock.advance(2_000)
    assert b.pop_service.tick() == 0  # the old checkpoint is over: nothing comes back
    clock.advance(1_000)
    again = b.pop_message("G", "T", invisible_time_ms=60_000)
    assert again.messages == [], [bytes(m.body) for m in again.messages]


def test_the_old_batch_is_off_the_disk_before_the_topic_is_deleted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                   clock: FakeClock) -> None:
    """A power cut right after the deletion: the order info on disk must not hold the old batch either
    (it was dropped in memory only, and the file kept it until the next flush round)."""
    image = DiskImage().install(monkeypatch)
    root = tmp_path / "store"
    b = Broker(root, small_config(), clock=clock)
    b.create_or_update_topic("T", 1, 1)
    b.create_or_update_subscription_group("F", consume_message_orderly=True)
    for i in range(3):
        b.send_message("T", b"old%d" % i, queue_id=0)
    assert len(b.pop_message("F", "T", max_msgs=3, invisible_time_ms=60_000, order=True).messages) == 3
    b.pop_service.persist()  # the pop thread's round: the batch is in consumerOrderInfo.json
    image.power_off_after(monkeypatch, TopicManager, "_persist_deleted", root)  # the tombstone is written, then the cut
    assert b.delete_topic("T")
    b.shutdown()
    image.cut(root)
    b = Broker(root, small_config(), clock=clock)
    try:
        b.create_or_update_topic("T", 1, 1)
        b.send_message("T", b"new", queue_id=0)
        got = b.pop_message("F", "T", max_msgs=3, invisible_time_ms=60_000, order=True)
        assert [bytes(m.body) for m in got.messages] == [b"new"]
    finally:
        b.shutdown()
