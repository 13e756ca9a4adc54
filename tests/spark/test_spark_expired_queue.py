"""A queue whose every record retention deleted keeps its offsets through a rebuild (min = max = old max).

Why: the rebuild walks the commitlog and found no record of such a queue, so it dropped it (range
[0, 0]). Apache never renumbers a queue (retention keeps its last file). After ``rebuildStore`` the
broker started SCHEDULE_TOPIC_XXXX and rmq_sys_wheel_timer at 0 while delayOffset.json and the timer
checkpoint still said 3: the next 3 delayed and timer messages were never delivered. ``--verify``
reported committed offsets as "above max: [0, 0]" although the store held [N, N], and the rebuild
clamped them to 0. The delay and timer offsets are now checked against the rebuilt ranges too.
"""

from __future__ import annotations

from pathlib import Path

from broker_core.broker.broker import Broker
from broker_core.broker.broker_config import BrokerConfig
from broker_core.store.codec.batch import BatchItem
from broker_core.store.schedule.delay_offset import DelayOffsetTable
from broker_core.store.timer.timer_checkpoint import TimerCheckpoint
from spark.rebuild import render_details, run_rebuild

SIZES = {"mappedFileSizeCommitLog": str(64 * 1024), "mappedFileSizeConsumeQueue": str(20 * 16),
         "mapperFileSizeBatchConsumeQueue": str(46 * 8), "maxHashSlotNum": "16", "maxIndexNum": "24",
         "messageDelayLevel": "1s 5s"}
SCHEDULE_Q = ("SCHEDULE_TOPIC_XXXX", 1)  # delay level 2
TIMER_Q = ("rmq_sys_wheel_timer", 0)


class Clock:
    def __init__(self) -> None:
        self.now = 1_700_000_000_000

    def __call__(self) -> int:
        return self.now


def _broker(store: Path, clock: Clock) -> Broker:
    return Broker(store, BrokerConfig.from_properties(dict(SIZES)), clock=clock)


def _delayed_and_timers(b: Broker, clock: Clock, tag: str) -> None:
    """3 level-2 delayed and 3 timer messages to T, ticked until due and delivered."""
    for i in range(3):
        b.send_message("T", f"{tag}-d{i}".encode(), {"DELAY": "2"}, queue_id=0)
        b.send_message("T", f"{tag}-t{i}".encode(), {"TIMER_DELAY_SEC": "1"}, queue_id=0)
    b.tick()
    clock.now += 5_000
    b.tick()
    b.tick()


def _bodies(b: Broker) -> list[bytes]:
    return [m.body for m in b.pull_message("G", "T", 0, b.get_min_offset("T", 0), 64).messages]


def _store(tmp_path: Path, retention: bool) -> tuple[Path, Path, Clock]:
    """Early (SimpleCQ, 3 messages, G committed 3), EarlyBatch (BatchCQ, 2 batches of 2), 3 delayed and 3 timer
    messages delivered to T; with ``retention`` a filler rolls the commitlog and retention deletes every file
    holding them (so none of these queues has a record left)."""
    store = tmp_path / "store"
    conf = tmp_path / "broker.conf"
    conf.write_text("".join(f"{k}={v}\n" for k, v in SIZES.items()), encoding="utf-8")
    clock = Clock()
    b = _broker(store, clock)
    try:
        for topic in ("T", "Early", "Fill"):
            b.create_or_update_topic(topic, 1, 1)
        b.create_or_update_topic("EarlyBatch", 1, 1, attributes="+queue.type=BatchCQ")
        b.create_or_update_subscription_group("G")
        for i in range(3):
            b.send_message("Early", f"e{i}".encode(), queue_id=0)
        b.commit_offset("G", "Early", 0, 3)
        for i in range(2):
            b.send_batch("EarlyBatch", [BatchItem(f"b{i}.{j}".encode(), {"KEYS": f"b{i}.{j}"}) for j in range(2)],
                         queue_id=0)
        _delayed_and_timers(b, clock, "before")
        assert len(_bodies(b)) == 6
        b.commit_offset("G", "T", 0, 6)
        if retention:
            while b.store.commit_log.min_offset() == 0:
                for _ in range(20):
                    b.send_message("Fill", b"f" * 1000, queue_id=0)
                b.store.retention.mtime_of = lambda path: 0  # every full file expired
                b.delete_expired_commit_log()
    finally:
        b.shutdown()
    return store, conf, clock


