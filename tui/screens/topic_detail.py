"""A topic opened from screen 2: per queue its offsets and last store time, and each consuming
group's offset on it (Esc goes back). Names are shown as literal text, never markup. A broker left out
as not answering is named: its queues are missing from the tables."""

from __future__ import annotations

from collections.abc import Iterable

from rich.text import Text
from textual.binding import Binding
from textual.widget import Widget
from textual.widgets import Label

from tui import format as fmt
from tui.screens.base import DashboardScreen
from tui.snapshot import History, Snapshot
from tui.widgets.filter_table import FilterTable, with_broker
from tui.widgets.left_out import LeftOutLine

QUEUE_COLUMNS = ["Queue", "Min offset", "Max offset", "Messages", "Last stored"]
GROUP_COLUMNS = ["Group", "Queue", "Consumer offset", "Lag"]


class TopicScreen(DashboardScreen):
    BINDINGS = [Binding("escape,backspace", "back", "Back")]

    def __init__(self, topic: str) -> None:
        super().__init__()
        self.topic = topic
        self.sub_title = topic

    def compose_body(self) -> Iterable[Widget]:
        yield Label(Text(f"Topic {self.topic}"), id="topic-title", classes="section")
        yield LeftOutLine(id="topic-left-out")
        yield FilterTable(QUEUE_COLUMNS, id="queues")
        yield Label("", id="consumed-by", classes="section")
        yield FilterTable(GROUP_COLUMNS, id="group-offsets")

    def action_back(self) -> None:
        if self.query_one("#filter").display:
            self.action_close_filter()
        else:
            self.app.pop_screen()

    def show(self, snapshot: Snapshot, history: History) -> None:
        self.query_one("#topic-left-out", LeftOutLine).show_left_out("Queues and offsets", snapshot.left_out,
                                                                          history.missing_brokers, snapshot.refusing)
        t = snapshot.topic(self.topic)
        if t is None:
            self.query_one("#topic-title", Label).update(Text(f"Topic {self.topic}: no longer exists"))
            self.query_one("#queues", FilterTable).set_rows([])
            return
        self.query_one("#topic-title", Label).update(Text(
            f"Topic {t.name}: {t.info.queue_type}, {t.info.read_queue_nums} read / {t.info.write_queue_nums} "
            f"write queues, {fmt.count(t.messages)} messages"))
        many = snapshot.many_brokers
        queues = self.query_one("#queues", FilterTable)
        queues.set_columns(with_broker(QUEUE_COLUMNS, many, 0))
        # a topic on two brokers has a queue 0 on each: rows are keyed (and shown) per broker
        queues.set_rows([
            (f"{q.broker_name}/{q.queue_id}", [*([q.broker_name] if many else []), q.queue_id, q.min_offset,
                                               q.max_offset, q.max_offset - q.min_offset,
                                               fmt.when(q.last_update_timestamp)]) for q in t.queues])
        rows = []
        groups = []
        for g in snapshot.groups:
            mine = [q for q in g.queues if q.topic == t.name]
            if mine:
                groups.append(g.group)
            rows += [(f"{g.group}/{q.broker_name}/{q.queue_id}",
                      [g.group, *([q.broker_name] if many else []), q.queue_id, q.consumer_offset, q.diff])
                     for q in mine]
        consumed_by = ", ".join(groups) if groups else "no group holds offsets on this topic"
        if snapshot.groups_error is not None:
            consumed_by += f" (cannot read consumer groups: {snapshot.groups_error})"
        self.query_one("#consumed-by", Label).update(Text(f"Consumed by: {consumed_by}"))
        offsets = self.query_one("#group-offsets", FilterTable)
        offsets.set_columns(with_broker(GROUP_COLUMNS, many, 1))
        offsets.set_rows(rows)
