"""'?': the keys and what each screen shows."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Markdown

HELP = """\
# rmqops dashboard

| Key | Does |
|---|---|
| `1` ... `6` | Overview, Topics, Consumers, Timers, Messages, ACL |
| `/` | filter the current table (Esc clears) |
| `Enter` | on Topics: open the topic (Esc goes back) |
| `r` | on Consumers: reset the highlighted group's offsets (plan, then confirm) |
| `b` / `n` / `p` | on Messages: body view / next page / previous page |
| `ctrl+r` | refresh now (and retry a lost connection) |
| `ctrl+p` | command palette: every action by name |
| `?` | this help |
| `q` | quit |

Figures refresh every few seconds in the background; rates (TPS, time to drain) come from
offsets over successive refreshes. On a store directory the store is opened read-only and re-read
each refresh, so it is safe beside a running broker; a reset needs the store lock (or `-n`).
"""


class HelpScreen(ModalScreen[None]):
    BINDINGS = [Binding("escape,q,question_mark", "close", "Close")]

    def compose(self) -> ComposeResult:
        with VerticalScroll(classes="dialog", id="help-dialog"):
            yield Markdown(HELP)

    def action_close(self) -> None:
        self.dismiss(None)
