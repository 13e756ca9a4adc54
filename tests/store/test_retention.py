"""Retention (CleanCommitLogService): when commitlog files go, and what goes with them.

Why: deleting too early loses messages, too late fills the disk; and consume queue / index files
left pointing into deleted commitlog files would answer lookups with data that no longer exists.
Time, file mtimes and disk usage are injected, so nothing sleeps and no disk has to fill up.
"""

from __future__ import annotations

import time
from datetime import datetime
from pathlib import Path

import pytest
from store_util import FakeClock, make_msg, small_config

from broker_core.store.message_store import GetMessageStatus, MessageStore
from broker_core.store.retention import parse_delete_when
from tests.waiting import wait_for

HOUR = 3_600_000


def local_ms(hour: int, minute: int = 30) -> int:
    return int(datetime(2026, 11, 20, hour, minute).timestamp() * 1000)


def filled_store(root: Path, clock: FakeClock, n: int = 120, **over: object) -> MessageStore:
    store = MessageStore(root, small_config(**over), clock=clock).open()
    for i in range(n):
        assert store.put_message(make_msg("Ret", i % 2, b"r" * 300, key=f"r{i}")).ok
    return store


def ages(store: MessageStore, hours_old: list[float], now: int) -> None:
    """Give commitlog file k the age hours_old[k] (the last file is the one being written)."""
    mtimes = {mf.path.name: now - int(h * HOUR) for mf, h in zip(store.commit_log.file_queue.files, hours_old,
                                                                  strict=False)}
    store.retention.mtime_of = lambda p: mtimes.get(p.name, now)


def test_parse_delete_when() -> None:
    assert parse_delete_when("04") == {4}
    assert parse_delete_when("04;16; 23") == {4, 16, 23}
    assert parse_delete_when("x;25;") == set()


def test_expired_files_deleted_only_at_delete_when_hour(tmp_path: Path) -> None:
    clock = FakeClock(local_ms(3), step=0)
    store = filled_store(tmp_path, clock)
    store.retention.disk_usage = lambda p: 0.10
    try:
        files = [mf.path.name for mf in store.commit_log.file_queue.files]
        assert len(files) >= 8
        ages(store, [100, 90, 80, 10, 90, 100] + [0] * 20, clock.now)
        rep = store.delete_expired_files()
        assert rep.trigger == "" and not rep.deleted_any and len(store.commit_log.file_queue.files) == len(files)
        clock.now = local_ms(4)
        rep = store.delete_expired_files()
        # oldest first, stopping at the first file younger than fileReservedTime (72 h)
        assert rep.trigger == "time" and rep.deleted_commit_log_files == files[:3]
        assert store.get_min_phy_offset() == 3 * 4096 == rep.commit_log_min_offset
        assert not (tmp_path / "commitlog" / files[0]).exists()
        assert store.delete_expired_files().deleted_commit_log_files == []  # file 3 is only 10 h old
    finally:
        store.shutdown()


def test_disk_usage_triggers_and_forcible_clean(tmp_path: Path) -> None:
    clock = FakeClock(local_ms(13), step=0)
    store = filled_store(tmp_path, clock, delete_file_batch_max=2)
    try:
        n_files = len(store.commit_log.file_queue.files)
        ages(store, [100] * 4 + [1] * 30, clock.now)
        store.retention.disk_usage = lambda p: 0.80  # > diskMaxUsedSpaceRatio 75 %, < forcibly 85 %
        rep = store.delete_expired_files()
        assert rep.trigger == "disk" and not rep.clean_at_once and len(rep.deleted_commit_log_files) == 2
        rep = store.delete_expired_files()
        assert len(rep.deleted_commit_log_files) == 2  # deleteFileBatchMax per run
        assert store.delete_expired_files().deleted_commit_log_files == []  # the rest are young
        store.retention.disk_usage = lambda p: 0.90  # > diskSpaceCleanForciblyRatio: young files go too
        for _ in range(20):
            rep = store.delete_expired_files()
            assert rep.clean_at_once
        files = store.commit_log.file_queue.files
        assert len(files) == 1 and n_files > 1  # never the file being written
        assert store.put_message(make_msg("Ret", 0, b"still writable")).ok
    finally:
        store.shutdown()


