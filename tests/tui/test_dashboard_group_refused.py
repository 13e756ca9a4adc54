"""A consumer group one broker refuses to report (ACL on broker-b lets the dashboard's user read topics
but not the group) keeps its lag on the other broker: the Consumers screen shows the group with
broker-a's queues and says which broker refused it, and the Overview's total lag says it is not the
whole backlog. It used to drop the group altogether, and the Overview summed the rest as if complete."""

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
from mqadmin.transport.values import SubscriptionGroupInfo
from tests.net.harness import Servers
from tui.app import DashboardApp
from tui.screens.consumers import ConsumersScreen
from tui.screens.overview import OverviewScreen

TOPIC, GROUP = "LagTopic", "lag_group"
ROOT = {"username": "rocketmq", "password": "12345678"}
VIEWER, VIEWER_SECRET = "viewer", "viewer-secret-1"


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Servers]:
    """broker-a (no ACL) and broker-b (ACL: user viewer may GET every topic, no group); LagTopic on both
    with 3 messages on broker-a and 2 on broker-b, lag_group's offsets at 0 on both."""
    s = Servers(tmp_path)
    try:
        s.add_broker("broker-a")
        s.add_broker("broker-b", props={"authenticationEnabled": "true", "authorizationEnabled": "true",
                                        "initAuthenticationUser": json.dumps(ROOT)})
        admin = open_remote_admin(s.namesrv_addr, access_key=ROOT["username"], secret_key=ROOT["password"])
        try:
            a, b = sorted(admin.brokers(), key=lambda x: x.broker_name)
            admin.create_user(VIEWER, VIEWER_SECRET, broker_addrs=[b.broker_addr], read_back=False)
            admin.create_acl(Acl.of(f"User:{VIEWER}", ["Topic:*"], ["Get"]), [b.broker_addr], read_back=False)
            admin.update_topic(TopicInfo(TOPIC, 1, 1, 6), [a, b])
            for broker, n in ((a, 3), (b, 2)):
                for i in range(n):
                    admin.send_message(TOPIC, f"{broker.broker_name}-{i}".encode(), broker_name=broker.broker_name,
                                       queue_id=0)
            admin.update_sub_group(SubscriptionGroupInfo(GROUP), [a, b])
            admin.reset_offset_by_time(GROUP, TOPIC, 0, offset=None)  # offsets at 0 on both brokers
        finally:
            admin.close()
        yield s
    finally:
        s.close()


@run_async
async def test_a_group_one_broker_refuses_keeps_the_other_brokers_lag(cluster: Servers) -> None:
    app = DashboardApp(ClusterTarget(cluster.namesrv_addr, VIEWER, VIEWER_SECRET), refresh_s=0.5,
                       call_timeout_s=20)
    async with app.run_test(size=SIZE) as pilot:
        await first_refresh(pilot, 2)
        assert app.lost is None
        await pilot.press("3")
        await wait_until(pilot, lambda: isinstance(app.screen, ConsumersScreen)
                         and GROUP in {r[0] for r in table_rows(app, "#groups")}, "the group on broker-a")
        row = next(r for r in table_rows(app, "#groups") if r[0] == GROUP)
        assert row[1] == "3"  # broker-a's lag: broker-b refused the group
        problem = shown_text(app.screen.query_one("#groups-problem"))
        # every group (the system ones too) is refused by broker-b and shown with broker-a's queues
        n = len(table_rows(app, "#groups"))
        assert problem.startswith(f"Cannot read consumer groups: {n} of {n} groups cannot be read in full ({n} "
                                  "shown with the other brokers' queues only): "), problem
        assert " on broker-b: User:viewer has no permission to access Group:" in problem
        assert "\n" not in problem
        await pilot.press("1")
        await wait_until(pilot, lambda: isinstance(app.screen, OverviewScreen), "the overview")
        figures = {r[0]: r[1] for r in table_rows(app, "#figures")}
        assert figures["Consumer lag (all groups)"].startswith("3 (not every group read: see Consumers)"), figures
        assert app.crash is None
