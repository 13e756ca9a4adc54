"""The reset action of screen 3: choose topic and target (a time, or an offset), see the plan (a dry
run: nothing changes), then apply it only after a confirmation. What is applied is exactly what was
planned; changing an input drops the plan. On a cluster a broker choice limits the reset to one broker
(one queue needs one: each broker numbers its queues from 0, as mqadmin's -q needs -b).

What the dialog says after an apply is what happened: the reset is applied broker by broker (each
checked first), so a refusal part way names the brokers already changed; an apply that outlives the
call timeout cannot be stopped (it goes on in the Admin's thread), so it is waited for to its end,
"not known yet" meanwhile, and its outcome is told even when the dialog was closed.

Group and topic names, what was typed and the Admin's errors are shown as literal text, never markup:
a time typed as ``[/]`` must be refused with its own words, not stop the dashboard.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Label, Select

from mqadmin.admin import Admin, BrokerIdentity
from mqadmin.errors import AdminError, UnreachableError
from mqadmin.reports import ResetPlan
from mqadmin.timefmt import parse_timestamp
from tui.errors import describe_error
from tui.poller import Poller
from tui.snapshot import who_is, with_credentials_hint
from tui.widgets.filter_table import FilterTable, with_broker

# the app's workers applying a reset: they outlive the dialog that started them, and quitting asks first
APPLY_WORKERS = "reset-apply"

ALL_BROKERS = ""
"""The broker choice meaning every broker that has the topic (no broker is named "")."""


@dataclass(frozen=True)
class ResetRequest:
    group: str
    topic: str
    timestamp: int
    queue_id: int | None
    offset: int | None
    broker_addr: str | None = None
    """The broker chosen in the form (None: every broker with the topic)."""

    def run(self, admin: Admin, dry_run: bool, broker_addr: str | None = None) -> ResetPlan:
        return admin.reset_offset_by_time(self.group, self.topic, self.timestamp, True, self.queue_id,
                                          self.offset, dry_run=dry_run, broker_addr=broker_addr or self.broker_addr)


@dataclass
class ApplyProgress:
    """How far an apply got, written by the Admin's thread and read by the UI: the broker it is on (and
    whether it is changing it or still checking), and the brokers changed so far with their queue counts."""

    on: BrokerIdentity | None = None
    changing: bool = False
    brokers: int = 0
    done: list[tuple[BrokerIdentity, int]] = field(default_factory=list)

    def waiting_on(self) -> str | None:
        return who_is(self.on) if self.on is not None else None


def apply_reset(admin: Admin, req: ResetRequest, brokers: list[str], progress: ApplyProgress) -> ResetPlan:
    """``req`` applied on the planned ``brokers`` one at a time, each checked (a dry run) before any is
    changed, as the Admin's own reset does. Why broker by broker: the Admin's reset over the whole topic
    tells neither which broker it waits on nor, in a form the dialog can use, which it has changed."""
    known = {b.broker_name: b for b in admin.brokers()}
    missing = [name for name in brokers if name not in known]
    if missing:
        raise AdminError(f"broker {', '.join(missing)} of the plan is not registered at {admin.target} now")
    targets = [known[name] for name in brokers]
    progress.brokers = len(targets)
    # each planned broker by its address whenever the target has several: without one the Admin resets the
    # topic on every broker that has it, a broker left out of the plan (not answering then, or given the
    # topic since) too. A target of one broker (a store has no address to name) resets that one.
    by_address = len(known) > 1

    def addr(b: BrokerIdentity) -> str | None:
        return b.broker_addr if by_address else None

    for b in targets:
        progress.on = b
        req.run(admin, dry_run=True, broker_addr=addr(b))
    parts = []
    for b in targets:
        progress.on, progress.changing = b, True
        part = req.run(admin, dry_run=False, broker_addr=addr(b))
        progress.done.append((b, len(part.changes)))
        parts.append(part)
    progress.on, progress.changing = None, False
    return ResetPlan(req.group, req.topic, req.timestamp, True, [c for part in parts for c in part.changes],
                     applied=True)


def _named(b: BrokerIdentity) -> str:
    return f"{b.broker_name} ({b.broker_addr})"


def apply_failure(req: ResetRequest, progress: ApplyProgress, error: Exception, queues_on_broker: int) -> str:
    """What a failed apply did, in one line: "nothing changed" only when that is so. ``queues_on_broker``:
    the planned queues of the broker that failed (a reset to an offset sends one request per queue)."""
    why = describe_error(error)
    b = progress.on
    if b is None or not progress.changing:  # refused while checking: no broker has been changed
        where = f"{_named(b)}: " if b is not None and progress.brokers > 1 and b.broker_addr not in why else ""
        return f"Reset failed, nothing changed: {where}{why}"
    changed = "; ".join(f"{_named(d)} ({n} queue(s))" for d, n in progress.done)
    before = f"changed on {changed}; " if changed else ""
    if isinstance(error, UnreachableError):  # no answer to the change: it may have been made
        return f"Reset not confirmed: {before}{_named(b)} may or may not have moved: {why}"
    if req.offset is not None and req.queue_id is None and queues_on_broker > 1:
        return f"Reset failed part way: {before}{_named(b)} may have moved some queues: {why}"
    if changed:
        return f"Reset failed part way: {before}not changed on {_named(b)}: {why}"
    return f"Reset failed, nothing changed: {why}"


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
        self._planned_brokers: list[str] = []
        self._planned_queues: dict[str, int] = {}
        self._brokers: dict[str, BrokerIdentity] = {}
        self.applying = False
        self._dismissed = False

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
                # shown on a cluster only: queue ids repeat across brokers
                broker = Select([("all brokers", ALL_BROKERS)], value=ALL_BROKERS, allow_blank=False,
                                id="reset-broker")
                broker.display = False
                yield broker
                yield Input(placeholder="queue id (blank: all)", id="reset-queue")
            with Horizontal(classes="buttons"):
                yield Button("Plan (dry run)", id="plan", variant="primary")
                yield Button("Apply...", id="apply", variant="error", disabled=True)
                yield Button("Close", id="cancel")
            yield Label("Plan: press 'Plan' to see what would change (nothing changes).", id="reset-status")
            yield FilterTable(PLAN_COLUMNS, id="plan-table")

    def on_mount(self) -> None:
        self._fill_brokers()

    def _poller(self) -> Poller:
        from tui.app import DashboardApp

        assert isinstance(self.app, DashboardApp)
        return self.app.poller

    def _fill_brokers(self) -> None:
        """The broker choice: every broker holding the topic's queues in the last refresh (all of them
        when it has none there), shown when the cluster has more than one broker."""
        from tui.app import DashboardApp

        snap = self.app.snapshot if isinstance(self.app, DashboardApp) else None
        choice = self.query_one("#reset-broker", Select)
        topic = self.query_one("#reset-topic", Select).value
        brokers: list[BrokerIdentity] = []
        if snap is not None and snap.many_brokers and isinstance(topic, str):
            t = snap.topic(topic)
            having = {q.broker_name for q in t.queues} if t is not None else set()
            brokers = [b.identity for b in snap.brokers if not having or b.name in having]
        self._brokers = {b.broker_name: b for b in brokers}
        choice.display = bool(brokers)
        choice.set_options([("all brokers", ALL_BROKERS), *((Text(n), n) for n in self._brokers)])

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
        choice = self.query_one("#reset-broker", Select)
        broker = self._brokers.get(choice.value) if choice.display and isinstance(choice.value, str) else None
        if queue_id is not None and choice.display and broker is None:
            raise AdminError("a queue id needs a broker (each broker numbers its queues from 0): choose one")
        addr = broker.broker_addr if broker is not None else None
        if mode == "offset":
            try:
                offset = int(value)
            except ValueError:
                raise AdminError(f"offset {value!r} is not a number") from None
            return ResetRequest(self.group, topic, 0, queue_id, offset, addr)
        return ResetRequest(self.group, topic, parse_timestamp(value, option="time"), queue_id, None, addr)

    def _status(self, text: str) -> None:
        """Show ``text`` as it is (it holds user input and error messages: no markup)."""
        self.query_one("#reset-status", Label).update(Text(text))

    def on_input_changed(self, event: Input.Changed) -> None:
        self._drop_plan()

    def on_select_changed(self, event: Select.Changed) -> None:
        if event.select.id == "reset-topic":
            self._fill_brokers()
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

        brokers = list(self._planned_brokers)

        def confirmed(yes: bool | None) -> None:
            if yes and self.planned is req and not self.applying:
                self.applying = True
                self.query_one("#apply", Button).disabled = True
                self._status("Applying...")
                # the app's worker, not the dialog's: closing the dialog must not drop the outcome
                self.app.run_worker(self._apply(req, brokers), group=APPLY_WORKERS)

        self.app.push_screen(ConfirmScreen(question), confirmed)

    @property
    def _open(self) -> bool:
        return not self._dismissed and self.is_attached

    def _tell(self, text: str, error: bool = False) -> None:
        """An apply's outcome: on the status line while the dialog is open, else as a notification."""
        if self._open:
            self._status(text)
        else:
            self.app.notify(text, title="Reset failed" if error else "Reset applied",
                            severity="error" if error else "information", markup=False)

    async def _apply(self, req: ResetRequest, brokers: list[str]) -> None:
        progress = ApplyProgress()

        def slow(why: str) -> None:
            if self._open:
                self._status(f"Outcome not known yet: {why}; the reset may still complete: its outcome is shown "
                             "when it ends.")

        try:
            plan = await self._poller().write(lambda a: apply_reset(a, req, brokers, progress), slow,
                                              progress.waiting_on)
        except Exception as e:  # noqa: BLE001 - reported as one line, saying what was changed
            on = progress.on.broker_name if progress.on is not None else ""
            self._tell(apply_failure(req, progress, e, self._planned_queues.get(on, 0)), error=True)
            if self._open and self.planned is req:
                self.query_one("#apply", Button).disabled = False
        else:
            self.applied = plan
            text = f"Applied: {len(plan.changes)} queue(s) of group {self.group} reset."
            if self._open:
                self.planned = None
                self.query_one("#apply", Button).disabled = True
                self._status(text)
                self.notify(f"Offsets of {self.group} reset", title="Reset applied", markup=False)
            else:
                self._tell(text)
        finally:
            self.applying = False
            self._poller().refresh_now()

    def on_poller_answer(self, event: Poller.Answer) -> None:
        event.stop()
        if event.tag.startswith("plan:"):
            if event.tag != f"plan:{self._plans}":
                return  # an older plan's answer: a newer one is on its way
            if event.error is not None:
                self._status(f"Plan failed: {with_credentials_hint(event.error)}")
                return
            plan: ResetPlan = event.value
            self.planned = self._pending
            self._planned_brokers = list(dict.fromkeys(c.broker_name for c in plan.changes))
            self._planned_queues = {n: sum(c.broker_name == n for c in plan.changes) for n in self._planned_brokers}
            table = self.query_one("#plan-table", FilterTable)
            many = self._many_brokers(plan)
            table.set_columns(with_broker(PLAN_COLUMNS, many, 0))
            # a topic on two brokers plans queue 0 on each: one row per broker and queue
            table.set_rows([
                (f"{c.broker_name}/{c.queue_id}", [*([c.broker_name] if many else []), c.queue_id, c.broker_offset,
                                                   c.consumer_offset, c.reset_offset])
                for c in plan.changes])
            self.query_one("#apply", Button).disabled = self.applying
            self._status(f"Plan (dry run, nothing changed): {len(plan.changes)} queue(s) of {plan.topic}.")

    def action_cancel(self) -> None:
        self._dismissed = True
        self.dismiss(self.applied)
        if self.applying:  # it cannot be stopped: say that it goes on, and that its outcome will be told
            self.app.notify(f"The reset of {self.group} is still being applied: its outcome is shown when it ends.",
                            title="Reset", markup=False)
