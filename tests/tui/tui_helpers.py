"""Reading what the dashboard shows (table cells as plain text, labels) in pilot tests."""

from __future__ import annotations

import io

from rich.console import Console
from rich.text import Text
from textual.app import App
from textual.widgets import DataTable, Label, Static


def table_rows(app: App, selector: str) -> list[list[str]]:
    table = app.screen.query_one(selector, DataTable)
    return [[c.plain if isinstance(c, Text) else str(c) for c in table.get_row_at(i)] for i in range(table.row_count)]


def by_first(app: App, selector: str) -> dict[str, list[str]]:
    return {r[0]: r for r in table_rows(app, selector)}


def text_of(app: App, selector: str) -> str:
    """A Label's or Static's content as plain text (rich renderables printed without styles)."""
    widget = app.screen.query_one(selector)
    assert isinstance(widget, Label | Static)
    content = widget.content
    if isinstance(content, str):
        return content
    if hasattr(content, "plain"):
        return content.plain
    console = Console(width=200, file=io.StringIO(), color_system=None, record=True)
    console.print(content)
    return console.export_text()


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
