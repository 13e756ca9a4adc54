"""The dashboard over a name server with two brokers (in-process servers): a topic on both brokers has
a queue 0 on each, so every queue row is per broker (it used to stop the dashboard on a repeated row
key); browsing and offset reads go to a broker that has the topic; the ACL screen shows each broker's
users and says why one shows none."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from textual.css.query import NoMatches
from textual.widgets import Input, Select
from tui_helpers import first_refresh, run_async, table_rows, text_of, wait_until
from tui_seed import SIZE

from mqadmin.commands.dashboard import ClusterTarget
from mqadmin.connect import open_remote_admin
from mqadmin.transport.base import TopicInfo
from mqadmin.transport.values import SubscriptionGroupInfo
from tests.net.harness import Servers
from tui.app import DashboardApp
from tui.screens.consumers import ConsumersScreen
from tui.screens.messages import MessagesScreen
from tui.screens.reset import ResetScreen
from tui.screens.topic_detail import TopicScreen

BOTH, ONLY_B, GROUP = "SpanTopic", "OnlyOnB", "span_group"


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Servers]:
    """broker-a and broker-b; SpanTopic (2 queues) on both, OnlyOnB on broker-b, span_group with
    offsets on both brokers, user bob on broker-b only."""
    s = Servers(tmp_path)
    try:
        s.add_broker("broker-a")
        s.add_broker("broker-b")
        admin = open_remote_admin(s.namesrv_addr)
        try:
            a, b = sorted(admin.brokers(), key=lambda x: x.broker_name)
            admin.update_topic(TopicInfo(BOTH, 2, 2, 6), [a, b])
            admin.update_topic(TopicInfo(ONLY_B, 1, 1, 6), [b])
            for broker in (a, b):
                for q in (0, 1):
                    admin.send_message(BOTH, f"{broker.broker_name}-{q}".encode(), broker_name=broker.broker_name,
                                       queue_id=q)
            for i in range(3):
                admin.send_message(ONLY_B, f"only-b-{i}".encode(), broker_name="broker-b", queue_id=0)
            admin.update_sub_group(SubscriptionGroupInfo(GROUP), [a, b])
            admin.reset_offset_by_time(GROUP, BOTH, 0, offset=None)  # offsets on every queue of both
            admin.create_user("bob", "bob-secret-1", broker_addrs=[b.broker_addr], read_back=False)
        finally:
            admin.close()
        yield s
    finally:
        s.close()


def _rows(app: DashboardApp, selector: str) -> list[list[str]]:
    """The table's rows, [] while the screen holding it is still being composed."""
    try:
        return table_rows(app, selector)
    except NoMatches:
        return []


def _app(s: Servers) -> DashboardApp:
    return DashboardApp(ClusterTarget(s.namesrv_addr), refresh_s=0.5, call_timeout_s=20)


@run_async
async def test_queue_rows_are_per_broker_on_consumers_topic_and_reset(cluster):
    app = _app(cluster)
    async with app.run_test(size=SIZE) as pilot:
        await first_refresh(pilot, 2)
        await pilot.press("3")
        await wait_until(pilot, lambda: isinstance(app.screen, ConsumersScreen)
                         and len(_rows(app, "#group-queues")) == 4, "the group's four queues")
        queues = table_rows(app, "#group-queues")
        assert app.screen.query_one("#group-queues").column_labels[:3] == ["Topic", "Broker", "Queue"]
        assert sorted((r[1], r[2]) for r in queues) == [("broker-a", "0"), ("broker-a", "1"),
                                                        ("broker-b", "0"), ("broker-b", "1")]
        # the reset plan: one row per broker and queue
        await pilot.press("r")
        await wait_until(pilot, lambda: isinstance(app.screen, ResetScreen), "the reset dialog")
        app.screen.action_plan()
        await wait_until(pilot, lambda: "Plan (dry run" in text_of(app, "#reset-status"), "the plan")
        plan = table_rows(app, "#plan-table")
        assert sorted((r[0], r[1]) for r in plan) == [("broker-a", "0"), ("broker-a", "1"),
                                                      ("broker-b", "0"), ("broker-b", "1")]
        app.screen.action_cancel()
        await pilot.pause()
        # the topic detail: its queues and the group's offsets, per broker
        app.push_screen(TopicScreen(BOTH))
        await wait_until(pilot, lambda: isinstance(app.screen, TopicScreen)
                         and len(_rows(app, "#queues")) == 4
                         and len(_rows(app, "#group-offsets")) == 4, "the topic's queues per broker")
        assert sorted((r[0], r[1]) for r in table_rows(app, "#queues")) == [
            ("broker-a", "0"), ("broker-a", "1"), ("broker-b", "0"), ("broker-b", "1")]
        assert {(r[1], r[2]) for r in table_rows(app, "#group-offsets")} == {
            ("broker-a", "0"), ("broker-a", "1"), ("broker-b", "0"), ("broker-b", "1")}
        assert app.crash is None and app.return_code in (None, 0)


@run_async
async def test_browsing_a_topic_on_the_second_broker_reads_that_broker(cluster):
    app = _app(cluster)
    async with app.run_test(size=SIZE) as pilot:
        await first_refresh(pilot)
        await pilot.press("5")
        await wait_until(pilot, lambda: isinstance(app.screen, MessagesScreen), "the messages screen")
        screen = app.screen
        await wait_until(pilot, lambda: screen.query_one("#broker", Select).display, "the broker choice")
        screen.query_one("#mode", Select).value = "browse"
        screen.query_one("#topic", Input).value = ONLY_B
        screen.query_one("#queue", Input).value = "0"
        await pilot.pause()
        screen.search()
        await wait_until(pilot, lambda: "message(s)" in text_of(app, "#query-status"), "the browse")
        assert "on broker-b" in text_of(app, "#query-status")
        assert len(table_rows(app, "#results")) == 3
        # an offset read at queue 1 of SpanTopic on the broker chosen
        screen.query_one("#broker", Select).value = "broker-b"
        screen.query_one("#mode", Select).value = "offset"
        screen.query_one("#topic", Input).value = BOTH
        screen.query_one("#queue", Input).value = "1"
        screen.query_one("#value", Input).value = "0"
        await pilot.pause()
        screen.search()
        await wait_until(pilot, lambda: "message(s)" in text_of(app, "#query-status"), "the offset read")
        assert screen.results[0].body == b"broker-b-1"


@run_async
async def test_acl_screen_shows_each_brokers_users_and_why_one_has_none(cluster):
    app = _app(cluster)
    async with app.run_test(size=SIZE) as pilot:
        await first_refresh(pilot)
        await pilot.press("6")
        await wait_until(pilot, lambda: any("bob" in r for r in _rows(app, "#users")), "bob on broker-b")
        assert ["broker-b", "bob"] == table_rows(app, "#users")[0][:2]
        scope = text_of(app, "#acl-scope")
        assert "broker-a" in scope and "broker-b" in scope
        assert "ACL is off" in scope and "no users or policies" in scope