def test_verify_after_retention_reports_no_offset_out_of_range(spark, tmp_path: Path) -> None:
    store, conf, _clock = _store(tmp_path, retention=True)
    checked = run_rebuild(store, conf, verify=True, spark=spark)
    assert checked.mismatches == []
    assert [(c.key, c.queue_id, c.old, c.reason) for c in checked.offset_changes] == []
    ranges = {(q.topic, q.queue_id): (q.min_offset, q.max_offset) for q in checked.queue_results}
    assert ranges[("Early", 0)] == (3, 3) and ranges[SCHEDULE_Q] == (3, 3) and ranges[TIMER_Q] == (3, 3)
    assert ranges[("EarlyBatch", 0)] == (4, 4) and ranges[("T", 0)] == (6, 6)


def test_rebuild_after_retention_keeps_offsets_and_delivers_the_next_delayed_and_timer_messages(
        spark, tmp_path: Path) -> None:
    store, conf, clock = _store(tmp_path, retention=True)
    summary = run_rebuild(store, conf, spark=spark)
    assert summary.offset_changes == []
    assert any(k.startswith("SCHEDULE_TOPIC_XXXX/1 at 3") for k in summary.kept_queues), summary.kept_queues
    b = _broker(store, clock)
    try:
        for (topic, qid), end in ((("Early", 0), 3), (("EarlyBatch", 0), 4), (SCHEDULE_Q, 3), (TIMER_Q, 3),
                                  (("T", 0), 6)):
            assert (b.get_min_offset(topic, qid), b.get_max_offset(topic, qid)) == (end, end), topic
        assert b.query_offset("G", "Early", 0) == 3
        assert b.send_message("Early", b"e3", queue_id=0).queue_offset == 3
        assert b.send_batch("EarlyBatch", [BatchItem(b"b2.0", {"KEYS": "k"})], queue_id=0).queue_offset == 4
        _delayed_and_timers(b, clock, "after")
        assert sorted(_bodies(b)) == sorted(f"after-{k}{i}".encode() for k in "dt" for i in range(3))
    finally:
        b.shutdown()


def test_delay_and_timer_offsets_past_their_queues_are_reported_and_clamped(spark, tmp_path: Path) -> None:
    store, conf, clock = _store(tmp_path, retention=False)
    delay = DelayOffsetTable(store / "config")
    delay.load()
    delay.update(2, 9)
    delay.persist(clock.now)
    cp = TimerCheckpoint(store / "config" / "timercheck")
    cp.last_timer_queue_offset = cp.master_timer_queue_offset = 9
    cp.close()
    checked = run_rebuild(store, conf, verify=True, spark=spark)
    want = [("SCHEDULE_TOPIC_XXXX q1 (delayOffset.json level 2)", 9, 3, "above max"),
            ("rmq_sys_wheel_timer q0 (timercheck lastTimerQueueOffset)", 9, 3, "above max"),
            ("rmq_sys_wheel_timer q0 (timercheck masterTimerQueueOffset)", 9, 3, "above max")]
    assert [(c.where, c.old, c.new, c.reason) for c in checked.offset_changes] == want
    assert "delayOffset.json level 2" in str([str(r) for r in render_details(checked).columns[1]._cells])
    summary = run_rebuild(store, conf, spark=spark)
    assert [(c.where, c.old, c.new, c.reason) for c in summary.offset_changes] == want
    assert {Path(w).name for w in summary.written} >= {"delayOffset.json", "timercheck"}
    delay = DelayOffsetTable(store / "config")
    delay.load()
    cp = TimerCheckpoint(store / "config" / "timercheck", read_only=True)
    assert (delay.get(2), cp.last_timer_queue_offset, cp.master_timer_queue_offset) == (3, 3, 3)
    b = _broker(store, clock)
    try:
        _delayed_and_timers(b, clock, "after")
        assert len(_bodies(b)) == 12
    finally:
        b.shutdown()
