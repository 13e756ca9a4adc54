"""Brokers coming and going under the dashboard: rates stay per broker (no spike when one comes back,
no zero while one is gone), a broker that drops out of the name server is named on the Overview, a
hung broker is named and left out while the others go on refreshing, and a repeated row key never stops the dashboard."""

from __future__ import annotations

import asyncio
import os
import signal
import threading
import time
from pathlib import Path

import pytest
from textual.css.query import NoMatches
from tui_helpers import QuietAdmin, first_refresh, number, run_async, table_rows, text_of, wait_until
from tui_seed import SIZE

from mqadmin.admin import BrokerIdentity
from mqadmin.commands.dashboard import ClusterTarget
from mqadmin.connect import open_remote_admin
from mqadmin.errors import AdminError
from mqadmin.transport.base import TopicInfo
from mqadmin.transport.values import QueueStatus, SubscriptionGroupInfo
from tests.net.harness import Servers
from tests.remoting_broker import running_broker
from tui.app import DashboardApp
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
    """...and the screens whose totals it leaves (the group's lag was all on broker-b) say so too: the
    Consumers screen showed lag 0 and the Overview's total 0 as if the group had caught up."""
    s = Servers(tmp_path)
    try:
        s.add_broker("broker-a")
        broker_b, server_b, addr_b = s.add_broker("broker-b")
        admin = open_remote_admin(s.namesrv_addr)
        try:
            a, b = sorted(admin.brokers(), key=lambda x: x.broker_name)
            admin.update_topic(TopicInfo("GoneTopic", 1, 1, 6), [a, b])
            for _ in range(2):
                admin.send_message("GoneTopic", b"x", broker_name="broker-b", queue_id=0)
            admin.update_sub_group(SubscriptionGroupInfo("gone_group"), [a, b])
            admin.reset_offset_by_time("gone_group", "GoneTopic", 0, offset=None)
        finally:
            admin.close()
        app = DashboardApp(ClusterTarget(s.namesrv_addr), refresh_s=0.3, call_timeout_s=20)
        async with app.run_test(size=SIZE) as pilot:
            await first_refresh(pilot)
            s.brokers.remove((broker_b, server_b))
            s.loop.run(server_b.stop())  # unregisters, as the name server forgets a killed broker
            broker_b.shutdown()
            await wait_until(pilot, lambda: "no longer registered" in text_of(app, "#gone-problem"),
                             "the gone broker's line")
            assert text_of(app, "#gone-problem") == f"broker-b ({addr_b}) is no longer registered"
            figures = {r[0]: r[1] for r in table_rows(app, "#figures")}
            assert figures["Consumer lag (all groups)"] == "0 (without broker-b)"
            await pilot.press("3")
            await wait_until(pilot, lambda: "gone_group" in {r[0] for r in table_rows(app, "#groups")},
                             "the consumers screen")
            assert text_of(app, "#groups-left-out") == (
                f"Lag, queues, retry and DLQ depth exclude broker-b ({addr_b}): no longer registered with the "
                "name server")
    finally:
        s.close()


class _HungBrokerAdmin(QuietAdmin):
    """broker_status of the brokers in ``hung`` never answers (brokers stopped with SIGSTOP) until
    ``release``; ``asked`` records every broker a call reached."""

    def __init__(self, release: threading.Event, hung: set[str]) -> None:
        self.release = release
        self.hung = hung
        self.left_out: frozenset[str] = frozenset()
        self.asked: list[str] = []

    def registered_brokers(self) -> list[BrokerIdentity]:
        return [A, B]

    def broker_status(self, addr: str) -> dict[str, str]:
        self.asked.append(addr)
        if addr in self.hung:
            self.release.wait(10)
        return {"brokerVersionDesc": addr}

    def list_groups(self, among: list[BrokerIdentity] | None = None) -> list[str]:
        self.asked.extend(b.broker_addr for b in among or (A, B) if b.broker_addr not in self.left_out)
        return []

    def list_users(self, broker_addr: str) -> list:
        self.asked.append(broker_addr)
        return []


class _Target:
    description = "name server 127.0.0.1:9876"
    reopen_each_refresh = False

    def __init__(self, admin: _HungBrokerAdmin) -> None:
        self.admin = admin

    def open(self, writes: bool = False) -> _HungBrokerAdmin:
        return self.admin


