"""Screen 4, Timers: the timer wheel (pending, due-in histogram, rates, dequeue lag), the 4.x delay
levels with their queue depths, and transaction half/op depths with pending check-backs.

They all come from a broker's runtime info: when it cannot be read (a damaged delayOffset.json) a
problem line says why instead of showing an empty wheel as if it were off."""

from __future__ import annotations

from collections.abc import Iterable

from rich.text import Text
from textual.containers import Horizontal, Vertical
from textual.widget import Widget
from textual.widgets import Label

from mqadmin.figures import TIMER_DUE_BUCKETS
from tui import format as fmt
from tui.screens.base import DashboardScreen
from tui.snapshot import History, Snapshot
from tui.widgets.filter_table import FilterTable
from tui.widgets.problem import ProblemLine

BUCKET_NAMES = {"10s": "next 10 s", "1m": "10 s - 1 min", "10m": "1 - 10 min", "1h": "10 min - 1 h",
                "later": "later than 1 h"}
BAR_WIDTH = 30


class TimersScreen(DashboardScreen):
    TITLE = "Timers"

    def compose_body(self) -> Iterable[Widget]:
        yield ProblemLine(id="status-problem")
        with Horizontal(classes="pair"):
            with Vertical():
                yield Label("Timer wheel", id="timer-title", classes="section")
                yield FilterTable(["Figure", "Value"], id="timer-figures")
            with Vertical():
                yield Label("Due in", classes="section")
                yield FilterTable(["Due in", "Messages", ("Share", "bar")], id="due")
        with Horizontal(classes="pair"):
            with Vertical():
                yield Label("Delay levels (SCHEDULE_TOPIC_XXXX)", classes="section")
                yield FilterTable(["Level", "Delay", "Queue", "Delivered", "End", "Pending", "Next due"],
                                  id="delay-levels")
            with Vertical():
                yield Label("Transactions", classes="section")
                yield FilterTable(["Figure", "Value"], id="transactions")

    def show(self, snapshot: Snapshot, history: History) -> None:
        self.query_one("#status-problem", ProblemLine).show_problem(
            "Cannot read the runtime info", snapshot.status_error)
        many = len(snapshot.brokers) > 1
        readable = [b for b in snapshot.brokers if b.error is None]
        wheels = [(b.name, b.timer) for b in readable if b.timer is not None]
        figures = self.query_one("#timer-figures", FilterTable)
        due = self.query_one("#due", FilterTable)
        if not readable:
            self.query_one("#timer-title", Label).update("Timer wheel: unknown (runtime info cannot be read)")
            figures.set_rows([])
            due.set_rows([])
        elif not wheels:
            self.query_one("#timer-title", Label).update("Timer wheel: off (timerWheelEnable=false or no wheel)")
            figures.set_rows([])
            due.set_rows([])
        else:
            total = sum(t.pending for _, t in wheels)
            self.query_one("#timer-title", Label).update(f"Timer wheel: {fmt.count(total)} pending")
            rows = []
            for name, timer in wheels:
                prefix = f"{name}: " if many else ""
                rows += [(prefix + k, [prefix + k, v]) for k, v in (
                    ("Pending timer messages", fmt.count(timer.pending)),
                    ("Enqueue TPS", fmt.rate(timer.enqueue_tps)),
                    ("Dequeue TPS", fmt.rate(timer.dequeue_tps)),
                    ("Dequeue behind", fmt.duration(timer.dequeue_behind_ms)),
                    ("Read position", fmt.when(timer.curr_read_time_ms)),
                    ("Not yet in the wheel", f"{fmt.count(timer.enqueue_behind_messages)} "
                                             f"({fmt.duration(timer.enqueue_behind_ms)} old)"),
                    ("Timer log size", fmt.size(timer.timer_log_max_offset)),
                    ("Lost to retention", fmt.count(timer.lost_to_retention)),
                )]
            figures.set_rows(rows)
            counts = {b: sum(t.due.get(b, 0) for _, t in wheels) for b in TIMER_DUE_BUCKETS}
            top = max(counts.values(), default=0) or 1
            due.set_rows([(b, [BUCKET_NAMES[b], counts[b], Text("█" * round(BAR_WIDTH * counts[b] / top), style="bold")])
                          for b in TIMER_DUE_BUCKETS])
        levels = []
        for b in readable:
            prefix = f"{b.name}: " if many else ""
            levels += [(f"{b.name}/{d.level}", [f"{prefix}{d.level}" if many else d.level, fmt.duration(d.delay_ms), d.queue_id, d.offset,
                                                 d.max_offset, d.pending, fmt.when(d.next_due_ms or 0)])
                       for d in b.delay_levels]
        self.query_one("#delay-levels", FilterTable).set_rows(levels)
        tx_rows = []
        for b in readable:
            prefix = f"{b.name}: " if many else ""
            tx = b.transactions
            tx_rows += [(prefix + k, [prefix + k, v]) for k, v in (
                ("Halves awaiting commit/rollback", fmt.count(tx.pending_check)),
                ("Half queue unchecked", fmt.count(tx.half_depth)),
                ("Op queue unchecked", fmt.count(tx.op_depth)))]
        self.query_one("#transactions", FilterTable).set_rows(tx_rows)
