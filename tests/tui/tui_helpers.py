"""Reading what the dashboard shows (table cells as plain text, labels) in pilot tests."""

from __future__ import annotations

import io

from rich.console import Console
from rich.text import Text
from textual.app import App
from textual.errors import NoWidget
from textual.widget import Widget
from textual.widgets import Button, DataTable, Label, Static


def table_rows(app: App, selector: str) -> list[list[str]]:
    table = app.screen.query_one(selector, DataTable)
    return [[c.plain if isinstance(c, Text) else str(c) for c in table.get_row_at(i)] for i in range(table.row_count)]


def by_first(app: App, selector: str) -> dict[str, list[str]]:
    return {r[0]: r for r in table_rows(app, selector)}


def text_of(app: App, selector: str) -> str:
    """A Label's or Static's content on the top screen as plain text (see ``widget_text``)."""
    return widget_text(app.screen.query_one(selector))


def widget_text(widget: Widget) -> str:
    """A Label's or Static's content as plain text (rich renderables printed without styles)."""
    assert isinstance(widget, Label | Static)
    content = widget.content
    if isinstance(content, str):
        return content
    if hasattr(content, "plain"):
        return content.plain
    console = Console(width=200, file=io.StringIO(), color_system=None, record=True)
    console.print(content)
    return console.export_text()


def shown_text(widget: Widget) -> str:
    """What a Label or Static shows, as plain text: its content as rendered (markup in a string is
    applied, so a ``[word]`` read as a tag is missing here), where ``widget_text`` gives the content."""
    from textual.content import Content

    assert isinstance(widget, Label | Static)
    visual = widget.visual
    return visual.plain if isinstance(visual, Content) else widget_text(widget)


def number(cell: str) -> int:
    return int(cell.replace(",", ""))


def run_async(fn):  # noqa: ANN001, ANN201 - test decorator
    """Run an ``async def`` test body with asyncio.run (the suite has no asyncio pytest plugin)."""
    import asyncio
    import functools

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        return asyncio.run(fn(*args, **kwargs))

    return wrapper


async def wait_until(pilot, cond, what: str, timeout_s: float = 20.0) -> None:  # noqa: ANN001
    """Poll ``cond`` while the app runs until it holds, or fail naming ``what`` after ``timeout_s``.

    Why not ``pilot.pause()`` alone: it waits for the messages queued on the top screen when it is
    called, then for the process to look idle (CPU time not advancing). A message that bubbles on
    (a key up to the app's bindings, a button press up to its screen) or a screen pushed in reply is
    not covered, and a process starved of CPU on a busy machine looks idle at once.
    """
    import time

    deadline = time.monotonic() + timeout_s
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s:g} s waiting for {what}")
        await pilot.pause(0.05)


async def click_shown(pilot, widget: Widget, timeout_s: float = 20.0) -> None:  # noqa: ANN001
    """Click ``widget`` once a click would press it: laid out, on the top screen, not covered by anything,
    and (a Button) no longer showing its previous press, during which Textual ignores clicks (0.2 s)."""

    def on_top() -> bool:
        region = widget.region
        if pilot.app.screen is not widget.screen or not region.area:
            return False
        if isinstance(widget, Button) and widget.has_class("-active"):
            return False
        try:
            return pilot.app.get_widget_at(region.x, region.y)[0] is widget
        except NoWidget:  # nothing drawn at that place yet
            return False

    await wait_until(pilot, on_top, f"{widget!r} to be shown", timeout_s)
    assert await pilot.click(widget), f"the click did not land on {widget!r}"


async def first_refresh(pilot, refreshes: int = 1, timeout_s: float = 20.0) -> None:  # noqa: ANN001
    """Wait (without sleeping blindly) until the poller has posted ``refreshes`` snapshots."""
    import time

    app = pilot.app
    deadline = time.monotonic() + timeout_s
    while app.poller.refreshes < refreshes or app.snapshot is None:
        if time.monotonic() > deadline:
            raise AssertionError(f"no refresh within {timeout_s} s (lost: {app.lost})")
        await pilot.pause(0.05)
    await pilot.pause()


class QuietAdmin:
    """The Admin calls a dashboard refresh makes, each answering "nothing there" at once: a test's fake
    Admin subclasses it and overrides only the calls its scenario is about (one that hangs, say)."""

    left_out: frozenset[str] = frozenset()

    def registered_brokers(self) -> list:
        return []

    def broker_status(self, addr: str) -> dict[str, str]:
        return {}

    def list_topics(self) -> list[str]:
        return []

    def list_groups(self, among: list | None = None) -> list[str]:
        return []

    def topic_configs(self, broker: object) -> dict:
        """A broker that does not serve GET_ALL_TOPIC_CONFIG: the refresh asks per topic (topic_info,
        list_groups), the calls these fakes are about."""
        from mqadmin.errors import AdminError

        raise AdminError("request code 21 not supported")

    def list_users(self, broker_addr: str) -> list:
        return []

    def list_acls(self, broker_addr: str) -> list:
        return []

    def get_broker_config(self, addr: str) -> dict[str, str]:
        return {}

    def close(self, failed: bool = False) -> None:
        pass
