"""The lost-connection banner: shown over every screen while refreshes fail, hidden once one works."""

from __future__ import annotations

from textual.widgets import Static


class ConnectionBanner(Static):
    DEFAULT_CSS = """
    ConnectionBanner {
        display: none;
        background: $error;
        color: $text;
        padding: 0 1;
        height: auto;
    }
    ConnectionBanner.-lost {
        display: block;
    }
    """

    def show_lost(self, reason: str, retry_in_s: float) -> None:
        self.update(f"Connection lost: {reason} - retrying in {retry_in_s:g} s (ctrl+r retries now)")
        self.add_class("-lost")

    def show_ok(self) -> None:
        self.remove_class("-lost")
        self.update("")
