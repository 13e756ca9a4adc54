"""5.x pop and FIFO pop through the Broker API, with restarts in the middle of consumption.

What a restart must keep: committed offsets, in-flight pops (the revive log), FIFO order info
(consumerOrderInfo.json), and the operator figures (consume_stats inflight / blocked).
"""

from __future__ import annotations

import time
from collections.abc import Callable

from broker_core.broker.broker import Broker
from broker_core.broker.pop import AckStatus, PopStatus
from broker_core.store.codec.message import MessageExt
from mqadmin.embedded import EmbeddedAdmin

from .conftest import FakeClock

G = "G_pop"
T = "PopTopic"
GF = "G_fifo"
TF = "FifoTopic"


def _h(m: MessageExt) -> str:
    return m.properties["POP_CK"]


def _restart(make_broker: Callable[..., Broker], b: Broker) -> Broker:
    b.shutdown()
    return make_broker(b.root)


def _inflight(b: Broker, group: str, topic: str) -> int:
    return sum(s.inflight for s in b.consume_stats(group, topic).rows)


def test_pop_ack_change_invisible_and_revive_across_a_restart(make_broker, clock: FakeClock):
    b = make_broker()
    b.create_or_update_topic(T, 1, 1)
    b.create_or_update_subscription_group(G)
    for i in range(4):
        b.send_message(T, f"m{i}".encode(), queue_id=0)
    got = b.pop_message(G, T, max_msgs=4, invisible_time_ms=10_000)
    assert got.status is PopStatus.FOUND and [m.body for m in got.messages] == [b"m0", b"m1", b"m2", b"m3"]
    m0, m1, m2, m3 = got.messages
    assert b.query_offset(G, T, 0) == 4 and _inflight(b, G, T) == 4
    assert b.ack_message(G, T, _h(m0)).status is AckStatus.OK
    clock.advance(100)
    changed = b.change_invisible_time(G, T, _h(m1), 30_000)
    assert [r.status for r in b.batch_ack(G, T, [_h(m2), _h(m0)])] == [AckStatus.OK, AckStatus.ALREADY_ACKED]
    assert b.pop_message(G, T, invisible_time_ms=10_000).status is PopStatus.NO_NEW_MSG

    b = _restart(make_broker, b)
    assert b.query_offset(G, T, 0) == 4
    assert _inflight(b, G, T) == 2  # m1 (changed) and m3
    conf = b.root.parent / "broker.conf"
    conf.write_text("".join(f"{k}={v}\n" for k, v in b.config.to_properties().items()), encoding="utf-8")
    with EmbeddedAdmin(b.root, conf, read_only=True, clock=clock) as admin:  # what mqadmin consumerProgress shows
        rows = admin.consumer_progress(G, T).rows
        assert [(r.consumer_offset, r.inflight) for r in rows] == [(4, 2)]
    assert b.ack_message(G, T, _h(m2)).status is AckStatus.ALREADY_ACKED
    assert b.ack_message(G, T, _h(m1)).status is AckStatus.ALREADY_ACKED  # the handle before the change
    assert _inflight(b, G, T) == 2

    clock.advance(9_900)
    assert b.tick().revived == 1  # m3 only: m1 is invisible for 30 s from the change
    back = b.pop_message(G, T, invisible_time_ms=10_000)
    assert [(m.body, m.reconsume_times) for m in back.messages] == [(b"m3", 1)]
    assert back.messages[0].topic == T  # consumers see their own topic, not the pop retry topic
    assert b.ack_message(G, T, _h(back.messages[0])).ok

    b = _restart(make_broker, b)
    clock.advance(20_099)
    assert b.tick().revived == 0
    clock.advance(1)
    assert b.tick().revived == 1
    again = b.pop_message(G, T, invisible_time_ms=10_000)
    assert [(m.body, m.reconsume_times) for m in again.messages] == [(b"m1", 1)]
    assert b.ack_message(G, T, _h(again.messages[0])).ok
    assert b.ack_message(G, T, changed.receipt_handle).status is not AckStatus.OK
    clock.advance(60_000)
    assert b.tick().revived == 0 and _inflight(b, G, T) == 0


