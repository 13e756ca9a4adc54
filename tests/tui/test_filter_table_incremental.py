"""FilterTable changes the table in place: at 1,500 topics, clearing and re-adding every row each second
(and on each filter keystroke) held the event loop for seconds, so a key press took 3-6 s to answer and a
typed filter 14-24 s. A refresh now rewrites only the cells that changed and adds or removes only the
rows that came or went; what the table shows (rows, order, cursor) is the same as a rebuild's."""

from __future__ import annotations

from collections.abc import Callable

from rich.text import Text
from textual.app import App, ComposeResult
from tui_helpers import run_async, table_rows

from tui.widgets.filter_table import FilterTable

COLUMNS = ["Topic", "Messages", "Last stored"]
N = 1500


def _rows(messages: Callable[[int], int] = lambda i: i, keys: list[int] | None = None) -> list:
    return [(f"T{i:04d}", [f"T{i:04d}", messages(i), "-"]) for i in (range(N) if keys is None else keys)]


class _TableApp(App):
    def compose(self) -> ComposeResult:
        yield FilterTable(COLUMNS, id="t")


def _count_rebuilds(table: FilterTable) -> dict[str, int]:
    """How many rows the table is given afresh and how many cells it rewrites (wrapping its own methods)."""
    counts = {"add_row": 0, "clear": 0, "update_cell": 0}
    for name in counts:
        real = getattr(table, name)

        def counted(*args, _real=real, _name=name, **kwargs):  # noqa: ANN002, ANN003, ANN202
            counts[_name] += 1
            return _real(*args, **kwargs)

        setattr(table, name, counted)
    return counts


@run_async
async def test_a_refresh_rewrites_only_the_cells_that_changed():
    app = _TableApp()
    async with app.run_test(size=(120, 40)) as pilot:
        table = app.query_one(FilterTable)
        table.set_rows(_rows())
        await pilot.pause()
        table.move_cursor(row=700, animate=False)
        await pilot.pause()
        scroll_y = table.scroll_y
        counts = _count_rebuilds(table)
        table.set_rows(_rows(lambda i: i + 5 if i == 3 else i))  # one topic got 5 messages
        await pilot.pause()
        assert counts == {"add_row": 0, "clear": 0, "update_cell": 1}, counts
        assert table_rows(app, "#t")[3] == ["T0003", "8", "-"]
        assert (table.selected_key, table.cursor_row, table.scroll_y) == ("T0700", 700, scroll_y)


@run_async
async def test_filtering_and_refreshes_show_the_same_rows_as_a_rebuild():
    app = _TableApp()
    async with app.run_test(size=(120, 40)) as pilot:
        table = app.query_one(FilterTable)
        table.set_rows(_rows())
        await pilot.pause()
        table.move_cursor(row=1400, animate=False)
        for text, want in (("T14", [f"T14{i:02d}" for i in range(100)]),
                           ("T1", [f"T1{i:03d}" for i in range(1000)][:500]),  # widened: rows come back in order
                           ("T149", [f"T149{i}" for i in range(10)]),
                           ("", [f"T{i:04d}" for i in range(N)])):
            selected = table.selected_key
            table.set_filter(text)
            await pilot.pause()
            assert [r[0] for r in table_rows(app, "#t")] == want, text
            assert table.selected_key == selected or selected not in want, text
        table.move_cursor(row=table.get_row_index("T0010"), animate=False)
        # topics deleted, one created in the middle, the order reversed, a Text cell restyled
        keys = [k for k in reversed(range(N)) if k % 100 != 7]
        table.set_rows([(f"T{i:04d}", [f"T{i:04d}", i, Text("now", style="bold") if i == 10 else "-"])
                        for i in keys] + [("T0010x", ["T0010x", 1, "-"])])
        await pilot.pause()
        shown = table_rows(app, "#t")
        assert [r[0] for r in shown] == [f"T{i:04d}" for i in keys] + ["T0010x"]
        assert table.selected_key == "T0010"
        assert table.get_cell("T0010", "Last stored") == Text("now", style="bold")
        assert table.get_cell("T0010", "Last stored").style == "bold"
