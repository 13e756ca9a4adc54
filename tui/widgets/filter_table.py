"""A DataTable that keeps all its rows, shows those matching the screen's '/' filter, and keeps the
cursor on the same row across refreshes (rows are replaced every second).

Row keys must be unique (DataTable raises on a repeated one, which stopped the whole dashboard when a
topic spanned two brokers): screens key queue rows by broker too, and a key repeated all the same is
made unique here rather than taking the dashboard down. Columns may change with what is shown (the
Broker column appears once the cluster has more than one broker)."""

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

    def set_columns(self, columns: Sequence[str | tuple[str, str]]) -> None:
        """Show these columns (labels or (label, key)); the rows are dropped when they change, so call
        ``set_rows`` after. Nothing happens when they are the ones shown."""
        specs = [(c, c) if isinstance(c, str) else c for c in columns]
        if specs == self._column_specs:
            return
        self._column_specs = specs
        self._all_rows = []
        if self.is_mounted:
            self.clear(columns=True)
            for label, key in specs:
                self.add_column(label, key=key)

    @property
    def column_labels(self) -> list[str]:
        return [label for label, _ in self._column_specs]

    def set_rows(self, rows: Sequence[tuple[str, Sequence[Cell]]]) -> None:
        """Replace the rows (``(key, cells)``); the highlighted row stays highlighted if still there."""
        self._all_rows = _unique_keys([(k, tuple(cells)) for k, cells in rows])
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


def with_broker(columns: Sequence[str], many: bool, at: int) -> list[str]:
    """``columns`` with a Broker column at ``at`` when the cluster has more than one broker: rows per
    queue then come once per broker (as consumerProgress and topicStatus print them), and a lone
    broker's table stays as it was."""
    out = list(columns)
    if many:
        out.insert(at, "Broker")
    return out


def _unique_keys(rows: list[tuple[str, tuple[Cell, ...]]]) -> list[tuple[str, tuple[Cell, ...]]]:
    """The rows with each repeated key suffixed (``key#2``...): a screen's keying mistake must cost a
    stable cursor on those rows, never the dashboard (DataTable raises DuplicateKey)."""
    used: set[str] = set()
    out = []
    for key, cells in rows:
        unique, n = key, 1
        while unique in used:
            n += 1
            unique = f"{key}#{n}"
        used.add(unique)
        out.append((unique, cells))
    return out


def _cell(value: str | int | float) -> Text:
    """Numbers right-aligned (as mqadmin's tables), everything else as plain text (no markup)."""
    if isinstance(value, bool):
        return Text(str(value))
    if isinstance(value, int | float):
        return Text(f"{value:,}" if isinstance(value, int) else f"{value:.1f}", justify="right")
    return Text(value)
