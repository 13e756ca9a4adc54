"""A DataTable that keeps all its rows, shows those matching the screen's '/' filter, and keeps the
cursor on the same row across refreshes (rows are replaced every second).

Why the table is changed in place rather than rebuilt: clearing and re-adding every row on each refresh
and on each filter keystroke made Textual measure every cell again, which at 1,500 topics held the event
loop for seconds (a key press answered in 3-6 s, a typed filter in 14-24 s). Now only the cells that
changed are rewritten, rows that left or came are removed or added, and the order is set by a sort; the
cursor and the scroll position stay where they were. A change that removes many rows at once (a filter
that drops most of them) is still a rebuild: removing a row costs Textual a pass over all the others.

Row keys must be unique (DataTable raises on a repeated one, which stopped the whole dashboard when a
topic spanned two brokers): screens key queue rows by broker too, and a key repeated all the same is
made unique here rather than taking the dashboard down. Columns may change with what is shown (the
Broker column appears once the cluster has more than one broker)."""

from __future__ import annotations

from collections.abc import Sequence

from rich.cells import cell_len
from rich.text import Text
from textual.widgets import DataTable

Cell = str | int | float | Text

ROW_ADD_COST = 250
"""Adding (and measuring) a row costs about as much as renumbering this many rows, which removing one
row does for every row of the table (measured at 1,500 rows: about 1 ms against 4 us): when removing
costs more than adding the rows left afresh, the table is rebuilt instead."""


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
        self._shown: dict[str, tuple[Cell, ...]] = {}
        """The rows in the table now, in its order, with the cells as given (to compare the next ones)."""
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
        self._shown = {}
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
        wanted = {key: cells for key, cells in self._all_rows if self._matches(cells)}
        gone = [key for key in self._shown if key not in wanted]
        reshaped = any(len(cells) != len(before) for key, cells in wanted.items()
                       if (before := self._shown.get(key)) is not None)
        if not self._shown or reshaped or len(gone) * len(self._shown) > ROW_ADD_COST * len(wanted):
            self._rebuild(wanted)
        else:
            self._change(wanted, gone)
        self._shown = wanted
        if current is not None and current in wanted:
            row = self.get_row_index(current)
            if row != self.cursor_row:
                self.move_cursor(row=row, animate=False, scroll=False)

    def _rebuild(self, wanted: dict[str, tuple[Cell, ...]]) -> None:
        """Clear the table and add ``wanted`` (the first rows, a change of columns, most rows removed)."""
        self.clear()
        for key, cells in wanted.items():
            self.add_row(*_cells(cells), key=key)

    def _change(self, wanted: dict[str, tuple[Cell, ...]], gone: list[str]) -> None:
        """Make the table show ``wanted`` in its order by removing ``gone``, adding the new rows, rewriting
        only the cells that differ and sorting when the order changed."""
        for key in gone:
            self.remove_row(key)
        columns = self.ordered_columns
        for key, cells in wanted.items():
            before = self._shown.get(key)
            if before is None:
                self.add_row(*_cells(cells), key=key)
                continue
            for i, (old, new) in enumerate(zip(before, cells, strict=True)):  # same length: see _render_rows
                if not _same(old, new):
                    value = _cell(new) if i else _cells((new,))[0]
                    column = columns[i]
                    # widen the column when the value needs it; a narrower one leaves it as it is (Textual
                    # would measure the whole column again for each such cell)
                    wider = _width(value) > column.content_width
                    self.update_cell(key, column.key, value, update_width=wider)
        order = list(wanted)
        kept = [key for key in self._shown if key in wanted]
        if kept + [key for key in order if key not in self._shown] != order:
            # Textual sorts by cell values only: each row's first cell is its own object (``_cells``), so
            # its identity names the row
            rank = {id(self.get_cell(key, columns[0].key)): n for n, key in enumerate(order)}
            self.sort(columns[0].key, key=lambda first: rank[id(first)])

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


def _cells(cells: tuple[Cell, ...]) -> list[Text]:
    """A row's cells as the table holds them; the first is always a new object, which ``_change`` relies
    on to find the row again when it sorts (a screen may give the same Text to several rows)."""
    out = [_cell(c) for c in cells]
    if out and out[0] is cells[0]:
        out[0] = out[0].copy()
    return out


def _same(a: Cell, b: Cell) -> bool:
    """Whether two cells show the same (Text's own == ignores its style and justification)."""
    if isinstance(a, Text) and isinstance(b, Text):
        return a == b and a.style == b.style and a.justify == b.justify
    return type(a) is type(b) and a == b


def _width(value: Text) -> int:
    """Cells the value takes on one line (rows are one line high)."""
    return max((cell_len(line) for line in value.plain.splitlines()), default=0)


def _cell(value: Cell) -> Text:
    """Numbers right-aligned (as mqadmin's tables), everything else as plain text (no markup)."""
    if isinstance(value, Text):
        return value
    if isinstance(value, bool):
        return Text(str(value))
    if isinstance(value, int | float):
        return Text(f"{value:,}" if isinstance(value, int) else f"{value:.1f}", justify="right")
    return Text(value)
