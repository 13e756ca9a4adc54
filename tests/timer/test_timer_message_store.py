"""The timer service end to end over a real MessageStore, driven by a fake clock (no sleeping)."""

from __future__ import annotations

import base64
import random
import time
from pathlib import Path

import pytest

from broker_core.store.codec.message import MessageExt, MessageInner
from broker_core.store.codec.timer_format import MAGIC_DELETE, MAGIC_ROLL
from broker_core.store.message_store import MessageStore
from broker_core.store.store_config import StoreConfig
from broker_core.store.timer import TIMER_TOPIC, build_delete_key, convert_to_timer_message
from broker_core.store.timer.timer_message_store import LONG_MAX, TimerMessageStore

T0 = 1_800_000_000_000
DAY = 86_400_000


class FakeClock:
    def __init__(self, now: int) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


def _config(**kw) -> StoreConfig:
    base = {"mapped_file_size_commit_log": 16 * 1024 * 1024, "mapped_file_size_consume_queue": 20 * 20_000,
            "message_index_enable": False, "mapped_file_size_timer_log": 64 * 1024}
    base.update(kw)
    return StoreConfig(**base)


def _open(root: Path, clock: FakeClock, **kw) -> tuple[MessageStore, TimerMessageStore]:
    ms = MessageStore(root, _config(**kw), clock=clock).open()  # not started: dispatch is synchronous
    return ms, TimerMessageStore(ms, clock=clock)


def _put_timer(ms: MessageStore, clock: FakeClock, uniq: str, *, delay_ms: int | None = None,
               deliver_ms: int | None = None, topic: str = "RealTopic", queue_id: int = 0,
               extra: dict[str, str] | None = None) -> MessageInner:
    props = {"UNIQ_KEY": uniq, "TAGS": "t"}
    if delay_ms is not None:
        props["TIMER_DELAY_MS"] = str(delay_ms)
    if deliver_ms is not None:
        props["TIMER_DELIVER_MS"] = str(deliver_ms)
    props.update(extra or {})
    msg = MessageInner(topic=topic, body=f"body-{uniq}".encode(), properties=props, queue_id=queue_id,
                       born_timestamp=clock.now, born_host=("10.0.0.7", 40000))
    converted = convert_to_timer_message(msg, clock.now, 1000)
    assert converted is not None
    assert ms.put_message(converted).ok
    return converted


def _read_all(ms: MessageStore, topic: str, queue_id: int = 0) -> list[MessageExt]:
    res = ms.get_messages(topic, queue_id, 0, 1_000_000)
    return res.messages


# ---------------------------------------------------------------------------------------------
# golden: the six messages Apache RocketMQ left pending in store-timer


def _golden_config(manifest: dict, root: Path) -> StoreConfig:
    props = {k: (str(v).lower() if isinstance(v, bool) else str(v)) for k, v in manifest["settings"].items()}
    return StoreConfig.from_properties(props, root=root)