def test_fifo_pop_keeps_order_and_blocking_across_a_restart(make_broker, clock: FakeClock):
    b = make_broker()
    b.create_or_update_topic(TF, 1, 1)
    b.create_or_update_subscription_group(GF, consume_message_orderly=True)
    for i in range(3):
        b.send_message(TF, f"f{i}".encode(), queue_id=0)
    first = b.pop_message(GF, TF, invisible_time_ms=20_000)
    assert [m.body for m in first.messages] == [b"f0", b"f1", b"f2"]
    assert b.ack_message(GF, TF, _h(first.messages[0])).ok
    b.send_message(TF, b"f3", queue_id=0)
    assert b.query_offset(GF, TF, 0) == 1

    b = _restart(make_broker, b)
    stats = b.consume_stats(GF, TF).rows
    assert stats[0].blocked and stats[0].inflight == 2 and stats[0].consumer_offset == 1
    assert b.pop_message(GF, TF, invisible_time_ms=20_000).messages == []  # still blocked
    clock.advance(20_000)
    redelivered = b.pop_message(GF, TF, invisible_time_ms=20_000)
    # The unacked part of the batch comes back first, counted as a redelivery; f3 joins it as new.
    assert [(m.body, m.reconsume_times) for m in redelivered.messages] == [(b"f1", 1), (b"f2", 1), (b"f3", 0)]
    assert b.ack_message(GF, TF, _h(first.messages[1])).status is not AckStatus.OK  # stale batch

    b = _restart(make_broker, b)
    assert b.consume_stats(GF, TF).rows[0].blocked
    assert b.ack_message(GF, TF, _h(redelivered.messages[2])).ok
    assert b.query_offset(GF, TF, 0) == 1  # commitAndNext: f1 is still not acked
    for m in redelivered.messages[:2]:
        assert b.ack_message(GF, TF, _h(m)).ok
    assert b.query_offset(GF, TF, 0) == 4 and not b.consume_stats(GF, TF).rows[0].blocked
    b.send_message(TF, b"f4", queue_id=0)
    nxt = b.pop_message(GF, TF, invisible_time_ms=20_000)
    assert [(m.body, m.reconsume_times) for m in nxt.messages] == [(b"f4", 0)]


def test_offset_reset_through_the_broker_clears_pop_state(make_broker, clock: FakeClock):
    b = make_broker()
    b.create_or_update_topic(TF, 1, 1)
    b.create_or_update_subscription_group(GF, consume_message_orderly=True)
    for i in range(2):
        b.send_message(TF, f"f{i}".encode(), queue_id=0)
    b.pop_message(GF, TF, invisible_time_ms=20_000)
    assert b.consume_stats(GF, TF).rows[0].blocked
    b.reset_offset(GF, TF, offset=0)
    assert not b.consume_stats(GF, TF).rows[0].blocked
    assert [m.body for m in b.pop_message(GF, TF, invisible_time_ms=20_000).messages] == [b"f0", b"f1"]


def test_background_services_run_after_start_and_stop_before_the_store(make_broker, clock: FakeClock):
    b = make_broker(reviveInterval="10")
    b.create_or_update_topic(T, 1, 1)
    b.create_or_update_subscription_group(G)
    b.send_message(T, b"bg", queue_id=0)
    b.pop_message(G, T, invisible_time_ms=5_000)
    b.start()
    clock.advance(5_000)
    deadline = time.monotonic() + 5
    retry = f"%RETRY%{G}_{T}"
    while b.get_topic(retry) is None or b.get_max_offset(retry, 0) == 0:
        assert time.monotonic() < deadline, "the revive thread did not run"
        time.sleep(0.01)
    b.shutdown()
    b = make_broker(b.root)
    assert _inflight(b, G, T) == 0 and b.get_max_offset(retry, 0) == 1
