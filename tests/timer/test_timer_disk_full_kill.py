"""A timer log roll a full disk refuses, then a kill: every timer message is delivered once.

Why: the enqueue moves ``curr_queue_offset`` unit by unit, but committed it (what the checkpoint
saves) only after the whole batch; the unit that needed a new timer log file raised DiskFullError and
the commit never happened, nor did the periodic flush of the checkpoint (the tick raised before it),
for as long as the disk stayed full. After a kill and a restart the messages wheeled since the
checkpoint (60 here, the tester's u-0..u-59) were wheeled and delivered a second time. Now the
enqueue commits what it wheeled before the failure and a failing tick still flushes when due.

Also: a timer log ending exactly on a file boundary (the last file closed with its BLANK) made the
recovery's revision of the queue offset give up, so a checkpoint ahead of the log (its next file lost)
was believed and the messages of the lost file were never wheeled again; the revision now finds the
last unit before the BLANK.

Runs on a small tmpfs and on a loop-mounted ext4 image (``small_fs``: root needed, else skipped).
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from small_fs import fill_leaving
from test_timer_message_store import T0, FakeClock, _config, _put_timer, _read_all

from broker_core.store.codec.timer_format import MIN_BLANK_LEN, UNIT_SIZE
from broker_core.store.mapped_file import DiskFullError
from broker_core.store.message_store import MessageStore
from broker_core.store.timer.timer_message_store import TimerMessageStore

LOG_FILE = 64 * 1024
UNITS_PER_FILE = (LOG_FILE - MIN_BLANK_LEN) // UNIT_SIZE  # 1260
BEFORE, AFTER = 1200, 100
DELAY_MS = 30_000


def _open(root: Path, clock: FakeClock) -> tuple[MessageStore, TimerMessageStore]:
    # puts are refused only by the physical limit; every file but the next timer log one fits
    cfg = _config(mapped_file_size_commit_log=1024 * 1024, mapped_file_size_consume_queue=20 * 4000,
                  mapped_file_size_timer_log=LOG_FILE, disk_space_warning_level_ratio=100)
    ms = MessageStore(root, cfg, clock=clock).open()
    return ms, TimerMessageStore(ms, clock=clock)


def _fill_file_zero_and_fail_the_roll(small_fs: Path, root: Path, clock: FakeClock
                                      ) -> tuple[MessageStore, TimerMessageStore]:
    """1200 timer messages wheeled and checkpointed; then, on a disk without room for a 64 KiB file,
    100 more: 60 fill timer log file 0, the 61st needs the next file and the tick fails."""
    ms, ts = _open(root, clock)
    for i in range(BEFORE):
        _put_timer(ms, clock, f"t-{i}", delay_ms=DELAY_MS)
    assert ts.tick().enqueued == BEFORE
    ts.flush()
    assert ts.timer_checkpoint.last_timer_queue_offset == BEFORE
    fill_leaving(small_fs / "filler", 16 << 10)
    for i in range(AFTER):
        _put_timer(ms, clock, f"u-{i}", delay_ms=DELAY_MS)
    with pytest.raises(DiskFullError):
        ts.tick()
    assert ts.curr_queue_offset == UNITS_PER_FILE  # units 1200..1259 went into file 0
    return ms, ts


def _deliver_all_after_restart(small_fs: Path, root: Path, clock: FakeClock) -> Counter[str]:
    """Space back, reopen, run the timer past the due time: how often each message was delivered."""
    (small_fs / "filler").unlink()
    ms, ts = _open(root, clock)
    try:
        clock.now += DELAY_MS + 5_000
        for _ in range(20):
            ts.tick()
            clock.now += 1_000
        return Counter(m.properties["UNIQ_KEY"] for m in _read_all(ms, "RealTopic"))
    finally:
        ts.shutdown()
        ms.shutdown()


def test_kill_after_a_failed_roll_delivers_each_timer_message_once(small_fs: Path) -> None:
    """The timer thread goes on failing (the disk stays full) for a few seconds, then a kill -9."""
    root, clock = small_fs / "store", FakeClock(T0)
    ms, ts = _fill_file_zero_and_fail_the_roll(small_fs, root, clock)
    for _ in range(30):  # 3 s of ticks, every 100 ms as the thread runs them
        clock.now += 100
        with pytest.raises(DiskFullError):
            ts.tick()
    ts.shutdown(flush=False)  # kill -9: the mapped timer log, wheel and checkpoint stay as they are
    ms.shutdown()
    delivered = _deliver_all_after_restart(small_fs, root, clock)
    assert len(delivered) == BEFORE + AFTER
    twice = sorted(k for k, n in delivered.items() if n > 1)
    assert twice == [], f"{len(twice)} delivered twice: {twice[:5]}"


def test_a_failed_enqueue_commits_what_it_wheeled_before(small_fs: Path) -> None:
    """A flush after the failed tick checkpoints the units wheeled before the failure."""
    root, clock = small_fs / "store", FakeClock(T0)
    ms, ts = _fill_file_zero_and_fail_the_roll(small_fs, root, clock)
    try:
        assert ts.commit_queue_offset == UNITS_PER_FILE
        ts.flush()
        assert ts.timer_checkpoint.last_timer_queue_offset == UNITS_PER_FILE
    finally:
        ts.shutdown(flush=False)
        ms.shutdown()
    delivered = _deliver_all_after_restart(small_fs, root, clock)
    assert len(delivered) == BEFORE + AFTER and set(delivered.values()) == {1}


def test_checkpoint_ahead_of_a_log_ending_on_a_file_boundary_is_revised(tmp_path: Path) -> None:
    """Timer log file 1 lost its data (a power cut; the file is there, all zeros) while the checkpoint
    names its units: the valid log now ends on the file boundary after file 0's BLANK (as after a
    roll a full disk refused), and recovery revises the queue offset down to the unit before the
    BLANK, so the lost units' messages are wheeled again. Before, it gave up there and believed the
    checkpoint: those messages were never delivered."""
    root, clock = tmp_path / "store", FakeClock(T0)
    ms, ts = _open(root, clock)
    for i in range(BEFORE + AFTER):
        _put_timer(ms, clock, f"m-{i}", delay_ms=DELAY_MS)
    assert ts.tick().enqueued == BEFORE + AFTER
    ts.flush()
    assert ts.timer_checkpoint.last_timer_queue_offset == BEFORE + AFTER
    ts.shutdown(flush=False)
    ms.shutdown()
    lost = root / "timerlog" / f"{LOG_FILE:020d}"
    with open(lost, "r+b") as f:  # its blocks lost, its (sparse) size kept: it holds zeros only
        f.truncate(0)
        f.truncate(LOG_FILE)
    ms, ts = _open(root, clock)
    try:
        assert ts.curr_queue_offset == UNITS_PER_FILE
        clock.now += DELAY_MS + 5_000
        for _ in range(20):
            ts.tick()
            clock.now += 1_000
        delivered = Counter(m.properties["UNIQ_KEY"] for m in _read_all(ms, "RealTopic"))
    finally:
        ts.shutdown()
        ms.shutdown()
    assert len(delivered) == BEFORE + AFTER, sorted(set(f"m-{i}" for i in range(BEFORE + AFTER)) - set(delivered))[:5]
