"""A topic opened from screen 2: per queue its offsets and last store time, and each consuming
group's offset on it (Esc goes back). Names are shown as literal text, never markup."""

from __future__ import annotations

from collections.abc import Iterable

from rich.text import Text
from textual.binding import Binding
from textual.widget import Widget
from textual.widgets import Label

from tui import format as fmt
from tui.screens.base import DashboardScreen
from tui.snapshot import History, Snapshot
from tui.widgets.filter_table import FilterTable


class TopicScreen(DashboardScreen):
    BINDINGS = [Binding("escape,backspace", "back", "Back")]

    def __init__(self, topic: str) -> None:
        super().__init__()
        self.topic = topic
        self.sub_title = topic

    def compose_body(self) -> Iterable[Widget]:
        yield Label(Text(f"Topic {self.topic}"), id="topic-title", classes="section")
        yield FilterTable(["Queue", "Min offset", "Max offset", "Messages", "Last stored"], id="queues")
        yield Label("", id="consumed-by", classes="section")
        yield FilterTable(["Group", "Queue", "Consumer offset", "Lag"], id="group-offsets")

    def action_back(self) -> None:
        if self.query_one("#filter").display:
            self.action_close_filter()
        else:
            self.app.pop_screen()

    def show(self, snapshot: Snapshot, history: History) -> None:
        t = snapshot.topic(self.topic)
        if t is None:
            self.query_one("#topic-title", Label).update(Text(f"Topic {self.topic}: no longer exists"))
            self.query_one("#queues", FilterTable).set_rows([])
            return
        self.query_one("#topic-title", Label).update(Text(
            f"Topic {t.name}: {t.info.queue_type}, {t.info.read_queue_nums} read / {t.info.write_queue_nums} "
            f"write queues, {fmt.count(t.messages)} messages"))
        self.query_one("#queues", FilterTable).set_rows([
            (str(q.queue_id), [q.queue_id, q.min_offset, q.max_offset, q.max_offset - q.min_offset,
                               fmt.when(q.last_update_timestamp)]) for q in t.queues])
        rows = []
        groups = []
        for g in snapshot.groups:
            mine = [q for q in g.queues if q.topic == t.name]
            if mine:
                groups.append(g.group)
            rows += [(f"{g.group}/{q.queue_id}", [g.group, q.queue_id, q.consumer_offset, q.diff]) for q in mine]
        consumed_by = ", ".join(groups) if groups else "no group holds offsets on this topic"
        if snapshot.groups_error is not None:
            consumed_by += f" (cannot read consumer groups: {snapshot.groups_error})"
        self.query_one("#consumed-by", Label).update(Text(f"Consumed by: {consumed_by}"))
        self.query_one("#group-offsets", FilterTable).set_rows(rows)