def test_a_hung_broker_is_named_and_left_out_until_it_answers_while_the_others_refresh():
    release = threading.Event()
    admin = _HungBrokerAdmin(release, {B.broker_addr})
    poller = Poller(None, _Target(admin), call_timeout_s=0.3)  # type: ignore[arg-type]

    async def refreshes() -> list[Snapshot]:
        first = await poller.refresh_once()  # meets broker-b's timeout once
        admin.asked.clear()
        started = time.monotonic()
        second = await poller.refresh_once()  # broker-b left out: no timeout waited
        took = time.monotonic() - started
        asked_second = list(admin.asked)
        release.set()  # broker-b answers the probe the second refresh started
        await asyncio.sleep(0.2)
        third = await poller.refresh_once()
        assert took < 0.25, took
        # broker-b: the probe alone; broker-a: its runtime info, the group fan-out and its users
        assert sorted(asked_second) == [A.broker_addr] * 3 + [B.broker_addr], asked_second
        return [first, second, third]

    try:
        first, second, third = asyncio.run(refreshes())
    finally:
        release.set()
        poller.close()
    for snap in (first, second):
        a, b = snap.brokers
        assert a.error is None and a.status == {"brokerVersionDesc": A.broker_addr}
        assert b.error is not None and b.status == {}
        assert b.error.startswith(f"the broker broker-b ({B.broker_addr}) via name server 127.0.0.1:9876 "
                                  "did not answer within 0.3 s at "), b.error
        assert b.error.endswith("; left out of the refresh until it answers"), b.error
        assert [v.error for v in snap.acl_views] == [None, b.error]
    assert [v.error for v in third.brokers] == [None, None]
    assert third.brokers[1].status == {"brokerVersionDesc": B.broker_addr}


def test_a_refresh_fails_naming_the_broker_when_no_broker_answers():
    release = threading.Event()
    poller = Poller(None, _Target(_HungBrokerAdmin(release, {A.broker_addr, B.broker_addr})),  # type: ignore[arg-type]
                    call_timeout_s=0.3)
    try:
        with pytest.raises(AdminError) as e:
            asyncio.run(poller.refresh_once())
    finally:
        release.set()
        poller.close()
    assert e.value.message.startswith(f"broker-a: the broker broker-a ({A.broker_addr}) via name server"), e.value.message
    assert f"; broker-b: the broker broker-b ({B.broker_addr}) via" in e.value.message
    assert "did not answer within 0.3 s" in e.value.message


@run_async
async def test_the_healthy_broker_keeps_refreshing_while_another_is_stopped(tmp_path: Path):
    """Two mqbroker processes; broker-b stopped with SIGSTOP: broker-a's topic goes on counting on the
    Topics screen, the Overview says broker-b does not answer, and after SIGCONT it is read again."""
    with running_broker(tmp_path / "a") as a, \
            running_broker(tmp_path / "b", broker_name="broker-b", namesrv=a.namesrv_addr) as b:
        admin = open_remote_admin(a.namesrv_addr)
        try:
            broker_a = next(x for x in admin.brokers() if x.broker_name == "broker-a")
            admin.update_topic(TopicInfo("OnA", 1, 1, 6), [broker_a])
            admin.send_message("OnA", b"one", broker_name="broker-a", queue_id=0)
            app = DashboardApp(ClusterTarget(a.namesrv_addr), refresh_s=0.3, call_timeout_s=2)
            async with app.run_test(size=SIZE) as pilot:
                await first_refresh(pilot)
                await pilot.press("2")
                await wait_until(pilot, lambda: _messages(app, "OnA") == 1, "OnA's one message")
                os.kill(b.proc.pid, signal.SIGSTOP)
                try:
                    for n in range(2, 5):
                        admin.send_message("OnA", b"more", broker_name="broker-a", queue_id=0)
                        await wait_until(pilot, lambda n=n: _messages(app, "OnA") == n, f"OnA's message {n}")
                    stuck = app.poller.stuck.why(b.broker_addr)
                    assert stuck is not None and f"the broker broker-b ({b.broker_addr})" in stuck
                    assert app.poller.failures == 0
                    await pilot.press("1")
                    await wait_until(pilot, lambda: "broker-b" in text_of(app, "#status-problem"),
                                     "broker-b's line on the Overview")
                    assert "did not answer within 2 s" in text_of(app, "#status-problem")
                finally:
                    os.kill(b.proc.pid, signal.SIGCONT)
                await wait_until(pilot, lambda: app.poller.stuck.why(b.broker_addr) is None, "broker-b back")
                await wait_until(pilot, lambda: "broker-b" not in text_of(app, "#status-problem"),
                                 "broker-b read again")
        finally:
            admin.close()


def _messages(app: DashboardApp, topic: str) -> int | None:
    """The Messages cell of ``topic`` on the Topics screen (None while it is not shown)."""
    try:
        rows = {r[0]: r for r in table_rows(app, "#topics")}
    except NoMatches:
        return None
    return number(rows[topic][5]) if topic in rows else None


def test_repeated_row_keys_are_made_unique_not_a_crash():
    rows = _unique_keys([("0", ("a",)), ("0", ("b",)), ("0#2", ("c",))])
    assert [k for k, _ in rows] == ["0", "0#2", "0#2#2"]
