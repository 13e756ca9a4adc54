"""A damaged config file blanks only the part of the dashboard it feeds: the other screens show what
they read, the part that failed says so in one line naming the file, and the banner (kept for a
refresh that fails as a whole) neither calls a damaged file a lost connection nor prints a class name."""

from __future__ import annotations

import pytest
from tui_helpers import first_refresh, run_async, shown_text, table_rows, wait_until
from tui_seed import SIZE, Store, seed_acl, seed_consumers

from tui.app import DashboardApp
from tui.widgets.banner import ConnectionBanner

CLASS_NAMES = ("AuthStoreError", "ConfigFileError", "Error:")


def _damage(store: Store, name: str) -> None:
    """Cut ``config/<name>`` short (and drop its .bak, so there is nothing to fall back to)."""
    config = store.dir / "config"
    (config / name).write_text('{"broken": ')
    (config / f"{name}.bak").unlink(missing_ok=True)


async def _show(pilot, key: str) -> None:  # noqa: ANN001
    await pilot.press(key)
    await pilot.pause()


def _banner_shown(app: DashboardApp) -> bool:
    return app.screen.query_one(ConnectionBanner).has_class("-lost")


@pytest.mark.parametrize(("damaged", "key", "problem", "says"), [
    ("acls.json", "6", "#acl-problem", "Cannot read the users and ACLs: cannot read ACL file "),
    ("users.json", "6", "#acl-problem", "Cannot read the users and ACLs: cannot read users file "),
    ("delayOffset.json", "4", "#status-problem", "Cannot read the runtime info: cannot load config file: "),
    ("consumerOrderInfo.json", "3", "#groups-problem", "Cannot read consumer groups: "),
])
@run_async
async def test_a_damaged_file_shows_on_its_screen_and_the_others_stay_readable(golden_store, damaged, key,
                                                                                 problem, says):
    store: Store = golden_store("store-basic")
    seed_consumers(store)
    seed_acl(store)
    _damage(store, damaged)
    app = store.app()
    async with app.run_test(size=SIZE) as pilot:
        await first_refresh(pilot)
        assert app.lost is None and not _banner_shown(app)
        # The screens that do not need the damaged file show what they read.
        await _show(pilot, "2")
        assert {"GoldenTopicA", "GoldenTopicB"} <= {r[0] for r in table_rows(app, "#topics")}
        await _show(pilot, "3")  # a group's in-flight count reads consumerOrderInfo.json: the idle ones show
        shown_groups = {r[0] for r in table_rows(app, "#groups")}
        assert ("TOOLS_CONSUMER" if damaged == "consumerOrderInfo.json" else "dash_group") in shown_groups
        if damaged not in ("acls.json", "users.json"):
            await _show(pilot, "6")
            assert "alice" in {r[0] for r in table_rows(app, "#users")}
        # The one that does says why, in one line naming the file.
        await _show(pilot, key)
        line = shown_text(app.screen.query_one(problem))
        assert app.screen.query_one(problem).display
        assert line.startswith(says), line
        assert f"cannot load config file: {store.dir / 'config' / damaged}" in line and "\n" not in line
        assert not any(name in line for name in CLASS_NAMES), line
        assert not _banner_shown(app)
        if damaged == "delayOffset.json":
            await _show(pilot, "1")
            assert "cannot load config file" in shown_text(app.screen.query_one("#status-problem"))
            assert table_rows(app, "#brokers")[0][0] == "broker-a"


@run_async
async def test_a_refresh_that_fails_as_a_whole_says_what_failed_without_a_class_name(golden_store):
    store: Store = golden_store("store-basic")
    seed_consumers(store)  # writes config/topics.json
    app = store.app(refresh_s=0.1)
    async with app.run_test(size=SIZE) as pilot:
        await first_refresh(pilot)
        good = (store.dir / "config" / "topics.json").read_bytes()
        _damage(store, "topics.json")
        await wait_until(pilot, lambda: _banner_shown(app), "the banner")
        shown = shown_text(app.screen.query_one(ConnectionBanner))
        assert shown.startswith("Refresh failed: "), shown
        assert f"{store.dir / 'config' / 'topics.json'}" in shown
        assert "Connection lost" not in shown and not any(name in shown for name in CLASS_NAMES), shown
        (store.dir / "config" / "topics.json").write_bytes(good)
        app.action_refresh_now()
        await wait_until(pilot, lambda: not _banner_shown(app), "the banner to go")
