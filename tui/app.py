"""DashboardApp: six screens (keys 1-6) over one poller that reads the Admin interface.

Why this shape (as Textual's own example apps): each screen is a mode with its own module; the app
only wires the poller's messages to the visible screen, keeps the latest snapshot and history, and
owns the app-wide keys (screens, help, refresh, quit) and the command palette's actions.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from pathlib import Path

from textual.app import App, SystemCommand
from textual.binding import Binding
from textual.screen import Screen

from tui.poller import AdminTarget, Poller
from tui.screens.acl import AclScreen
from tui.screens.base import DashboardScreen
from tui.screens.consumers import ConsumersScreen
from tui.screens.help import HelpScreen
from tui.screens.messages import MessagesScreen
from tui.screens.overview import OverviewScreen
from tui.screens.reset import APPLY_WORKERS
from tui.screens.timers import TimersScreen
from tui.screens.topics import TopicsScreen
from tui.snapshot import History, Snapshot

SCREENS_IN_ORDER = (("overview", "Overview"), ("topics", "Topics"), ("consumers", "Consumers"),
                    ("timers", "Timers"), ("messages", "Messages"), ("acl", "ACL"))


class DashboardApp(App):
    TITLE = "rmqops dashboard"
    CSS_PATH = Path(__file__).with_name("dashboard.tcss")
    MODES = {"overview": OverviewScreen, "topics": TopicsScreen, "consumers": ConsumersScreen,
             "timers": TimersScreen, "messages": MessagesScreen, "acl": AclScreen}
    DEFAULT_MODE = "overview"
    BINDINGS = [
        *[Binding(str(i), f"show('{mode}')", title, key_display=str(i))
          for i, (mode, title) in enumerate(SCREENS_IN_ORDER, 1)],
        Binding("question_mark", "help", "Help", key_display="?"),
        Binding("ctrl+r", "refresh_now", "Refresh", show=False),
        Binding("q", "quit", "Quit"),
    ]

    def __init__(self, target: AdminTarget, refresh_s: float = 1.0, call_timeout_s: float = 5.0,
                 clock_ms: Callable[[], int] | None = None, monotonic: Callable[[], float] = time.monotonic,
                 start_screen: str = "overview") -> None:
        super().__init__()
        self.target = target
        self.poller = Poller(self, target, refresh_s, call_timeout_s,
                             clock_ms or (lambda: int(time.time() * 1000)))
        self.history = History(monotonic)
        self.snapshot: Snapshot | None = None
        self.lost: tuple[str, float] | None = None
        self.start_screen = start_screen
        self.sub_title = target.description
        self.crash: BaseException | None = None
        """The unexpected error that stopped the app (then ``return_code`` is 1), for the command to report."""

    def on_mount(self) -> None:
        self.switch_mode(self.start_screen)
        self.run_worker(self.poller.run(), name="poller", group="poller", exclusive=True)

    def on_unmount(self) -> None:
        self.poller.close()

    def _handle_exception(self, error: Exception) -> None:
        """Keep the error that stops the app: ``mqadmin dashboard`` reports it in one line and exits 1
        (Textual itself only prints a stack trace, and ``run()`` returns as after a normal quit)."""
        if self.crash is None:
            self.crash = error
        super()._handle_exception(error)

    # -- poller messages ---------------------------------------------------------------------------
    def on_poller_refreshed(self, event: Poller.Refreshed) -> None:
        self.snapshot = event.snapshot
        self.history.add(event.snapshot)
        was_lost = self.lost is not None
        self.lost = None
        screen = self._shown_screen()
        if screen is not None:
            if was_lost:
                screen.sync_banner()
            screen.show(event.snapshot, self.history)

    def on_poller_connection_lost(self, event: Poller.ConnectionLost) -> None:
        self.lost = (event.reason, event.retry_in_s)
        screen = self._shown_screen()
        if screen is not None:
            screen.sync_banner()

    def _shown_screen(self) -> DashboardScreen | None:
        """The dashboard screen in view, once composed. Why: a screen's key switches to it at once but
        composes it a moment later; a refresh in between found none of its widgets and crashed the
        app. It shows the latest snapshot and banner itself when it comes into view (on_screen_resume)."""
        screen = self.screen
        return screen if isinstance(screen, DashboardScreen) and screen.is_mounted else None

    # -- actions -----------------------------------------------------------------------------------
    def action_show(self, mode: str) -> None:
        if self.current_mode != mode:
            self.switch_mode(mode)

    def action_help(self) -> None:
        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen())

    def action_refresh_now(self) -> None:
        self.poller.refresh_now()

    async def action_quit(self) -> None:
        """Quit; while a reset is being applied, ask first. Why: a change once sent cannot be stopped (it
        completes, or fails, as the process exits), and after quitting its outcome is shown nowhere: the
        dashboard closed silently and the offsets moved afterwards."""
        if not any(w.group == APPLY_WORKERS and w.is_running for w in self.workers):
            self.exit()
            return
        from tui.screens.confirm import ConfirmScreen

        def answered(yes: bool | None) -> None:
            if yes:
                self.exit()

        self.push_screen(ConfirmScreen("A reset is still being applied. Quit anyway? It is not stopped: it goes "
                                       "on until it ends, but its outcome will not be shown anywhere.",
                                       yes_label="Yes, quit (y)"), answered)

    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        """The command palette (ctrl+p): every dashboard action by name, then Textual's own."""
        for i, (mode, title) in enumerate(SCREENS_IN_ORDER, 1):
            yield SystemCommand(f"Show {title}", f"Switch to screen {i} ({title})",
                                lambda m=mode: self.action_show(m))
        yield SystemCommand("Refresh now", "Read the broker again now (retries a lost connection)",
                            self.action_refresh_now)
        yield SystemCommand("Help", "Keys and what each screen shows", self.action_help)
        if isinstance(screen, DashboardScreen):
            yield SystemCommand("Filter rows", "Filter the current table (/)", screen.action_open_filter)
        if isinstance(screen, ConsumersScreen):
            yield SystemCommand("Reset offsets", "Reset the highlighted group's offsets (plan, then confirm)",
                                screen.action_reset_offsets)
        yield from super().get_system_commands(screen)
