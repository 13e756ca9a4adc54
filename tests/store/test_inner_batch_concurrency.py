"""INNER_BASE must equal the queue offset a BatchCQ record gets, even with concurrent plain puts."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from broker_core.store.codec.batch import BatchItem, encode_batch
from broker_core.store.codec.message import MessageInner
from broker_core.store.message_store import MessageStore
from broker_core.store.store_config import StoreConfig
from broker_core.store.topic_config import TopicConfig


@pytest.mark.parametrize("write_buffer", [False, True])
def test_inner_base_matches_queue_offset_under_concurrent_puts(tmp_path: Path, write_buffer: bool) -> None:
    """Also with the write buffer: plain puts commit what is buffered before them, the commit
    service (every 5 ms here) and the flush thread commit concurrently with the putters."""
    cfg = StoreConfig(mapped_file_size_commit_log=1 << 20, mapped_file_size_consume_queue=20 * 1000,
                      mapper_file_size_batch_consume_queue=46 * 1000, max_hash_slot_num=64, max_index_num=2000,
                      transient_store_pool_enable=write_buffer, commit_interval_commit_log=5)
    store = MessageStore(tmp_path, cfg).open()
    store.topic_table.put(TopicConfig("B", 1, 1, attributes={"queue.type": "BatchCQ"}), 0)
    store.start()
    errors: list[str] = []

    def plain() -> None:
        for i in range(200):
            r = store.put_message(MessageInner("B", body=b"x" * 10, properties={"KEYS": f"p{i}"}))
            if not r.ok:
                errors.append(r.remark)

    def batches() -> None:
        body = encode_batch([BatchItem(b"y" * 10, {"KEYS": "b"}) for _ in range(5)])
        for _ in range(100):
            r = store.put_inner_batch(MessageInner("B", body=body, properties={"UNIQ_KEY": "U"}), 5)
            if not r.ok:
                errors.append(r.remark)

    threads = [threading.Thread(target=plain), threading.Thread(target=batches), threading.Thread(target=plain)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    try:
        assert store.commit_log.write_buffer == write_buffer
        assert not errors
        assert store.wait_for_dispatch()
        assert store.get_max_offset_in_queue("B", 0) == 2 * 200 + 100 * 5
        seen = 0
        for rec in store.iter_commit_log():
            inner_base = rec.get_property("INNER_BASE")
            if inner_base is not None:
                assert int(inner_base) == rec.queue_offset
                seen += 1
        assert seen == 100
        # every offset is covered exactly once by the BatchCQ units
        covered = [u.queue_offset for u in store.consume_queues[("B", 0)].iter_all_units()
                   for _ in range(u.batch_num)]
        units = list(store.consume_queues[("B", 0)].iter_all_units())
        expected = 0
        for u in units:
            assert u.queue_offset == expected
            expected += u.batch_num
        assert expected == len(covered) == 900
    finally:
        store.shutdown()
