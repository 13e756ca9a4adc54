"""The golden store-timer written by Apache RocketMQ's TimerMessageStore, read with the timer file layer."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from broker_core.store.codec.hashing import java_string_hash
from broker_core.store.codec.timer_format import MAGIC_DEFAULT
from broker_core.store.timer import TimerCheckpoint, TimerLog, TimerWheel

TIMERLOG_FILE_SIZE = 16384  # settings.mappedFileSizeTimerLog of the golden store


@pytest.fixture
def store(golden_copy) -> Path:
    return golden_copy("store-timer")


@pytest.fixture
def manifest(manifests) -> dict:
    return manifests["store-timer"]


def _pending(manifest: dict) -> list[dict]:
    delivered = {d["uniqKey"] for d in manifest["deliveredToRealTopic"]}
    return [m for m in manifest["messages"] if m["uniqKey"] not in delivered]


def test_checkpoint_matches_manifest(store: Path, manifest: dict) -> None:
    expect = manifest["timerCheckpointAfterShutdown"]
    for read_only in (True, False):
        cp = TimerCheckpoint(store / "config" / "timercheck", read_only=read_only)
        try:
            assert cp.last_read_time_ms == expect["lastReadTimeMs"]
            assert cp.last_timer_log_flush_pos == expect["lastTimerLogFlushPos"]
            assert cp.last_timer_queue_offset == expect["lastTimerQueueOffset"]
            assert cp.master_timer_queue_offset == expect["masterTimerQueueOffset"]
            assert cp.data_version_counter > 0 and cp.data_version_timestamp > 0
        finally:
            cp.close(flush=False)
    state = manifest["timerStateBeforeShutdown"]
    assert expect["lastReadTimeMs"] == state["commitReadTimeMs"]
    assert expect["lastTimerQueueOffset"] == state["commitQueueOffset"]


def test_timerlog_units_match_messages(store: Path, manifest: dict) -> None:
    with TimerLog(store / "timerlog", file_size=TIMERLOG_FILE_SIZE, read_only=True) as log:
        assert log.max_offset == manifest["timerStateBeforeShutdown"]["timerLogMaxOffset"]
        assert log.max_offset == manifest["timerCheckpointAfterShutdown"]["lastTimerLogFlushPos"]
        units = list(log.iterate())
    msgs = sorted(manifest["messages"], key=lambda m: m["queueOffset"])
    assert len(units) == len(msgs) == 10
    assert [p for p, _ in units] == [52 * i for i in range(10)]
    for (_pos, unit), msg in zip(units, msgs, strict=True):
        assert (unit.offset_py, unit.size_py) == (msg["physicalOffset"], msg["size"])
        assert msg["topic"] == manifest["timerTopic"] == "rmq_sys_wheel_timer"
        assert unit.magic == MAGIC_DEFAULT  # no delay reaches the 2-day roll window, no deletes
        assert unit.delivery_ms == msg["timerOutMs"] == int(msg["properties"]["TIMER_OUT_MS"])
        assert unit.topic_hash == java_string_hash(msg["realTopic"])
        assert unit.curr_write_time_ms % 1000 == 0 and unit.reserved == 0


def test_pending_messages_found_through_wheel_chains(store: Path, manifest: dict) -> None:
    pending = _pending(manifest)
    assert len(pending) == 6
    read_time = manifest["timerCheckpointAfterShutdown"]["lastReadTimeMs"]
    with TimerWheel(store / "timerwheel", read_only=True) as wheel, \
            TimerLog(store / "timerlog", file_size=TIMERLOG_FILE_SIZE, read_only=True) as log:
        for msg in pending:
            out_ms = msg["timerOutMs"]
            assert out_ms >= read_time  # not yet due when the broker stopped
            slot = wheel.get_slot(out_ms)
            assert slot.time_ms == out_ms and slot.num >= 1
            chain = []
            chain_pos = []
            pos = slot.last_pos
            while pos != -1:
                unit = log.read_unit(pos)
                chain.append(unit)
                chain_pos.append(pos)
                pos = unit.prev_pos
            assert chain and all(u.delivery_ms == out_ms for u in chain)
            found = [u for u in chain if u.offset_py == msg["physicalOffset"]]
            assert len(found) == 1 and found[0].size_py == msg["size"]
            assert found[0].curr_write_time_ms + found[0].delayed_time == out_ms
            assert chain_pos[-1] == slot.first_pos and chain[-1].prev_pos == -1
            assert len(chain) == slot.num  # no deletes in this store
        # the live count over the wheel window starting at the read pointer is exactly the backlog
        assert wheel.get_all_num(read_time) == 6
        assert sorted(s.time_ms for _, s in wheel.iter_slots(read_time)) == sorted(m["timerOutMs"] for m in pending)


def test_slot_with_two_units_chains_back(store: Path, manifest: dict) -> None:
    # messages 1 and 2 share TIMER_OUT_MS 1795318699000: slot first=52, last=104, 104.prevPos = 52
    shared = [m for m in manifest["messages"] if m["timerOutMs"] == 1795318699000]
    assert len(shared) == 2
    with TimerWheel(store / "timerwheel", read_only=True) as wheel, \
            TimerLog(store / "timerlog", file_size=TIMERLOG_FILE_SIZE, read_only=True) as log:
        slot = wheel.get_slot(1795318699000)
        assert (slot.first_pos, slot.last_pos, slot.num) == (52, 104, 2)
        assert log.read_unit(104).prev_pos == 52 and log.read_unit(52).prev_pos == -1
        assert {log.read_unit(52).offset_py, log.read_unit(104).offset_py} == {m["physicalOffset"] for m in shared}


def test_read_only_open_leaves_files_untouched(store: Path) -> None:
    files = [store / "timerwheel", store / "timerlog" / "00000000000000000000", store / "config" / "timercheck"]
    before = [hashlib.sha256(p.read_bytes()).hexdigest() for p in files]
    with TimerWheel(store / "timerwheel", read_only=True) as w, \
            TimerLog(store / "timerlog", file_size=TIMERLOG_FILE_SIZE, read_only=True) as log:
        w.flush()
        log.flush()
    TimerCheckpoint(store / "config" / "timercheck", read_only=True).close()
    assert [hashlib.sha256(p.read_bytes()).hexdigest() for p in files] == before


def test_writable_open_appends_after_golden_units(store: Path, manifest: dict) -> None:
    with TimerLog(store / "timerlog", file_size=TIMERLOG_FILE_SIZE) as log:
        assert log.recover(0) == 520
        pos = log.append_unit(-1, MAGIC_DEFAULT, 1795318704000, 5000, 9999, 100, 0)
        assert pos == 520
    with TimerLog(store / "timerlog", file_size=TIMERLOG_FILE_SIZE, read_only=True) as log:
        assert [u.offset_py for _, u in log.iterate()][-2:] == [3656, 9999]
