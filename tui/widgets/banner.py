"""The refresh-failed banner: shown over every screen while refreshes fail, hidden once one works.

Why it says "Refresh failed" and not "Connection lost": the core of a refresh also fails on a damaged
store file (topics.json cut short), which is not a lost connection; the reason names what failed.
The reason is shown as literal text: it comes from error messages, which hold names in brackets
(``topic:[orders]``) that must neither vanish nor be read as markup.
"""

from __future__ import annotations

from rich.text import Text
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
        self.update(Text(f"Refresh failed: {reason} - retrying in {retry_in_s:g} s (ctrl+r retries now)"))
        self.add_class("-lost")

    def show_ok(self) -> None:
        self.remove_class("-lost")
        self.update("")
