"""Screen 6, ACL: users and policy entries (ACL 2.0), and an explain box: subject, resource, action
and source IP in, the deciding entry and the reason out (what ``mqadmin explainAcl`` says), from every
broker under its name: each broker keeps its own users, ACLs and authorizationEnabled.

When the users or ACLs cannot be read (a damaged users.json or acls.json) the screen says so in one
line naming the file, and the other screens go on showing what they read."""

from __future__ import annotations

from collections.abc import Iterable

from rich.console import Group
from rich.text import Text
from textual.containers import Horizontal, Vertical
from textual.widget import Widget
from textual.widgets import Button, Input, Label, Static

from broker_core.auth.evaluator import Explanation, describe_entry
from mqadmin.admin import BrokerExplanation
from mqadmin.cli import split_list
from tui.poller import Poller
from tui.screens.base import DashboardScreen
from tui.snapshot import History, Snapshot, with_credentials_hint
from tui.widgets.filter_table import FilterTable, with_broker
from tui.widgets.problem import ProblemLine

USER_COLUMNS = ["User", "Type", "Status"]
ACL_COLUMNS = ["Subject", "Policy", "Resource", "Actions", "Source IPs", "Decision"]


class AclScreen(DashboardScreen):
    TITLE = "ACL"

    def compose_body(self) -> Iterable[Widget]:
        yield ProblemLine(id="acl-problem")
        scope = Label("", id="acl-scope")
        scope.display = False  # shown when there is something to say (acl_scope)
        yield scope
        with Horizontal(classes="pair"):
            with Vertical(classes="narrow"):
                yield Label("Users", classes="section")
                yield FilterTable(USER_COLUMNS, id="users")
            with Vertical():
                yield Label("Policies", classes="section")
                yield FilterTable(ACL_COLUMNS, id="acls")
        yield Label("Explain: may this subject do this?", classes="section")
        with Horizontal(classes="form-row"):
            yield Input(placeholder="subject, e.g. User:alice", id="explain-subject")
            yield Input(placeholder="resource, e.g. Topic:orders", id="explain-resource")
            yield Input(placeholder="actions, e.g. Pub or Sub,Get", id="explain-actions")
            yield Input(placeholder="source IP (optional)", id="explain-ip")
            yield Button("Explain", id="explain", variant="primary")
        yield Static("", id="explanation")

    def show(self, snapshot: Snapshot, history: History) -> None:
        self.query_one("#acl-problem", ProblemLine).show_problem("Cannot read the users and ACLs",
                                                                 snapshot.acl_error)
        many = snapshot.many_brokers
        scope = self.query_one("#acl-scope", Label)
        note = acl_scope(snapshot)
        scope.update(Text(note))
        scope.display = bool(note)
        users, rows = [], []
        for v in snapshot.acl_views:  # each broker keeps its own users and ACLs: a row per broker
            at = [v.name] if many else []
            users += [(f"{v.name}|{u.username}", [*at, u.username, u.user_type.value, u.user_status.value])
                      for u in v.users]
            for acl in v.acls:
                for policy in acl.policies:
                    for i, e in enumerate(policy.entries):
                        rows.append((f"{v.name}|{acl.subject.key}|{policy.policy_type.value}|{e.resource.key}|{i}", [
                            *at, acl.subject.key, policy.policy_type.value, e.resource.key,
                            ",".join(a.value for a in e.actions), ",".join(e.source_ips) or "*", e.decision.value]))
        user_table, acl_table = self.query_one("#users", FilterTable), self.query_one("#acls", FilterTable)
        user_table.set_columns(with_broker(USER_COLUMNS, many, 0))
        user_table.set_rows(users)
        acl_table.set_columns(with_broker(ACL_COLUMNS, many, 0))
        acl_table.set_rows(rows)

    def on_button_pressed(self, event: Button.Pressed) -> None:
        if event.button.id == "explain":
            self.explain()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if event.input.id and event.input.id.startswith("explain-"):
            event.stop()
            self.explain()
        else:
            super().on_input_submitted(event)

    def explain(self) -> None:
        subject = self.query_one("#explain-subject", Input).value.strip()
        resource = self.query_one("#explain-resource", Input).value.strip()
        actions = split_list(self.query_one("#explain-actions", Input).value) or []
        ip = self.query_one("#explain-ip", Input).value.strip() or None
        out = self.query_one("#explanation", Static)
        if not (subject and resource and actions):
            out.update("Give a subject, a resource and at least one action.")
            return
        out.update("Explaining...")
        # Each broker answers for itself, one call per broker (a hung one is named and left out): each
        # keeps its own users, ACLs and authorizationEnabled, so the first broker's answer is not the cluster's.
        self.run_worker(self.dashboard.poller.ask_each_broker(
            self, "explain", lambda a: a.brokers(), lambda a: a.explain_acl_each(subject, resource, actions, ip)),
            group="explain", exclusive=True)

    def on_poller_answer(self, event: Poller.Answer) -> None:
        if event.tag != "explain":
            return
        event.stop()
        out = self.query_one("#explanation", Static)
        if event.error is not None:
            out.update(Text(f"Cannot explain: {event.error}", style="bold red"))
            return
        answers, skipped = event.value
        out.update(render_answers(answers, skipped))


