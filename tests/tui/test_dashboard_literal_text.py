"""Text that comes from data, user input or error messages is shown as it is, never read as markup: a
message property or a typed value holding ``[/]`` does not stop the dashboard, ``[NoSuchTopic]`` in an
error does not vanish, and a crash that still happens exits 1 with one line instead of a silent 0."""

from __future__ import annotations

import os
import pty
import re
import select
import subprocess
import sys
import time
from pathlib import Path

from rich.text import Text
from textual.widgets import Button, Input, Select
from tui_helpers import click_shown, first_refresh, run_async, shown_text, table_rows, wait_until, widget_text
from tui_seed import SIZE, Store, open_broker, seed_consumers

from mqadmin.commands.dashboard import StoreTarget
from mqadmin.errors import AdminError
from tui.app import DashboardApp
from tui.screens.messages import MessagesScreen
from tui.screens.reset import ResetScreen
from tui.widgets.banner import ConnectionBanner

REPO = Path(__file__).resolve().parent.parent.parent
MARKUP = "[/]"


def _status(app: DashboardApp) -> str:
    return shown_text(app.screen.query_one("#query-status"))


async def _search(pilot, mode: str, topic: str, value: str, queue: str = "") -> str:  # noqa: ANN001
    """Fill the Messages form, search, and return the status line as shown once the answer is in."""
    screen = pilot.app.screen
    assert isinstance(screen, MessagesScreen)
    screen.query_one("#mode", Select).value = mode
    screen.query_one("#topic", Input).value = topic
    screen.query_one("#value", Input).value = value
    screen.query_one("#queue", Input).value = queue
    await pilot.pause()
    screen.search()
    await wait_until(pilot, lambda: not _status(pilot.app).startswith("Reading"), "the answer")
    return _status(pilot.app)


@run_async
async def test_message_property_with_markup_is_shown_literally(golden_store):
    store: Store = golden_store("store-basic")
    broker = open_broker(store)
    try:
        broker.send_message("GoldenTopicA", b"hello [b]body[/b]", {"KEYS": "k2", "note": MARKUP,
                                                                  "style": "[bold]loud[/bold]"}, queue_id=0)
    finally:
        broker.shutdown()
    app = store.app()
    async with app.run_test(size=SIZE) as pilot:
        await _query_key(pilot, app, "k2")
        await pilot.pause()
        assert app.is_running
        shown = widget_text(app.screen.query_one("#message"))
        assert re.search(r"note\s+\[/\]", shown), shown
        assert re.search(r"style\s+\[bold\]loud\[/bold\]", shown), shown
        assert "hello [b]body[/b]" in shown


async def _query_key(pilot, app, key: str) -> None:
    """Screen 5, a key query on GoldenTopicA, until its answer's status line shows."""
    await first_refresh(pilot)
    await pilot.press("5")
    await pilot.pause()
    await pilot.click("#topic")
    await pilot.press(*"GoldenTopicA")
    await pilot.click("#value")
    await pilot.press(*key, "enter")
    await wait_until(pilot, lambda: "message(s)" in _status(app), "the key query's answer")


@run_async
async def test_markup_typed_into_search_and_reset_is_searched_for_and_refused_literally(golden_store):
    store: Store = golden_store("store-basic")
    seed_consumers(store)
    app = store.app()
    async with app.run_test(size=SIZE) as pilot:
        await _query_key(pilot, app, MARKUP)
        assert _status(app) == f"GoldenTopicA by key {MARKUP}: 0 message(s)"

        app.screen.set_focus(None)  # keys go to the app again, not into the value box
        await pilot.press("3")
        await pilot.pause()
        groups = app.screen.query_one("#groups")
        groups.focus()
        groups.move_cursor(row=[r[0] for r in table_rows(app, "#groups")].index("dash_group"))
        await pilot.pause()
        await pilot.press("r")
        await wait_until(pilot, lambda: isinstance(app.screen, ResetScreen), "the reset dialog")
        app.screen.query_one("#reset-value", Input).value = MARKUP
        await click_shown(pilot, app.screen.query_one("#plan", Button))
        await wait_until(pilot, lambda: "Cannot plan" in shown_text(app.screen.query_one("#reset-status")),
                         "the refusal")
        assert shown_text(app.screen.query_one("#reset-status")).startswith(
            f"Cannot plan: invalid time {MARKUP!r}")
        assert app.is_running


