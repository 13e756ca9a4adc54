"""Brokers coming and going under the dashboard: rates stay per broker (no spike when one comes back,
no zero while one is gone), a broker that drops out of the name server is named on the Overview, a
hung broker's timeout names that broker, and a repeated row key never stops the dashboard."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import pytest
from tui_helpers import first_refresh, run_async, text_of, wait_until
from tui_seed import SIZE

from mqadmin.admin import BrokerIdentity
from mqadmin.commands.dashboard import ClusterTarget
from mqadmin.transport.base import TopicInfo
from mqadmin.transport.values import QueueStatus
from tests.net.harness import Servers
from tui.app import DashboardApp
from tui.errors import CallTimeout
from tui.poller import Poller
from tui.snapshot import BrokerView, History, Snapshot, TopicSnapshot
from tui.widgets.filter_table import _unique_keys

A = BrokerIdentity("DefaultCluster", "broker-a", "127.0.0.1:1001")
B = BrokerIdentity("DefaultCluster", "broker-b", "127.0.0.1:1002")


def _snap(offsets: dict[BrokerIdentity, int]) -> Snapshot:
    """One topic with queue 0 on each broker given, at the given max offset."""
    queues = [QueueStatus(b.broker_name, 0, 0, off, 0) for b, off in offsets.items()]
    return Snapshot(0, [BrokerView(b, {}) for b in offsets], [TopicSnapshot(TopicInfo("T", 1, 1, 6), queues)],
                    [], [], [])


def test_put_rate_is_summed_per_broker_across_a_broker_leaving_and_coming_back():
    now = [0.0]
    history = History(lambda: now[0])
    a, b = 0, 50_000  # broker-b holds far more messages: summing whatever answered made it a spike
    seen: list[float] = []
    for step in range(12):
        now[0] = float(step)
        a += 10
        b += 5
        present = {A: a} if 4 <= step < 7 else {A: a, B: b}  # broker-b gone for three refreshes
        history.add(_snap(present))
        seen.append(history.put_tps.values()[-1])
    gone, back = seen[4:7], seen[7:]
    assert all(abs(r - 10) < 1e-9 for r in gone), seen  # broker-a's own rate, not 0
    assert max(back) <= 15 + 1e-9, seen  # no spike of broker-b's whole backlog
    assert abs(seen[-1] - 15) < 1e-9, seen
    assert abs(history.topic_put_tps("T") - 15) < 1e-9


def test_a_broker_missing_from_a_refresh_is_remembered_until_it_comes_back():
    history = History(lambda: 0.0)
    history.add(_snap({A: 1, B: 1}))
    assert history.missing_brokers == []
    history.add(_snap({A: 1}))
    history.add(_snap({A: 1}))
    assert history.missing_brokers == [B]
    history.add(_snap({A: 1, B: 1}))
    assert history.missing_brokers == []


@run_async
async def test_overview_names_a_broker_that_is_no_longer_registered(tmp_path: Path):
    s = Servers(tmp_path)
    try:
        s.add_broker("broker-a")
        broker_b, server_b, addr_b = s.add_broker("broker-b")
        app = DashboardApp(ClusterTarget(s.namesrv_addr), refresh_s=0.3, call_timeout_s=20)
        async with app.run_test(size=SIZE) as pilot:
            await first_refresh(pilot)
            s.brokers.remove((broker_b, server_b))
            s.loop.run(server_b.stop())  # unregisters, as the name server forgets a killed broker
            broker_b.shutdown()
            await wait_until(pilot, lambda: "no longer registered" in text_of(app, "#gone-problem"),
                             "the gone broker's line")
            assert text_of(app, "#gone-problem") == f"broker-b ({addr_b}) is no longer registered"
    finally:
        s.close()


class _HungBrokerAdmin:
    """broker_status of broker-b never answers (a broker stopped with SIGSTOP)."""

    def __init__(self, release: threading.Event) -> None:
        self.release = release

    def brokers(self) -> list[BrokerIdentity]:
        return [A, B]

    def broker_status(self, addr: str) -> dict[str, str]:
        if addr == B.broker_addr:
            self.release.wait(10)
        return {}

    def close(self) -> None:
        pass


class _Target:
    description = "name server 127.0.0.1:9876"
    reopen_each_refresh = False

    def __init__(self, admin: _HungBrokerAdmin) -> None:
        self.admin = admin

    def open(self, writes: bool = False) -> _HungBrokerAdmin:
        return self.admin


def test_a_hung_broker_s_timeout_names_that_broker():
    release = threading.Event()
    poller = Poller(None, _Target(_HungBrokerAdmin(release)), call_timeout_s=0.3)  # type: ignore[arg-type]
    try:
        with pytest.raises(CallTimeout) as e:
            asyncio.run(poller.refresh_once())
    finally:
        release.set()
        poller.close()
    assert e.value.message.startswith(f"the broker broker-b ({B.broker_addr})"), e.value.message
    assert "did not answer within 0.3 s" in e.value.message


def test_repeated_row_keys_are_made_unique_not_a_crash():
    rows = _unique_keys([("0", ("a",)), ("0", ("b",)), ("0#2", ("c",))])
    assert [k for k, _ in rows] == ["0", "0#2", "0#2#2"]
