"""Snapshot tests (pytest-textual-snapshot): each screen's rendering on golden store copies.

Update after an intended change with ``pytest tests/tui --snapshot-update`` and look at the report.
The Overview is covered by a pilot test instead: it shows the host's disk use, which no snapshot
can hold still.
"""

from __future__ import annotations

import time

from textual.widgets import Input
from tui_seed import SIZE, seed_acl, seed_consumers

from tui.app import DashboardApp


async def _refreshed(pilot) -> None:  # noqa: ANN001
    app: DashboardApp = pilot.app
    deadline = time.monotonic() + 20
    while app.snapshot is None:
        assert time.monotonic() < deadline, f"no refresh (lost: {app.lost})"
        await pilot.pause(0.05)
    await pilot.pause()


async def _answered(pilot, selector: str, marker: str) -> None:  # noqa: ANN001
    from tui_helpers import text_of

    deadline = time.monotonic() + 20
    while marker not in text_of(pilot.app, selector):
        assert time.monotonic() < deadline, f"no answer in {selector}"
        await pilot.pause(0.05)
    await pilot.pause()


def test_snapshot_topics(golden_store, snap_compare):
    store = golden_store("store-basic")
    seed_consumers(store)
    assert snap_compare(store.app(), run_before=_refreshed, press=["2"], terminal_size=SIZE)


def test_snapshot_topic_detail(golden_store, snap_compare):
    store = golden_store("store-basic")
    seed_consumers(store)
    assert snap_compare(store.app(), run_before=_refreshed, press=["2", "down", "down", "down", "enter"],
                        terminal_size=SIZE)


def test_snapshot_consumers(golden_store, snap_compare):
    store = golden_store("store-basic")
    seed_consumers(store)
    assert snap_compare(store.app(), run_before=_refreshed, press=["3"], terminal_size=SIZE)


def test_snapshot_timers(golden_store, snap_compare):
    store = golden_store("store-timer")
    assert snap_compare(store.app(), run_before=_refreshed, press=["4"], terminal_size=SIZE)


def test_snapshot_messages(golden_store, snap_compare):
    store = golden_store("store-basic")

    async def query(pilot) -> None:  # noqa: ANN001
        await _refreshed(pilot)
        await pilot.press("5")
        await pilot.pause()
        pilot.app.screen.query_one("#topic", Input).value = "GoldenTopicA"
        pilot.app.screen.query_one("#value", Input).value = "key-0"
        await pilot.click("#search")
        await _answered(pilot, "#query-status", "message(s)")
        pilot.app.screen.query_one("#results").focus()

    assert snap_compare(store.app(), run_before=query, terminal_size=SIZE)


def test_snapshot_acl_explain(golden_store, snap_compare):
    store = golden_store("store-basic")
    seed_acl(store)

    async def explain(pilot) -> None:  # noqa: ANN001
        await _refreshed(pilot)
        await pilot.press("6")
        await pilot.pause()
        screen = pilot.app.screen
        for field, value in (("subject", "User:alice"), ("resource", "Topic:GoldenTopicB"), ("actions", "Pub"),
                             ("ip", "10.1.2.3")):
            screen.query_one(f"#explain-{field}", Input).value = value
        await pilot.click("#explain")
        await _answered(pilot, "#explanation", "Decision")
        screen.query_one("#acls").focus()

    assert snap_compare(store.app(), run_before=explain, terminal_size=SIZE)


def test_snapshot_help(golden_store, snap_compare):
    store = golden_store("store-basic")
    assert snap_compare(store.app(), run_before=_refreshed, press=["2", "question_mark"], terminal_size=SIZE)