def test_consume_queue_and_index_follow_the_commitlog(tmp_path: Path) -> None:
    clock = FakeClock(local_ms(4), step=1)
    store = filled_store(tmp_path, clock, n=160)
    store.retention.disk_usage = lambda p: 0.10
    try:
        cq = store.consume_queues[("Ret", 0)]
        cq_files_before = cq.file_count()
        idx_before = len(store.index_service.files)
        assert cq_files_before >= 5 and idx_before >= 3
        ages(store, [100] * 7 + [0] * 30, clock.now)
        rep = store.delete_expired_files()
        min_phy = store.get_min_phy_offset()
        assert len(rep.deleted_commit_log_files) == 7 and min_phy == 7 * 4096
        assert rep.deleted_consume_queue_files > 0 and rep.deleted_index_files > 0
        assert cq.file_count() < cq_files_before and len(store.index_service.files) < idx_before
        for f in store.index_service.files[:-1]:
            assert f.end_phy_offset >= min_phy
        for qid in (0, 1):
            q = store.consume_queues[("Ret", qid)]
            min_off = store.get_min_offset_in_queue("Ret", qid)
            first = q.get_unit(min_off)
            assert first.phy_offset >= min_phy
            assert q.get_unit(min_off - 1) is None or q.get_unit(min_off - 1).phy_offset < min_phy
            r = store.get_messages("Ret", qid, 0, 1)
            assert r.status is GetMessageStatus.OFFSET_TOO_SMALL and r.next_begin_offset == min_off
            r = store.get_messages("Ret", qid, min_off, 500)
            assert r.status is GetMessageStatus.FOUND
            assert [m.queue_offset for m in r.messages] == list(range(min_off, store.get_max_offset_in_queue("Ret",
                                                                                                           qid)))
        assert store.query_message("Ret", "r0") == []
        assert [m.keys for m in store.query_message("Ret", "r159")] == ["r159"]
    finally:
        store.shutdown()
    store = MessageStore(tmp_path, small_config(), clock=clock).open()  # the deletions survive a reopen
    try:
        assert store.get_min_phy_offset() == 7 * 4096
        assert store.get_min_offset_in_queue("Ret", 0) > 0
    finally:
        store.shutdown()


def test_flush_thread_runs_retention_every_clean_resource_interval(tmp_path: Path) -> None:
    clock = FakeClock(local_ms(4), step=0)
    store = filled_store(tmp_path, clock, clean_resource_interval=10_000, flush_interval_consume_queue=10)
    store.retention.disk_usage = lambda p: 0.10
    ages(store, [100] * 3 + [0] * 30, clock.now)
    store.start()
    try:
        # the first clock reading taken, or the advance below could come before it and not count
        wait_for(lambda: store._last_clean_ms is not None, "the flush thread's first retention round", 10, 0.005)
        assert store.get_min_phy_offset() == 0  # not yet: the interval has not passed on the store clock
        clock.advance(10_000)
        # one run deletes the three expired files one after another; wait for the run to finish
        wait_for(lambda: store.get_min_phy_offset() >= 3 * 4096, "the three expired files to be deleted", 10)
        assert store.get_min_phy_offset() == 3 * 4096
    finally:
        store.shutdown()


def test_read_only_store_refuses_retention(tmp_path: Path) -> None:
    clock = FakeClock(local_ms(4), step=1)
    filled_store(tmp_path, clock, n=5).shutdown()
    ro = MessageStore(tmp_path, small_config(), read_only=True).open()
    try:
        try:
            ro.delete_expired_files(force=True)
        except PermissionError:
            pass
        else:
            raise AssertionError("read-only store deleted files")
    finally:
        ro.shutdown()


