"""put_message's sampled writable check (``MessageStore._put_checked_until``).

Why: the single put checks "open, writable, disk below diskSpaceWarningLevelRatio" only when its
last pass is DISK_CHECK_INTERVAL_S old (one clock read a put otherwise, issue 17). A pass must not
outlive the state it vouched for: a put right after ``shutdown`` (well within the interval) is
refused and writes nothing, on both hot-path implementations; a store opened read-only refuses
every put.
"""

from __future__ import annotations

from pathlib import Path

from store_util import make_msg, small_config

from broker_core.store.commit_log import PutMessageStatus
from broker_core.store.message_store import MessageStore


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
