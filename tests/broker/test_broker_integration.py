"""Timer messages, delay levels, consumer retries and transactions through the Broker API only.

Every test uses a real store in tmp_path and the injected fake clock; ``Broker.tick()`` stands in for
the background services, and a restart is a clean shutdown plus a new Broker on the same directory.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from broker_core.broker.broker import Broker
from broker_core.broker.errors import (
    BrokerSystemError,
    InvalidParameterError,
    MessageIllegalError,
    NoPermissionError,
)
from broker_core.broker.transaction import EndTransactionStatus
from broker_core.store.codec.message import MessageExt
from broker_core.store.codec.sys_flag import (
    TRANSACTION_COMMIT_TYPE,
    TRANSACTION_NOT_TYPE,
    TRANSACTION_ROLLBACK_TYPE,
)
from broker_core.store.timer import build_delete_key

from .conftest import FakeClock

G = "G_int"
T = "IntTopic"
PG = "PG_tx"


def _pull(b: Broker, topic: str, queue_id: int = 0, group: str = G) -> list[MessageExt]:
    return b.pull_message(group, topic, queue_id, 0, 32).messages


def _bodies(b: Broker, topic: str, queue_id: int = 0) -> list[bytes]:
    return [m.body for m in _pull(b, topic, queue_id)]


def _restart(make_broker: Callable[..., Broker], b: Broker, **props: str) -> Broker:
    b.shutdown()
    return make_broker(b.root, **props)


# -- (a) timer messages ---------------------------------------------------------------------------------
def test_timer_messages_stay_invisible_until_due_then_arrive_with_timer_stamps(make_broker, clock: FakeClock):
    b = make_broker()
    b.create_or_update_topic(T, 1, 1)
    t0 = clock.now
    r1 = b.send_message(T, b"at", {"TIMER_DELIVER_MS": str(t0 + 5_000)}, queue_id=0)
    r2 = b.send_message(T, b"in3s", {"TIMER_DELAY_SEC": "3"}, queue_id=0)
    assert r1.topic == T and r2.queue_id == 0
    assert b.get_max_offset(T, 0) == 0 and b.get_max_offset("rmq_sys_wheel_timer", 0) == 2
    tick = b.tick()
    assert tick.timer is not None and tick.timer.enqueued == 2 and tick.timer.delivered == 0
    backlog = b.timer_backlog()
    assert backlog is not None and backlog.pending == 2 and backlog.due["10s"] == 2
    info = b.broker_runtime_info()
    assert info["timerCongestNum"] == "2" and info["timerOffsetBehind"] == "0"

    clock.advance(2_999)
    b.tick()
    assert _bodies(b, T) == []
    clock.advance(1)
    assert b.tick().timer.delivered == 1
    got = _pull(b, T)
    assert [m.body for m in got] == [b"in3s"]
    assert got[0].uniq_key == r2.uniq_key
    assert got[0].properties["TIMER_DEQUEUE_MS"] == str(t0 + 3_000)
    assert int(got[0].properties["TIMER_ENQUEUE_MS"]) <= t0 + 1_000

    clock.advance(2_000)
    b.tick()
    assert _bodies(b, T) == [b"in3s", b"at"]
    assert b.timer_backlog().pending == 0 and b.broker_runtime_info()["timerCongestNum"] == "0"


def test_timer_message_can_be_cancelled_and_bad_timers_are_refused(make_broker, clock: FakeClock):
    b = make_broker()
    b.create_or_update_topic(T, 1, 1)
    due = clock.now + 10_000
    keep = b.send_message(T, b"keep", {"TIMER_DELIVER_MS": str(due)}, queue_id=0)
    gone = b.send_message(T, b"gone", {"TIMER_DELIVER_MS": str(due)}, queue_id=0)
    b.send_message(T, b"", {"TIMER_DELIVER_MS": str(due), "TIMER_DEL_UNIQKEY": build_delete_key(T, gone.uniq_key)},
                   queue_id=0)
    b.tick()
    clock.advance(10_000)
    result = b.tick().timer
    assert result is not None and result.cancelled == 1
    got = _pull(b, T)
    assert [m.uniq_key for m in got] == [keep.uniq_key]

    with pytest.raises(MessageIllegalError, match="timerMaxDelaySec"):
        b.send_message(T, b"x", {"TIMER_DELAY_SEC": str(4 * 86_400)}, queue_id=0)
    with pytest.raises(MessageIllegalError, match="^TIMER_DELIVER_MS must be an integer, got 'soon'$"):
        b.send_message(T, b"x", {"TIMER_DELIVER_MS": "soon"}, queue_id=0)
    with pytest.raises(MessageIllegalError, match="^TIMER_DELAY_SEC is out of the range of a Java long"):
        b.send_message(T, b"x", {"TIMER_DELAY_SEC": "9" * 20}, queue_id=0)
    assert b.get_max_offset("rmq_sys_wheel_timer", 0) == 3  # nothing of the refused ones was written


def test_timer_wheel_disabled_refuses_timer_messages(make_broker, tmp_path: Path):
    b = make_broker(tmp_path / "nowheel", timerWheelEnable="false")
    b.create_or_update_topic(T, 1, 1)
    assert b.timer_backlog() is None and b.broker_runtime_info()["timerCongestNum"] == "0"
    with pytest.raises(BrokerSystemError, match="timerWheelEnable"):  # SYSTEM_ERROR, as Apache: retriable
        b.send_message(T, b"x", {"TIMER_DELAY_SEC": "5"}, queue_id=0)
    assert not (tmp_path / "nowheel" / "timerwheel").exists()


def test_timer_settings_changed_by_update_broker_config_apply_to_the_next_message(make_broker, tmp_path: Path):
    """updateBrokerConfig answered success and getBrokerConfig showed the new timerMaxDelaySec and
    timerWheelEnable, but sends kept the values of the broker's start (the put hook had copied them)."""
    b = make_broker()
    b.create_or_update_topic(T, 1, 1)
    b.send_message(T, b"x", {"TIMER_DELAY_SEC": "60"}, queue_id=0)
    b.update_broker_config({"timerMaxDelaySec": "10"})
    with pytest.raises(MessageIllegalError, match="exceeds timerMaxDelaySec 10"):
        b.send_message(T, b"x", {"TIMER_DELAY_SEC": "60"}, queue_id=0)
    b.send_message(T, b"x", {"TIMER_DELAY_SEC": "5"}, queue_id=0)
    b.update_broker_config({"timerWheelEnable": "false"})
    with pytest.raises(BrokerSystemError, match="timerWheelEnable is false"):
        b.send_message(T, b"x", {"TIMER_DELAY_SEC": "5"}, queue_id=0)
    assert b.broker_runtime_info()["timerWheelEnable"] == "false"
    assert b.get_max_offset("rmq_sys_wheel_timer", 0) == 2
    # a broker started without the wheel has none to deliver with: switching it on waits for a restart
    off = make_broker(tmp_path / "nowheel", timerWheelEnable="false")
    off.create_or_update_topic(T, 1, 1)
    off.update_broker_config({"timerWheelEnable": "true"})
    with pytest.raises(BrokerSystemError, match="starts with the broker"):
        off.send_message(T, b"x", {"TIMER_DELAY_SEC": "5"}, queue_id=0)
    assert off.broker_runtime_info()["timerWheelEnable"] == "false"


