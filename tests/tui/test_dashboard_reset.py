"""The reset action of screen 3: plan (dry run: nothing changes), confirm, apply; mqadmin confirms."""

from __future__ import annotations

import json

from textual.widgets import Input, Select
from tui_helpers import first_refresh, number, run_async, table_rows, text_of
from tui_seed import DASH_GROUP_OFFSETS, SIZE, seed_consumers
from typer.testing import CliRunner

from mqadmin.app import app as mqadmin_app
from tui.screens.confirm import ConfirmScreen
from tui.screens.reset import ResetScreen


def consumer_offsets(store, group: str, topic: str) -> dict[int, int]:  # noqa: ANN001
    result = CliRunner().invoke(mqadmin_app, ["consumerProgress", "-g", group, "-t", topic, "--store", str(store.dir),
                                              "--config", str(store.conf), "--output", "json"],
                                env={"NAMESRV_ADDR": "", "RMQ_STORE": ""})
    assert result.exit_code == 0, result.output
    return {r["queueId"]: r["consumerOffset"] for r in json.loads(result.stdout)}


async def _open_reset(pilot, group: str) -> ResetScreen:  # noqa: ANN001
    await pilot.press("3")
    await pilot.pause()
    rows = [r[0] for r in table_rows(pilot.app, "#groups")]
    table = pilot.app.screen.query_one("#groups")
    table.focus()
    table.move_cursor(row=rows.index(group))
    await pilot.pause()
    await pilot.press("r")
    await pilot.pause()
    screen = pilot.app.screen
    assert isinstance(screen, ResetScreen)
    return screen


async def _wait(pilot, cond, what: str) -> None:  # noqa: ANN001
    import time

    deadline = time.monotonic() + 20
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await pilot.pause(0.05)


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
        await pilot.pause()
        await pilot.click("#plan")
        await _wait(pilot, lambda: screen.planned is not None, "the plan")
        plan = {number(r[0]): (number(r[2]), number(r[3])) for r in table_rows(pilot.app, "#plan-table")}
        assert plan == {q: (o, 7) for q, o in DASH_GROUP_OFFSETS.items()}
        assert "dry run" in text_of(pilot.app, "#reset-status")
        # The plan changed nothing.
        assert consumer_offsets(store, "dash_group", "GoldenTopicA") == before

        # Apply asks first; "n" leaves everything as it was.
        await pilot.click("#apply")
        await pilot.pause()
        assert isinstance(pilot.app.screen, ConfirmScreen)
        await pilot.press("n")
        await pilot.pause()
        assert pilot.app.screen is screen
        assert consumer_offsets(store, "dash_group", "GoldenTopicA") == before

        await pilot.click("#apply")
        await pilot.pause()
        await pilot.press("y")
        await _wait(pilot, lambda: screen.applied is not None or "failed" in text_of(pilot.app, "#reset-status"),
                    "the reset")
        assert screen.applied is not None, text_of(pilot.app, "#reset-status")
        assert "Applied" in text_of(pilot.app, "#reset-status")
        await pilot.press("escape")
        await pilot.pause()
        # The dashboard's next refresh shows the new lag (7 on every queue: 4 x 18).
        app = pilot.app
        await _wait(pilot, lambda: app.snapshot is not None and app.snapshot.group("dash_group").total_lag == 72,
                    "the refreshed lag")
    assert consumer_offsets(store, "dash_group", "GoldenTopicA") == dict.fromkeys(DASH_GROUP_OFFSETS, 7)


@run_async
async def test_reset_by_time_plan_is_dropped_when_an_input_changes_and_bad_input_is_one_line(golden_store):
    store = golden_store("store-basic")
    seed_consumers(store)
    async with store.app().run_test(size=SIZE) as pilot:
        await first_refresh(pilot)
        # A group without offsets has nothing to reset: no dialog, a warning instead.
        await pilot.press("3")
        await pilot.pause()
        rows = [r[0] for r in table_rows(pilot.app, "#groups")]
        table = pilot.app.screen.query_one("#groups")
        table.focus()
        table.move_cursor(row=rows.index("TOOLS_CONSUMER"))
        await pilot.press("r")
        await pilot.pause()
        assert not isinstance(pilot.app.screen, ResetScreen)
        screen = await _open_reset(pilot, "dash_group")
        await pilot.click("#plan")  # by time, "now": every queue to its end
        await _wait(pilot, lambda: screen.planned is not None, "the plan")
        assert {number(r[3]) for r in table_rows(pilot.app, "#plan-table")} == {25}
        screen.query_one("#reset-queue", Input).value = "2"
        await pilot.pause()
        assert screen.planned is None and screen.query_one("#apply").disabled
        screen.query_one("#reset-mode", Select).value = "offset"
        screen.query_one("#reset-value", Input).value = "99"
        await pilot.pause()
        await pilot.click("#plan")
        await _wait(pilot, lambda: "failed" in text_of(pilot.app, "#reset-status"), "the refusal")
        assert "not in consume queue range" in text_of(pilot.app, "#reset-status")
        assert screen.query_one("#apply").disabled
    assert consumer_offsets(store, "dash_group", "GoldenTopicA") == DASH_GROUP_OFFSETS
