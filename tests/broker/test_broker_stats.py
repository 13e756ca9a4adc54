from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from broker_core.broker.errors import NoPermissionError, TopicNotExistError
from broker_core.broker.request_context import RequestContext
from broker_core.broker.stats import TpsCounter

from .conftest import START_MS


def test_tps_counter_with_fake_clock(clock):
    tps = TpsCounter(clock)
    clock.now = START_MS - START_MS % 1000
    for _ in range(30):
        tps.add()
    clock.advance(1000)
    tps.add(10)
    assert tps.tps_over(1) == 30.0
    clock.advance(1000)
    assert tps.tps_over(1) == 10.0 and tps.tps_over(2) == 20.0
    assert tps.tps_over(3) is None  # younger than the window (StoreStatsService leaves it blank)
    assert tps.tps_last_minute() == pytest.approx(40 / 60)
    clock.advance(61_000)
    assert tps.tps_last_minute() == 0.0 and tps.tps_over(1) == 0.0


def test_topic_and_consume_stats(make_broker, clock):
    b = make_broker()
    b.create_or_update_topic("T", 2, 3)
    for i in range(5):
        clock.now = START_MS + i
        b.send_message("T", b"x", queue_id=0)
    rows = b.topic_stats("T").rows
    assert [(r.queue_id, r.min_offset, r.max_offset) for r in rows] == [(0, 0, 5), (1, 0, 0), (2, 0, 0)]
    assert rows[0].last_update_timestamp == START_MS + 4 and rows[1].last_update_timestamp == 0
    with pytest.raises(TopicNotExistError):
        b.topic_stats("Missing")
    clock.now = START_MS + 1000  # tpsTopicPutNums: puts a second over the last (full) minute
    assert b.topic_stats("T").put_tps == pytest.approx(5 / 60)
    clock.now = START_MS + 500
    b.pull_message("g", "T", 0, 0, max_msgs=4)
    b.commit_offset("g", "T", 0, 2)
    b.inflight_provider = lambda g, t, q: 3 if q == 0 else 0
    b.fifo_blocked_provider = lambda g, t, q: q == 1
    stats = {s.queue_id: s for s in b.consume_stats("g").rows}
    s0 = stats[0]
    assert (s0.broker_offset, s0.consumer_offset, s0.pull_offset, s0.diff) == (5, 2, 4, 3)
    assert s0.inflight == 3 and not s0.blocked and stats[1].blocked
    assert s0.last_timestamp == START_MS + 1 and s0.last_consume_timestamp == START_MS + 500
    assert set(stats) == {0, 1}  # read queues only


def test_broker_runtime_info_counts(make_broker, clock):
    b = make_broker()
    clock.now = int(datetime(2024, 5, 1, 12).timestamp() * 1000)
    b.stats.__init__(clock)
    b.create_or_update_topic("T", 1, 1)
    for _ in range(3):
        b.send_message("T", b"x", queue_id=0)
    b.pull_message("g", "T", 0, 0)
    clock.advance(1000)
    info = b.broker_runtime_info()
    assert info["msgPutTotalTodayNow"] == "3" and info["msgGetTotalTodayNow"] == "3"
    assert info["putTps"] == "  "  # up 1 s: no 10 s window yet (each blank, as StoreStatsService)
    clock.advance(9000)
    info = b.broker_runtime_info()
    assert (info["putTps"], info["getTransferredTps"]) == ("0.3  ", "0.3  ")
    assert int(info["commitLogMaxOffset"]) == b.store.get_max_phy_offset() > 0
    assert info["dispatchBehindBytes"] == "0" and info["runtime"].startswith("[ 0 days")
    # Past local midnight the morning snapshot moves.
    clock.now = int((datetime(2024, 5, 1, 12) + timedelta(days=1)).timestamp() * 1000)
    b.send_message("T", b"x", queue_id=0)
    info = b.broker_runtime_info()
    assert info["msgPutTotalTodayMorning"] == "3" and info["msgPutTotalTodayNow"] == "4"
    assert all(isinstance(v, str) for v in info.values())


def test_acl_enforced_for_remote_callers(make_broker, tmp_path, monkeypatch):
    monkeypatch.setenv("ROCKETMQ_LOG_HOME", str(tmp_path / "logs"))
    b = make_broker(authorizationEnabled="true")
    b.auth_manager.create_user("alice", "secret")
    b.create_or_update_topic("T", 1, 1)  # in-process caller: trusted
    ctx = RequestContext(subject="alice", source_ip="10.0.0.5:50000")
    with pytest.raises(NoPermissionError) as ei:
        b.send_message("T", b"x", auth=ctx)
    assert ei.value.code == 16
    from broker_core.auth.converter import acl_from_info

    b.auth_manager.create_acl(acl_from_info({"subject": "User:alice", "policies": [
        {"policyType": "Custom", "entries": [{"resource": "Topic:T", "actions": ["Pub"], "sourceIps": [],
                                              "decision": "Allow"}]}]}))
    assert b.send_message("T", b"x", auth=ctx).queue_offset == 0
    with pytest.raises(NoPermissionError):
        b.pull_message("g", "T", 0, 0, auth=ctx)
    with pytest.raises(NoPermissionError):
        b.create_or_update_topic("T2", auth=ctx)
    assert "alice" in (tmp_path / "logs" / "auth_audit.log").read_text()


def test_stats_data_windows_for_stats_all(clock):
    """VIEW_BROKER_STATS_DATA: the minute is the last 60 s (not the calendar minute), hour and day sum
    the per-minute buckets; avgpt is the mean count per recorded event."""
    from broker_core.broker.stats import BrokerStats

    stats = BrokerStats(clock)
    stats.record_put("T", 4)
    stats.record_put("T", 2)
    clock.advance(50_000)
    minute, hour, day = stats.stats_data("TOPIC_PUT_NUMS", "T")
    assert (minute.sum, minute.avgpt, hour.sum, day.sum) == (6, 3.0, 6, 6)
    assert minute.tps == 0.1
    clock.advance(20_000)  # 70 s after the puts: out of the minute, still in the hour and the day
    minute, hour, day = stats.stats_data("TOPIC_PUT_NUMS", "T")
    assert (minute.sum, hour.sum, day.sum) == (0, 6, 6)
    clock.advance(2 * 3_600_000)
    assert stats.stats_data("TOPIC_PUT_NUMS", "T")[1].sum == 0 and stats.stats_data("TOPIC_PUT_NUMS", "T")[2].sum == 6
    stats.record_get("G", "T", 3)
    assert stats.stats_data("GROUP_GET_NUMS", "T@G")[0].sum == 3
    assert stats.stats_data("GROUP_GET_NUMS", "T@Other") is None and stats.stats_data("TOPIC_PUT_NUMS", "U") is None
