"""Screen 1, Overview: the broker, disk, put/get TPS with sparklines, store positions and backlogs.

A broker whose runtime info cannot be read (a damaged delayOffset.json) keeps its row, with '-' where
the figures would be, and a problem line says why (tui.widgets.problem)."""

from __future__ import annotations

from collections.abc import Iterable

from textual.containers import Horizontal, Vertical
from textual.widget import Widget
from textual.widgets import Label, Sparkline

from mqadmin.admin import BrokerIdentity
from tui import format as fmt
from tui.screens.base import DashboardScreen
from tui.snapshot import History, Snapshot
from tui.widgets.filter_table import FilterTable
from tui.widgets.problem import ProblemLine


class OverviewScreen(DashboardScreen):
    TITLE = "Overview"

    def compose_body(self) -> Iterable[Widget]:
        yield Label("Brokers", classes="section")
        yield ProblemLine(id="status-problem")
        yield ProblemLine(id="gone-problem")
        yield FilterTable(["Broker", "Address", "Cluster", "Version", "Up time", "Disk used", "Mode"], id="brokers")
        with Horizontal(id="tps"):
            with Vertical(classes="tps-box"):
                yield Label("Put TPS", id="put-label")
                yield Sparkline([], id="put-spark")
            with Vertical(classes="tps-box"):
                yield Label("Get TPS", id="get-label")
                yield Sparkline([], id="get-spark")
        yield Label("Store and backlogs", classes="section")
        yield FilterTable(["Figure", "Value"], id="figures")

    def show(self, snapshot: Snapshot, history: History) -> None:
        rows = []
        for b in snapshot.brokers:
            status, me = b.status, b.identity
            if b.error is not None:
                up = mode = "-"
            elif status.get("readOnly") == "true":
                held = status.get("brokerActive") == "true"
                up = "store held by a running broker" if held else "store (no broker running)"
                mode = "read-only store"
            else:
                up = status.get("runtime", "-").strip("[] ")
                mode = "live"
            rows.append((me.broker_addr, [me.broker_name, me.broker_addr, me.cluster_name,
                                          status.get("brokerVersionDesc", "-"), up,
                                          _disk(status.get("commitLogDiskRatio")), mode]))
        self.query_one("#brokers", FilterTable).set_rows(rows)
        self.query_one("#status-problem", ProblemLine).show_problem(
            "Cannot read the runtime info", snapshot.status_error)
        gone = history.missing_brokers
        self.query_one("#gone-problem", ProblemLine).show_line("; ".join(
            f"{b.broker_name} ({b.broker_addr}) is no longer registered" for b in gone) if gone else None)
        put_tps, get_tps = history.put_tps.values(), history.get_tps.values()
        self.query_one("#put-label", Label).update(f"Put TPS {fmt.rate(put_tps[-1] if put_tps else 0.0)} "
                                                   f"(last {len(put_tps)} refreshes)")
        self.query_one("#get-label", Label).update(f"Get TPS {fmt.rate(get_tps[-1] if get_tps else 0.0)} "
                                                   f"(last {len(get_tps)} refreshes)")
        self.query_one("#put-spark", Sparkline).data = put_tps or [0.0]
        self.query_one("#get-spark", Sparkline).data = get_tps or [0.0]
        figures: list[tuple[str, str]] = [
            ("Topics / groups", f"{len(snapshot.topics)}"
                                f"{f' (+{n} not readable)' if (n := len(snapshot.topics_refused)) else ''}"
                                f" / {len(snapshot.groups)}"),
            ("Consumer lag (all groups)", _lag(snapshot, history.missing_brokers)),
        ]
        many = len(snapshot.brokers) > 1
        for b in snapshot.brokers:
            prefix = f"{b.name}: " if many else ""
            if b.error is not None:
                figures.append((prefix + "Runtime info", "cannot be read (see above)"))
                continue
            p, timer, tx = b.positions, b.timer, b.transactions
            delay_pending = sum(d.pending for d in b.delay_levels)
            figures += [(prefix + k, v) for k, v in (
                ("Commitlog range", f"[{fmt.count(p.commit_log_min_offset)}, {fmt.count(p.commit_log_max_offset)})"),
                ("Flushed position", f"{fmt.count(p.flushed_offset)} ({fmt.size(p.unflushed_bytes)} not flushed)"),
                ("Dispatch behind", fmt.size(p.dispatch_behind_bytes)),
                ("Last stored", fmt.when(p.physic_msg_timestamp)),
                ("Timer messages pending", "timer wheel off" if timer is None else fmt.count(timer.pending)),
                ("Timer dequeue behind", "-" if timer is None else fmt.duration(timer.dequeue_behind_ms)),
                ("Delay-level messages pending", fmt.count(delay_pending)),
                ("Transaction halves awaiting decision", fmt.count(tx.pending_check)),
                ("Transaction half / op unchecked", f"{fmt.count(tx.half_depth)} / {fmt.count(tx.op_depth)}"),
            )]
        self.query_one("#figures", FilterTable).set_rows([(k, [k, v]) for k, v in figures])


def _lag(snapshot: Snapshot, gone: list[BrokerIdentity]) -> str:
    """The total lag, saying what it leaves out: a sum over the groups that could be read looked like the
    whole backlog (0 when the only group with lag was on a broker that stopped answering or was killed)."""
    missing = []
    if snapshot.left_out or gone:
        missing.append("without " + ", ".join(b.broker_name for b in [*snapshot.left_out, *gone]))
    if snapshot.groups_error is not None:
        missing.append("not every group read: see Consumers")
    return fmt.count(snapshot.total_lag) + (f" ({'; '.join(missing)})" if missing else "")


def _disk(ratio: str | None) -> str:
    """"-" when the broker gave no figure (it did not answer): "0.0 %" read as an empty disk."""
    if ratio is None or not ratio.strip():
        return "-"
    try:
        return f"{float(ratio) * 100:.1f} %"
    except ValueError:
        return "-"
