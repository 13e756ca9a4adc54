from __future__ import annotations

import threading
import time

import pytest

from broker_core.broker import pull as pull_module
from broker_core.broker.errors import (
    InvalidParameterError,
    NoPermissionError,
    SubscriptionGroupNotExistError,
    SubscriptionParseFailedError,
    TopicNotExistError,
)
from broker_core.broker.pull import PullStatus
from broker_core.common.response_code import ResponseCode
from tests.waiting import wait_for


@pytest.fixture
def broker(make_broker):
    b = make_broker()
    b.create_or_update_topic("T", 2, 2)
    for i in range(6):
        b.send_message("T", b"m%d" % i, {"TAGS": "TagA" if i % 2 == 0 else "TagB", "price": str(i * 10)},
                       queue_id=0)
    return b


def test_pull_statuses(broker):
    r = broker.pull_message("g", "T", 0, 0, max_msgs=4)
    assert r.status is PullStatus.FOUND and r.response_code == ResponseCode.SUCCESS
    assert [m.queue_offset for m in r.messages] == [0, 1, 2, 3] and r.next_begin_offset == 4
    assert (r.min_offset, r.max_offset, r.suggest_which_broker_id) == (0, 6, 0)
    r = broker.pull_message("g", "T", 0, 6)
    assert r.status is PullStatus.NO_NEW_MSG and r.detail == "OFFSET_OVERFLOW_ONE" and r.next_begin_offset == 6
    assert r.response_code == ResponseCode.PULL_NOT_FOUND
    r = broker.pull_message("g", "T", 0, 9)
    assert r.status is PullStatus.OFFSET_ILLEGAL and r.detail == "OFFSET_OVERFLOW_BADLY"
    assert r.next_begin_offset == 6 and r.response_code == ResponseCode.PULL_OFFSET_MOVED
    r = broker.pull_message("g", "T", 1, 0)
    assert r.status is PullStatus.NO_NEW_MSG and r.next_begin_offset == 0
    r = broker.pull_message("g", "T", 1, 3)
    assert r.status is PullStatus.OFFSET_ILLEGAL and r.next_begin_offset == 0


def test_status_mapping_of_store_results():
    from broker_core.broker.pull import map_get_result
    from broker_core.store.message_store import GetMessageResult
    from broker_core.store.message_store import GetMessageStatus as G

    def m(status, offset, next_begin=7):
        st, code, nxt = map_get_result(GetMessageResult(status, next_begin, 3, 9), offset)
        return st.value, code, nxt

    assert m(G.OFFSET_TOO_SMALL, 1, 3) == ("OFFSET_ILLEGAL", 21, 3)
    assert m(G.OFFSET_FOUND_NULL, 4, 5) == ("NO_NEW_MSG", 19, 5)
    assert m(G.MESSAGE_WAS_REMOVING, 4, 5) == ("NO_MATCHED_MSG", 20, 5)
    assert m(G.NO_MATCHED_LOGIC_QUEUE, 0) == ("NO_NEW_MSG", 19, 0)
    assert m(G.NO_MESSAGE_IN_QUEUE, 5) == ("OFFSET_ILLEGAL", 21, 0)


def test_tag_and_sql_filters(broker):
    r = broker.pull_message("g", "T", 0, 0, subscription="TagA")
    assert [m.body for m in r.messages] == [b"m0", b"m2", b"m4"] and r.next_begin_offset == 6
    r = broker.pull_message("g", "T", 0, 5, subscription="TagA")
    assert r.status is PullStatus.NO_MATCHED_MSG and r.next_begin_offset == 6
    assert r.response_code == ResponseCode.PULL_RETRY_IMMEDIATELY
    r = broker.pull_message("g", "T", 0, 0, expression_type="SQL92", subscription="price >= 30 AND TAGS = 'TagB'")
    assert [m.body for m in r.messages] == [b"m3", b"m5"]


def test_bad_subscription_is_refused_up_front(broker):
    with pytest.raises(SubscriptionParseFailedError) as ei:
        broker.pull_message("g", "T", 0, 0, expression_type="SQL92", subscription="price >>> 3")
    assert ei.value.code == ResponseCode.SUBSCRIPTION_PARSE_FAILED
    with pytest.raises(SubscriptionParseFailedError):
        broker.pull_message("g", "T", 0, 0, expression_type="XPATH", subscription="x")


def test_pull_errors(make_broker):
    b = make_broker(autoCreateSubscriptionGroup="false")
    b.create_or_update_topic("T", 2, 2)
    with pytest.raises(SubscriptionGroupNotExistError):
        b.pull_message("nobody", "T", 0, 0)
    b.create_or_update_subscription_group("g")
    with pytest.raises(TopicNotExistError):
        b.pull_message("g", "Missing", 0, 0)
    with pytest.raises(InvalidParameterError, match="queueId"):
        b.pull_message("g", "T", 2, 0)
    b.create_or_update_subscription_group("g", consume_enable=False)
    with pytest.raises(NoPermissionError, match="subscription group no permission"):
        b.pull_message("g", "T", 0, 0)
    b.create_or_update_topic("WO", 1, 1, perm=2)
    b.create_or_update_subscription_group("g2")
    with pytest.raises(NoPermissionError, match="pulling message is forbidden"):
        b.pull_message("g2", "WO", 0, 0)


