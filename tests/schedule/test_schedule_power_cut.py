"""Delay-level messages re-put before a power cut are in their topic after it (page_cache_model).

Why: delayOffset.json says which messages of each level were re-put to their topics. Written (fsync)
while those re-puts were still only in the page cache (ASYNC_FLUSH), a power cut lost the delayed
messages for good: the offset said delivered, the topic never had them. The service now flushes the
commitlog between the offsets' snapshot and their write.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hooked_store import FakeClock, broker_put, open_store
from page_cache_model import DiskImage
from test_schedule_message_service import LEVELS_MS, delay_msg, real_messages

from broker_core.store.schedule import ScheduleMessageService


def test_delivered_delay_messages_survive_a_power_cut(tmp_path: Path, clock: FakeClock,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    image = DiskImage().install(monkeypatch)
    root = tmp_path / "store"
    store = open_store(root, clock)
    put = broker_put(store, clock)
    for i in range(4):
        assert put(delay_msg(1, b"d%d" % i, queue_id=i)).ok
    store.flush()  # sent and parked, all on disk
    svc = ScheduleMessageService(store, put, clock=clock)
    clock.advance(LEVELS_MS[0])
    assert svc.tick() == 4
    assert svc.persist()  # the service's periodic write of delayOffset.json; the commitlog's flush has not run
    image.power_off(root)
    svc.shutdown()
    store.shutdown()
    image.cut(root)
    store = open_store(root, clock)
    svc = ScheduleMessageService(store, broker_put(store, clock), clock=clock)
    try:
        clock.advance(1000)
        svc.tick()
        assert sorted(bytes(m.body) for m in real_messages(store)) == [b"d0", b"d1", b"d2", b"d3"]
    finally:
        svc.shutdown()
        store.shutdown()
