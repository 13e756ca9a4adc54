"""The SQL92 bitmap across restarts and crashes, and the filter manager's registration rules (Broker API).

Why these: the bitmaps on disk are only as good as the filters' birth times that go with them, so the
filters must survive a restart (consumerFilter.json) and keep getting bits while their consumers are
away; an expression change must re-birth the filter so older bitmaps are not trusted.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from broker_core.broker.client_registry import ConsumerData, SubscriptionData
from tests.broker.conftest import FakeClock, small_config

FLAGS = {"enableConsumeQueueExt": "true", "enableCalcFilterBitMap": "true"}
EXPR = "pick = 'yes'"


def _heartbeat(broker, group: str, expr: str = EXPR, version: int = 1, channel: str = "ch") -> None:
    broker.heartbeat(channel, f"{group}@client", consumers=[ConsumerData(
        group, "CONSUME_ACTIVELY", subscriptions=(SubscriptionData("B", expr, "SQL92", version),))])


def _send(broker, clock: FakeClock, first: int, n: int) -> None:
    for i in range(first, first + n):
        clock.advance(1)
        broker.send_message("B", b"m%d" % i, {"pick": "yes" if i % 5 == 0 else "no", "seq": str(i)}, queue_id=0)
    broker.store.wait_for_dispatch()


def _pull(broker, group: str, expr: str = EXPR) -> list[int]:
    r = broker.pull_message(group, "B", 0, 0, 1000, "SQL92", expr)
    return [int(m.properties["seq"]) for m in r.messages]


def _counts(broker) -> tuple[int, int, int]:
    s = broker.consumer_filter_manager.stats
    return s.skipped, s.maybe, s.not_usable


def test_filters_and_bitmaps_survive_a_restart(make_broker, clock: FakeClock, tmp_path: Path) -> None:
    b = make_broker(**FLAGS)
    b.create_or_update_topic("B", 1, 1)
    _heartbeat(b, "g")
    _send(b, clock, 0, 20)
    assert _pull(b, "g") == [0, 5, 10, 15] and _counts(b) == (16, 4, 0)
    b.shutdown()
    saved = json.loads((tmp_path / "store" / "config" / "consumerFilter.json").read_text())
    data = saved["filterDataByTopic"]["B"]["groupFilterData"]["g"]
    assert data["expression"] == EXPR and data["bloomFilterData"]["bitNum"] == 112

    clock.advance(1000)
    b = make_broker(**FLAGS)
    # loaded as dead until the group heartbeats again, but its bits are still computed
    assert b.consumer_filter_manager.get("B", "g").is_dead()
    _send(b, clock, 20, 10)
    _heartbeat(b, "g")  # same version: re-alive with the old birth time
    assert not b.consumer_filter_manager.get("B", "g").is_dead()
    assert _pull(b, "g") == [0, 5, 10, 15, 20, 25] and _counts(b) == (24, 6, 0)


def test_an_expression_change_rebirths_the_filter(make_broker, clock: FakeClock) -> None:
    b = make_broker(**FLAGS)
    b.create_or_update_topic("B", 1, 1)
    _heartbeat(b, "g")
    _send(b, clock, 0, 10)
    clock.advance(5)
    new = "seq > 7"
    _heartbeat(b, "g", new, version=2)  # bitmaps so far hold the old expression's bits: not trusted
    assert _pull(b, "g", new) == [8, 9] and _counts(b) == (0, 0, 10)
    _send(b, clock, 10, 2)
    assert _pull(b, "g", new) == [8, 9, 10, 11] and _counts(b) == (0, 2, 20)
    # an older version of the subscription changes nothing
    _heartbeat(b, "g", EXPR, version=1)
    assert b.consumer_filter_manager.get("B", "g").expression == new


def test_a_pull_with_another_expression_does_not_use_the_bits(make_broker, clock: FakeClock) -> None:
    b = make_broker(**FLAGS)
    b.create_or_update_topic("B", 1, 1)
    _heartbeat(b, "g")
    _send(b, clock, 0, 10)
    assert _pull(b, "g", "pick = 'no'") == [1, 2, 3, 4, 6, 7, 8, 9]
    assert _counts(b) == (0, 0, 0)


def test_crash_recovery_recomputes_lost_bitmaps(make_broker, clock: FakeClock, tmp_path: Path) -> None:
    b = make_broker(**FLAGS)
    b.create_or_update_topic("B", 1, 1)
    _heartbeat(b, "g")
    _send(b, clock, 0, 10)
    b.persist()
    b.store.flush()
    crashed = tmp_path / "crashed"
    shutil.copytree(tmp_path / "store", crashed)  # the disk as a kill -9 now would leave it
    # the last two CQ units were lost (their ext units were written)
    cq = sorted((crashed / "consumequeue" / "B" / "0").iterdir())[0]
    with open(cq, "r+b") as f:
        f.seek(8 * 20)
        f.write(bytes(40))
    b.shutdown()
    clock.advance(10)
    r = make_broker(root=crashed, config=small_config(**FLAGS))
    assert r.store.recovery_report.abnormal
    _heartbeat(r, "g")
    assert _pull(r, "g") == [0, 5] and _counts(r) == (8, 2, 0)
    units = r.store.get_units("B", 0, 0, 20)
    assert len(units) == 10 and all(u.ext is not None and u.ext.filter_bit_map is not None for u in units)
