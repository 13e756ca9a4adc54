"""The golden store-timer (written by Apache RocketMQ) opened by a Broker with the golden config.

Six timer messages were still in the wheel when the Java broker shut down; a Broker that comes back
later and whose clock moves past their delivery times must deliver each of them exactly once to
GoldenTimerTopic, pullable like any message, with the figures an operator sees moving accordingly.
"""

from __future__ import annotations

import base64
import hashlib
import logging
from collections import Counter
from pathlib import Path

import pytest
from golden_helpers import golden_store_config, write_broker_conf

from broker_core.broker.broker import Broker
from broker_core.broker.broker_config import BrokerConfig
from broker_core.broker.errors import ServiceNotAvailableError
from mqadmin.embedded import EmbeddedAdmin

from .conftest import FakeClock

TOPIC = "GoldenTimerTopic"


def test_golden_timer_store_delivers_its_pending_messages_through_the_broker(golden_copy, manifests, make_broker,
                                                                            clock: FakeClock):
    manifest = manifests["store-timer"]
    root = golden_copy("store-timer")
    delivered_before = {d["uniqKey"] for d in manifest["deliveredToRealTopic"]}
    pending = [m for m in manifest["messages"] if m["uniqKey"] not in delivered_before]
    assert len(pending) == 6
    clock.now = manifest["timerCheckpointAfterShutdown"]["lastReadTimeMs"] + 5_000
    config = BrokerConfig.from_properties(golden_store_config("store-timer"))
    b = make_broker(root, config=config)

    info = b.broker_runtime_info()
    assert info["timerCongestNum"] == "6" and info["timerOffsetBehind"] == "0"
    backlog = b.timer_backlog()
    assert backlog is not None and backlog.pending == 6 and backlog.queue_offset == 10
    before = {q: b.get_max_offset(TOPIC, q) for q in (0, 1)}
    assert before == {0: 2, 1: 2}
    assert b.tick().timer.delivered == 0  # nothing is due yet

    first = min(m["timerOutMs"] for m in pending)
    clock.now = first + 999
    b.tick()
    assert {q: b.get_max_offset(TOPIC, q) for q in (0, 1)} == before
    clock.now = max(m["timerOutMs"] for m in pending) + 1_000
    assert b.tick().timer.delivered == 6

    got = {m.uniq_key: m for q in (0, 1) for m in b.pull_message("G_golden", TOPIC, q, 0, 32).messages}
    assert len(got) == 10
    for m in pending:
        msg = got[m["uniqKey"]]
        assert msg.queue_id == m["realQueueId"] and msg.body == base64.b64decode(m["body"])
        assert msg.properties["TIMER_OUT_MS"] == m["properties"]["TIMER_OUT_MS"]
        assert "TIMER_DEQUEUE_MS" in msg.properties and "TIMER_ENQUEUE_MS" in msg.properties
    assert b.timer_backlog().pending == 0 and b.broker_runtime_info()["timerCongestNum"] == "0"

    b.shutdown()
    clock.advance(60_000)
    b = make_broker(root, config=BrokerConfig.from_properties(golden_store_config("store-timer")))
    b.tick()
    assert {q: b.get_max_offset(TOPIC, q) for q in (0, 1)} == {0: 5, 1: 5}  # nothing delivered twice


def _reopen_damaged(root: Path, manifest: dict, make_broker, clock: FakeClock) -> Broker:
    """The damaged golden timer store opened by a Broker at the golden checkpoint's time (plus 5 s)."""
    clock.now = manifest["timerCheckpointAfterShutdown"]["lastReadTimeMs"] + 5_000
    return make_broker(root, config=BrokerConfig.from_properties(golden_store_config("store-timer")))


def _deliveries_when_all_are_due(b: Broker, manifest: dict, clock: FakeClock) -> tuple[int, Counter[str], set[str]]:
    """Move the clock past every timer message's time and tick: (timer deliveries, how often each unique
    key reached GoldenTimerTopic, the unique keys the golden store still had pending)."""
    clock.now = max(m["timerOutMs"] for m in manifest["messages"]) + 2_000
    delivered = sum(b.tick().timer.delivered for _ in range(5))
    got = Counter(m.uniq_key for q in (0, 1) for m in b.pull_message("G_golden", TOPIC, q, 0, 64).messages)
    pending = {m["uniqKey"] for m in manifest["messages"]} - {d["uniqKey"] for d in manifest["deliveredToRealTopic"]}
    return delivered, got, pending


def _warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]