def test_retention_beside_clean_expired_consume_queues_and_new_queues(tmp_path: Path) -> None:
    """Retention's pass over the queues ran beside mqadmin cleanExpiredCQ, which destroys the very
    queues that pass is trimming (those whose every message is gone): the pass read a released
    mapping, failed with ValueError and left the rest of the retention run undone. Now each queue
    is trimmed only while it is still the store's. Threads for a second and a half: topics written
    then left behind (SimpleCQ and BatchCQ), a writer rolling the commitlog, cleanExpiredCQ and
    forced retention runs; no thread may fail."""
    import threading
    import traceback

    from broker_core.store.codec.batch import BatchItem, encode_batch
    from broker_core.store.topic_config import TopicConfig

    store = MessageStore(tmp_path, small_config(mapped_file_size_commit_log=64 * 1024, file_reserved_time=0)).open()
    store.start()
    failures: list[str] = []
    until = time.monotonic() + 1.5

    def loop(step) -> None:  # noqa: ANN001
        while time.monotonic() < until:
            try:
                step()
            except Exception:  # noqa: BLE001 - the finding
                failures.append(traceback.format_exc())
                return

    made = [0]

    def abandoned_topics() -> None:  # each topic written once, then left to expire
        made[0] += 1
        topic = f"Left{made[0]}"
        if made[0] % 2:
            store.topic_table.put(TopicConfig(topic, 2, 2, attributes={"queue.type": "BatchCQ"}), 0)
        for i in range(40):
            if made[0] % 2:
                assert store.put_inner_batch(make_msg(topic, i % 2, encode_batch([BatchItem(b"b" * 50)] * 2)), 2).ok
            else:
                assert store.put_message(make_msg(topic, i % 2, b"s" * 50)).ok

    threads = [threading.Thread(target=loop, args=(step,)) for step in (
        abandoned_topics,
        lambda: store.put_message(make_msg("Roll", 0, b"r" * 4000)),
        store.clean_expired_consume_queues,
        lambda: store.delete_expired_files(force=True))]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not failures, failures[0]
        assert store.commit_log.min_offset() > 0, "retention never ran"
    finally:
        store.shutdown()


def test_a_read_racing_retention_skips_what_it_deleted(tmp_path: Path) -> None:
    """A consumer reading the oldest file while retention deletes it (a lagging consumer at 4 a.m.).
    The pull read the commitlog's min offset, then retention deleted the files under the units it was
    about to read: those records are gone like any below the min offset, and the pull goes on with the
    next ones. It used to fail with CorruptDataError ("expected a record ... found no data there"),
    reporting corruption where there was none."""
    clock = FakeClock(local_ms(4), step=1)
    store = filled_store(tmp_path, clock, n=160)
    store.retention.disk_usage = lambda p: 0.10
    real_read = store.commit_log.read_message
    deleted: list[str] = []

    def read_after_retention(*args, **kwargs):  # retention runs between the pull's min-offset read and this
        if not deleted:
            ages(store, [100] * 7 + [0] * 30, clock.now)
            deleted.extend(store.delete_expired_files().deleted_commit_log_files)
        return real_read(*args, **kwargs)

    try:
        store.commit_log.read_message = read_after_retention
        r = store.get_messages("Ret", 0, 0, 500)
        min_off = store.get_min_offset_in_queue("Ret", 0)
        assert len(deleted) == 7 and min_off > 0
        assert r.status is GetMessageStatus.FOUND
        assert [m.queue_offset for m in r.messages] == list(range(min_off, store.get_max_offset_in_queue("Ret", 0)))
    finally:
        store.commit_log.read_message = real_read
        store.shutdown()


def test_a_file_destroyed_while_read_stays_mapped_until_the_reader_lets_go(tmp_path: Path) -> None:
    """Retention (or cleanExpiredCQ) destroying a file a pull is reading: the reader's mapping stays
    valid until it is done (RocketMQ's reference-counted MappedFile), then goes. The destroy used to
    release the mapping under the reader: ValueError on a released memoryview in the pull."""
    clock = FakeClock(local_ms(4), step=1)
    store = filled_store(tmp_path, clock, n=160)
    try:
        queue = store.commit_log.file_queue
        first = queue.files[0]
        with queue.reading(first.file_from_offset) as held:
            assert held is first
            queue.delete_first_file()
            assert not first.path.exists()  # unlinked at once
            assert store.commit_log.read_message(first.file_from_offset) is None  # no new reader gets it
            assert bytes(held.mv[:4]) != b"\0\0\0\0"  # the reader still reads the first record's size
        with pytest.raises(ValueError):  # unmapped once the reader let go
            bytes(first.mv[:4])
    finally:
        store.shutdown()