def test_timer_message_survives_a_restart(make_broker, clock: FakeClock):
    b = make_broker()
    b.create_or_update_topic(T, 1, 1)
    b.send_message(T, b"later", {"TIMER_DELAY_SEC": "60"}, queue_id=0)
    b.tick()
    b = _restart(make_broker, b)
    assert b.timer_backlog().pending == 1
    clock.advance(60_000)
    b.tick()
    assert _bodies(b, T) == [b"later"]
    b = _restart(make_broker, b)
    clock.advance(1_000)
    b.tick()
    assert _bodies(b, T) == [b"later"]  # delivered exactly once


def test_timer_delivers_after_clean_expired_consume_queues(make_broker, clock: FakeClock):
    """cleanExpiredCQ once destroyed the timer topic's queue when every message in it had expired: its
    queue offsets started again at 0 while the timer waited at the old one, so the next delayed
    messages were never delivered. System topics' queues stay, as RocketMQ 5's cleanExpired keeps
    them (its own services read them by queue offset)."""
    b = make_broker()
    b.create_or_update_topic(T, 1, 1)
    b.send_message(T, b"first", {"TIMER_DELAY_SEC": "1"}, queue_id=0)
    b.tick()
    clock.advance(1_000)
    assert b.tick().timer.delivered == 1
    while b.store.commit_log.min_offset() == 0:  # the timer topic's record in a deleted commitlog file
        for _ in range(40):
            b.send_message(T, b"f" * 8_000, queue_id=0)
        b.store.retention.mtime_of = lambda path: 0  # every full file expired
        b.delete_expired_commit_log()
    removed = b.clean_expired_consume_queues()
    assert ("rmq_sys_wheel_timer", 0) not in removed and b.get_topic("rmq_sys_wheel_timer") is not None
    b.send_message(T, b"second", {"TIMER_DELAY_SEC": "1"}, queue_id=0)
    b.tick()
    clock.advance(1_000)
    b.tick()
    last = b.pull_message(G, T, 0, b.get_max_offset(T, 0) - 1, 1).messages
    assert [m.body for m in last] == [b"second"]


