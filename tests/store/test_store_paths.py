"""A store opened through a config whose commitlog directory is not the store's own."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from store_util import make_msg, small_config

from broker_core.store.errors import CommitLogMissingError
from broker_core.store.message_store import MessageStore


def tree(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("read_only", [False, True])
def test_a_commitlog_directory_that_holds_nothing_is_refused(tmp_path: Path, read_only: bool) -> None:
    """storePathCommitLog with a typo (or an unmounted disk): the writable open cut every consume queue
    to offset 0 and the next put began a new log there, the queues' units then pointing at the wrong
    records; a read-only open showed empty queues. It must refuse, name the directory, change nothing."""
    root = tmp_path / "store"
    store = MessageStore(root, small_config()).open()
    for i in range(3):
        assert store.put_message(make_msg("T", 0, f"m{i}".encode(), key=f"k{i}")).ok
    store.shutdown()
    before = tree(root)
    elsewhere = tmp_path / "nowhere" / "commitlog"
    with pytest.raises(CommitLogMissingError) as e:
        MessageStore(root, small_config(store_path_commit_log=str(elsewhere)), read_only=read_only).open()
    assert str(elsewhere) in str(e.value) and "queue T/0" in str(e.value) and "storePathCommitLog" in str(e.value)
    assert tree(root) == before and not elsewhere.exists()
    again = MessageStore(root, small_config(), read_only=True).open()
    try:
        assert [m.body for m in again.get_messages("T", 0, 0, 10).messages] == [b"m0", b"m1", b"m2"]
    finally:
        again.shutdown()


def test_a_new_store_with_its_commitlog_elsewhere_opens(tmp_path: Path) -> None:
    """The refusal is only for queues that point into a log: a fresh store with storePathCommitLog works."""
    root, elsewhere = tmp_path / "store", tmp_path / "disk2" / "commitlog"
    store = MessageStore(root, small_config(store_path_commit_log=str(elsewhere))).open()
    try:
        assert store.put_message(make_msg("T", 0, b"x")).ok
    finally:
        store.shutdown()
    assert any(elsewhere.iterdir())
