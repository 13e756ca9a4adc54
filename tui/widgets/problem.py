"""One line saying why a part of the screen could not be read (a damaged acls.json, say).

Why a widget: a refresh reads its parts separately (tui.snapshot), so a screen can show what it read
and, where the rest would be, what failed, naming the broken file; hidden while there is nothing to
say. The text comes from error messages, so it is literal, never markup.
"""

from __future__ import annotations

from rich.text import Text
from textual.widgets import Label


class ProblemLine(Label):
    DEFAULT_CSS = """
    ProblemLine {
        display: none;
        color: $error;
        padding: 0 1;
    }
    ProblemLine.-shown {
        display: block;
    }
    """

    def show_problem(self, what: str, error: str | None) -> None:
        """``what``: the part ("Cannot read the users and ACLs"); ``error``: why, or None to hide."""
        self.show_line(None if error is None else f"{what}: {error}")

    def show_line(self, text: str | None) -> None:
        """Show ``text`` as it is, or hide the line (None)."""
        if text is None:
            self.remove_class("-shown")
            self.update("")
        else:
            self.update(Text(text))
            self.add_class("-shown")