class FailingTarget(StoreTarget):
    """A store whose next opens fail with ``reason`` (once ``fail`` is set)."""

    def __init__(self, store: Store, reason: str) -> None:
        super().__init__(store.dir, store.conf, description="failing store")
        self.reason = reason
        self.fail = False

    def open(self, writes: bool = False):  # noqa: ANN201
        if self.fail:
            raise AdminError(self.reason)
        return super().open(writes)


@run_async
async def test_words_in_brackets_stay_in_status_lines_and_the_banner(golden_store):
    store: Store = golden_store("store-basic")
    app = store.app()
    async with app.run_test(size=SIZE) as pilot:
        await first_refresh(pilot)
        await pilot.press("5")
        await pilot.pause()
        assert "topic [NoSuchTopic] not found" in await _search(pilot, "key", "NoSuchTopic", "k")
        assert "queue 99 of topic [GoldenTopicA] does not exist" in await _search(
            pilot, "offset", "GoldenTopicA", "0", "99")
        assert await _search(pilot, "key", "GoldenTopicA", "[bold]key-0") == \
            "GoldenTopicA by key [bold]key-0: 0 message(s)"
        assert isinstance(app.screen.query_one("#query-status").content, Text)

    reason = "broker [broker-a] at [127.0.0.1:10911] refused: [/] closed"
    target = FailingTarget(store, reason)
    app = DashboardApp(target, refresh_s=0.1, call_timeout_s=60)
    async with app.run_test(size=SIZE) as pilot:
        await first_refresh(pilot)
        target.fail = True
        banner = app.screen.query_one(ConnectionBanner)
        await wait_until(pilot, lambda: banner.has_class("-lost"), "the banner")
        shown = shown_text(banner)
        assert f"Refresh failed: {reason} - retrying in" in shown
        assert "Connection lost" not in shown
        target.fail = False
        app.action_refresh_now()
        await wait_until(pilot, lambda: not banner.has_class("-lost"), "the banner to go")


CRASHING = """
import sys
import tui.screens.timers as timers

def show(self, snapshot, history):
    raise RuntimeError("boom [/] in [bold]show")

timers.TimersScreen.show = show
sys.argv = ["mqadmin", *sys.argv[1:]]
from mqadmin.app import main
main()
"""


def test_a_crash_exits_1_with_one_line_and_no_stack_trace(golden_store):
    """An unexpected error inside the app (here a screen that raises) ends ``mqadmin dashboard`` with
    exit 1 and mqadmin's one line, not Textual's stack trace and exit 0."""
    store: Store = golden_store("store-timer")
    env = dict(os.environ, PYTHONPATH=str(REPO), TERM="xterm-256color", COLUMNS="120", LINES="40",
               NAMESRV_ADDR="", RMQ_STORE="")
    leader, follower = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-c", CRASHING, "dashboard", "--store", str(store.dir),
                             "--config", str(store.conf), "--screen", "timers"],
                            stdin=follower, stdout=follower, stderr=follower, env=env, close_fds=True)
    os.close(follower)
    seen = b""
    try:
        deadline = time.monotonic() + 90
        while proc.poll() is None and time.monotonic() < deadline:  # keep draining: a full pty blocks the app
            ready, _, _ = select.select([leader], [], [], 0.2)
            if ready:
                try:
                    seen += os.read(leader, 65536)
                except OSError:
                    break
        code = proc.wait(timeout=10)
        while True:  # what is left after the exit
            ready, _, _ = select.select([leader], [], [], 0.2)
            if not ready:
                break
            try:
                chunk = os.read(leader, 65536)
            except OSError:
                break
            if not chunk:
                break
            seen += chunk
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(leader)
    text = re.sub(r"\x1b(\[[0-9;?<>=]*[ -/]*[@-~]|[()][0-9A-B]|[=>78])", "", seen.decode("utf-8", "replace"))
    assert code == 1, text[-3000:]
    assert "Traceback" not in text and "RuntimeError" not in text, text[-3000:]
    line = "mqadmin dashboard: the dashboard stopped: unexpected failure: boom [/] in [bold]show " \
           "(run with --verbose for the details)"
    assert text.rstrip().endswith(line), text[-500:]  # the last thing written, after the screen is restored
    assert text.count("mqadmin dashboard:") == 1
