"""The reset action of screen 3: choose topic and target (a time, or an offset), see the plan (a dry
run: nothing changes), then apply it only after a confirmation. What is applied is exactly what was
planned; changing an input drops the plan.

Group and topic names, what was typed and the Admin's errors are shown as literal text, never markup:
a time typed as ``[/]`` must be refused with its own words, not stop the dashboard.
"""

from __future__ import annotations

from dataclasses import dataclass

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Label, Select

from mqadmin.admin import Admin
from mqadmin.errors import AdminError
from mqadmin.reports import ResetPlan
from mqadmin.timefmt import parse_timestamp
from tui.poller import Poller
from tui.widgets.filter_table import FilterTable, with_broker


@dataclass(frozen=True)
class ResetRequest:
    group: str
    topic: str
    timestamp: int
    queue_id: int | None
    offset: int | None

    def run(self, admin: Admin, dry_run: bool) -> ResetPlan:
        return admin.reset_offset_by_time(self.group, self.topic, self.timestamp, True, self.queue_id,
                                          self.offset, dry_run=dry_run)


PLAN_COLUMNS = ["Queue", "Broker offset", "Consumer offset", "Reset to"]


class ResetScreen(ModalScreen[ResetPlan | None]):
    BINDINGS = [Binding("escape", "cancel", "Close")]

    def __init__(self, group: str, topics: list[str], broker_name: str) -> None:
        super().__init__()
        self.group = group
        self.topics = topics
        self.broker_name = broker_name
        self.planned: ResetRequest | None = None
        self.applied: ResetPlan | None = None
        self._pending: ResetRequest | None = None
        self._plans = 0

    def compose(self) -> ComposeResult:
        with Vertical(id="reset-dialog", classes="dialog"):
            yield Label(Text(f"Reset the offsets of group {self.group}"), classes="section")
            with Horizontal(classes="form-row"):
                yield Select([(Text(t), t) for t in self.topics], value=self.topics[0] if self.topics else Select.BLANK,
                             allow_blank=False, id="reset-topic")
                yield Select([("to a time", "time"), ("to an offset", "offset")], value="time", allow_blank=False,
                             id="reset-mode")
            with Horizontal(classes="form-row"):
                yield Input(value="now", placeholder="now | ms | yyyy-MM-dd#HH:mm:ss:SSS | offset", id="reset-value")
                yield Input(placeholder="queue id (blank: all)", id="reset-queue")
            with Horizontal(classes="buttons"):
                yield Button("Plan (dry run)", id="plan", variant="primary")
                yield Button("Apply...", id="apply", variant="error", disabled=True)
                yield Button("Close", id="cancel")
            yield Label("Plan: press 'Plan' to see what would change (nothing changes).", id="reset-status")
            yield FilterTable(PLAN_COLUMNS, id="plan-table")

    def _poller(self) -> Poller:
        from tui.app import DashboardApp

        assert isinstance(self.app, DashboardApp)
        return self.app.poller

    def _request(self) -> ResetRequest:
        topic = self.query_one("#reset-topic", Select).value
        if not isinstance(topic, str):
            raise AdminError("choose a topic")
        mode = self.query_one("#reset-mode", Select).value
        value = self.query_one("#reset-value", Input).value.strip()
        queue_text = self.query_one("#reset-queue", Input).value.strip()
        try:
            queue_id = int(queue_text) if queue_text else None
        except ValueError:
            raise AdminError(f"queue id {queue_text!r} is not a number") from None
        if mode == "offset":
            try:
                offset = int(value)
            except ValueError:
                raise AdminError(f"offset {value!r} is not a number") from None
            return ResetRequest(self.group, topic, 0, queue_id, offset)
        return ResetRequest(self.group, topic, parse_timestamp(value, option="time"), queue_id, None)

    def _status(self, text: str) -> None:
        """Show ``text`` as it is (it holds user input and error messages: no markup)."""
        self.query_one("#reset-status", Label).update(Text(text))

    def on_input_changed(self, event: Input.Changed) -> None:
        self._drop_plan()

    def on_select_changed(self, event: Select.Changed) -> None:
        self._drop_plan()

    def _drop_plan(self) -> None:
        if self.planned is not None:
            self.planned = None
            self.query_one("#apply", Button).disabled = True
            self.query_one("#plan-table", FilterTable).set_rows([])
            self._status("Inputs changed: plan again before applying.")

    def on_button_pressed(self, event: Button.Pressed) -> None:
        if event.button.id == "plan":
            self.action_plan()
        elif event.button.id == "apply":
            self.action_apply()
        elif event.button.id == "cancel":
            self.action_cancel()

    def action_plan(self) -> None:
        try:
            req = self._request()
        except AdminError as e:
            self._status(f"Cannot plan: {e.message}")
            return
        self._status("Planning...")
        self._plans += 1
        self._pending = req
        self.run_worker(self._poller().ask(self, f"plan:{self._plans}", lambda a: req.run(a, dry_run=True)),
                        group="reset")

    def _many_brokers(self, plan: ResetPlan) -> bool:
        """Name the broker of each row when the cluster (or the plan itself) has more than one."""
        from tui.app import DashboardApp

        snap = self.app.snapshot if isinstance(self.app, DashboardApp) else None
        return (snap is not None and snap.many_brokers) or len({c.broker_name for c in plan.changes}) > 1

    def action_apply(self) -> None:
        if self.planned is None:
            return
        from tui.screens.confirm import ConfirmScreen

        req = self.planned
        moves = self.query_one("#plan-table", FilterTable).row_count
        question = (f"Apply the planned reset? Group {req.group} on {req.topic}: {moves} queue(s) move as shown. "
                    "Consumers of the group see the new offsets on their next pull.")

        def confirmed(yes: bool | None) -> None:
            if yes and self.planned is req:
                self._status("Applying...")
                self.run_worker(self._poller().ask(self, "apply", lambda a: req.run(a, dry_run=False), writes=True),
                                group="reset")

        self.app.push_screen(ConfirmScreen(question), confirmed)

    def on_poller_answer(self, event: Poller.Answer) -> None:
        event.stop()
        if event.tag.startswith("plan:"):
            if event.tag != f"plan:{self._plans}":
                return  # an older plan's answer: a newer one is on its way
            if event.error is not None:
                self._status(f"Plan failed: {event.error}")
                return
            plan: ResetPlan = event.value
            self.planned = self._pending
            table = self.query_one("#plan-table", FilterTable)
            many = self._many_brokers(plan)
            table.set_columns(with_broker(PLAN_COLUMNS, many, 0))
            # a topic on two brokers plans queue 0 on each: one row per broker and queue
            table.set_rows([
                (f"{c.broker_name}/{c.queue_id}", [*([c.broker_name] if many else []), c.queue_id, c.broker_offset,
                                                   c.consumer_offset, c.reset_offset])
                for c in plan.changes])
            self.query_one("#apply", Button).disabled = False
            self._status(f"Plan (dry run, nothing changed): {len(plan.changes)} queue(s) of {plan.topic}.")
        elif event.tag == "apply":
            if event.error is not None:
                self._status(f"Reset failed, nothing changed: {event.error}")
                return
            self.applied = event.value
            self.planned = None
            self.query_one("#apply", Button).disabled = True
            self._status(f"Applied: {len(self.applied.changes)} queue(s) of group {self.group} reset.")
            self.notify(f"Offsets of {self.group} reset", title="Reset applied", markup=False)
            self._poller().refresh_now()

    def action_cancel(self) -> None:
        self.dismiss(self.applied)
