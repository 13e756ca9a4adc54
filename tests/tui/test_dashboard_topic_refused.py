"""A Normal ACL user allowed only some topics sees those: the name server lists every topic (the
cluster-name topic too), and the first one the broker refused (NO_PERMISSION) failed the whole refresh
("Refresh failed: User:alice has no permission to access Topic:AclCluster ... retrying in 10 s") on
every screen, forever. Now the refused topics are left out, counted and named in one line on the Topics
screen and in the Overview's topic count, and the rest is shown."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from tui_helpers import first_refresh, run_async, shown_text, table_rows, wait_until
from tui_seed import SIZE

from broker_core.auth.model import Acl
from mqadmin.commands.dashboard import ClusterTarget
from mqadmin.connect import open_remote_admin
from mqadmin.transport.base import TopicInfo
from tests.net.harness import Servers
from tui.app import DashboardApp
from tui.screens.overview import OverviewScreen
from tui.screens.topics import TopicsScreen
from tui.widgets.banner import ConnectionBanner

ROOT = {"username": "rocketmq", "password": "12345678"}
ALICE, ALICE_SECRET = "alice", "alice-secret-1"
MINE, OTHERS = "AliceTopic", "SecretTopic"


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Servers]:
    """One broker with ACL 2.0 on; alice (Normal) may Get AliceTopic only, not SecretTopic."""
    s = Servers(tmp_path)
    try:
        s.add_broker("broker-a", props={"authenticationEnabled": "true", "authorizationEnabled": "true",
                                        "initAuthenticationUser": json.dumps(ROOT)})
        admin = open_remote_admin(s.namesrv_addr, access_key=ROOT["username"], secret_key=ROOT["password"])
        try:
            (b,) = admin.brokers()
            admin.create_user(ALICE, ALICE_SECRET, broker_addrs=[b.broker_addr], read_back=False)
            admin.create_acl(Acl.of(f"User:{ALICE}", [f"Topic:{MINE}"], ["Get", "Pub", "Sub"]), [b.broker_addr],
                             read_back=False)
            for topic in (MINE, OTHERS):
                admin.update_topic(TopicInfo(topic, 2, 2, 6), [b])
            admin.send_message(MINE, b"hello", broker_name=b.broker_name, queue_id=0)
        finally:
            admin.close()
        yield s
    finally:
        s.close()


@run_async
async def test_topics_the_user_may_not_read_are_left_out_and_counted(cluster: Servers) -> None:
    app = DashboardApp(ClusterTarget(cluster.namesrv_addr, ALICE, ALICE_SECRET), refresh_s=0.5, call_timeout_s=20)
    async with app.run_test(size=SIZE) as pilot:
        await first_refresh(pilot, 2)
        assert app.lost is None, app.lost
        assert not app.screen.query_one(ConnectionBanner).has_class("-lost")
        await pilot.press("2")
        await wait_until(pilot, lambda: isinstance(app.screen, TopicsScreen)
                         and MINE in {r[0] for r in table_rows(app, "#topics")}, "alice's topic")
        rows = {r[0]: r for r in table_rows(app, "#topics")}
        assert OTHERS not in rows and "DefaultCluster" not in rows, rows
        assert rows[MINE][5] == "1"  # its one message
        snap = app.snapshot
        assert snap is not None and OTHERS in snap.topics_refused and "DefaultCluster" in snap.topics_refused
        n = len(snap.topics_refused)
        line = shown_text(app.screen.query_one("#topics-problem"))
        assert line.startswith(f"{n} of {n + len(rows)} topics not shown: no permission to read "), line
        assert "DefaultCluster" in line and line.endswith(f" and {n - 5} more") and "\n" not in line, line
        await pilot.press("1")
        await wait_until(pilot, lambda: isinstance(app.screen, OverviewScreen), "the overview")
        figures = {r[0]: r[1] for r in table_rows(app, "#figures")}
        assert figures["Topics / groups"].startswith(f"{len(rows)} (+{n} not readable) / "), figures
        assert app.crash is None
