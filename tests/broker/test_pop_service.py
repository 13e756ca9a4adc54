"""Pop, ack, changeInvisibleTime, revive into the pop retry topic, DLQ, long polling, restart, reset."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from broker_core.broker.errors import InvalidParameterError, TopicNotExistError
from broker_core.broker.pop import (
    AckStatus,
    InvalidReceiptHandleError,
    PopConfig,
    PopNoMessageError,
    PopStatus,
)
from broker_core.broker.pop.pop_ck import REVIVE_GROUP

from .conftest import FakeClock
from .test_pop_support import PopEnv, handle_of, parsed, pop_env_factory, reopen

G = "G_pop"
T = "T_pop"
RETRY = "%RETRY%G_pop_T_pop"


@pytest.fixture
def pop_env(tmp_path: Path, clock: FakeClock) -> Iterator[Callable[..., PopEnv]]:
    yield from pop_env_factory(tmp_path, clock)


def _setup(env, n: int = 3, queues: int = 1):  # type: ignore[no-untyped-def]
    env.broker.create_or_update_topic(T, queues, queues)
    env.broker.create_or_update_subscription_group(G)
    return [env.send(T, f"m{i}".encode(), tags="TagA") for i in range(n)]


def test_pop_ack_round_trip_with_real_handles(pop_env) -> None:  # type: ignore[no-untyped-def]
    env = pop_env()
    _setup(env)
    now = env.clock.now
    res = env.pop.pop(G, T, max_msgs=2, invisible_time_ms=30_000)
    assert res.status is PopStatus.FOUND and [m.body for m in res.messages] == [b"m0", b"m1"]
    assert res.pop_time == now and res.invisible_time == 30_000 and res.rest_num == 1
    h0, h1 = (parsed(m) for m in res.messages)
    assert (h0.start_offset, h0.retrieve_time, h0.invisible_time, h0.topic_type, h0.broker_name, h0.queue_id,
            h0.offset) == (0, now, 30_000, "0", "broker-a", 0, 0)
    assert 0 <= h0.revive_queue_id < 8 and h1.offset == 1
    assert h0.commit_log_offset == res.messages[0].commit_log_offset
    assert res.messages[0].properties["1ST_POP_TIME"] == str(now)
    assert res.start_offset_info == "0 0 0" and res.msg_offset_info == "0 0 0,1"
    # The consumer offset moves past the popped batch at once; the checkpoint keeps them in flight.
    assert env.broker.query_offset(G, T, 0) == 2
    assert env.pop.inflight(G) == 2 and env.pop.inflight(G, T, 0) == 2
    assert env.broker.consume_stats(G, T).rows[0].inflight == 2

    assert env.pop.ack(G, T, handle_of(res.messages[0])).status is AckStatus.OK
    again = env.pop.ack(G, T, handle_of(res.messages[0]))
    assert again.status is AckStatus.ALREADY_ACKED and again.ok
    assert env.pop.inflight(G, T) == 1

    nxt = env.pop.pop(G, T, max_msgs=32, invisible_time_ms=30_000)
    assert [m.body for m in nxt.messages] == [b"m2"] and parsed(nxt.messages[0]).start_offset == 2
    assert env.pop.pop(G, T, invisible_time_ms=30_000).status is PopStatus.NO_NEW_MSG


def test_acked_messages_are_never_revived_and_unacked_ones_come_back_once(pop_env) -> None:  # type: ignore[no-untyped-def]
    env = pop_env()
    _setup(env, 2)
    first = env.pop.pop(G, T, max_msgs=2, invisible_time_ms=10_000)
    env.pop.ack(G, T, handle_of(first.messages[0]))
    env.clock.advance(9_999)
    assert env.pop.tick() == 0
    env.clock.advance(1)
    assert env.pop.tick() == 1
    assert env.pop.tick() == 0 and env.pop.inflight(G) == 0
    [retry] = env.messages(RETRY)
    assert retry.body == b"m1" and retry.reconsume_times == 1
    assert retry.properties["1ST_POP_TIME"] == str(first.pop_time)
    assert retry.uniq_key == first.messages[1].uniq_key  # the message id survives redelivery
    assert env.broker.get_topic(RETRY).read_queue_nums == 1

    # The expired handle is stale now.
    late = env.pop.ack(G, T, handle_of(first.messages[1]))
    assert late.status is AckStatus.EXPIRED and not late.ok

    # Consumers pop the retry topic too and see their own topic, with a retry-topic handle.
    again = env.pop.pop(G, T, invisible_time_ms=10_000)
    [m] = again.messages
    assert m.topic == T and m.body == b"m1" and m.reconsume_times == 1
    h = parsed(m)
    assert h.topic_type == "1" and h.real_topic(T, G) == RETRY
    assert env.pop.ack(G, T, handle_of(m)).status is AckStatus.OK
    env.clock.advance(60_000)
    assert env.pop.tick() == 0


def test_a_retried_message_is_acked_with_its_real_retry_topic(pop_env) -> None:  # type: ignore[no-untyped-def]
    """Java's remoting client acks (and changes the invisible time of) a redelivered message with the real
    topic, ExtraInfoUtil.getRealTopic: %RETRY%G_T. The retry prefix was added again (TOPIC_NOT_EXIST for
    "%RETRY%G_%RETRY%G_T"), so every retried message a Java consumer handled came back until the DLQ."""
    env = pop_env()
    _setup(env, 2)
    env.pop.pop(G, T, max_msgs=2, invisible_time_ms=10_000)
    env.clock.advance(10_000)
    assert env.pop.tick() == 2
    again = env.pop.pop(G, T, max_msgs=2, invisible_time_ms=10_000)
    m0, m1 = again.messages
    assert parsed(m0).topic_type == "1"
    changed = env.pop.change_invisible_time(G, RETRY, handle_of(m1), 20_000)
    assert env.pop.ack(G, RETRY, handle_of(m0)).status is AckStatus.OK
    assert env.pop.ack(G, RETRY, changed.receipt_handle).status is AckStatus.OK
    env.clock.advance(60_000)
    assert env.pop.tick() == 0 and env.pop.inflight(G) == 0
    assert env.pop.pop(G, T, invisible_time_ms=10_000).status is PopStatus.NO_NEW_MSG


def test_change_invisible_time_moves_the_revive_time(pop_env) -> None:  # type: ignore[no-untyped-def]
    env = pop_env()
    _setup(env, 1)
    res = env.pop.pop(G, T, invisible_time_ms=10_000)
    old = parsed(res.messages[0])
    env.clock.advance(5_000)
    changed = env.pop.change_invisible_time(G, T, handle_of(res.messages[0]), 60_000)
    new = type(old).decode(changed.receipt_handle)
    assert (new.start_offset, new.offset, new.queue_id, new.topic_type) == (old.start_offset, 0, 0, "0")
    assert new.retrieve_time == env.clock.now == changed.pop_time and new.invisible_time == 60_000
    assert new.revive_queue_id == old.revive_queue_id
    env.clock.advance(10_000)  # the original invisible time is long over
    assert env.pop.tick() == 0 and env.pop.inflight(G, T) == 1
    # The old handle no longer moves anything.
    with pytest.raises(PopNoMessageError):
        env.pop.change_invisible_time(G, T, handle_of(res.messages[0]), 1_000)
    env.clock.advance(50_000)
    assert env.pop.tick() == 1
    [retry] = env.messages(RETRY)
    assert retry.reconsume_times == 1


def test_ack_after_change_invisible_time_uses_the_new_handle(pop_env) -> None:  # type: ignore[no-untyped-def]
    env = pop_env()
    _setup(env, 1)
    res = env.pop.pop(G, T, invisible_time_ms=10_000)
    env.clock.advance(1)
    changed = env.pop.change_invisible_time(G, T, handle_of(res.messages[0]), 20_000)
    assert env.pop.ack(G, T, changed.receipt_handle).status is AckStatus.OK
    env.clock.advance(100_000)
    assert env.pop.tick() == 0 and env.messages(RETRY) == []


def test_reconsumed_past_retry_max_times_goes_to_the_dlq(pop_env) -> None:  # type: ignore[no-untyped-def]
    env = pop_env()
    _setup(env, 1)
    env.broker.create_or_update_subscription_group(G, retry_max_times=2)
    seen = []
    for _ in range(3):
        res = env.pop.pop(G, T, invisible_time_ms=1_000)
        [m] = res.messages
        seen.append(m.reconsume_times)
        env.clock.advance(1_000)
        assert env.pop.tick() == 1
    assert seen == [0, 1, 2]  # retryMaxTimes + 1 deliveries
    res = env.pop.pop(G, T, invisible_time_ms=1_000)
    assert res.status is PopStatus.NO_NEW_MSG
    [dead] = env.messages("%DLQ%" + G)
    assert dead.body == b"m0" and dead.properties["DLQ_ORIGIN_TOPIC"] == T
    assert dead.properties["DLQ_ORIGIN_MESSAGE_ID"] == dead.uniq_key
    assert env.broker.get_topic("%DLQ%" + G).perm == 6
    env.clock.advance(10_000)
    assert env.pop.tick() == 0 and env.pop.inflight(G) == 0


def test_retry_topic_v2_and_round_robin_over_queues(pop_env) -> None:  # type: ignore[no-untyped-def]
    env = pop_env(PopConfig(enable_retry_topic_v2=True))
    env.broker.create_or_update_topic(T, 2, 2)
    for q in (0, 1):
        env.send(T, f"q{q}".encode(), queue_id=q)
    res = env.pop.pop(G, T, max_msgs=1, invisible_time_ms=1_000)
    res2 = env.pop.pop(G, T, max_msgs=1, invisible_time_ms=1_000)
    assert {m.queue_id for m in res.messages + res2.messages} == {0, 1}
    env.clock.advance(1_000)
    assert env.pop.tick() == 2
    assert len(env.messages("%RETRY%G_pop+T_pop")) == 2
    back = env.pop.pop(G, T, invisible_time_ms=1_000)
    assert {parsed(m).topic_type for m in back.messages} == {"2"} and len(back.messages) == 2


def test_tag_filter_skips_other_messages(pop_env) -> None:  # type: ignore[no-untyped-def]
    env = pop_env()
    env.broker.create_or_update_topic(T, 1, 1)
    env.send(T, b"a", tags="TagA")
    env.send(T, b"b", tags="TagB")
    env.send(T, b"c", tags="TagA")
    res = env.pop.pop(G, T, expression="TagA", invisible_time_ms=1_000)
    assert [m.body for m in res.messages] == [b"a", b"c"]
    assert [parsed(m).offset for m in res.messages] == [0, 2]


def test_bad_requests_are_refused(pop_env) -> None:  # type: ignore[no-untyped-def]
    env = pop_env()
    _setup(env, 1)
    with pytest.raises(InvalidParameterError):
        env.pop.pop(G, T, max_msgs=33)
    with pytest.raises(TopicNotExistError):
        env.pop.pop(G, "nope")
    with pytest.raises(InvalidReceiptHandleError):
        env.pop.ack(G, T, "1 2 3")
    with pytest.raises(InvalidParameterError):
        env.pop.pop(G, T, queue_id=5)
    assert env.pop.ack(G, T, "0 1 1000 0 0 broker-a 0 0 0").status is AckStatus.EXPIRED


def test_revive_log_records_are_rocketmq_checkpoints_and_acks(pop_env) -> None:  # type: ignore[no-untyped-def]
    env = pop_env()
    _setup(env, 2)
    res = env.pop.pop(G, T, max_msgs=2, invisible_time_ms=30_000)
    qid = res.revive_qid
    env.pop.batch_ack(G, T, [handle_of(m) for m in res.messages])
    ck, back = env.messages("rmq_sys_REVIVE_LOG_DefaultCluster", qid)
    assert ck.tags == "ck" and back.tags == "bAck"
    body = json.loads(ck.body)
    assert (body["so"], body["n"], body["d"], body["t"], body["c"], body["pt"], body["it"]) == \
        (0, 2, [0, 1], T, G, res.pop_time, 30_000)
    assert ck.uniq_key == f"{T}@0@0@{G}@{res.pop_time}@broker-a@ck"
    assert json.loads(back.body)["aol"] == [0, 1]
    # Nothing is in flight, so the revive group's offset is past both records.
    assert env.broker.offset_manager.query_offset(REVIVE_GROUP, "rmq_sys_REVIVE_LOG_DefaultCluster", qid) == 2


def test_restart_keeps_in_flight_pops(pop_env) -> None:  # type: ignore[no-untyped-def]
    env = pop_env()
    _setup(env, 3)
    res = env.pop.pop(G, T, max_msgs=3, invisible_time_ms=30_000)
    env.pop.ack(G, T, handle_of(res.messages[0]))
    env = reopen(pop_env, env)
    assert env.pop.inflight(G, T) == 2
    assert env.pop.ack(G, T, handle_of(res.messages[0])).status is AckStatus.ALREADY_ACKED
    assert env.pop.ack(G, T, handle_of(res.messages[1])).status is AckStatus.OK
    assert env.pop.pop(G, T, invisible_time_ms=30_000).status is PopStatus.NO_NEW_MSG
    env.clock.advance(30_000)
    assert env.pop.tick() == 1
    # A second restart does not revive it again.
    env = reopen(pop_env, env)
    assert env.pop.inflight(G) == 0
    env.clock.advance(60_000)
    assert env.pop.tick() == 0
    assert [m.body for m in env.messages(RETRY)] == [b"m2"]


def test_offset_reset_drops_in_flight_pops(pop_env) -> None:  # type: ignore[no-untyped-def]
    env = pop_env()
    _setup(env, 3)
    res = env.pop.pop(G, T, max_msgs=3, invisible_time_ms=30_000)
    assert len(res.messages) == 3 and env.pop.inflight(G, T) == 3
    env.broker.reset_offset(G, T, offset=1)
    assert env.pop.inflight(G, T) == 0
    again = env.pop.pop(G, T, invisible_time_ms=30_000)
    assert [parsed(m).offset for m in again.messages] == [1, 2]
    env.clock.advance(30_000)
    assert env.pop.tick() == 2  # only the pops made after the reset come back
    env = reopen(pop_env, env)
    assert env.pop.inflight(G) == 0


def test_long_polling_pop_wakes_when_a_message_arrives(pop_env) -> None:  # type: ignore[no-untyped-def]
    env = pop_env()
    _setup(env, 0)
    out = {}

    def consumer() -> None:
        out["res"] = env.pop.pop(G, T, invisible_time_ms=10_000, poll_time_ms=20_000)

    t = threading.Thread(target=consumer)
    started = time.monotonic()
    t.start()
    deadline = time.monotonic() + 5
    while env.pop.long_polling.waiting() == 0 and time.monotonic() < deadline:
        time.sleep(0.005)
    assert env.pop.long_polling.waiting() == 1
    env.send(T, b"late")
    t.join(5)
    assert not t.is_alive() and time.monotonic() - started < 5
    assert out["res"].status is PopStatus.FOUND and out["res"].messages[0].body == b"late"
    assert env.pop.long_polling.waiting() == 0


def test_long_polling_times_out_and_a_full_table_refuses(pop_env) -> None:  # type: ignore[no-untyped-def]
    env = pop_env()
    _setup(env, 0)
    assert env.pop.pop(G, T, poll_time_ms=30).status is PopStatus.POLLING_NOT_FOUND
    env.pop.long_polling.max_pop_polling_size = 0
    full = env.pop.pop(G, T, poll_time_ms=30)
    assert full.status is PopStatus.POLLING_FULL and full.response_code == 209


def test_background_revive_thread_uses_the_injected_clock(pop_env) -> None:  # type: ignore[no-untyped-def]
    env = pop_env(PopConfig(revive_interval=10))
    _setup(env, 1)
    env.pop.pop(G, T, invisible_time_ms=5_000)
    env.pop.start()
    time.sleep(0.05)
    assert env.messages(RETRY) == []  # the fake clock has not moved: nothing is due
    env.clock.advance(5_000)
    deadline = time.monotonic() + 5
    while not env.messages(RETRY) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert [m.reconsume_times for m in env.messages(RETRY)] == [1]
    env.pop.shutdown()