@pytest.mark.parametrize("damage", ["missing", "empty", "zeroed", "short"])
def test_a_damaged_timer_checkpoint_is_named_and_wheels_each_timer_message_once(
        damage: str, golden_copy, manifests, make_broker, clock: FakeClock, caplog: pytest.LogCaptureFixture):
    """A missing, empty, zeroed or cut ``config/timercheck`` was silent, and its zero
    masterTimerQueueOffset had every timer message of rmq_sys_wheel_timer wheeled and delivered again
    (20 deliveries for the 6 pending). The timer log says how far the queue was wheeled; only what
    the wheel still holds can come again (it is read from 7 days back, as Java does), and the warning
    names the file."""
    manifest = manifests["store-timer"]
    root = golden_copy("store-timer")
    check = root / "config" / "timercheck"
    if damage == "missing":
        check.unlink()
    else:
        check.write_bytes({"empty": b"", "zeroed": bytes(4096), "short": check.read_bytes()[:20]}[damage])
    caplog.set_level(logging.WARNING, "rmqops")
    b = _reopen_damaged(root, manifest, make_broker, clock)
    (warning,) = [w for w in _warnings(caplog) if "timer checkpoint" in w]
    assert warning.startswith(f"timer checkpoint {check} is ") and "delivered again" in warning
    delivered, got, pending = _deliveries_when_all_are_due(b, manifest, clock)
    assert pending <= set(got)  # nothing held back
    assert delivered <= len(manifest["messages"])  # no timer message wheeled twice
    assert max(got.values()) <= 2


def test_an_emptied_timer_log_wheels_the_timer_queue_again_instead_of_losing_its_pending_messages(
        golden_copy, manifests, make_broker, clock: FakeClock, caplog: pytest.LogCaptureFixture):
    """With the timer log emptied, the checkpoint's queue offset (10) said every timer message had been
    wheeled, the wheel's slots pointed outside the log, and the 6 pending messages were never delivered."""
    manifest = manifests["store-timer"]
    root = golden_copy("store-timer")
    (root / "timerlog" / ("0" * 20)).write_bytes(b"")
    caplog.set_level(logging.WARNING, "rmqops")
    b = _reopen_damaged(root, manifest, make_broker, clock)
    assert any("wheeling it again from its first message" in w for w in _warnings(caplog))
    _, got, pending = _deliveries_when_all_are_due(b, manifest, clock)
    assert pending <= set(got)


def test_wheel_slots_leading_past_a_cut_timer_log_are_cleared_not_reused(
        golden_copy, manifests, make_broker, clock: FakeClock, caplog: pytest.LogCaptureFixture):
    """The timer log cut to 5 of its 10 units: the wheel's slots of the 5 lost units kept pointing past its
    end, the units appended next took those positions, and those slots delivered other messages' units
    again (22 deliveries, one message 6 times, for the 6 pending)."""
    manifest = manifests["store-timer"]
    root = golden_copy("store-timer")
    timer_log = root / "timerlog" / ("0" * 20)
    timer_log.write_bytes(timer_log.read_bytes()[:260])
    caplog.set_level(logging.WARNING, "rmqops")
    b = _reopen_damaged(root, manifest, make_broker, clock)
    assert any("wheel slot(s) led only to timer log units past its valid end" in w for w in _warnings(caplog))
    _, got, pending = _deliveries_when_all_are_due(b, manifest, clock)
    assert pending <= set(got)
    assert max(got.values()) <= 2, got  # the re-wheeled ones at most once more


def _snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).digest() for p in sorted(root.rglob("*"))
            if p.is_file()}


def test_read_only_broker_shows_timer_figures_and_writes_nothing(golden_copy, manifests, make_broker,
                                                                 clock: FakeClock, tmp_path: Path):
    root = golden_copy("store-timer")
    clock.now = manifests["store-timer"]["timerCheckpointAfterShutdown"]["lastReadTimeMs"] + 5_000
    before = _snapshot(root)
    conf = write_broker_conf("store-timer", tmp_path / "broker.conf")
    with EmbeddedAdmin(root, conf, read_only=True, clock=clock) as admin:
        row = admin.cluster_list()[0]
        assert row["timerCongestNum"] == 6 and row["timerOffsetBehind"] == 0 and row["timerReadBehind"] == 5
        assert admin.broker_status()["timerCongestNum"] == "6"
    # The Admin has no Broker escape hatch any more: open the same read-only Broker it uses.
    b = Broker(root, BrokerConfig.load(conf, root), clock, read_only=True)
    try:
        assert b.start() is b  # starts nothing
        with pytest.raises(ServiceNotAvailableError):
            b.tick()
        assert b.timer_backlog().pending == 6
    finally:
        b.shutdown()
    assert _snapshot(root) == before