def test_a_forced_run_goes_on_for_the_next_periodic_runs(tmp_path: Path) -> None:
    """mqadmin deleteExpiredCommitLog deleted one batch (deleteFileBatchMax) and stopped; RocketMQ counts
    that run and the next 19 of the clean service as manual, so a forced clean empties the backlog."""
    clock = FakeClock(local_ms(13), step=0)  # not a deleteWhen hour
    store = filled_store(tmp_path, clock, delete_file_batch_max=2)
    store.retention.disk_usage = lambda p: 0.10
    try:
        n_files = len(store.commit_log.file_queue.files)
        assert n_files >= 8
        ages(store, [100] * 30, clock.now)
        assert len(store.delete_expired_files(force=True).deleted_commit_log_files) == 2
        runs = [store.delete_expired_files() for _ in range(25)]
        assert [r.trigger for r in runs] == ["manual"] * 19 + [""] * 6
        assert sum(len(r.deleted_commit_log_files) for r in runs) == n_files - 1 - 2  # all but the written one
    finally:
        store.shutdown()


def test_over_the_forcible_ratio_files_go_whatever_disk_max_used_space_ratio_says(tmp_path: Path) -> None:
    """With diskMaxUsedSpaceRatio raised to 95, a disk 88 % full deleted nothing until 95 %; RocketMQ's
    isSpaceToDelete cleans at once above diskSpaceCleanForciblyRatio (85) on its own."""
    clock = FakeClock(local_ms(13), step=0)
    store = filled_store(tmp_path, clock, delete_file_batch_max=2, disk_max_used_space_ratio=95)
    try:
        ages(store, [1] * 30, clock.now)  # young files: only a forcible clean takes them
        store.retention.disk_usage = lambda p: 0.80
        assert store.delete_expired_files().trigger == ""  # below both: nothing is due
        store.retention.disk_usage = lambda p: 0.88
        rep = store.delete_expired_files()
        assert rep.trigger == "disk" and rep.clean_at_once and len(rep.deleted_commit_log_files) == 2
    finally:
        store.shutdown()


def test_clean_file_forcibly_disabled_deletes_only_expired_files_however_full(tmp_path: Path) -> None:
    """cleanFileForciblyEnable=false: above diskSpaceCleanForciblyRatio only expired files go (Apache's
    cleanAtOnce = isCleanFileForciblyEnable() && cleanImmediately); the unexpired ones were deleted."""
    clock = FakeClock(local_ms(13), step=0)
    store = filled_store(tmp_path, clock, clean_file_forcibly_enable=False)
    try:
        files = [mf.path.name for mf in store.commit_log.file_queue.files]
        ages(store, [100] * 2 + [1] * 30, clock.now)
        store.retention.disk_usage = lambda p: 0.97  # past forcibly (85 %) and the warning level (90 %)
        for _ in range(5):
            rep = store.delete_expired_files()
            assert rep.trigger == "disk" and not rep.clean_at_once
        assert [mf.path.name for mf in store.commit_log.file_queue.files] == files[2:]
        store.config.clean_file_forcibly_enable = True  # updateBrokerConfig: read at every run
        rep = store.delete_expired_files()
        assert rep.clean_at_once and rep.deleted_commit_log_files[:3] == files[2:5]  # the unexpired go now
    finally:
        store.shutdown()


def test_clean_file_forcibly_enable_is_a_listed_store_key(tmp_path: Path) -> None:
    from broker_core.broker.broker_config import BrokerConfig

    assert BrokerConfig().to_properties()["cleanFileForciblyEnable"] == "true"  # Apache's default
    conf = tmp_path / "broker.conf"
    conf.write_text("cleanFileForciblyEnable=false\n")
    cfg = BrokerConfig.load(conf, tmp_path / "store")
    assert cfg.store.clean_file_forcibly_enable is False
    assert cfg.to_properties()["cleanFileForciblyEnable"] == "false"
