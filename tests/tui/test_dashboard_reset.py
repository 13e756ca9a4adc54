"""The reset action of screen 3: plan (dry run: nothing changes), confirm, apply; mqadmin confirms.

Every step waits for what the user would see before the next key or click (the screen on top, the
rows, the button on screen, the status line), never for a fixed time: see ``tui_helpers.wait_until``.
"""

from __future__ import annotations

import json

from textual.widgets import Button, Input, Select
from tui_helpers import click_shown, first_refresh, number, run_async, table_rows, wait_until, widget_text
from tui_seed import DASH_GROUP_OFFSETS, SIZE, seed_consumers
from typer.testing import CliRunner

from mqadmin.app import app as mqadmin_app
from tui.screens.confirm import ConfirmScreen
from tui.screens.consumers import ConsumersScreen
from tui.screens.reset import ResetScreen


def consumer_offsets(store, group: str, topic: str) -> dict[int, int]:  # noqa: ANN001
    result = CliRunner().invoke(mqadmin_app, ["consumerProgress", "-g", group, "-t", topic, "--store", str(store.dir),
                                              "--config", str(store.conf), "--output", "json"],
                                env={"NAMESRV_ADDR": "", "RMQ_STORE": ""})
    assert result.exit_code == 0, result.output
    return {r["queueId"]: r["consumerOffset"] for r in json.loads(result.stdout)}


def _told(app) -> list[str]:  # noqa: ANN001
    """Record what the app tells the user from now on (run_test draws no toasts): notify()'s messages."""
    messages: list[str] = []
    notify = app.notify

    def recording(message: str, **kwargs):  # noqa: ANN003, ANN202
        messages.append(message)
        return notify(message, **kwargs)

    app.notify = recording
    return messages


async def _highlight_group(pilot, group: str) -> ConsumersScreen:  # noqa: ANN001
    """Screen 3 with ``group``'s row highlighted in the groups table."""
    await pilot.press("3")

    def listed() -> bool:
        screen = pilot.app.screen
        return (isinstance(screen, ConsumersScreen) and bool(screen.query("#groups"))
                and group in [r[0] for r in table_rows(pilot.app, "#groups")])

    await wait_until(pilot, listed, f"screen 3 listing {group}")
    screen = pilot.app.screen
    rows = [r[0] for r in table_rows(pilot.app, "#groups")]
    table = screen.query_one("#groups")
    table.focus()
    table.move_cursor(row=rows.index(group))
    assert screen.selected_group().group == group
    return screen


async def _open_reset(pilot, group: str) -> ResetScreen:  # noqa: ANN001
    await _highlight_group(pilot, group)
    await pilot.press("r")
    await wait_until(pilot, lambda: isinstance(pilot.app.screen, ResetScreen) and bool(pilot.app.screen.query("#plan")),
                     "the reset dialog")
    return pilot.app.screen


def _status(screen: ResetScreen) -> str:
    return widget_text(screen.query_one("#reset-status"))


async def _confirm(pilot, screen: ResetScreen, key: str) -> None:  # noqa: ANN001
    """Apply..., wait for the question, answer it with ``key``, wait until the dialog is back on top."""
    await click_shown(pilot, screen.query_one("#apply", Button))
    await wait_until(pilot, lambda: isinstance(pilot.app.screen, ConfirmScreen), "the confirmation")
    await pilot.press(key)
    await wait_until(pilot, lambda: pilot.app.screen is screen, "the reset dialog after the confirmation")


@run_async
async def test_reset_from_consumers_screen_plans_confirms_applies_and_mqadmin_sees_it(golden_store):
    store = golden_store("store-basic")
    seed_consumers(store)
    before = consumer_offsets(store, "dash_group", "GoldenTopicA")
    assert before == DASH_GROUP_OFFSETS
    async with store.app().run_test(size=SIZE) as pilot:
        await first_refresh(pilot)
        screen = await _open_reset(pilot, "dash_group")
        assert screen.query_one("#reset-topic", Select).value == "GoldenTopicA"
        screen.query_one("#reset-mode", Select).value = "offset"
        screen.query_one("#reset-value", Input).value = "7"
        await click_shown(pilot, screen.query_one("#plan", Button))
        await wait_until(pilot, lambda: screen.planned is not None, "the plan")
        plan = {number(r[0]): (number(r[2]), number(r[3])) for r in table_rows(pilot.app, "#plan-table")}
        assert plan == {q: (o, 7) for q, o in DASH_GROUP_OFFSETS.items()}
        assert "dry run" in _status(screen)
        # The plan changed nothing.
        assert consumer_offsets(store, "dash_group", "GoldenTopicA") == before

        # Apply asks first; "n" leaves everything as it was.
        await _confirm(pilot, screen, "n")
        assert screen.applied is None and screen.planned is not None
        assert consumer_offsets(store, "dash_group", "GoldenTopicA") == before

        await _confirm(pilot, screen, "y")
        await wait_until(pilot, lambda: screen.applied is not None or "failed" in _status(screen), "the reset")
        assert screen.applied is not None, _status(screen)
        assert "Applied" in _status(screen)
        await pilot.press("escape")
        # The dashboard's next refresh shows the new lag on screen 3 (7 on every queue: 4 x 18).
        app = pilot.app

        def lag_shown() -> int | None:
            if not isinstance(app.screen, ConsumersScreen):
                return None
            return {r[0]: number(r[1]) for r in table_rows(app, "#groups")}.get("dash_group")

        await wait_until(pilot, lambda: lag_shown() == 72, "the refreshed lag on screen 3")
        assert app.snapshot is not None and app.snapshot.group("dash_group").total_lag == 72
    assert consumer_offsets(store, "dash_group", "GoldenTopicA") == dict.fromkeys(DASH_GROUP_OFFSETS, 7)


@run_async
async def test_reset_by_time_plan_is_dropped_when_an_input_changes_and_bad_input_is_one_line(golden_store):
    store = golden_store("store-basic")
    seed_consumers(store)
    async with store.app().run_test(size=SIZE) as pilot:
        await first_refresh(pilot)
        told = _told(pilot.app)
        # A group without offsets has nothing to reset: no dialog, a warning instead.
        consumers = await _highlight_group(pilot, "TOOLS_CONSUMER")
        await pilot.press("r")
        await wait_until(pilot, lambda: any("nothing to reset" in m for m in told), "the warning")
        assert pilot.app.screen is consumers
        screen = await _open_reset(pilot, "dash_group")
        await click_shown(pilot, screen.query_one("#plan", Button))  # by time, "now": every queue to its end
        await wait_until(pilot, lambda: screen.planned is not None, "the plan")
        assert {number(r[3]) for r in table_rows(pilot.app, "#plan-table")} == {25}
        screen.query_one("#reset-queue", Input).value = "2"
        await wait_until(pilot, lambda: screen.planned is None, "the plan to be dropped")
        assert screen.query_one("#apply").disabled and "plan again" in _status(screen)
        assert table_rows(pilot.app, "#plan-table") == []
        screen.query_one("#reset-mode", Select).value = "offset"
        screen.query_one("#reset-value", Input).value = "99"
        await click_shown(pilot, screen.query_one("#plan", Button))
        await wait_until(pilot, lambda: "failed" in _status(screen), "the refusal")
        assert "not in consume queue range" in _status(screen)
        assert screen.query_one("#apply").disabled
    assert consumer_offsets(store, "dash_group", "GoldenTopicA") == DASH_GROUP_OFFSETS