# -- (b) delay levels and the retry ladder ---------------------------------------------------------------
def test_delay_level_message_lands_after_its_delay(make_broker, clock: FakeClock):
    b = make_broker(messageDelayLevel="1s 5s 10s")
    b.create_or_update_topic(T, 1, 1)
    b.send_message(T, b"d2", {"DELAY": "2"}, queue_id=0)
    b.send_message(T, b"d9", {"DELAY": "9"}, queue_id=0)  # clamped to the last level (10s)
    assert b.get_max_offset(T, 0) == 0
    assert [s.pending for s in b.schedule_stats()] == [0, 1, 1]
    clock.advance(4_999)
    assert b.tick().scheduled_delivered == 0
    clock.advance(1)
    assert b.tick().scheduled_delivered == 1
    assert _bodies(b, T) == [b"d2"]
    assert "DELAY" not in _pull(b, T)[0].properties
    b = _restart(make_broker, b, messageDelayLevel="1s 5s 10s")
    assert b.broker_runtime_info()["scheduleMessageOffset_2"] == "1,1"
    clock.advance(5_000)
    b.tick()
    assert _bodies(b, T) == [b"d2", b"d9"]


def test_consumer_send_back_walks_the_ladder_to_the_dlq(make_broker, clock: FakeClock):
    b = make_broker(messageDelayLevel="1s 2s 3s 4s 5s")
    b.create_or_update_topic(T, 1, 1)
    b.create_or_update_subscription_group(G, retry_max_times=2, retry_queue_nums=1)
    sent = b.send_message(T, b"fail-me", {"TAGS": "a"}, queue_id=0)
    msg = _pull(b, T)[0]
    retry, dlq = b.retry_topic_of(G), b.dlq_topic_of(G)

    first = b.consumer_send_back(G, msg.commit_log_offset, origin_topic=T)
    assert (first.topic, first.delay_level, first.dlq) == (retry, 3, False)  # level 3 + reconsume times 0
    assert b.get_max_offset("SCHEDULE_TOPIC_XXXX", 2) == 1 and b.get_max_offset(retry, 0) == 0
    clock.advance(3_000)
    b.tick()
    r1 = _pull(b, retry)
    assert [m.reconsume_times for m in r1] == [1]
    assert r1[0].properties["RETRY_TOPIC"] == T and r1[0].properties["ORIGIN_MESSAGE_ID"] == sent.msg_id

    second = b.consumer_send_back(G, r1[0].msg_id)  # the offset msgId works too
    assert (second.topic, second.delay_level) == (retry, 4)
    clock.advance(4_000)
    b.tick()
    r2 = _pull(b, retry)
    assert [m.reconsume_times for m in r2] == [1, 2]

    third = b.consumer_send_back(G, r2[1].commit_log_offset)
    assert third.dlq and third.topic == dlq
    dead = _pull(b, dlq)
    assert len(dead) == 1 and dead[0].body == b"fail-me" and dead[0].reconsume_times == 3
    assert dead[0].properties["DLQ_ORIGIN_TOPIC"] == T
    assert b.get_topic(dlq) is not None

    with pytest.raises(InvalidParameterError):
        b.consumer_send_back(G, "not-a-msg-id")


