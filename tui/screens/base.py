"""What every dashboard screen shares: header, lost-connection banner, '/' filter box and footer.

Why a base class: the app hands each refresh to the visible screen through ``show``; screens only
render a ``Snapshot`` (and ask the poller for one-off reads), so they look the same whichever Admin
transport is behind them.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import Screen
from textual.widget import Widget
from textual.widgets import Footer, Header, Input

from tui.snapshot import History, Snapshot
from tui.widgets.banner import ConnectionBanner
from tui.widgets.filter_table import FilterTable

if TYPE_CHECKING:
    from tui.app import DashboardApp


class DashboardScreen(Screen):
    _filtered: FilterTable | None = None
    BINDINGS = [
        Binding("slash", "open_filter", "Filter", key_display="/"),
        Binding("escape", "close_filter", "Clear filter", show=False),
    ]

    @property
    def dashboard(self) -> DashboardApp:
        from tui.app import DashboardApp

        assert isinstance(self.app, DashboardApp)
        return self.app

    def compose(self) -> ComposeResult:
        yield Header()
        yield ConnectionBanner()
        yield from self.compose_body()
        yield Input(placeholder="filter rows (Enter keeps it, Esc clears)", id="filter")
        yield Footer()

    def compose_body(self) -> Iterable[Widget]:
        raise NotImplementedError

    def on_mount(self) -> None:
        self.query_one("#filter", Input).display = False

    def on_screen_resume(self) -> None:
        app = self.dashboard
        self.sync_banner()
        if app.snapshot is not None:
            self.show(app.snapshot, app.history)

    def sync_banner(self) -> None:
        banner = self.query_one(ConnectionBanner)
        lost = self.dashboard.lost
        if lost is None:
            banner.show_ok()
        else:
            banner.show_lost(*lost)

    def show(self, snapshot: Snapshot, history: History) -> None:
        """Render one refresh (called on the visible screen only, and when it comes back into view)."""
        raise NotImplementedError

    # -- '/' filter ---------------------------------------------------------------------------------
    def filter_target(self) -> FilterTable | None:
        """The table '/' filters: the focused one, else the screen's first."""
        focused = self.focused
        if isinstance(focused, FilterTable):
            return focused
        tables = self.query(FilterTable)
        return tables.first() if tables else None

    def action_open_filter(self) -> None:
        self._filtered = self.filter_target()
        box = self.query_one("#filter", Input)
        box.display = True
        box.focus()

    def action_close_filter(self) -> None:
        box = self.query_one("#filter", Input)
        if not box.display:
            return
        box.value = ""
        box.display = False
        self._apply_filter("")

    def on_input_changed(self, event: Input.Changed) -> None:
        if event.input.id == "filter":
            self._apply_filter(event.value)

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if event.input.id == "filter":
            event.stop()
            table = self._filtered
            if table is not None:
                table.focus()

    def _apply_filter(self, text: str) -> None:
        table = self._filtered or self.filter_target()
        if table is not None:
            table.set_filter(text)