def test_golden_pending_messages_are_delivered(golden_copy, manifests) -> None:
    manifest = manifests["store-timer"]
    root = golden_copy("store-timer")
    checkpoint = manifest["timerCheckpointAfterShutdown"]
    delivered_before = {d["uniqKey"] for d in manifest["deliveredToRealTopic"]}
    pending = sorted((m for m in manifest["messages"] if m["uniqKey"] not in delivered_before),
                     key=lambda m: (m["timerOutMs"], m["queueOffset"]))
    assert len(pending) == 6
    clock = FakeClock(checkpoint["lastReadTimeMs"] + 5_000)  # the broker comes back 5 s later
    ms = MessageStore(root, _golden_config(manifest, root), clock=clock).open()
    ts = TimerMessageStore(ms, clock=clock)
    try:
        assert ts.curr_queue_offset == checkpoint["lastTimerQueueOffset"] == 10
        assert ts.curr_read_time_ms == checkpoint["lastReadTimeMs"]
        assert ts.timer_log.max_offset == checkpoint["lastTimerLogFlushPos"]
        assert ts.get_all_congest_num() == 6
        before = {q: ms.get_max_offset_in_queue("GoldenTimerTopic", q) for q in (0, 1)}
        assert before == {0: 2, 1: 2}
        assert ts.tick().delivered == 0  # nothing due yet, nothing re-enqueued
        seen: list[dict] = []
        for m in pending:
            out_ms = m["timerOutMs"]
            clock.now = out_ms + 999  # the slot fires only once the write pointer is past it
            assert ts.tick().delivered == 0
            clock.now = out_ms + 1000
            result = ts.tick()
            assert result.delivered == 1 and result.enqueued == 0
            qid = m["realQueueId"]
            got = _read_all(ms, "GoldenTimerTopic", qid)[-1]
            expect_props = dict(m["properties"])
            expect_props["TIMER_ENQUEUE_MS"] = "1795318697000"  # write pointer when the broker enqueued it
            expect_props["TIMER_DEQUEUE_MS"] = str(clock.now)
            assert got.properties == expect_props
            assert got.topic == "GoldenTimerTopic" and got.queue_id == qid
            assert got.body == base64.b64decode(m["body"])
            assert got.born_timestamp == m["bornTimestamp"] and got.tags == "TimerTag"
            assert f"{got.born_host[0]}:{got.born_host[1]}" == m["bornHost"]
            # same record as the broker writes: topic renamed, two properties added
            extra = sum(len(f"{k}\x01{v}\x02") for k, v in expect_props.items() if k.startswith("TIMER_")
                        and k not in m["properties"])
            assert got.store_size == m["size"] - len(TIMER_TOPIC) + len("GoldenTimerTopic") + extra
            seen.append(m)
        after = {q: ms.get_max_offset_in_queue("GoldenTimerTopic", q) for q in (0, 1)}
        assert after[0] - before[0] == sum(1 for m in pending if m["realQueueId"] == 0) == 3
        assert after[1] - before[1] == 3
        assert ts.get_all_congest_num() == 0
        ts.flush()
        assert ts.timer_checkpoint.last_read_time_ms == pending[-1]["timerOutMs"] + 1000
        assert ts.timer_checkpoint.last_timer_queue_offset == 10
    finally:
        ts.shutdown()
        ms.shutdown()
    # a restart does not deliver anything twice
    clock.now += 10_000
    ms = MessageStore(root, _golden_config(manifest, root), clock=clock).open()
    ts = TimerMessageStore(ms, clock=clock)
    try:
        assert ts.tick().delivered == 0
        assert {q: ms.get_max_offset_in_queue("GoldenTimerTopic", q) for q in (0, 1)} == {0: 5, 1: 5}
    finally:
        ts.shutdown()
        ms.shutdown()


# ---------------------------------------------------------------------------------------------
# ordering, roll-over, cancel


def test_ten_thousand_random_delays_in_delivery_order_in_one_tick(tmp_path: Path) -> None:
    clock = FakeClock(T0)
    ms, ts = _open(tmp_path / "store", clock)
    rnd = random.Random(20240601)
    try:
        expected = {}
        for i in range(10_000):
            delay = rnd.randint(1, 3 * DAY)
            conv = _put_timer(ms, clock, f"U{i:05d}", delay_ms=delay)
            expected[f"U{i:05d}"] = int(conv.properties["TIMER_OUT_MS"])
        clock.now = T0 + 3 * DAY + 1000
        result = ts.tick()
        assert result.delivered == 10_000
        assert result.rolled > 0 and result.enqueued == 10_000 + result.rolled
        out = _read_all(ms, "RealTopic")
        assert len(out) == 10_000
        assert sorted(m.uniq_key for m in out) == sorted(expected)
        times = [int(m.properties["TIMER_OUT_MS"]) for m in out]
        assert times == sorted(times)
        for m in out:
            assert int(m.properties["TIMER_OUT_MS"]) == expected[m.uniq_key]
            rolls = m.properties.get("TIMER_ROLL_TIMES")
            # a roll happens exactly when the target was at least the 2-day roll window away
            assert (rolls == "1") == (expected[m.uniq_key] - T0 >= 2 * DAY)
            assert m.properties["REAL_TOPIC"] == "RealTopic" and m.body == f"body-{m.uniq_key}".encode()
        assert ts.get_all_congest_num() == 0
        assert ts.tick().delivered == 0
    finally:
        ts.shutdown()
        ms.shutdown()


