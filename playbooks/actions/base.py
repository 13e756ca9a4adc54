"""What every action is: typed parameters, a plan (what would change) and an apply.

Why: idempotence and ``--check`` come from one shape. ``run`` asks for a read-only Admin, plans; with
nothing to change (or in check mode) it stops there, so a re-run on a store a running broker holds
still reports ``ok``. Otherwise it re-plans under the writable Admin (the store lock) and applies
exactly that plan. Actions never see a store, a Broker or a socket: only ``Admin`` and ``HostOps``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol

from mqadmin.admin import Admin, BrokerIdentity

Status = Literal["ok", "changed", "failed", "skipped"]

# Where an action runs on an SSH target: "admin" actions run on that host inside `mqadmin playbook
# step` (so they see its store and processes); "host" actions run here and reach the host through
# HostOps (exec, sftp).
Placement = Literal["admin", "host"]


PLANNED_IN_CHECK = "_planned_in_check"
"""An argument the runner adds under --check: the things (``user orders-app``) earlier steps of the run
would create on this target. Why: a plan must refuse what the real run would refuse (an ACL for a user
that does not exist), yet under --check the user.ensure before it creates nothing."""


def planned_in_check(args: dict[str, Any], what: str) -> bool:
    """Whether an earlier step of this --check run would create ``what`` (``topic orders``) on this
    target, on any of its brokers (a cluster's plan names them: ``topic orders on broker b``)."""
    return any(p == what or p.startswith(f"{what} on broker ") for p in args.get(PLANNED_IN_CHECK) or ())


def planned_on(args: dict[str, Any], what: str, broker_name: str) -> bool:
    """Whether an earlier step of this --check run would create ``what`` on the broker ``broker_name``:
    a cluster's plan names it (``topic orders on broker b``), a store's or one broker's names none."""
    return any(p in (what, f"{what} on broker {broker_name}") for p in args.get(PLANNED_IN_CHECK) or ())


@dataclass(frozen=True)
class Param:
    """One action argument: accepted Python types, required or default, allowed values."""

    types: tuple[type, ...]
    required: bool = False
    default: Any = None
    choices: tuple[Any, ...] | None = None
    help: str = ""
    # Parses a value of the right type into what the action uses (a file mode "0644" -> 0o644); raises
    # ValueError saying why not. Called at validation time too, so a bad value is found before any step.
    parse: Callable[[Any], Any] | None = None

    def type_names(self) -> str:
        names = {str: "string", int: "integer", bool: "boolean", float: "number", list: "list", dict: "mapping"}
        return " or ".join(names.get(t, t.__name__) for t in self.types)


def seconds(value: Any) -> float:
    """A duration (timeout:, interval:): a finite number >= 0. Why at load: ``.inf`` overflowed the
    sleep after earlier steps had run, ``.nan`` never ended a wait, -1 failed deep in the transport."""
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"must be a finite number of seconds >= 0, got {value!r}")
    return value


def at_least(low: int, high: int | None = None) -> Callable[[Any], Any]:
    """A whole number in low..high (the broker's own range)."""
    def parse(value: Any) -> Any:
        if value < low or (high is not None and value > high):
            raise ValueError(f"must be {low}..{high}, got {value}" if high is not None
                             else f"must be >= {low}, got {value}")
        return value
    return parse


@dataclass
class Change:
    """One line of a diff: ``what`` changed (``topic orders-events``), which field, from, to."""

    what: str
    field: str | None = None
    old: Any = None
    new: Any = None

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"what": self.what}
        if self.field is not None:
            d.update({"field": self.field, "old": self.old, "new": self.new})
        return d


@dataclass
class Outcome:
    """What a step did on one target; ``data`` is what ``register:`` exposes beside the status."""

    status: Status
    changes: list[Change] = field(default_factory=list)
    message: str = ""
    data: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"status": self.status, "changes": [c.to_dict() for c in self.changes], "message": self.message,
                "data": self.data}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Outcome:
        changes = [Change(c.get("what", ""), c.get("field"), c.get("old"), c.get("new")) for c in d.get("changes", [])]
        return cls(d.get("status", "failed"), changes, str(d.get("message", "")), dict(d.get("data") or {}))


@dataclass
class CommandResult:
    rc: int
    stdout: str
    stderr: str


class HostOps(Protocol):
    """A machine a step acts on: this one (subprocess) or an SSH host (paramiko exec + sftp)."""

    name: str

    def run(self, command: str, stdin: bytes | None = None, timeout: float | None = None) -> CommandResult: ...
    def sha256(self, path: str) -> str | None: ...  # IsADirectoryError for a directory, as put
    def mode(self, path: str) -> int | None: ...
    def exists(self, path: str) -> bool: ...
    def put(self, local_path: Path, remote_path: str, mode: int | None) -> None: ...
    def chmod(self, path: str, mode: int) -> None: ...


class ActionContext(Protocol):
    """What an action may use: an Admin for its target, the host, the store path, a clock."""

    store_dir: Path | None
    config_file: str | None

    def admin(self, writes: bool) -> AbstractContextManager[Admin]: ...
    def host(self) -> HostOps: ...
    def sleep(self, seconds: float) -> None: ...
    def now(self) -> float: ...


class Action(Protocol):
    name: str
    params: dict[str, Param]
    placement: Placement

    def run(self, ctx: ActionContext, args: dict[str, Any], check: bool) -> Outcome: ...


@dataclass
class Plan:
    changes: list[Change]
    data: dict[str, Any] = field(default_factory=dict)
    message: str = ""
    brokers: list[BrokerIdentity] = field(default_factory=list)
    """The brokers whose own config differs, for actions that plan each broker of the target: the apply
    changes those, each from its own current config (a cluster's brokers need not agree)."""


class PlannedAction:
    """Base of the Admin actions: ``plan`` on a read-only Admin, ``apply`` the plan on a writable one."""

    name = ""
    params: dict[str, Param] = {}
    placement: Placement = "admin"

    def plan(self, admin: Admin, args: dict[str, Any]) -> Plan:
        raise NotImplementedError

    def apply(self, admin: Admin, args: dict[str, Any], plan: Plan) -> None:
        raise NotImplementedError

    def can_apply(self, ctx: ActionContext, args: dict[str, Any]) -> None:
        """Raise StepError when this target cannot take the planned changes. Checked in --check too:
        a dry run must not promise a change the real run would refuse."""

    def run(self, ctx: ActionContext, args: dict[str, Any], check: bool) -> Outcome:
        with ctx.admin(writes=False) as admin:
            plan = self.plan(admin, args)
        if plan.changes:
            self.can_apply(ctx, args)
        if plan.changes and not check:
            with ctx.admin(writes=True) as admin:
                plan = self.plan(admin, args)
                if plan.changes:
                    self.apply(admin, args, plan)
        return Outcome("changed" if plan.changes else "ok", plan.changes,
                       plan.message or _summary(plan.changes, check), plan.data)


def _summary(changes: list[Change], check: bool) -> str:
    if not changes:
        return "nothing to change"
    verb = "would change" if check else "changed"
    whats = list(dict.fromkeys(c.what for c in changes))
    return f"{verb}: " + ", ".join(whats)


def poll(ctx: ActionContext, timeout: float, interval: float, probe: Callable[[], tuple[bool, str]]) -> tuple[bool, str]:
    """Call ``probe`` until it returns (True, ...) or ``timeout`` seconds pass; the last message."""
    deadline = ctx.now() + timeout
    while True:
        done, message = probe()
        if done or ctx.now() >= deadline:
            return done, message
        ctx.sleep(min(interval, max(0.0, deadline - ctx.now())))


