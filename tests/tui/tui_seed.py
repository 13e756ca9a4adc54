"""Golden store copies with real consumer and ACL state, for the dashboard tests and the README
screenshots (tests/tui/make_screenshots.py)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from golden_helpers import copy_golden_store, load_manifest, write_broker_conf

from broker_core.auth.model import Acl
from broker_core.broker.broker import Broker
from broker_core.broker.broker_config import BrokerConfig
from mqadmin.commands.dashboard import StoreTarget
from mqadmin.embedded import EmbeddedAdmin
from tui.app import DashboardApp

SIZE = (120, 40)
DASH_GROUP_OFFSETS = {0: 5, 1: 25, 2: 0, 3: 10}  # GoldenTopicA holds 25 per queue: lag 20 + 0 + 25 + 15


@dataclass
class Store:
    name: str
    dir: Path
    conf: Path
    clock_ms: int

    def target(self) -> StoreTarget:
        # A stable description: the snapshots must not contain the pytest temp path.
        return StoreTarget(self.dir, self.conf, clock=lambda: self.clock_ms, description=f"store {self.name}")

    def app(self, refresh_s: float = 3600.0, call_timeout_s: float = 60.0, **kw: object) -> DashboardApp:
        # A generous timeout per call: CI machines are shared and slow; the timeout test sets its own.
        return DashboardApp(self.target(), refresh_s=refresh_s, call_timeout_s=call_timeout_s,
                            clock_ms=lambda: self.clock_ms, **kw)  # type: ignore[arg-type]

    def admin(self, writes: bool = False) -> EmbeddedAdmin:
        return EmbeddedAdmin(self.dir, self.conf, read_only=not writes, clock=lambda: self.clock_ms)


def make_store(name: str, dest_root: Path) -> Store:
    """A fresh copy of golden store ``name`` with its broker.conf; the clock sits 5 s after the golden
    driver started (so the timer wheel's due-in histogram is spread as when it was written)."""
    store = copy_golden_store(name, dest_root / name)
    conf = write_broker_conf(name, dest_root / f"{name}.conf")
    manifest = load_manifest(name)
    start = manifest.get("driverStartMs") or max(m["storeTimestamp"] for m in manifest["messages"])
    return Store(name, store, conf, int(start) + 5000)


def open_broker(store: Store) -> Broker:
    """A writable Broker over the copy (what a running broker would be), for seeding real state."""
    return Broker(store.dir, BrokerConfig.load(store.conf, store.dir), lambda: store.clock_ms, audit_log_path=None)


def seed_consumers(store: Store) -> None:
    """Real consumer state on store-basic through the Broker's own calls: dash_group with committed
    offsets on GoldenTopicA; fifo_group popping GoldenTopicB orderly and not acking (a blocked FIFO
    queue, 3 in flight); pop_group with 4 in flight and one message sent to its DLQ."""
    broker = open_broker(store)
    try:
        broker.create_or_update_subscription_group("dash_group")
        for qid, offset in DASH_GROUP_OFFSETS.items():
            broker.reset_offset("dash_group", "GoldenTopicA", offset=offset, queue_id=qid)
        broker.create_or_update_subscription_group("fifo_group", consume_message_orderly=True)
        broker.create_or_update_subscription_group("pop_group")
        fifo = broker.pop_message("fifo_group", "GoldenTopicB", max_msgs=3, invisible_time_ms=3_600_000,
                                  order=True, init_mode=1)
        assert len(fifo.messages) == 3
        popped = broker.pop_message("pop_group", "GoldenTopicA", max_msgs=4, invisible_time_ms=3_600_000,
                                    init_mode=1)
        assert len(popped.messages) == 4
        broker.consumer_send_back("pop_group", popped.messages[0].commit_log_offset, delay_level=-1)
    finally:
        broker.shutdown()


def seed_acl(store: Store) -> None:
    admin = store.admin(writes=True)
    try:
        admin.create_user("alice", "alice-secret", "Normal")
        admin.create_acl(Acl.of("User:alice", ["Topic:GoldenTopicA"], ["Pub", "Sub"], "Allow", []))
        admin.create_acl(Acl.of("User:alice", ["Topic:GoldenTopicB"], ["Pub"], "Deny", ["10.0.0.0/8"]))
    finally:
        admin.close()