def test_roll_over_with_a_small_window(tmp_path: Path) -> None:
    clock = FakeClock(T0)
    ms = MessageStore(tmp_path / "s", _config(timer_roll_window_slot=10), clock=clock).open()
    ts = TimerMessageStore(ms, clock=clock)
    try:
        assert ts.timer_roll_window_slots == 10
        _put_timer(ms, clock, "R", deliver_ms=T0 + 25_500)  # TIMER_OUT_MS = T0 + 25 s
        ts.tick()
        first = next(u for _, u in ts.timer_log.iterate())
        # 25 s >= the 10 s window and the excess (15 s) is not under a third of it: roll by the whole window
        assert first.magic & MAGIC_ROLL and first.delivery_ms == T0 + 10_000
        delivered_at = None
        for step in range(1, 40):  # one tick per second
            clock.now = T0 + step * 1000
            r = ts.tick()
            if r.delivered:
                delivered_at = clock.now
                break
        assert delivered_at == T0 + 26_000
        out = _read_all(ms, "RealTopic")
        assert len(out) == 1
        assert out[0].properties["TIMER_ROLL_TIMES"] == "2"  # fired at +10 s and +21 s, then normal
        assert out[0].properties["TIMER_OUT_MS"] == str(T0 + 25_000)
        rolled_units = [u for _, u in ts.timer_log.iterate() if u.magic & MAGIC_ROLL]
        assert [u.delivery_ms for u in rolled_units] == [T0 + 10_000, T0 + 21_000]
        # the rolled copies went through the timer topic: original + 2 re-puts
        assert ms.get_max_offset_in_queue(TIMER_TOPIC, 0) == 3
    finally:
        ts.shutdown()
        ms.shutdown()


def test_roll_to_half_window_when_the_excess_is_small(tmp_path: Path) -> None:
    clock = FakeClock(T0)
    ms = MessageStore(tmp_path / "s", _config(timer_roll_window_slot=12), clock=clock).open()
    ts = TimerMessageStore(ms, clock=clock)
    try:
        _put_timer(ms, clock, "H", deliver_ms=T0 + 14_500)  # excess 2 s < 12/3 s: half window (6 s)
        ts.tick()
        unit = next(u for _, u in ts.timer_log.iterate())
        assert unit.magic & MAGIC_ROLL and unit.delivery_ms == T0 + 6_000
        clock.now = T0 + 15_000
        assert ts.tick().delivered == 1
        assert _read_all(ms, "RealTopic")[0].properties["TIMER_ROLL_TIMES"] == "1"
    finally:
        ts.shutdown()
        ms.shutdown()


def test_cancel_with_timer_del_uniqkey(tmp_path: Path) -> None:
    clock = FakeClock(T0)
    ms, ts = _open(tmp_path / "s", clock)
    try:
        when = T0 + 60_500
        _put_timer(ms, clock, "KEEP", deliver_ms=when)
        _put_timer(ms, clock, "GONE", deliver_ms=when)
        _put_timer(ms, clock, "OTHER-TOPIC", deliver_ms=when, topic="Elsewhere")
        # the recall: same real topic and time, names the message by realTopic+uniqKey
        _put_timer(ms, clock, "RECALL-1", deliver_ms=when,
                   extra={"TIMER_DEL_UNIQKEY": build_delete_key("RealTopic", "GONE")})
        # a recall naming the wrong topic cancels nothing
        _put_timer(ms, clock, "RECALL-2", deliver_ms=when,
                   extra={"TIMER_DEL_UNIQKEY": build_delete_key("RealTopic", "OTHER-TOPIC")})
        ts.tick()
        slot = ts.timer_wheel.get_slot(T0 + 60_000)
        assert slot.num == 3 - 2  # three messages, two delete units
        magics = [u.magic for _, u in ts.timer_log.iterate()]
        assert [bool(m & MAGIC_DELETE) for m in magics] == [False, False, False, True, True]
        clock.now = T0 + 61_000
        r = ts.tick()
        assert (r.delivered, r.cancelled) == (2, 1)
        assert [m.uniq_key for m in _read_all(ms, "RealTopic")] == ["KEEP"]
        assert [m.uniq_key for m in _read_all(ms, "Elsewhere")] == ["OTHER-TOPIC"]
    finally:
        ts.shutdown()
        ms.shutdown()


