"""Screen 3, Consumers: groups by lag (highest first) with consume TPS, time to drain, pop in-flight,
blocked FIFO queues, retry and DLQ depth; the highlighted group's lag sparkline and queues. ``r``
opens the offset reset (plan first, then a confirmation).

Group names are shown as literal text; groups that cannot be read (a damaged consumerOrderInfo.json)
are named in a problem line above the table instead of blanking the whole dashboard; so is a broker left
out as not answering, whose queues are in no lag, retry or DLQ figure."""

from __future__ import annotations

from collections.abc import Iterable

from rich.text import Text
from textual.binding import Binding
from textual.widget import Widget
from textual.widgets import DataTable, Label, Sparkline

from mqadmin.figures import GroupLag
from tui import format as fmt
from tui.screens.base import DashboardScreen
from tui.snapshot import History, Snapshot
from tui.widgets.filter_table import FilterTable, with_broker
from tui.widgets.left_out import LeftOutLine
from tui.widgets.problem import ProblemLine

QUEUE_COLUMNS = ["Topic", "Queue", "Broker offset", "Consumer offset", "Lag", "In-flight", "Blocked"]


class ConsumersScreen(DashboardScreen):
    TITLE = "Consumers"
    BINDINGS = [Binding("r", "reset_offsets", "Reset offsets")]

    def compose_body(self) -> Iterable[Widget]:
        yield Label("Consumer groups, highest lag first", classes="section")
        yield ProblemLine(id="groups-problem")
        yield LeftOutLine(id="groups-left-out")
        yield FilterTable(["Group", "Lag", "Trend", "Consume TPS", "Drains in", "In-flight", "Blocked FIFO", "Retry",
                           "DLQ", "Topics"], id="groups")
        yield Label("", id="lag-label", classes="section")
        yield Sparkline([], id="lag-spark")
        yield FilterTable(QUEUE_COLUMNS, id="group-queues")

    def show(self, snapshot: Snapshot, history: History) -> None:
        self.query_one("#groups-problem", ProblemLine).show_problem("Cannot read consumer groups",
                                                                    snapshot.groups_error)
        self.query_one("#groups-left-out", LeftOutLine).show_left_out("Lag, queues, retry and DLQ depth",
                                                                      snapshot.left_out, history.missing_brokers,
                                                                      snapshot.refusing)
        groups = sorted(snapshot.groups, key=lambda g: (-g.total_lag, g.group))
        rows = []
        for g in groups:
            eta = history.drain_eta_s(g.group, g.total_lag)
            drains = "caught up" if g.total_lag == 0 else "-" if eta is None else fmt.duration(eta * 1000)
            rows.append((g.group, [g.group, g.total_lag, fmt.trend(history.lag_values(g.group)),
                                   fmt.rate(history.group_consume_tps(g.group)), drains,
                                   g.inflight, len(g.blocked_queues), g.retry_depth, g.dlq_depth,
                                   ", ".join(g.topics) or "-"]))
        table = self.query_one("#groups", FilterTable)
        table.set_rows(rows)
        self._show_group(snapshot, history, table.selected_key)

    def selected_group(self) -> GroupLag | None:
        snap = self.dashboard.snapshot
        key = self.query_one("#groups", FilterTable).selected_key
        return snap.group(key) if snap is not None and key is not None else None

    def _show_group(self, snapshot: Snapshot, history: History, name: str | None) -> None:
        g = snapshot.group(name) if name else None
        label = self.query_one("#lag-label", Label)
        spark = self.query_one("#lag-spark", Sparkline)
        queues = self.query_one("#group-queues", FilterTable)
        if g is None:
            label.update("No consumer group holds offsets in this store" if snapshot.groups_error is None
                         else "No consumer group to show")
            spark.data = [0.0]
            queues.set_rows([])
            return
        values = history.lag_values(g.group)
        label.update(Text(f"Lag of {g.group}: {fmt.count(g.total_lag)} now, {len(values)} refreshes shown"))
        spark.data = values or [0.0]
        many = snapshot.many_brokers
        queues.set_columns(with_broker(QUEUE_COLUMNS, many, 1))
        # one row per broker and queue (queue ids repeat across brokers): keyed by all three
        queues.set_rows([(f"{q.broker_name}/{q.topic}/{q.queue_id}", [
            q.topic, *([q.broker_name] if many else []), q.queue_id, q.broker_offset, q.consumer_offset, q.diff,
            q.inflight, Text("BLOCKED", style="bold red") if q.blocked else ""]) for q in g.queues])

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        if event.data_table.id == "groups" and self.dashboard.snapshot is not None:
            self._show_group(self.dashboard.snapshot, self.dashboard.history, event.row_key.value)

    def action_reset_offsets(self) -> None:
        g = self.selected_group()
        if g is None:
            self.notify("Highlight a consumer group first", severity="warning")
            return
        if not g.topics:
            self.notify(f"{g.group} holds no offsets on any topic: nothing to reset", severity="warning",
                        markup=False)
            return
        from tui.screens.reset import ResetScreen

        self.app.push_screen(ResetScreen(g.group, g.topics, self.dashboard.snapshot.identity.broker_name
                                         if self.dashboard.snapshot else ""))
