"""A DataTable that keeps all its rows, shows those matching the screen's '/' filter, and keeps the
cursor on the same row across refreshes (rows are replaced every second)."""

from __future__ import annotations

from collections.abc import Sequence

from rich.text import Text
from textual.widgets import DataTable

Cell = str | int | float | Text


class FilterTable(DataTable):
    DEFAULT_CSS = """
    FilterTable {
        height: auto;
        max-height: 100%;
    }
    """

    def __init__(self, columns: Sequence[str | tuple[str, str]], **kwargs: object) -> None:
        super().__init__(cursor_type="row", zebra_stripes=True, **kwargs)  # type: ignore[arg-type]
        self._column_specs = [(c, c) if isinstance(c, str) else c for c in columns]
        self._all_rows: list[tuple[str, tuple[Cell, ...]]] = []
        self.filter_text = ""

    def on_mount(self) -> None:
        for label, key in self._column_specs:
            self.add_column(label, key=key)

    def set_rows(self, rows: Sequence[tuple[str, Sequence[Cell]]]) -> None:
        """Replace the rows (``(key, cells)``); the highlighted row stays highlighted if still there."""
        self._all_rows = [(k, tuple(cells)) for k, cells in rows]
        self._render_rows()

    def set_filter(self, text: str) -> None:
        self.filter_text = text.strip().lower()
        self._render_rows()

    def _matches(self, cells: tuple[Cell, ...]) -> bool:
        if not self.filter_text:
            return True
        return any(self.filter_text in (c.plain if isinstance(c, Text) else str(c)).lower() for c in cells)

    def _render_rows(self) -> None:
        current = self.selected_key
        self.clear()
        for key, cells in self._all_rows:
            if self._matches(cells):
                self.add_row(*[c if isinstance(c, Text) else _cell(c) for c in cells], key=key)
        if current is not None:
            try:
                self.move_cursor(row=self.get_row_index(current), animate=False, scroll=False)
            except Exception:  # noqa: BLE001 - the row is gone (filtered out or deleted): stay at the top
                pass

    @property
    def selected_key(self) -> str | None:
        if self.row_count == 0:
            return None
        try:
            row_key, _ = self.coordinate_to_cell_key(self.cursor_coordinate)
        except Exception:  # noqa: BLE001 - no cursor yet
            return None
        return row_key.value

    @property
    def shown_keys(self) -> list[str]:
        return [k for k, cells in self._all_rows if self._matches(cells)]


def _cell(value: str | int | float) -> Text:
    """Numbers right-aligned (as mqadmin's tables), everything else as plain text (no markup)."""
    if isinstance(value, bool):
        return Text(str(value))
    if isinstance(value, int | float):
        return Text(f"{value:,}" if isinstance(value, int) else f"{value:.1f}", justify="right")
    return Text(value)