def test_already_due_on_enqueue_is_delivered_at_once(tmp_path: Path) -> None:
    clock = FakeClock(T0)
    ms, ts = _open(tmp_path / "s", clock)
    try:
        ts.tick()
        _put_timer(ms, clock, "LATE", delay_ms=1500)  # TIMER_OUT_MS = T0 + 1000
        clock.now = T0 + 5_000
        ts.curr_write_time_ms = T0 + 5_000  # the wheel already moved on (the broker was busy)
        ts.curr_read_time_ms = T0 + 5_000
        r = ts.tick()
        assert (r.delivered, r.expired_on_enqueue, r.enqueued) == (1, 1, 0)
        got = _read_all(ms, "RealTopic")[0]
        assert got.properties["TIMER_ENQUEUE_MS"] == str(LONG_MAX)
        assert got.properties["TIMER_DEQUEUE_MS"] == str(T0 + 5_000)
    finally:
        ts.shutdown()
        ms.shutdown()


# ---------------------------------------------------------------------------------------------
# restart and recovery


def _delays(n: int, seed: int) -> list[int]:
    rnd = random.Random(seed)
    return [rnd.randint(1, 3 * DAY) for _ in range(n)]


@pytest.mark.parametrize("clean", [True, False])
def test_restart_mid_way_loses_nothing(tmp_path: Path, clean: bool) -> None:
    clock = FakeClock(T0)
    root = tmp_path / "s"
    ms, ts = _open(root, clock)
    delays = _delays(2000, 7)
    for i, d in enumerate(delays[:1000]):
        _put_timer(ms, clock, f"A{i}", delay_ms=d)
    ts.tick()
    clock.now = T0 + DAY
    ts.tick()
    for i, d in enumerate(delays[1000:]):
        _put_timer(ms, clock, f"B{i}", delay_ms=d)
    clock.now = T0 + DAY + 30 * 60_000
    ts.tick()  # enqueues the B messages, delivers the first day and a half hour
    if clean:
        ts.shutdown()
    else:
        clock.now += 500  # some work after the last persisted state, then the process dies
        ts.tick()
        ts.shutdown(flush=False)
    ms.shutdown()
    first_part = len(_read_all(MessageStore(root, _config(), clock=clock, read_only=True).open(), "RealTopic"))
    assert 0 < first_part < 2000

    ms, ts = _open(root, clock)
    try:
        clock.now = T0 + DAY + 3 * DAY + 2000
        ts.tick()
        out = _read_all(ms, "RealTopic")
        keys = [m.uniq_key for m in out]
        assert set(keys) == {f"A{i}" for i in range(1000)} | {f"B{i}" for i in range(1000)}
        if clean:
            assert len(keys) == 2000  # a clean restart delivers each exactly once
        assert ts.get_all_congest_num() == 0
    finally:
        ts.shutdown()
        ms.shutdown()


def test_recovery_relinks_slots_the_wheel_lost(tmp_path: Path) -> None:
    clock = FakeClock(T0)
    root = tmp_path / "s"
    ms, ts = _open(root, clock)
    _put_timer(ms, clock, "M1", deliver_ms=T0 + 10_500)
    ts.tick()
    ts.flush()
    _put_timer(ms, clock, "M2", deliver_ms=T0 + 10_500)
    _put_timer(ms, clock, "M3", deliver_ms=T0 + 20_500)
    ts.tick()
    # the process dies before the wheel reaches disk: the newer slot state is lost
    ts.timer_wheel.put_slot(T0 + 10_000, 0, 0, 1, 0)
    ts.timer_wheel.clear_slot(T0 + 20_000)
    ts.shutdown(flush=False)
    ms.shutdown()
    ms, ts = _open(root, clock)
    try:
        slot = ts.timer_wheel.get_slot(T0 + 10_000)
        assert (slot.first_pos, slot.last_pos) == (0, 52)  # re-linked from the TimerLog
        assert ts.timer_wheel.get_slot(T0 + 20_000).last_pos == 104
        clock.now = T0 + 21_000
        ts.tick()
        keys = [m.uniq_key for m in _read_all(ms, "RealTopic")]
        # nothing lost; M2/M3 were read from the timer topic after the last checkpoint, so (as in
        # Java, which restarts from min(revised offset, masterTimerQueueOffset)) they come twice
        assert keys == ["M1", "M2", "M2", "M3", "M3"]
    finally:
        ts.shutdown()
        ms.shutdown()


