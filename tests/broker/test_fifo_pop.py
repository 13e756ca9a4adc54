"""FIFO pop (seed 000): queue blocking, commitAndNext, redelivery with consumedCount + 1, attempt ids,
DLQ, consumerOrderInfo.json, restart and reset."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from broker_core.broker.pop import AckStatus, PopStatus
from broker_core.broker.pop.receipt_handle import POP_ORDER_REVIVE_QUEUE
from broker_core.store.config_file import read_config_json

from .conftest import FakeClock
from .test_pop_support import PopEnv, handle_of, parsed, pop_env_factory, reopen

G = "G_fifo"
T = "fifo"
INVISIBLE = 60_000


@pytest.fixture
def pop_env(tmp_path: Path, clock: FakeClock) -> Iterator[Callable[..., PopEnv]]:
    yield from pop_env_factory(tmp_path, clock)


def _setup(env, n: int = 3, **group: object):  # type: ignore[no-untyped-def]
    env.broker.create_or_update_topic(T, 1, 1)
    env.broker.create_or_update_subscription_group(G, consume_message_orderly=True, **group)
    for i in range(n):
        env.send(T, f"m{i}".encode())


def _pop(env, **kw: object):  # type: ignore[no-untyped-def]
    kw.setdefault("invisible_time_ms", INVISIBLE)
    return env.pop.pop(G, T, **kw)


def test_second_consumer_is_blocked_until_the_batch_is_fully_acked(pop_env) -> None:  # type: ignore[no-untyped-def]
    env = pop_env()
    _setup(env)
    a = _pop(env)
    assert [m.body for m in a.messages] == [b"m0", b"m1", b"m2"]
    assert a.revive_qid == POP_ORDER_REVIVE_QUEUE and all(parsed(m).is_order for m in a.messages)
    assert [m.reconsume_times for m in a.messages] == [0, 0, 0]
    assert a.order_count_info == "0 0 0"
    env.send(T, b"m3")

    b = _pop(env)
    assert b.status is PopStatus.NO_NEW_MSG and b.messages == []
    assert env.pop.blocked_fifo_queues(G) == [(T, 0, a.pop_time)]
    assert env.broker.consume_stats(G, T).rows[0].blocked

    assert env.pop.ack(G, T, handle_of(a.messages[0])).status is AckStatus.OK
    assert env.broker.query_offset(G, T, 0) == 1  # commitAndNext: the first un-acked offset
    assert _pop(env).messages == []
    env.pop.ack(G, T, handle_of(a.messages[2]))
    assert env.broker.query_offset(G, T, 0) == 1
    env.pop.ack(G, T, handle_of(a.messages[1]))
    assert env.broker.query_offset(G, T, 0) == 3
    assert env.pop.blocked_fifo_queues(G) == [] and not env.broker.consume_stats(G, T).rows[0].blocked

    b = _pop(env)
    assert [m.body for m in b.messages] == [b"m3"] and b.messages[0].reconsume_times == 0


def test_an_unacked_batch_is_redelivered_after_the_invisible_time(pop_env) -> None:  # type: ignore[no-untyped-def]
    env = pop_env()
    _setup(env)
    a = _pop(env)
    env.clock.advance(INVISIBLE - 1)
    assert _pop(env).messages == []
    env.clock.advance(1)
    b = _pop(env)
    assert [m.body for m in b.messages] == [b"m0", b"m1", b"m2"]
    assert [m.reconsume_times for m in b.messages] == [1, 1, 1]
    # The old consumer's handles are stale; the new ones work.
    assert env.pop.ack(G, T, handle_of(a.messages[0])).status is AckStatus.EXPIRED
    assert env.broker.query_offset(G, T, 0) == 0
    env.clock.advance(INVISIBLE)
    c = _pop(env)
    assert [m.reconsume_times for m in c.messages] == [2, 2, 2]
    assert "0 qo0%0 2" in c.order_count_info.split(";") and c.order_count_info.endswith("0 0 2")


def test_partial_ack_then_expiry_redelivers_from_the_first_unacked(pop_env) -> None:  # type: ignore[no-untyped-def]
    env = pop_env()
    _setup(env)
    a = _pop(env)
    env.pop.ack(G, T, handle_of(a.messages[0]))
    env.clock.advance(INVISIBLE)
    b = _pop(env)
    assert [(m.body, m.reconsume_times) for m in b.messages] == [(b"m1", 1), (b"m2", 1)]


def test_consumer_order_info_json_has_the_seed_shape(pop_env) -> None:  # type: ignore[no-untyped-def]
    env = pop_env()
    _setup(env, 2)
    a = _pop(env)
    env.pop.ack(G, T, handle_of(a.messages[0]))
    env.pop.persist()
    path = env.broker.store.config_dir / "consumerOrderInfo.json"
    text = path.read_text()
    assert '\t\t"fifo@G_fifo":{' in text and "\t\t\t0:{" in text  # Java dialect: bare int queue key
    info = read_config_json(path)["table"]["fifo@G_fifo"]["0"]
    assert info == {"cm": 1, "i": INVISIBLE, "l": env.clock.now, "o": [0, 1], "popTime": a.pop_time}
    env.clock.advance(INVISIBLE)
    b = _pop(env, attempt_id="attempt-1")
    env.pop.persist()
    info = read_config_json(path)["table"]["fifo@G_fifo"]["0"]
    assert info["o"] == [1] and info["oc"] == {"1": 1} and info["a"] == "attempt-1" and info["cm"] == 0
    assert info["popTime"] == b.pop_time
    assert "\t\t\t\t\t1:1" in path.read_text()  # oc: Long keys unquoted too


def test_same_attempt_id_gets_the_same_batch_back(pop_env) -> None:  # type: ignore[no-untyped-def]
    env = pop_env()
    _setup(env)
    a = _pop(env, attempt_id="att-1", max_msgs=2)
    assert _pop(env, attempt_id="att-2").messages == []
    again = _pop(env, attempt_id="att-1", max_msgs=2)
    assert [m.body for m in again.messages] == [m.body for m in a.messages]
    assert [m.reconsume_times for m in again.messages] == [0, 0]  # a lost response is not a consumption


def test_change_invisible_time_keeps_the_queue_blocked_longer(pop_env) -> None:  # type: ignore[no-untyped-def]
    env = pop_env()
    _setup(env, 1)
    a = _pop(env, invisible_time_ms=10_000)
    changed = env.pop.change_invisible_time(G, T, handle_of(a.messages[0]), 50_000)
    h = type(parsed(a.messages[0])).decode(changed.receipt_handle)
    assert h.retrieve_time == a.pop_time and h.invisible_time == 50_000 and h.is_order
    env.clock.advance(20_000)
    assert _pop(env).messages == []
    env.clock.advance(30_000)
    assert [m.reconsume_times for m in _pop(env).messages] == [1]


def test_too_many_redeliveries_send_the_message_to_the_dlq(pop_env) -> None:  # type: ignore[no-untyped-def]
    env = pop_env()
    _setup(env, 2, retry_max_times=1)
    first = _pop(env, max_msgs=1)
    env.clock.advance(INVISIBLE)
    second = _pop(env, max_msgs=1)
    assert [m.reconsume_times for m in first.messages + second.messages] == [0, 1]
    env.clock.advance(INVISIBLE)
    third = _pop(env, max_msgs=1)
    # m0 was consumed retryMaxTimes + 1 times: dead-lettered, acked, and the queue moves on.
    assert third.messages == []
    [dead] = env.messages("%DLQ%" + G)
    assert dead.body == b"m0" and dead.properties["DLQ_ORIGIN_TOPIC"] == T
    assert env.broker.query_offset(G, T, 0) == 1
    nxt = _pop(env, max_msgs=1)
    assert [(m.body, m.reconsume_times) for m in nxt.messages] == [(b"m1", 0)]


def test_restart_keeps_order_info(pop_env) -> None:  # type: ignore[no-untyped-def]
    env = pop_env()
    _setup(env)
    a = _pop(env)
    env.pop.ack(G, T, handle_of(a.messages[0]))
    env = reopen(pop_env, env)
    assert _pop(env).messages == []  # still blocked after the restart
    assert env.pop.inflight(G, T) == 2
    assert env.pop.ack(G, T, handle_of(a.messages[1])).status is AckStatus.OK
    env.clock.advance(INVISIBLE)
    b = _pop(env)
    assert [(m.body, m.reconsume_times) for m in b.messages] == [(b"m2", 1)]


def test_offset_reset_clears_order_info(pop_env) -> None:  # type: ignore[no-untyped-def]
    env = pop_env()
    _setup(env)
    _pop(env)
    assert env.pop.blocked_fifo_queues(G)
    env.broker.reset_offset(G, T, offset=0)
    assert env.pop.blocked_fifo_queues(G) == []
    b = _pop(env)
    assert [(m.body, m.reconsume_times) for m in b.messages] == [(b"m0", 0), (b"m1", 0), (b"m2", 0)]


def test_a_waiting_pop_is_woken_when_the_blocking_batch_is_acked(pop_env) -> None:  # type: ignore[no-untyped-def]
    env = pop_env()
    _setup(env)
    a = _pop(env, max_msgs=2)
    out = {}

    def consumer() -> None:
        out["res"] = _pop(env, poll_time_ms=20_000)

    t = threading.Thread(target=consumer)
    t.start()
    deadline = time.monotonic() + 5
    while env.pop.long_polling.waiting() == 0 and time.monotonic() < deadline:
        time.sleep(0.005)
    started = time.monotonic()
    for m in a.messages:
        env.pop.ack(G, T, handle_of(m))
    t.join(5)
    assert not t.is_alive() and time.monotonic() - started < 2
    assert [m.body for m in out["res"].messages] == [b"m2"]
