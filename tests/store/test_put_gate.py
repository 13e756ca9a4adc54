"""put_message's and put_inner_batch's sampled writable check (``MessageStore._put_checked_until``).

Why: the single put checks "open, writable, disk below diskSpaceWarningLevelRatio" only when its
last pass is DISK_CHECK_INTERVAL_S old (one clock read a put otherwise, issue 17). A pass must not
outlive the state it vouched for: a put right after ``shutdown`` (well within the interval) is
refused and writes nothing, on both hot-path implementations; a store opened read-only refuses
every put. The inner-batch put shares the gate: the same after a shutdown, with and without the
write buffer.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from store_util import make_msg, small_config

from broker_core.store.codec.batch import BatchItem, encode_batch
from broker_core.store.commit_log import PutMessageStatus
from broker_core.store.message_store import MessageStore
from broker_core.store.topic_config import TopicConfig


def test_put_right_after_shutdown_is_refused_and_writes_nothing(tmp_path: Path) -> None:
    store = MessageStore(tmp_path, small_config()).open()
    assert store.put_message(make_msg("Gate", 0, b"a", key="k1")).ok  # the check passed just now
    store.shutdown()
    r = store.put_message(make_msg("Gate", 0, b"b", key="k2"))
    assert r.status is PutMessageStatus.SERVICE_NOT_AVAILABLE and "not open" in r.remark
    reopened = MessageStore(tmp_path, small_config()).open()
    try:
        assert reopened.get_max_offset_in_queue("Gate", 0) == 1
        assert reopened.query_message("Gate", "k2") == []
        assert len(reopened.query_message("Gate", "k1")) == 1
    finally:
        reopened.shutdown()


def test_read_only_store_refuses_every_put(tmp_path: Path) -> None:
    store = MessageStore(tmp_path, small_config()).open()
    assert store.put_message(make_msg("Gate", 0, b"a")).ok
    store.shutdown()
    ro = MessageStore(tmp_path, small_config(), read_only=True).open()
    try:
        for body in (b"b", b"c"):
            r = ro.put_message(make_msg("Gate", 0, body))
            assert r.status is PutMessageStatus.SERVICE_NOT_AVAILABLE and "read-only" in r.remark
        assert ro.get_max_offset_in_queue("Gate", 0) == 1
    finally:
        ro.shutdown()


@pytest.mark.parametrize("write_buffer", [False, True], ids=["direct", "write-buffer"])
def test_inner_batch_put_right_after_shutdown_is_refused_and_writes_nothing(tmp_path: Path,
                                                                            write_buffer: bool) -> None:
    cfg = small_config()
    cfg.transient_store_pool_enable = write_buffer
    store = MessageStore(tmp_path, cfg).open()
    store.topic_table.put(TopicConfig("GateB", 1, 1, attributes={"queue.type": "BatchCQ"}), 0)
    body = encode_batch([BatchItem(b"x" * 100, {})] * 4)

    def batch(key: str):
        return make_msg("GateB", 0, body, key=key)

    for i in range(3):  # the check passed just now
        assert store.put_inner_batch(batch(f"k{i}"), 4).ok
    store.shutdown()
    r = store.put_inner_batch(batch("late"), 4)
    assert r.status is PutMessageStatus.SERVICE_NOT_AVAILABLE and "not open" in r.remark
    reopened = MessageStore(tmp_path, cfg).open()
    try:
        assert reopened.get_max_offset_in_queue("GateB", 0) == 12
        assert reopened.query_message("GateB", "late") == []
        assert len(reopened.query_message("GateB", "k2")) == 1
    finally:
        reopened.shutdown()
