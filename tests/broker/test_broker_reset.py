from __future__ import annotations

import pytest

from broker_core.broker.errors import InvalidParameterError, SubscriptionGroupNotExistError
from broker_core.broker.pull import PullStatus
from broker_core.broker.reset_offset import (
    ResetOffsetPlanEntry,
    format_reset_timestamp,
    parse_reset_timestamp,
)
from broker_core.common.response_code import ResponseCode
from broker_core.store.codec.batch import BatchItem

from .conftest import START_MS


@pytest.fixture
def timed(make_broker, clock):
    """Queue 0 of T: offsets 0..9 stored one second apart (t0 = START_MS + 1000 * i)."""
    b = make_broker()
    b.create_or_update_topic("T", 2, 2)
    b.create_or_update_subscription_group("g")
    for i in range(10):
        clock.now = START_MS + 1000 * i
        b.send_message("T", b"m%d" % i, queue_id=0)
    clock.now = START_MS + 60_000
    return b


def test_parse_timestamp_formats(clock):
    assert parse_reset_timestamp("now", clock) == clock.now
    assert parse_reset_timestamp("1700000001234", clock) == 1700000001234
    assert parse_reset_timestamp(-1, clock) == -1
    text = format_reset_timestamp(1700000001234)
    assert parse_reset_timestamp(text, clock) == 1700000001234
    for bad in ("yesterday", "2023-11-14 22:13:21", "2023-13-40#25:00:00:000", "12ab"):
        with pytest.raises(InvalidParameterError, match="bad timestamp"):
            parse_reset_timestamp(bad, clock)


@pytest.mark.parametrize("form", ["ms", "date"])
def test_reset_by_time_plan_then_apply(timed, form):
    ts = START_MS + 4000
    arg = str(ts) if form == "ms" else format_reset_timestamp(ts)
    timed.commit_offset("g", "T", 0, 9)
    plan = timed.plan_reset_offset("g", "T", arg)
    assert plan == [ResetOffsetPlanEntry("T", 0, 9, 4), ResetOffsetPlanEntry("T", 1, -1, 0)]
    assert timed.query_offset("g", "T", 0) == 9  # planning changes nothing
    seen = []
    timed.offset_reset_listeners.append(lambda g, t, q, o: seen.append((g, t, q, o)))
    timed.apply_reset_offset("g", plan)
    assert seen == [("g", "T", 0, 4), ("g", "T", 1, 0)]
    assert timed.query_offset("g", "T", 0) == 4
    # A consumer's stale commit before it pulls again is ignored (RIP-48)...
    assert timed.commit_offset("g", "T", 0, 9) is False
    assert timed.query_offset("g", "T", 0) == 4
    # ...and its next pull is told to move to the reset offset.
    r = timed.pull_message("g", "T", 0, 9)
    assert r.status is PullStatus.OFFSET_ILLEGAL and r.detail == "OFFSET_RESET" and r.next_begin_offset == 4
    assert [m.body for m in timed.pull_message("g", "T", 0, 4, max_msgs=2).messages] == [b"m4", b"m5"]
    assert timed.commit_offset("g", "T", 0, 6) is True


def test_reset_now_and_future_go_to_end(timed):
    plan = timed.plan_reset_offset("g", "T", "now", queue_id=0)
    assert plan == [ResetOffsetPlanEntry("T", 0, -1, 10)]


def test_reset_to_explicit_offset_and_range_check(timed):
    plan = timed.plan_reset_offset("g", "T", offset=3, queue_id=0)
    assert plan[0].new_offset == 3
    with pytest.raises(InvalidParameterError, match=r"not in consume queue range \[0-10\]"):
        timed.plan_reset_offset("g", "T", offset=11, queue_id=0)
    with pytest.raises(InvalidParameterError, match="either a timestamp or an offset"):
        timed.plan_reset_offset("g", "T")


