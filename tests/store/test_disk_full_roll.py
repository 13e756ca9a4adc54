"""A put refused because the next commitlog file cannot be allocated changes nothing (no roll).

Why: the roll used to end the last file with its BLANK and create the next (sparse) file before
reserving that file's blocks. On a full disk the put was refused, but the BLANK stayed, an empty next
file stayed in the file queue and dispatch moved past the old file: it was no longer the file being
written, so the disk cleaner (forced on that full disk, diskSpaceCleanForciblyRatio) deleted it with
every message acknowledged in it. The next file is now prepared first and deleted again when the disk
cannot hold it; the old file stays the last one, which retention never deletes.

Runs on a small tmpfs and on a loop-mounted ext4 image (``small_fs``: root needed, else skipped).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from small_fs import fill_leaving
from store_util import make_msg, small_config

from broker_core.store.message_store import MessageStore
from broker_core.store.verify import verify_store

FILE_SIZE = 256 * 1024
BODY = b"r" * 1000


def _config():  # noqa: ANN202 - StoreConfig
    # physical limit only (no warning ratio), one CQ file for the whole test, the index never rolls
    return small_config(mapped_file_size_commit_log=FILE_SIZE, mapped_file_size_consume_queue=20 * 2000,
                        max_hash_slot_num=500, max_index_num=2000, disk_space_warning_level_ratio=100)


def _commit_log_names(root: Path) -> list[str]:
    return sorted(p.name for p in (root / "commitlog").iterdir())


@pytest.mark.parametrize("started", [False, True], ids=["dispatch-in-put", "reput-thread"])
def test_refused_roll_leaves_the_last_file_untouched_and_retention_keeps_it(small_fs: Path,
                                                                           started: bool) -> None:
    root = small_fs / "store"
    store = MessageStore(root, _config()).open()
    if started:
        store.start()
    acked: list[tuple[int, str]] = []
    try:
        for i in range(100):
            r = store.put_message(make_msg("Roll", 0, BODY, key=f"k{i}"))
            assert r.ok
            acked.append((r.queue_offset, f"k{i}"))
        fill_leaving(small_fs / "filler", 64 << 10)  # file 0's blocks are reserved whole already; a next file gets none
        refusal = None
        for i in range(100, 400):
            max_phy = store.get_max_phy_offset()
            r = store.put_message(make_msg("Roll", 0, BODY, key=f"k{i}"))
            if not r.ok:
                refusal = r
                break
            acked.append((r.queue_offset, f"k{i}"))
        assert refusal is not None, "file 0 never filled up"
        assert refusal.status.name == "SERVICE_NOT_AVAILABLE" and "disk full" in refusal.remark, refusal
        assert f"{FILE_SIZE:020d}" in refusal.remark, refusal.remark  # the next file could not be allocated
        # nothing changed: no BLANK at the write position, no next file (on disk or in the queue)
        cl = store.commit_log
        assert store.get_max_phy_offset() == max_phy < FILE_SIZE
        assert [mf.file_from_offset for mf in cl.file_queue.files] == [0]
        assert _commit_log_names(root) == [f"{0:020d}"]
        last = cl.file_queue.files[-1]
        assert last.wrote_position == max_phy
        assert bytes(last.mv[max_phy:max_phy + 8]) == bytes(8), "a BLANK end was written"
        if started:
            assert store.wait_for_dispatch(10)
        # the disk cleaner on this full disk (forced: above diskSpaceCleanForciblyRatio) keeps the file
        report = store.delete_expired_files()
        assert report.clean_at_once and report.deleted_commit_log_files == [], report
        for q, key in acked:
            assert store.get_messages("Roll", 0, q, 1).messages[0].keys == key
    finally:
        store.shutdown()
    # after a restart (read-only: the disk is still full) every acknowledged message is there
    ro = MessageStore(root, _config(), read_only=True).open()
    try:
        for q, key in acked:
            assert store_key(ro, q) == key
        rep = verify_store(ro)
        assert rep.ok and rep.records == len(acked), rep.issues[:3]
    finally:
        ro.shutdown()
    # space back: the roll happens, the refused put took no queue offset
    (small_fs / "filler").unlink()
    store = MessageStore(root, _config()).open()
    try:
        r = store.put_message(make_msg("Roll", 0, BODY, key="after"))
        assert r.ok and r.queue_offset == len(acked) and r.wrote_offset == FILE_SIZE, r
        assert _commit_log_names(root) == [f"{0:020d}", f"{FILE_SIZE:020d}"]
        assert store_key(store, 0) == "k0"
    finally:
        store.shutdown()


def store_key(store: MessageStore, queue_offset: int) -> str | None:
    """The KEYS of the message at ``queue_offset`` of Roll/0 (None when it is gone)."""
    got = store.get_messages("Roll", 0, queue_offset, 1).messages
    return got[0].keys if got else None