def test_pull_records_pull_offset_and_commit(broker):
    broker.pull_message("g", "T", 0, 0, max_msgs=2, commit_offset=1)
    assert broker.query_offset("g", "T", 0) == 1
    stats = {s.queue_id: s for s in broker.consume_stats("g", "T").rows}
    assert stats[0].pull_offset == 2 and stats[0].consumer_offset == 1


def _pull_in_thread(broker, **kw):
    out: dict = {}

    def run():
        t0 = time.monotonic()
        out["result"] = broker.pull_message(**kw)
        out["elapsed"] = time.monotonic() - t0

    th = threading.Thread(target=run)
    th.start()
    wait_for(lambda: broker.pull_hold_service.waiting() > 0, "the pull to park in the hold service", 5, 0.005)
    return th, out


@pytest.mark.parametrize("started", [False, True])
def test_long_polling_wakes_on_matching_message(make_broker, started):
    b = make_broker()
    if started:
        b.start()
    b.create_or_update_topic("LP", 1, 1)
    th, out = _pull_in_thread(b, group="g", topic="LP", queue_id=0, offset=0, subscription="TagA",
                              suspend_timeout_ms=5000)
    assert b.pull_hold_service.waiting() == 1
    t_send = time.monotonic()
    b.send_message("LP", b"hit", {"TAGS": "TagA"}, queue_id=0)
    th.join(3)
    assert not th.is_alive()
    r = out["result"]
    assert r.status is PullStatus.FOUND and [m.body for m in r.messages] == [b"hit"]
    assert time.monotonic() - t_send < 0.5
    assert b.pull_hold_service.waiting() == 0


def test_long_polling_not_woken_by_filtered_message(make_broker):
    b = make_broker()
    b.create_or_update_topic("LP", 1, 1)
    th, out = _pull_in_thread(b, group="g", topic="LP", queue_id=0, offset=0, subscription="TagA",
                              suspend_timeout_ms=400)
    b.send_message("LP", b"miss", {"TAGS": "TagB"}, queue_id=0)
    time.sleep(0.1)
    assert th.is_alive(), "a message the filter rejects must not wake the pull"
    th.join(3)
    r = out["result"]
    assert r.status is PullStatus.NO_MATCHED_MSG and r.next_begin_offset == 1 and out["elapsed"] >= 0.35


def test_parked_pull_answers_filtered_arrivals_at_the_hold_round(make_broker, monkeypatch):
    """As PullRequestHoldService's 5 s round: a queue that grew only by messages the pull's filter
    refuses is answered before the suspend timeout, so the consumer commits past them. Parked until
    the timeout (15 s for Java clients) instead, the group showed that lag in consumerProgress."""
    monkeypatch.setattr(pull_module, "HOLD_CHECK_INTERVAL_S", 0.3)
    b = make_broker()
    b.create_or_update_topic("LP", 1, 1)
    th, out = _pull_in_thread(b, group="g", topic="LP", queue_id=0, offset=0, subscription="TagA",
                              suspend_timeout_ms=10_000)
    for _ in range(3):
        b.send_message("LP", b"miss", {"TAGS": "TagB"}, queue_id=0)
    th.join(5)
    assert not th.is_alive()
    r = out["result"]
    assert (r.status, r.next_begin_offset, r.messages) == (PullStatus.NO_MATCHED_MSG, 3, [])
    assert 0.25 <= out["elapsed"] < 2


def test_hold_round_keeps_a_pull_parked_when_its_queue_did_not_grow(make_broker, monkeypatch):
    monkeypatch.setattr(pull_module, "HOLD_CHECK_INTERVAL_S", 0.1)
    b = make_broker()
    b.create_or_update_topic("LP", 1, 1)
    t0 = time.monotonic()
    r = b.pull_message("g", "LP", 0, 0, subscription="TagA", suspend_timeout_ms=600)
    assert r.status is PullStatus.NO_NEW_MSG and time.monotonic() - t0 >= 0.59


def test_long_polling_times_out_with_no_new_msg(make_broker):
    b = make_broker()
    b.create_or_update_topic("LP", 1, 1)
    t0 = time.monotonic()
    r = b.pull_message("g", "LP", 0, 0, suspend_timeout_ms=150)
    assert r.status is PullStatus.NO_NEW_MSG and 0.14 <= time.monotonic() - t0 < 1.0


def test_sql_long_polling_checks_properties(make_broker):
    b = make_broker()
    b.create_or_update_topic("LP", 1, 1)
    th, out = _pull_in_thread(b, group="g", topic="LP", queue_id=0, offset=0, expression_type="SQL92",
                              subscription="a > 5", suspend_timeout_ms=3000)
    b.send_message("LP", b"low", {"a": "1"}, queue_id=0)
    time.sleep(0.05)
    assert th.is_alive()
    b.send_message("LP", b"high", {"a": "9"}, queue_id=0)
    th.join(3)
    assert [m.body for m in out["result"].messages] == [b"high"]