def test_reset_unknown_group_or_topic(timed):
    with pytest.raises(SubscriptionGroupNotExistError, match="Group nobody does not exist"):
        timed.plan_reset_offset("nobody", "T", "now")
    with pytest.raises(Exception) as ei:
        timed.plan_reset_offset("g", "Missing", "now")
    assert ei.value.code == ResponseCode.TOPIC_NOT_EXIST


def test_reset_persists_immediately(timed, tmp_path):
    from broker_core.store.consumer_offset_file import read_consumer_offsets

    timed.reset_offset("g", "T", START_MS + 2000, queue_id=0)
    assert read_consumer_offsets(tmp_path / "store" / "config")[0]["T@g"][0] == 2


def test_batch_messages_sharing_a_store_time_reset_to_first(make_broker, clock):
    """RocketMQ #5445: an exploded batch shares one store time; a reset to it lands on its first message."""
    b = make_broker()
    b.create_or_update_topic("S", 1, 1)
    b.create_or_update_subscription_group("g")
    for i in range(3):
        clock.now = START_MS + i * 1000
        b.send_message("S", b"single%d" % i, queue_id=0)
    clock.now = START_MS + 5000
    b.send_batch("S", [BatchItem(b"b%d" % i) for i in range(7)], queue_id=0)
    plan = b.plan_reset_offset("g", "S", START_MS + 5000)
    assert plan[0].new_offset == 3


def test_batch_cq_time_reset_and_exact_inner_offset(make_broker, clock):
    b = make_broker()
    b.create_or_update_topic("BQ", 1, 1, attributes="+queue.type=BatchCQ")
    b.create_or_update_subscription_group("g")
    clock.now = START_MS
    b.send_batch("BQ", [BatchItem(b"a%d" % i) for i in range(4)], {"UNIQ_KEY": "BA"}, queue_id=0)  # offsets 0..3
    clock.now = START_MS + 10_000
    b.send_batch("BQ", [BatchItem(b"b%d" % i) for i in range(4)], {"UNIQ_KEY": "BB"}, queue_id=0)  # offsets 4..7
    clock.now = START_MS + 20_000
    assert b.plan_reset_offset("g", "BQ", START_MS + 5_000)[0].new_offset == 4
    assert b.plan_reset_offset("g", "BQ", START_MS + 10_000)[0].new_offset == 4
    assert b.plan_reset_offset("g", "BQ", START_MS)[0].new_offset == 0
    # An explicit offset inside a batch stays on that exact message.
    b.reset_offset("g", "BQ", offset=6, queue_id=0)
    r = b.pull_message("g", "BQ", 0, 0)
    assert r.next_begin_offset == 6
    msgs = b.pull_message("g", "BQ", 0, 6).messages
    assert [(m.queue_offset, m.body) for m in msgs] == [(6, b"b2"), (7, b"b3")]


def test_skip_accumulated_and_clone(timed):
    timed.commit_offset("g", "T", 0, 2)
    plan = timed.plan_skip_accumulated_message("g", "T")
    assert [(e.queue_id, e.old_offset, e.new_offset) for e in plan] == [(0, 2, 10), (1, -1, 0)]
    timed.skip_accumulated_message("g", "T")
    assert timed.query_offset("g", "T", 0) == 10
    seen = []
    timed.offset_reset_listeners.append(lambda g, t, q, o: seen.append((g, q, o)))
    # as UPDATE_CONSUMER_OFFSET, a clone never makes the destination group
    with pytest.raises(SubscriptionGroupNotExistError, match="Group copy not exist!"):
        timed.clone_group_offset("g", "copy", "T")
    assert timed.query_offset("copy", "T", 0) == -1 and not seen
    timed.create_or_update_subscription_group("copy")
    plan = timed.clone_group_offset("g", "copy", "T")
    assert [(e.queue_id, e.new_offset) for e in plan] == [(0, 10), (1, 0)]
    assert timed.query_offset("copy", "T", 0) == 10 and ("copy", 0, 10) in seen
