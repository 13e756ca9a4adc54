"""FIFO pop's order info never reaches the disk ahead of the messages it holds in flight.

Why: consumerOrderInfo.json records, per queue of an orderly group, the offsets of the batch popped
and not yet acked; it is written (fsync and rename) every flushConsumerOffsetInterval. With
ASYNC_FLUSH those messages may still be only in the page cache: after a power cut the queue ended
before them, the order info still held them in flight, the queue was blocked for their invisible
time, and the messages put again at those offsets inherited their consume counts. The pop service
now flushes the commitlog before writing the file, as the consumer offsets do.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from page_cache_model import DiskImage

from broker_core.broker.broker import Broker

from .conftest import FakeClock, small_config


def test_in_flight_order_info_survives_only_with_its_messages(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    image = DiskImage().install(monkeypatch)
    root, clock = tmp_path / "store", FakeClock()
    broker = Broker(root, small_config(), clock=clock)
    broker.create_or_update_topic("F", 1, 1)
    broker.create_or_update_subscription_group("G", consume_message_orderly=True)
    for i in range(5):
        broker.send_message("F", b"m%d" % i, queue_id=0)
    popped = broker.pop_message("G", "F", max_msgs=5, invisible_time_ms=60_000, order=True)
    assert [m.queue_offset for m in popped.messages] == [0, 1, 2, 3, 4]
    broker.pop_service.persist()  # the pop thread's round; the commitlog's own flush has not run
    image.power_off(root)
    broker.shutdown()
    image.cut(root)
    broker = Broker(root, small_config(), clock=clock)
    try:
        info = broker.pop_service.order_info.get("F", "G", 0)
        assert info is not None and info.queue_offsets() == [0, 1, 2, 3, 4]
        assert broker.store.get_max_offset_in_queue("F", 0) == 5  # the messages it holds in flight are there
        clock.advance(61_000)  # their invisible time passed: the same messages again, one more consume each
        again = broker.pop_message("G", "F", max_msgs=5, invisible_time_ms=60_000, order=True)
        assert [bytes(m.body) for m in again.messages] == [b"m0", b"m1", b"m2", b"m3", b"m4"]
        assert [m.reconsume_times for m in again.messages] == [1] * 5
    finally:
        broker.shutdown()
