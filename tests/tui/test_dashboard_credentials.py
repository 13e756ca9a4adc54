"""``dashboard --ak/--sk``: the credentials sign every refresh (a cluster with ACL on refused each one
with "username cannot be null."), and a lone --ak is a usage error (exit 2) as for every command."""

from __future__ import annotations

import json
from pathlib import Path

from tui_helpers import first_refresh, run_async
from tui_seed import SIZE
from typer.testing import CliRunner

from mqadmin.app import app as mqadmin_app
from mqadmin.commands.dashboard import ClusterTarget
from tests.net.harness import Servers
from tui.app import DashboardApp

ROOT = {"username": "rocketmq", "password": "12345678"}


def test_an_access_key_without_its_secret_is_a_usage_error():
    r = CliRunner().invoke(mqadmin_app, ["dashboard", "-n", "127.0.0.1:1", "--ak", "rocketmq"],
                           env={"NAMESRV_ADDR": "", "RMQ_STORE": ""})
    assert r.exit_code == 2, r.stderr
    assert "--ak/--accessKey and --sk/--secretKey must be given together" in r.stderr


@run_async
async def test_refreshes_are_signed_with_the_access_key(tmp_path: Path):
    s = Servers(tmp_path)
    try:
        s.add_broker(props={"authenticationEnabled": "true", "authorizationEnabled": "true",
                            "initAuthenticationUser": json.dumps(ROOT)})
        app = DashboardApp(ClusterTarget(s.namesrv_addr, "rocketmq", "12345678"), refresh_s=0.5, call_timeout_s=20)
        async with app.run_test(size=SIZE) as pilot:
            await first_refresh(pilot)
            assert app.lost is None
            assert app.snapshot is not None and app.snapshot.status_error is None
            assert app.snapshot.acl_error is None and "rocketmq" in {u.username for u in app.snapshot.users}
    finally:
        s.close()
