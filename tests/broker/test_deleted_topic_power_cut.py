"""A deleted topic's tombstone never reaches the disk ahead of the records it cuts off.

Why: deleteTopic writes config/deletedTopics.json (fsync and rename) with the commitlog offset every
record of the old topic is below, so recovery never dispatches them into a queue of the same name
made later. With ASYNC_FLUSH those records may still be only in the page cache: after a power cut
the commitlog ended before the cut, the records of the topic made again after the restart were put
below it, and dispatch refused every one of them (sent OK, never readable). The broker now flushes
the commitlog before writing the tombstone.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from page_cache_model import DiskImage

from broker_core.broker.broker import Broker
from broker_core.broker.topic_manager import TopicManager

from .conftest import FakeClock, small_config


def test_a_topic_made_again_after_a_power_cut_gets_its_messages(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    image = DiskImage().install(monkeypatch)
    root, clock = tmp_path / "store", FakeClock()
    broker = Broker(root, small_config(), clock=clock)
    broker.create_or_update_topic("D", 1, 1)
    for i in range(5):
        broker.send_message("D", b"old%d" % i, queue_id=0)
    image.power_off_after(monkeypatch, TopicManager, "_persist_deleted", root)  # the tombstone is written, then the cut
    assert broker.delete_topic("D")
    broker.shutdown()
    image.cut(root)
    broker = Broker(root, small_config(), clock=clock)
    try:
        broker.create_or_update_topic("D", 1, 1)
        sent = broker.send_message("D", b"new", queue_id=0)
        assert sent.status.name == "SEND_OK"
        got = broker.read_queue("D", 0, 0, 32)
        assert [bytes(m.body) for m in got.messages] == [b"new"]
    finally:
        broker.shutdown()
