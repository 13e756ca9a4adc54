"""Screen 2, Topics: every topic with its queue type, queues, stored messages and put TPS.

Enter opens the topic (``TopicScreen``): its queues' offsets and which groups consume them. A broker
left out as not answering is named above the table: its queues are in none of the figures. Topics the
user may not read (ACL: NO_PERMISSION) are not rows; one line above the table counts and names them.
"""

from __future__ import annotations

from collections.abc import Iterable

from textual.widget import Widget
from textual.widgets import DataTable, Label

from tui import format as fmt
from tui.screens.base import DashboardScreen
from tui.snapshot import History, Snapshot
from tui.widgets.filter_table import FilterTable
from tui.widgets.left_out import LeftOutLine
from tui.widgets.problem import ProblemLine


class TopicsScreen(DashboardScreen):
    TITLE = "Topics"

    def compose_body(self) -> Iterable[Widget]:
        yield Label("Topics (Enter opens one)", classes="section")
        yield LeftOutLine(id="topics-left-out")
        yield ProblemLine(id="topics-problem")
        yield FilterTable(["Topic", "Queue type", "Read", "Write", "Perm", "Messages", "Put TPS", "Last stored"],
                          id="topics", classes="fill")

    def show(self, snapshot: Snapshot, history: History) -> None:
        self.query_one("#topics-left-out", LeftOutLine).show_left_out("Queues, messages and put TPS",
                                                                      snapshot.left_out, history.missing_brokers,
                                                                      snapshot.refusing)
        self.query_one("#topics-problem", ProblemLine).show_line(snapshot.topics_problem)
        self.query_one("#topics", FilterTable).set_rows([
            (t.name, [t.name, t.info.queue_type, t.info.read_queue_nums, t.info.write_queue_nums,
                      fmt.perm(t.info.perm), t.messages,
                      fmt.rate(history.topic_put_tps(t.name)), fmt.when(t.last_store_ms)])
            for t in snapshot.topics])

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        if event.data_table.id == "topics" and event.row_key.value is not None:
            from tui.screens.topic_detail import TopicScreen

            self.app.push_screen(TopicScreen(event.row_key.value))