# -- (c) transactions -----------------------------------------------------------------------------------
def _tx_broker(make_broker: Callable[..., Broker], root: Path | None = None, **props: str) -> Broker:
    base = {"transactionTimeOut": "1000", "transactionCheckInterval": "1000", "transactionCheckMax": "2",
            "transactionOpBatchInterval": "0"}
    base.update(props)
    b = make_broker(root, **base)
    b.create_or_update_topic(T, 1, 1)
    return b


def _send_half(b: Broker, body: bytes = b"tx"):  # -> SendResult
    return b.send_message(T, body, {"TRAN_MSG": "true", "PGROUP": PG}, queue_id=0, producer_group=PG)


def _end(b: Broker, half, state: int, from_check: bool = False):  # -> EndTransactionResult
    return b.end_transaction(PG, half.queue_offset, half.commit_log_offset, state, msg_id=half.msg_id,
                             transaction_id=half.transaction_id, from_transaction_check=from_check)


def test_transaction_commit_and_rollback_across_a_restart(make_broker, clock: FakeClock):
    b = _tx_broker(make_broker)
    commit, rollback = _send_half(b, b"c"), _send_half(b, b"r")
    assert b.get_max_offset(T, 0) == 0 and b.get_max_offset("RMQ_SYS_TRANS_HALF_TOPIC", 0) == 2
    assert (commit.queue_offset, rollback.queue_offset) == (0, 1)  # the half's ids go back to the producer
    assert b.transaction_metrics().half_pending == {T: 2}

    b = _restart(make_broker, b, transactionTimeOut="1000", transactionCheckInterval="1000")
    assert b.transaction_metrics().half_pending == {T: 2}
    assert _end(b, commit, TRANSACTION_COMMIT_TYPE).ok
    assert _end(b, rollback, TRANSACTION_ROLLBACK_TYPE).ok
    assert _end(b, commit, TRANSACTION_NOT_TYPE).status is EndTransactionStatus.IGNORED
    got = _pull(b, T)
    assert [m.body for m in got] == [b"c"] and got[0].uniq_key == commit.uniq_key
    assert "TRAN_MSG" not in got[0].properties
    view = b.transaction_metrics()
    assert view.half_pending == {T: 0} and (view.counters.commits, view.counters.rollbacks) == (1, 1)

    # Restart before any check: the op markers were written, nothing is checked or committed twice.
    b = _restart(make_broker, b, transactionTimeOut="1000", transactionCheckInterval="1000")
    asked: list[str] = []
    b.set_transaction_check_listener(lambda half, group: asked.append(half.uniq_key))
    clock.advance(5_000)
    b.tick()
    assert asked == [] and _bodies(b, T) == [b"c"]
    wrong = b.end_transaction("other-group", commit.queue_offset, commit.commit_log_offset, TRANSACTION_COMMIT_TYPE)
    assert wrong.status is EndTransactionStatus.SYSTEM_ERROR