def test_checkpoint_and_files_after_flush(tmp_path: Path) -> None:
    clock = FakeClock(T0)
    root = tmp_path / "s"
    ms, ts = _open(root, clock)
    try:
        for i in range(3):
            _put_timer(ms, clock, f"C{i}", delay_ms=5_000)
        clock.now = T0 + 1_000
        ts.tick()  # more than timerFlushIntervalMs since opening: flushed by the tick
        cp = ts.timer_checkpoint
        assert cp.last_timer_queue_offset == cp.master_timer_queue_offset == 3
        assert cp.last_timer_log_flush_pos == 156 == ts.timer_log.max_offset
        assert cp.last_read_time_ms == T0 + 1_000
        data = (root / "config" / "timercheck").read_bytes()
        assert int.from_bytes(data[8:16], "big") == 156 and int.from_bytes(data[16:24], "big") == 3
        assert (root / "timerwheel").stat().st_size == 38_707_200
        assert (root / "timerlog" / "00000000000000000000").stat().st_size == 64 * 1024
    finally:
        ts.shutdown()
        ms.shutdown()


# ---------------------------------------------------------------------------------------------
# figures and the background service


def test_backlog_figures(tmp_path: Path) -> None:
    clock = FakeClock(T0)
    ms, ts = _open(tmp_path / "s", clock)
    try:
        for i, delay in enumerate([3_000, 8_000, 30_000, 300_000, 1_800_000, 7_200_000, 7_300_000]):
            _put_timer(ms, clock, f"F{i}", delay_ms=delay)
        b = ts.backlog()
        assert b.pending == 0 and b.enqueue_behind_messages == 7
        clock.now = T0 + 2_000
        assert b.enqueue_behind_messages == 7
        assert ts.backlog().enqueue_behind_ms == 2_000
        ts.tick()
        b = ts.backlog()
        assert b.pending == 7 and b.enqueue_behind_messages == 0 and b.enqueue_behind_ms == 0
        assert b.due == {"10s": 2, "1m": 1, "10m": 1, "1h": 1, "later": 2}
        assert b.dequeue_behind_ms == 0
        clock.now = T0 + 61_000
        ts.tick()
        b = ts.backlog()
        assert b.pending == 4 and b.due == {"10s": 0, "1m": 0, "10m": 1, "1h": 1, "later": 2}
        assert b.enqueue_rate == pytest.approx(7 / 61)  # since the store opened at T0
        assert b.dequeue_rate == pytest.approx(3 / 61)
        clock.now = T0 + 200_000
        ts.tick()
        b = ts.backlog()
        assert b.enqueue_rate == 0 and b.dequeue_rate == 0  # nothing moved in the last minute
        assert b.due == {"10s": 0, "1m": 0, "10m": 1, "1h": 1, "later": 2}
    finally:
        ts.shutdown()
        ms.shutdown()


def test_background_thread(tmp_path: Path) -> None:
    clock = FakeClock(T0)
    ms, ts = _open(tmp_path / "s", clock)
    try:
        _put_timer(ms, clock, "BG", delay_ms=2_000)
        ts.start(interval_s=0.005)
        clock.now = T0 + 3_000
        deadline = time.monotonic() + 10
        while ms.get_max_offset_in_queue("RealTopic", 0) == 0 and time.monotonic() < deadline:
            time.sleep(0.005)  # waiting for the thread, not for time to pass
        assert ms.get_max_offset_in_queue("RealTopic", 0) == 1
    finally:
        ts.shutdown()
        ms.shutdown()
    with pytest.raises(RuntimeError):
        ts.tick()


def test_read_only_figures(tmp_path: Path) -> None:
    clock = FakeClock(T0)
    root = tmp_path / "s"
    ms, ts = _open(root, clock)
    _put_timer(ms, clock, "RO", delay_ms=90_000)
    ts.tick()
    ts.shutdown()
    ms.shutdown()
    before = (root / "timerwheel").read_bytes()
    ro_ms = MessageStore(root, _config(), clock=clock, read_only=True).open()
    ro = TimerMessageStore(ro_ms, clock=clock)
    try:
        assert ro.backlog().pending == 1
        with pytest.raises(PermissionError):
            ro.tick()
    finally:
        ro.shutdown()
        ro_ms.shutdown()
    assert (root / "timerwheel").read_bytes() == before