def acl_scope(snapshot: Snapshot) -> str:
    """What the tables cover, when that is not obvious: every broker (by name), and why a broker shows
    nothing (ACL off on it, or simply none stored). '' for one broker whose entries are shown."""
    parts = []
    if snapshot.many_brokers:
        parts.append("Users and policies of each broker: " + ", ".join(
            f"{v.name} ({v.identity.broker_addr})" for v in snapshot.acl_views))
    for v in snapshot.acl_views:
        if v.error is not None or v.users or v.acls:
            continue
        who = f"{v.name} ({v.identity.broker_addr})"
        if v.auth_enabled is False:
            parts.append(f"{who}: ACL is off (authenticationEnabled and authorizationEnabled are false), "
                         "no users or policies stored")
        else:
            parts.append(f"{who}: no users or policies stored")
    return ". ".join(parts)


def render_answers(answers: list[BrokerExplanation], skipped: list[str]) -> Group:
    """Every broker's answer under its name; a broker that could not be asked says why (a refusal of the
    credentials with what to do), one left out as not answering is named as not asked."""
    lines: list[Text | Group] = []
    for a in answers:
        lines.append(Text(f"{a.name} ({a.broker.broker_addr})", style="bold underline"))
        if a.explanation is None:
            lines.append(Text(f"Cannot explain: {with_credentials_hint(a.error or '')}", style="bold red"))
        elif a.authorization_enabled is False:  # the policies still shown: they decide once it is turned on
            lines.append(Text(a.broker_reason, style="bold green"))
            lines.append(Text("With authorization on, the policies would decide:", style="italic"))
            lines.append(render_explanation(a.explanation, would_say="It would say: "))
        else:
            lines.append(render_explanation(a.explanation))
    lines += [Text(f"Not asked: {who} (not answering, left out until it answers)", style="bold yellow")
              for who in skipped]
    return Group(*lines)


def render_explanation(x: Explanation, would_say: str = "Broker would say: ") -> Group:
    style = "bold green" if x.allowed else "bold red"
    lines = [Text.assemble(("Decision: ", "bold"), (x.decision.value, style)),
             Text.assemble(("Reason: ", "bold"), x.reason)]
    if x.entry is not None:
        kind = x.policy_type.value if x.policy_type else ""
        lines.append(Text.assemble(("Decided by: ", "bold"), f"{kind} {describe_entry(x.entry)}".strip()))
    for e in x.candidates[1:]:
        lines.append(Text.assemble(("Also matched: ", "bold"), describe_entry(e)))
    for e, why in x.near_misses:
        lines.append(Text.assemble(("Not applicable: ", "bold"), f"{describe_entry(e)} ({why})"))
    if not x.allowed:
        lines.append(Text.assemble((would_say, "bold"), x.failure_message()))
    return Group(*lines)
