"""A negative queue offset is refused on the Messages screen, and by the Admin behind it, in the words a
broker's pull uses ("queueOffset must be >= 0"), on a store directory as over the network: the store
read used to treat it as 0 and show offset 0's message."""

from __future__ import annotations

import pytest
from textual.widgets import Input, Select
from tui_helpers import first_refresh, run_async, shown_text, table_rows, wait_until
from tui_seed import SIZE, Store

from mqadmin.admin import Admin
from mqadmin.commands.dashboard import ClusterTarget
from mqadmin.connect import open_remote_admin
from mqadmin.errors import AdminError
from mqadmin.transport.base import TopicInfo
from tests.remoting_broker import running_broker
from tui.app import DashboardApp
from tui.screens.messages import MessagesScreen

TOPIC = "GoldenTopicA"


async def _refused(app: DashboardApp, pilot) -> None:  # noqa: ANN001
    """'at queue offset' -1 and 'browse a queue' from -5: refused, no message listed."""
    await pilot.press("5")
    await pilot.pause()
    screen = app.screen
    assert isinstance(screen, MessagesScreen)
    for mode, value in (("offset", "-1"), ("browse", "-5")):
        screen.query_one("#mode", Select).value = mode
        screen.query_one("#topic", Input).value = TOPIC
        screen.query_one("#value", Input).value = value
        screen.query_one("#queue", Input).value = "0"
        await pilot.pause()
        screen.search()
        await wait_until(pilot, lambda: "must be >= 0" in shown_text(screen.query_one("#query-status")),
                         f"the refusal of {value}")
        assert shown_text(screen.query_one("#query-status")) == f"queueOffset must be >= 0, got {value}"
        assert table_rows(app, "#results") == []
        assert screen.query_one("#message").record is None


def _admin_refuses(admin: Admin, broker_name: str) -> None:
    for read in (lambda: admin.query_msg_by_offset(TOPIC, broker_name, 0, -1),
                 lambda: admin.consume_message(TOPIC, "TOOLS_CONSUMER", broker_name, 0, -5, max_num=5)):
        with pytest.raises(AdminError, match=r"^queueOffset must be >= 0, got -[15]$"):
            read()
    assert admin.query_msg_by_offset(TOPIC, broker_name, 0, 0).queue_offset == 0


@run_async
async def test_negative_offset_is_refused_on_a_store_directory(golden_store):
    store: Store = golden_store("store-basic")
    app = store.app()
    async with app.run_test(size=SIZE) as pilot:
        await first_refresh(pilot)
        await _refused(app, pilot)
    admin = store.admin()
    try:
        _admin_refuses(admin, "broker-a")
    finally:
        admin.close()


@run_async
async def test_negative_offset_is_refused_over_the_network(tmp_path):
    with running_broker(tmp_path / "mqbroker") as b:
        admin = open_remote_admin(b.namesrv_addr)
        try:
            admin.update_topic(TopicInfo(TOPIC, 1, 1, 6))
            admin.send_message(TOPIC, b"first", keys="k0", broker_name=b.broker_name, queue_id=0)
            _admin_refuses(admin, b.broker_name)
        finally:
            admin.close()
        app = DashboardApp(ClusterTarget(b.namesrv_addr), refresh_s=3600, call_timeout_s=30)
        async with app.run_test(size=SIZE) as pilot:
            await first_refresh(pilot)
            await _refused(app, pilot)