def test_unknown_transaction_is_checked_back_and_committed_by_the_listener(make_broker, clock: FakeClock):
    b = _tx_broker(make_broker)
    half = _send_half(b, b"unknown")
    assert _end(b, half, TRANSACTION_NOT_TYPE).status is EndTransactionStatus.IGNORED
    b = _restart(make_broker, b, transactionTimeOut="1000", transactionCheckInterval="1000",
                 transactionOpBatchInterval="0")
    checks: list[tuple[str, str]] = []

    def listener(h: MessageExt, group: str) -> None:
        checks.append((h.uniq_key, group))
        res = b.end_transaction(group, h.queue_offset, h.commit_log_offset, TRANSACTION_COMMIT_TYPE,
                                msg_id=h.msg_id, from_transaction_check=True)
        assert res.ok, res.remark

    b.set_transaction_check_listener(listener)
    b.tick()
    assert checks == [] and _bodies(b, T) == []  # too young to be checked
    clock.advance(1_500)
    report = b.tick().transaction_check
    assert report is not None and len(report.checked) == 1
    assert checks == [(half.uniq_key, PG)]
    assert _bodies(b, T) == [b"unknown"]
    clock.advance(5_000)
    b.tick()
    assert len(checks) == 1 and _bodies(b, T) == [b"unknown"]
    assert b.transaction_metrics().counters.checks_sent == 1


def test_exhausted_checks_park_the_half_in_trans_check_max_time_topic(make_broker, clock: FakeClock):
    b = _tx_broker(make_broker)
    half = _send_half(b, b"never-answered")
    asked: list[int] = []
    b.set_transaction_check_listener(lambda h, g: asked.append(h.queue_offset))
    clock.advance(1_500)
    b.tick()
    assert len(asked) == 1
    b = _restart(make_broker, b, transactionTimeOut="1000", transactionCheckInterval="1000",
                 transactionCheckMax="2", transactionOpBatchInterval="0")
    b.set_transaction_check_listener(lambda h, g: asked.append(h.queue_offset))
    for _ in range(3):
        clock.advance(1_500)
        b.tick()
    assert len(asked) == 2  # transactionCheckMax = 2 checks, then discarded
    tc = b.get_topic("TRANS_CHECK_MAX_TIME_TOPIC")
    assert tc is not None and tc.read_queue_nums == 1
    parked = _pull(b, "TRANS_CHECK_MAX_TIME_TOPIC", group="G_ops")
    assert [m.body for m in parked] == [b"never-answered"] and parked[0].uniq_key == half.uniq_key
    assert _bodies(b, T) == []
    assert b.transaction_metrics().half_pending == {T: 0}
    clock.advance(5_000)
    b.tick()
    assert len(asked) == 2


def test_transaction_refusals(make_broker, tmp_path: Path):
    b = _tx_broker(make_broker)
    half = _send_half(b)
    with pytest.raises(InvalidParameterError, match="belongs to topic"):
        b.end_transaction(PG, half.queue_offset, half.commit_log_offset, TRANSACTION_COMMIT_TYPE, topic="Other")
    plain = b.send_message(T, b"plain", queue_id=0)
    res = b.end_transaction(PG, plain.queue_offset, plain.commit_log_offset, TRANSACTION_COMMIT_TYPE)
    assert res.status is EndTransactionStatus.SYSTEM_ERROR and "not a half message" in res.remark
    b2 = _tx_broker(make_broker, tmp_path / "reject", rejectTransactionMessage="true")
    with pytest.raises(NoPermissionError):
        _send_half(b2)


def test_starting_the_broker_keeps_what_happened_before_start(make_broker, clock: FakeClock):
    b = _tx_broker(make_broker)
    _send_half(b)
    b = _restart(make_broker, b)  # config/transactionMetrics now says 1
    _send_half(b)
    b.send_message(T, b"d", {"DELAY": "1"}, queue_id=0)
    b.start()
    assert b.transaction_metrics().half_pending == {T: 2}
    b.shutdown()
    b = make_broker(b.root)
    assert b.transaction_metrics().half_pending == {T: 2}
    assert sum(s.pending for s in b.schedule_stats()) == 1
