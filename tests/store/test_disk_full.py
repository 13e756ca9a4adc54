"""A full disk refuses writes with a clear error and never kills the process (issue 11 item 3).

Why: the writer died with SIGBUS in the mapped copy (and in the fallback after a short pwritev), and
on a full tmpfs even opening a store died. Mapped files now get their disk blocks before any write
(posix_fallocate: whole consume queue and index files when created, the commitlog ahead of its write
position; the index file a roll needs before the put that needs it is accepted), puts are refused
with "disk full" at diskSpaceWarningLevelRatio or the physical limit, reads and verifyStore keep
working, and no stored message is reported as failed.

Each test runs on a small tmpfs and on a loop-mounted ext4 image that it mounts itself (root and
mkfs.ext4 needed; otherwise it is skipped, saying why) and always unmounts.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from disk_full_writer import config
from small_fs import fill
from store_util import make_msg, small_config

from broker_core.store.message_store import MessageStore
from broker_core.store.verify import verify_store

HERE = Path(__file__).resolve().parent


@pytest.mark.parametrize("ratio", [90, 100], ids=["warning-ratio", "physical-limit"])
def test_full_disk_refuses_cleanly_and_keeps_every_ack(small_fs: Path, ratio: int) -> None:
    root = small_fs / "store"
    env = dict(os.environ, PYTHONPATH=str(HERE.parents[1]))
    res = subprocess.run([sys.executable, str(HERE / "disk_full_writer.py"), str(root), str(ratio)],
                         capture_output=True, text=True, env=env, timeout=120)
    assert res.returncode == 0, f"writer ended with {res.returncode}: {res.stderr[-2000:]}"
    lines = res.stdout.splitlines()
    acks = [ln.split() for ln in lines if ln.startswith("ack ")]
    refusals = [ln for ln in lines if ln.startswith("refused ")]
    assert acks and len(refusals) == 5
    assert all("SERVICE_NOT_AVAILABLE disk full" in r for r in refusals), refusals[:2]
    assert not any("disk full: disk full" in r for r in refusals), refusals[:2]  # said once
    assert lines[-1] == f"read {len(acks)}"  # reads worked on the full disk, every ack included
    # reopen read-only on the still full disk: every acknowledged message by queue and by key
    store = MessageStore(root, config(ratio), read_only=True).open()
    try:
        for _, topic, qid, off, key in acks:
            got = store.get_messages(topic, int(qid), int(off), 1).messages
            assert got and got[0].keys == key, (topic, qid, off, key)
        for _, topic, _qid, _off, key in acks:
            assert [m.keys for m in store.query_message(topic, key)] == [key]
        rep = verify_store(store)  # read-only verifyStore works on the full disk and finds nothing wrong
        assert rep.ok and rep.records == len(acks), rep.issues[:3]
    finally:
        store.shutdown()
    # mqadmin verifyStore (a read-only Broker over the store) on the still full disk: answers, all OK
    conf = small_fs.parent / "store.properties"
    conf.write_text("mappedFileSizeCommitLog=262144\nmappedFileSizeConsumeQueue=320\n"
                    "mapperFileSizeBatchConsumeQueue=368\nmaxHashSlotNum=64\nmaxIndexNum=64\n")
    res = subprocess.run([sys.executable, "-m", "mqadmin.app", "verifyStore", "--store", str(root), "--config",
                          str(conf), "--output", "json"], capture_output=True, text=True, timeout=120,
                         env=dict(env, NAMESRV_ADDR="", RMQ_STORE=""))
    assert res.returncode == 0, res.stderr[-2000:]
    assert json.loads(res.stdout)["ok"] is True
    # a writable open on the full disk does not die either: it opens or says why in one line
    code = ("import sys\nfrom disk_full_writer import config\nfrom broker_core.store.message_store import MessageStore\n"
            f"s = MessageStore({str(root)!r}, config({ratio})).open()\n"
            "print(len(s.get_messages('DiskA', 0, 0, 10).messages))\ns.shutdown()")
    env["PYTHONPATH"] += os.pathsep + str(HERE)
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60)
    assert res.returncode in (0, 1), res.stderr[-2000:]
    if res.returncode == 1:
        assert "No space" in res.stderr or "disk full" in res.stderr


def test_single_puts_are_refused_past_disk_space_warning_level_ratio(tmp_path: Path, monkeypatch) -> None:
    """Every write path checks diskSpaceWarningLevelRatio, the single put too (its flat fast path once
    skipped the check and wrote on until ENOSPC). A full disk refuses the put, a freed one accepts again."""
    from collections import namedtuple

    from store_util import make_msg, small_config

    from broker_core.store import message_store
    from broker_core.store.commit_log import PutMessageStatus

    usage = namedtuple("usage", "total used free")
    state = {"used": 10}
    monkeypatch.setattr(shutil, "disk_usage", lambda p: usage(100, state["used"], 100 - state["used"]))
    clock = [0.0]
    monkeypatch.setattr(message_store, "_monotonic", lambda: clock[0])
    store = MessageStore(tmp_path, small_config(disk_space_warning_level_ratio=90)).open()
    try:
        assert store.put_message(make_msg("D", 0, b"x")).ok
        state["used"] = 95
        clock[0] += 1.0  # past DISK_CHECK_INTERVAL_S: the next put samples the disk
        r = store.put_message(make_msg("D", 0, b"y"))
        assert r.status is PutMessageStatus.SERVICE_NOT_AVAILABLE and "disk full" in r.remark
        assert store.get_max_offset_in_queue("D", 0) == 1
        state["used"] = 50
        clock[0] += 1.0
        assert store.put_message(make_msg("D", 0, b"z")).ok
        assert store.get_max_offset_in_queue("D", 0) == 2
    finally:
        store.shutdown()


def _index_config():  # noqa: ANN202 - StoreConfig
    # ~1.2 MB index files of 99 entries, and consume queue files that do not roll in this test
    return small_config(mapped_file_size_commit_log=256 * 1024, mapped_file_size_consume_queue=20 * 1000,
                        max_hash_slot_num=300_000, max_index_num=100, disk_space_warning_level_ratio=100,
                        disk_max_used_space_ratio=95)


@contextmanager
def _store_filled_after_one_put(small_fs: Path, started: bool, topic: str) -> Iterator[MessageStore]:
    """A store (started: with its reput thread) holding one dispatched message of ``topic`` (key
    "first"), on a disk then filled; shut down at the end, and the read-only store verified."""
    root = small_fs / "store"
    store = MessageStore(root, _index_config()).open()
    if started:
        store.start()
    try:
        assert store.put_message(make_msg(topic, 0, b"first", key="first")).ok
        assert store.wait_for_dispatch(10)
        fill(small_fs / "filler")
        yield store
    finally:
        store.shutdown()
    ro = MessageStore(root, _index_config(), read_only=True).open()
    try:
        assert verify_store(ro).ok
    finally:
        ro.shutdown()


def test_index_file_the_disk_cannot_hold_refuses_the_put_and_changes_nothing(small_fs: Path) -> None:
    """The index file a roll needs is created (all blocks reserved) before the put that needs it is
    accepted: on a full disk that put is refused with "disk full" and nothing changes; every acked
    message stays findable by queue and key. Before, the file was made at dispatch, after the ack:
    the put raised a raw DiskFullError though its record was stored."""
    root = small_fs / "store"
    store = MessageStore(root, _index_config()).open()
    acked: list[tuple[int, str]] = []
    try:
        for i in range(5):
            r = store.put_message(make_msg("Idx", 0, b"x" * 100, key=f"ik{i}"))
            assert r.ok
            acked.append((r.queue_offset, f"ik{i}"))
        fill(small_fs / "filler")
        refusal = None
        for i in range(5, 200):
            index_files = sorted(p.name for p in (root / "index").iterdir())
            max_phy, max_q = store.get_max_phy_offset(), store.get_max_offset_in_queue("Idx", 0)
            r = store.put_message(make_msg("Idx", 0, b"x" * 100, key=f"ik{i}"))
            if not r.ok:
                refusal = r
                break
            acked.append((r.queue_offset, f"ik{i}"))
        assert refusal is not None and refusal.status.name == "SERVICE_NOT_AVAILABLE", refusal
        assert "disk full" in refusal.remark and "index" in refusal.remark, refusal.remark
        # nothing changed: no bytes, no queue offset, no half-made index file
        assert store.get_max_phy_offset() == max_phy and store.get_max_offset_in_queue("Idx", 0) == max_q
        assert sorted(p.name for p in (root / "index").iterdir()) == index_files
        assert len(acked) > 50  # the last index file filled up to its margin first
        for q, key in acked:
            assert store.get_messages("Idx", 0, q, 1).messages[0].keys == key
            assert [m.keys for m in store.query_message("Idx", key)] == [key]
        (small_fs / "filler").unlink()
        r = store.put_message(make_msg("Idx", 0, b"after", key="after"))
        assert r.ok and r.queue_offset == max_q  # the refused put took no offset
        assert [m.body for m in store.query_message("Idx", "after")] == [b"after"]
    finally:
        store.shutdown()
    ro = MessageStore(root, _index_config(), read_only=True).open()
    try:
        assert verify_store(ro).ok
    finally:
        ro.shutdown()


@pytest.mark.parametrize("started", [False, True], ids=["dispatch-in-put", "reput-thread"])
def test_stored_message_whose_index_file_cannot_be_made_is_acked_and_indexed_later(small_fs: Path,
                                                                                  started: bool) -> None:
    """A record with more keys than a whole index file holds needs a file at dispatch that the put
    could not reserve beforehand. On a full disk its append succeeded: the put is acknowledged (never
    reported failed), it is readable by queue at once, dispatch waits at it (later puts are refused
    meanwhile, as their keys cannot be indexed either), and once space is back every key is indexed."""
    with _store_filled_after_one_put(small_fs, started, "Idx") as store:
        many = " ".join(f"m{j}" for j in range(150))  # > 99 entries: two rolls at dispatch
        r = store.put_message(make_msg("Idx", 0, b"many", key=many))
        assert r.ok and r.queue_offset == 1  # stored, so acknowledged
        deadline = time.monotonic() + 10
        while not store.get_messages("Idx", 0, 1, 1).messages:  # its unit is written before the index
            assert time.monotonic() < deadline
            time.sleep(0.01)
        assert store.get_messages("Idx", 0, 1, 1).messages[0].body == b"many"
        assert not store.wait_for_dispatch(0.2)  # dispatch waits at the record while the disk is full
        later = store.put_message(make_msg("Idx", 0, b"later", key="later"))
        assert not later.ok and "disk full" in later.remark
        (small_fs / "filler").unlink()
        assert store.wait_for_dispatch(10)
        for j in (0, 98, 99, 149):
            assert [m.body for m in store.query_message("Idx", f"m{j}")] == [b"many"], j
        assert store.put_message(make_msg("Idx", 0, b"later", key="later")).queue_offset == 2


def test_every_put_path_is_refused_past_disk_space_warning_level_ratio(small_fs: Path) -> None:
    """diskSpaceWarningLevelRatio refuses single puts too (before, only batches checked it: the single
    put's fast path skipped the check, so a disk past the ratio kept taking messages)."""
    root = small_fs / "store"
    cfg = small_config(disk_space_warning_level_ratio=50, disk_max_used_space_ratio=50)
    store = MessageStore(root, cfg).open()
    try:
        assert store.put_message(make_msg("Ratio", 0, b"before")).ok
        du = shutil.disk_usage(small_fs)
        with open(small_fs / "filler", "wb") as f:
            f.truncate(0)
            f.write(bytes(int((du.used + du.free) * 0.7) - du.used))
        time.sleep(0.6)  # the disk is sampled every 0.5 s
        for r in (store.put_message(make_msg("Ratio", 0, b"over")),
                  store.put_messages([make_msg("Ratio", 0, b"over")])):
            assert r.status.name == "SERVICE_NOT_AVAILABLE" and "diskSpaceWarningLevelRatio" in r.remark, r
        assert store.get_max_offset_in_queue("Ratio", 0) == 1
        (small_fs / "filler").unlink()
        time.sleep(0.6)
        assert store.put_message(make_msg("Ratio", 0, b"after")).queue_offset == 1
    finally:
        store.shutdown()


def test_the_timer_on_a_full_disk_refuses_instead_of_dying(small_fs: Path) -> None:
    """A Broker's timer wheel (38 MB, sparse) and timer log on a filesystem that fills up. A write into
    a hole of either mapping with no block left, or on tmpfs even a read of one (the wheel's scan at
    open), was SIGBUS: the broker died at open on a small tmpfs, and when the disk filled on ext4.
    Pages now get their blocks before their first write and holes are read with pread.

    The send's congestion check (timerCongestNumEachSlot) read the slot of a new delayed message
    through the mapping: on a full tmpfs, the first delayed message due in a wheel page nothing had
    touched killed the broker with SIGBUS (a probe's mqbroker exited -7) instead of being refused."""
    env = dict(os.environ, PYTHONPATH=str(HERE.parents[1]))
    res = subprocess.run([sys.executable, str(HERE / "disk_full_timer_writer.py"), str(small_fs / "store")],
                         capture_output=True, text=True, env=env, timeout=300)
    assert res.returncode == 0, f"writer ended with {res.returncode}: {res.stderr[-2000:]}"
    lines = res.stdout.splitlines()
    figures = dict(line.split() for line in lines if line != "closed" and not line.startswith("far-"))
    assert lines[-1] == "closed"
    assert int(figures["delayed"]) > 0 and int(figures["refused"]) == 20
    far = next(line for line in lines if line.startswith("far-delayed"))
    # refused for want of space, or stored where ext4 still had the commitlog's reserved blocks for it
    assert far == "far-delayed stored" or far.startswith("far-delayed refused") and "disk full" in far, far


def test_a_new_store_on_a_full_disk_names_its_lock_file_and_holds_no_lock(small_fs: Path) -> None:
    """The lock file could be created but not written: the refusal was a bare "[Errno 28] No space left
    on device", and the failed open kept the lock (its descriptor was never closed), so no other process
    (a broker, an mqadmin) could open the store while this one lived, even once there was room."""
    fill(small_fs / "filler")
    root = small_fs / "new"
    with pytest.raises(OSError) as refused:
        MessageStore(root, small_config()).open()
    # ext4 has no block left for the store's directory; tmpfs makes it and the lock file, not its byte
    assert str(refused.value) in (f"[Errno 28] No space left on device: '{root / 'lock'}'",
                                  f"[Errno 28] No space left on device: '{root}'")
    (small_fs / "filler").unlink()
    other = subprocess.run([sys.executable, "-c", "import sys; from pathlib import Path; "
                            "from broker_core.store.store_lock import is_store_locked; "
                            "print(is_store_locked(Path(sys.argv[1])))", str(root)],
                           capture_output=True, text=True, timeout=60, env=dict(os.environ, PYTHONPATH=str(HERE.parents[1])))
    assert other.stdout.strip() == "False", other.stderr
    store = MessageStore(root, small_config()).open()
    store.shutdown()


@pytest.mark.parametrize("started", [False, True], ids=["dispatch-in-put", "reput-thread"])
def test_puts_are_refused_while_dispatch_waits_for_a_consume_queue_file_the_disk_cannot_hold(
        small_fs: Path, started: bool) -> None:
    """A put to a queue that has no consume queue file yet is stored (its commitlog blocks were
    reserved) and acknowledged, but on a full disk dispatch cannot make the queue's file and waits at
    it. Later puts, to any queue, are refused while it waits (they could not be consumed either: a
    probe saw five sends acknowledged on a full disk and none readable) and taken again once space is
    back, when the waiting record is dispatched too."""
    with _store_filled_after_one_put(small_fs, started, "Cq") as store:
        waiting = store.put_message(make_msg("Cq", 1, b"new-queue", key="new-queue"))
        assert waiting.ok and waiting.queue_offset == 0  # stored, so acknowledged
        assert not store.wait_for_dispatch(0.3)  # no file for queue 1: dispatch waits at the record
        for queue_id in (0, 1):
            later = store.put_message(make_msg("Cq", queue_id, b"later", key="later"))
            assert later.status == "SERVICE_NOT_AVAILABLE", later
            assert "dispatch waits at commitlog offset" in later.remark and "disk full" in later.remark, later.remark
        assert not store.put_messages([make_msg("Cq", 0, b"b1"), make_msg("Cq", 0, b"b2")]).ok
        assert store.get_messages("Cq", 0, 1, 4).messages == []  # nothing of the refused puts is in queue 0
        (small_fs / "filler").unlink()
        deadline = time.monotonic() + 10
        while not (r := store.put_message(make_msg("Cq", 0, b"after", key="after"))).ok:
            assert time.monotonic() < deadline, r
            time.sleep(0.05)
        assert r.queue_offset == 1
        assert store.wait_for_dispatch(10)
        assert [m.body for m in store.get_messages("Cq", 1, 0, 4).messages] == [b"new-queue"]
        assert [m.body for m in store.query_message("Cq", "new-queue")] == [b"new-queue"]
        assert [m.body for m in store.query_message("Cq", "later")] == []
