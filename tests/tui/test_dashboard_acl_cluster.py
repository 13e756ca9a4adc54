"""The dashboard on a cluster whose brokers differ in ACL: broker-a with ACL off, broker-b with ACL 2.0
on (tests/mqadmin/acl_cluster.py).

The ACL screen's Explain asked the first broker only: "Deny, user ops does not exist" for a user
broker-b allows, naming no broker, and Deny from broker-a, which serves everyone. Now every broker
answers, named. And one broker refusing the credentials failed every refresh ("Refresh failed:
username cannot be null."), naming no broker, while broker-a was readable: now that broker is named
with the reason and what to do, and the others are shown."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from textual.widgets import Input
from tui_helpers import first_refresh, run_async, text_of, wait_until
from tui_seed import SIZE

from mqadmin.commands.dashboard import ClusterTarget
from tests.mqadmin.acl_cluster import SUPER, AclCluster
from tui.app import DashboardApp
from tui.screens.acl import AclScreen


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AclCluster]:
    c = AclCluster(Path(tmp_path_factory.mktemp("dash-acl")))
    try:
        yield c
    finally:
        c.close()


async def _explain(pilot, subject: str, resource: str, actions: str) -> str:  # noqa: ANN001
    await pilot.press("6")
    await pilot.pause()
    screen = pilot.app.screen
    assert isinstance(screen, AclScreen)
    for field, value in (("subject", subject), ("resource", resource), ("actions", actions)):
        screen.query_one(f"#explain-{field}", Input).value = value
    await pilot.click("#explain")
    await wait_until(pilot, lambda: "Explaining" not in text_of(pilot.app, "#explanation")
                     and text_of(pilot.app, "#explanation").strip() != "", "the explanation")
    return text_of(pilot.app, "#explanation")


@run_async
async def test_explain_answers_for_every_broker_each_named(cluster: AclCluster):
    app = DashboardApp(ClusterTarget(cluster.namesrv, *SUPER), refresh_s=3600, call_timeout_s=20)
    async with app.run_test(size=SIZE) as pilot:
        await first_refresh(pilot)
        text = await _explain(pilot, "User:ops", "Topic:T2", "Sub")
        assert f"broker-a ({cluster.addr_a})" in text and f"broker-b ({cluster.addr_b})" in text, text
        assert "authorization is off on broker-a: allowed" in text, text
        on_b = text[text.index("broker-b ("):]
        assert "Decision: Allow" in on_b and "Decided by: Custom Topic:* [Sub,Get,List] Allow" in on_b, text
        assert "does not exist" not in on_b, text


@run_async
async def test_a_broker_refusing_the_credentials_is_named_and_the_others_shown(cluster: AclCluster):
    for target, reason in ((ClusterTarget(cluster.namesrv), "username cannot be null."),
                           (ClusterTarget(cluster.namesrv, SUPER[0], "wrong"), "check signature failed.")):
        app = DashboardApp(target, refresh_s=3600, call_timeout_s=20)
        async with app.run_test(size=SIZE) as pilot:
            await first_refresh(pilot)
            snap = app.snapshot
            assert app.lost is None and snap is not None
            a, b = snap.brokers
            assert (a.name, a.error) == ("broker-a", None) and a.status  # broker-a's figures are shown
            assert b.name == "broker-b" and b.error is not None
            assert reason in b.error and "--ak/--sk" in b.error, b.error
            assert [x.broker_name for x in snap.left_out] == ["broker-b"]
            overview = text_of(app, "#status-problem")
            assert "broker-b: refused" in overview and reason in overview, overview
            assert snap.acl_error is not None and "broker-b: refused" in snap.acl_error  # the ACL screen's line
            await pilot.press("2")  # Topics: its totals say why broker-b is not in them
            await pilot.pause(0.3)
            left_out = text_of(app, "#topics-left-out")
            assert f"broker-b ({cluster.addr_b}): refuses the credentials" in left_out, left_out
            assert "not answering" not in left_out, left_out
            await pilot.press("1")
            # Explain still answers for broker-a, and names broker-b's refusal
            text = await _explain(pilot, "User:ops", "Topic:T2", "Sub")
            assert "authorization is off on broker-a: allowed" in text, text
            assert f"broker-b ({cluster.addr_b})" in text and reason in text, text

