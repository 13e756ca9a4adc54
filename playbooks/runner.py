"""The playbook runner: variables, targets, step options, results, the JSON-lines run log.

Why one object: a run has state that every step reads (variables, registered results, the SSH
connections, the secrets to mask) and a report every front end renders the same way. Steps run in
order; a failed step stops the play after its batch of targets (``serial:`` batches for rolling
steps), unless ``ignore_errors: true``. Nothing printed or logged carries a secret.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any, Protocol, TextIO

from jinja2 import TemplateSyntaxError, Undefined, meta

from broker_core.store.store_dir import expand_store_path
from playbooks.actions.base import PLANNED_IN_CHECK, Outcome, Param
from playbooks.errors import PlaybookError, StepError
from playbooks.inventory import CREATE_HINT, Executors, Target, missing_store_message
from playbooks.schema import BUILTIN_NAMES, Playbook, Step, check_value, is_template, ssh_timeout_problem
from playbooks.ssh import DEFAULT_TIMEOUT, SshSpec
from playbooks.templating import EnvironmentSecrets, Secrets, Templater, is_secret_name

MAKES_ITS_OWN_STORE = ("broker.start", "broker.stop")
"""Admin actions fine on a store path that is not there yet: mqbroker makes its own store (as
``mqbroker --store``), and stopping no broker is "ok". A target such a step (or a host step: a shell
step may make the store) comes to first is not refused before the run; its later steps still are."""

STORE_CHECKS = ("store.verify", "store.rebuild")

JINJA_GLOBALS = {"range", "dict", "lipsum", "cycler", "joiner", "namespace", "true", "false", "none",
                 "True", "False", "None"}


@dataclass
class StepRecord:
    index: int
    name: str
    target: str
    action: str
    status: str
    changes: list[dict[str, Any]]
    message: str
    started: float
    ended: float
    attempts: int = 1
    ignored: bool = False
    data: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        d = {"step": self.index + 1, "name": self.name, "target": self.target, "action": self.action,
             "status": self.status, "changes": self.changes, "message": self.message,
             "started": _iso(self.started), "ended": _iso(self.ended),
             "duration_ms": int((self.ended - self.started) * 1000)}
        if self.attempts > 1:
            d["attempts"] = self.attempts
        if self.ignored:
            d["ignored"] = True
        return d


@dataclass
class RunReport:
    playbook: str
    source: str
    check: bool
    records: list[StepRecord] = field(default_factory=list)
    stopped: str | None = None
    log_problem: str | None = None  # the run log stopped being written (a full disk): what and where
    interrupted: bool = False  # Ctrl-C (SIGINT): the report is what ran before it

    def count(self, status: str) -> int:
        return sum(1 for r in self.records if r.status == status and not r.ignored)

    @property
    def failed(self) -> bool:
        return self.count("failed") > 0

    def to_dict(self) -> dict[str, Any]:
        return {"playbook": self.playbook, "file": self.source, "check": self.check,
                "ok": self.count("ok"), "changed": self.count("changed"), "failed": self.count("failed"),
                "skipped": self.count("skipped"), "ignored": sum(1 for r in self.records if r.ignored),
                "interrupted": self.interrupted, "stopped": self.stopped,
                "steps": [r.to_dict() for r in self.records]}


class RunLog:
    """One JSON line per event (run start, each step on each target, run end), secrets masked."""

    def __init__(self, path: Path, secrets: Secrets) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self.secrets = secrets
        self._file: TextIO | None = open(path, "a", encoding="utf-8")  # noqa: SIM115 - closed in close()
        self.problem: str | None = None

    def write(self, event: str, **fields: Any) -> None:
        """One line, on disk when it returns. Raises OSError: the first line is written before any
        step runs, so a log that cannot be started stops the run before it changes anything."""
        if self._file is None:
            return
        line = {"ts": _iso(time.time()), "event": event, **fields}
        self._file.write(json.dumps(self.secrets.mask(line), default=str, ensure_ascii=False) + "\n")
        self._file.flush()

    def write_during_run(self, event: str, after: str, **fields: Any) -> None:
        """A line once steps have run: a log that fails now (a full disk) must not stop the run half
        done, nor hide the report of what it changed. The log stops there, and ``problem`` says
        where, for the report."""
        if self._file is None:
            return
        whole = self._file.tell()  # every line before this one is on disk in full
        try:
            self.write(event, **fields)
        except OSError as e:
            self.problem = f"cannot write the run log {self.path}: {e.strerror or e} (its last line is {after})"
            self._close_quietly()
            try:  # the part of the line the disk took goes: the log stays whole JSON lines
                os.truncate(self.path, whole)
            except OSError:
                pass

    def close(self) -> None:
        self._close_quietly()

    def _close_quietly(self) -> None:
        file, self._file = self._file, None
        if file is not None:
            try:
                file.close()
            except OSError:
                pass


class Observer(Protocol):
    """Progress hooks (the CLI shows a rich status line on a terminal)."""

    def step_started(self, step: Step, target: str) -> None: ...
    def step_finished(self, record: StepRecord) -> None: ...


class _Quiet:
    def step_started(self, step: Step, target: str) -> None:
        pass

    def step_finished(self, record: StepRecord) -> None:
        pass


class Runner:
    def __init__(self, playbook: Playbook, extra_vars: Mapping[str, Any] | None = None, check: bool = False,
                 limit: list[str] | None = None, log_path: Path | None = None, observer: Observer | None = None,
                 environ: Mapping[str, str] | None = None, sleep: Callable[[float], None] = time.sleep) -> None:
        self.pb = playbook
        self.extra = dict(extra_vars or {})
        self.check = check
        self.limit = limit
        self.log_path = log_path
        self.observer: Observer = observer or _Quiet()
        self.secrets = Secrets()
        self.environ = os.environ if environ is None else environ
        self.env = EnvironmentSecrets(self.secrets, self.environ)
        self.templater = Templater()
        self.sleep = sleep
        self.registered: dict[str, Any] = {}
        self._planned: dict[str, set[str]] = {}  # --check: per target, what earlier steps would create
        self._in_flight: tuple[Step, str, float] | None = None  # for the report of an interrupted run
        self._finished_records: list[StepRecord] = []
        self._last_logged = "run_start"

    # -- checks that need -e (run before anything happens) ----------------------------------------------
    def problems(self) -> list[PlaybookError]:
        """Variables no one defines and env.NAME not set: one error each, with its line."""
        return [error for _, error in self._findings()]

    def check_findings(self) -> tuple[list[PlaybookError], list[PlaybookError]]:
        """What ``playbook check`` reports: (errors, warnings). A variable used before the step that
        registers it is an error whatever -e says; one nobody defines is an error only when -e was given
        (else check lists it as needed). The environment at check time is not the run's, so an unset
        env.NAME is a warning that says so."""
        errors: list[PlaybookError] = []
        warnings: list[PlaybookError] = []
        for kind, error in self._findings(at_check=True):
            if kind == "env":
                warnings.append(error)
            elif kind == "later" or self.extra:
                errors.append(error)
        if self.extra and not errors:  # with -e given, a target the run would refuse is an error too
            errors += [error for _, error in self._empty_targets()]
        if not errors:  # without -e, a literal store: path; the disk at check time may not be the run's
            missing = list(self._missing_stores(at_check=True))
            if self.extra:
                errors += missing
            else:
                warnings += [PlaybookError(f"{e.message} at check time", e.line, e.source) for e in missing]
        return errors, warnings

    def _missing_stores(self, at_check: bool = False) -> Iterator[PlaybookError]:
        """An error for each store target whose store: path does not exist and that does not say
        ``create: true``, as mqadmin refuses a write there without --create: a typo in ``-e store=`` must
        not build a new store, and is said before any step runs (``--check`` too). Left out: targets a
        broker or host step comes to first (``MAKES_ITS_OWN_STORE``), a store: that does not render yet
        (reported as such), one that reads env at check time, and targets --limit leaves out."""
        try:
            ctx = self._variables()
        except PlaybookError:
            return
        for name, step in self._opened_as_stores().items():
            spec = self.pb.targets[name]
            if spec.get("ssh") is not None or (self.limit is not None
                                               and not any(fnmatchcase(name, p) for p in self.limit)):
                continue
            if at_check and any("env" in self._reads(spec.get(key)) for key in ("store", "create")):
                continue
            try:
                target = self._target(name, {**ctx, "target": name})
            except StepError:
                continue
            if target.store is None or target.create or expand_store_path(target.store).exists():
                continue
            line = spec.line_of("store") if hasattr(spec, "line_of") else self.pb.target_lines.get(name)
            # store.verify/rebuild want a store with records: create: true would not help them
            hint = None if step.action_name in STORE_CHECKS else self._create_hint(spec.get("create"))
            yield PlaybookError(missing_store_message(expand_store_path(target.store), name, hint),
                                line or None, self.pb.source)

    def _create_hint(self, create: Any) -> str:
        """``give -e create=true`` when the target's create: is a variable's, else the key itself."""
        names = sorted(self._reads(create) - {"env"} - BUILTIN_NAMES) if is_template(create) else []
        return f"give -e {names[0]}=true" if names else CREATE_HINT

    def _opened_as_stores(self) -> dict[str, Step]:
        """The targets whose first step (in playbook order) opens their store through an Admin, and that step."""
        first: dict[str, Step] = {}
        for step in self.pb.steps:
            if step.action is None or step.target is None:
                continue
            patterns = [str(p) for p in ([step.target] if isinstance(step.target, str) else step.target)]
            templated = any(is_template(p) for p in patterns)
            for t in self.pb.targets:
                if templated or any(fnmatchcase(t, p) for p in patterns):
                    first.setdefault(t, step)
        return {t: step for t, step in first.items() if step.action is not None
                and step.action.placement == "admin" and step.action.name not in MAKES_ITS_OWN_STORE}

    def _empty_targets(self) -> Iterator[tuple[set[str], PlaybookError]]:
        """(the variables its store:/namesrv: read, the error) for each target a step uses that the run
        would refuse at its first step (``_target``): no ssh:, and store: and namesrv: both render empty
        from vars: and -e (``store: "{{ store | default('') }}"`` with neither -e given). Why here: the
        ``| default('')`` that lets one playbook serve a store or a cluster also hides the variables from
        the undefined-variable check. Left out: a target whose store:/namesrv: reads env (check time's
        environment is not the run's), or a name nobody defines (that is reported as such)."""
        try:
            ctx = self._variables()
        except PlaybookError:
            return
        known = set(self.pb.vars) | BUILTIN_NAMES | JINJA_GLOBALS
        for name in self._used_targets():
            spec = self.pb.targets[name]
            if spec.get("ssh") is not None:
                continue
            fields = {key: spec[key] for key in ("store", "namesrv") if key in spec}
            reads = {key: self._reads(value) for key, value in fields.items()}
            if any("env" in names for names in reads.values()):
                continue
            try:
                rendered = self.templater.render(fields, ctx)
            except StepError:
                continue
            if any(isinstance(value, Undefined) for value in rendered.values()):
                continue  # ``store: "{{ store }}"`` without -e store: an undefined variable, reported as such
            if any(str(value or "").strip() for value in rendered.values()):
                continue
            hints = [f"-e {v}=DIR" for v in sorted(reads.get("store", set()) - known)]
            hints += [f"-e {v}=HOST:PORT" for v in sorted(reads.get("namesrv", set()) - known)]
            give = f"; give {' or '.join(hints)}" if hints else ""
            what = "store: and namesrv: both render empty" if "namesrv" in spec else "store: renders to an empty path"
            needs = set().union(*reads.values()) - known
            yield needs, PlaybookError(f"target {name}: {what}{give}", self.pb.target_lines.get(name) or None,
                                       self.pb.source)

    def _used_targets(self) -> list[str]:
        """The targets some step runs on (all of them when a step's target: is a template)."""
        used: set[str] = set()
        for step in self.pb.steps:
            if step.action is None or step.target is None:
                continue
            patterns = [step.target] if isinstance(step.target, str) else list(step.target)
            for pattern in patterns:
                if "{{" in str(pattern) or "{%" in str(pattern):
                    return list(self.pb.targets)
                used |= {t for t in self.pb.targets if fnmatchcase(t, str(pattern))}
        return [t for t in self.pb.targets if t in used]

    def _reads(self, value: Any) -> set[str]:
        """Every top-level name a target field's template reads, ``| default(..)``-guarded ones too."""
        if not isinstance(value, str):
            return set()
        try:
            return set(meta.find_undeclared_variables(self.templater.env.parse(value)))
        except TemplateSyntaxError:
            return set()

    def _findings(self, at_check: bool = False) -> Iterator[tuple[str, PlaybookError]]:
        """("undefined" | "later" | "env", error) for each template reference the run would refuse."""
        registered_by = {s.register: s.index for s in self.pb.steps if s.register}
        known = set(self.pb.vars) | set(self.extra) | BUILTIN_NAMES | JINJA_GLOBALS
        for line, names, env_names, step in self.pb.template_refs:
            for name in sorted(names):
                if name in known:
                    continue
                if name in registered_by and step >= 0 and registered_by[name] <= step:
                    continue
                later = name in registered_by
                hint = (f" (registered by step {registered_by[name] + 1}, which runs later)"
                        if later else f"; give -e {name}=VALUE or define it under vars:")
                yield ("later" if later else "undefined",
                       PlaybookError(f"variable {name!r} is not defined{hint}", line, self.pb.source))
            for name in sorted(env_names):
                if name not in self.environ:
                    when = " at check time" if at_check else ""
                    yield "env", PlaybookError(f"environment variable {name} is not set{when} (used as env.{name})",
                                               line, self.pb.source)

    def needed_variables(self) -> list[str]:
        registered = {s.register for s in self.pb.steps if s.register}
        known = set(self.pb.vars) | BUILTIN_NAMES | JINJA_GLOBALS | registered
        names = {n for _, names, _, _ in self.pb.template_refs for n in names}
        for reads, _ in self._empty_targets():  # store/namesrv behind ``| default('')``: one of them is needed
            names |= reads
        return sorted(names - known)

    # -- the run -----------------------------------------------------------------------------------------
    def run(self) -> RunReport:
        """Every step in order. Ctrl-C (KeyboardInterrupt) ends the run with a report of what ran and
        what was in flight (``interrupted``), in the run log too, instead of losing both."""
        problems = self.problems() or list(self._missing_stores())
        if problems:
            raise problems[0]
        report = RunReport(self.pb.name, self.pb.source, self.check)
        for _, _, env_names, _ in self.pb.template_refs:
            for name in env_names:
                self.secrets.add(self.environ.get(name))
        context = self._variables()
        log = RunLog(self.log_path, self.secrets) if self.log_path else None
        executors = Executors()
        self._last_logged = "run_start"
        try:
            if log:
                log.write("run_start", playbook=self.pb.name, file=self.pb.source, check=self.check,
                          limit=self.limit, vars=sorted(context))
            try:
                self._play(report, context, executors, log)
            except KeyboardInterrupt:
                self._interrupted(report, log)
            if log:
                summary = report.to_dict()
                summary.pop("steps")
                log.write_during_run("run_end", self._last_logged, **summary)
        finally:
            executors.close()  # also closes an interrupted SSH channel: its remote step stops
            if log:
                log.close()
                report.log_problem = log.problem
        return report

    def _play(self, report: RunReport, context: dict[str, Any], executors: Executors, log: RunLog | None) -> None:
        for step in self.pb.steps:
            self._finished_records = []
            records = self._step(step, context, executors)
            self._finished_records = []  # in the report from here on
            self._add(report, log, records)
            if any(r.status == "failed" and not r.ignored for r in records):
                report.stopped = f"step {step.index + 1} {step.name!r} failed; later steps were not run"
                break

    def _add(self, report: RunReport, log: RunLog | None, records: list[StepRecord]) -> None:
        for r in records:
            report.records.append(r)
            if log:
                log.write_during_run("step", self._last_logged, **r.to_dict())
                self._last_logged = f"step {r.index + 1} {r.name!r} on {r.target}"

    def _interrupted(self, report: RunReport, log: RunLog | None) -> None:
        """The records the interrupted step finished, and one ``interrupted`` record for what was in flight."""
        records = list(self._finished_records)
        flight = self._in_flight
        if flight is not None:
            step, target, started = flight
            records.append(StepRecord(step.index, step.name, target, step.action_name, "interrupted", [],
                                      "interrupted (SIGINT) while it ran; it may have done part of its work",
                                      started, time.time()))
        self._add(report, log, records)
        report.interrupted = True
        where = f" during step {flight[0].index + 1} {flight[0].name!r} on {flight[1]}" if flight else ""
        report.stopped = f"interrupted{where}; later steps were not run"

    def _variables(self) -> dict[str, Any]:
        ctx: dict[str, Any] = {"env": self.env, "check_mode": self.check, "playbook": self.pb.name}
        ctx.update(self.extra)
        for name in self.pb.var_order or list(self.pb.vars):  # each after the vars it reads (schema)
            if name in self.extra:
                continue
            try:
                ctx[name] = self.templater.render(self.pb.vars[name], ctx)
            except StepError as e:
                raise PlaybookError(f"vars.{name}: {e.message}", self.pb.var_lines.get(name),
                                    self.pb.source) from None
        for name, value in list(ctx.items()):
            self._add_secrets(name, value)
        return ctx

    def _add_secrets(self, name: str, value: Any, secret: bool = False) -> None:
        """Mask every value under a key named like a secret, however deep (``db: {password: x}``)."""
        secret = secret or is_secret_name(name)
        if isinstance(value, Mapping) and not isinstance(value, EnvironmentSecrets):
            for key, item in value.items():
                self._add_secrets(str(key), item, secret)
        elif isinstance(value, list | tuple):
            for item in value:
                self._add_secrets(name, item, secret)
        elif secret and isinstance(value, str | int) and not isinstance(value, bool):
            self.secrets.add(value)

    def _context(self, base: dict[str, Any]) -> dict[str, Any]:
        return {**base, **self.registered}

    def _targets(self, step: Step, ctx: dict[str, Any]) -> list[str]:
        spec = self.templater.render(step.target, ctx)
        patterns = [spec] if isinstance(spec, str) else list(spec)
        names: list[str] = []
        for p in patterns:
            matched = [t for t in self.pb.targets if fnmatchcase(t, str(p))]
            if not matched:
                raise StepError(f"target {p!r} is not defined")
            names.extend(m for m in matched if m not in names)
        return names

    def _step(self, step: Step, base: dict[str, Any], executors: Executors) -> list[StepRecord]:
        ctx = self._context(base)
        started = time.time()
        if step.action is None:
            self._in_flight = (step, "-", started)
            self.observer.step_started(step, "-")
            outcome = self._asserts(step, ctx, Outcome("ok", message="assertions hold"))
            record = self._finished(self._record(step, "-", outcome, started, 1))
            self._register(step, [outcome])
            return [record]
        try:
            names = self._targets(step, ctx)
        except StepError as e:
            record = self._record(step, str(step.target), Outcome("failed", message=e.message), started, 1)
            return [record]
        selected = [n for n in names if self.limit is None or any(fnmatchcase(n, p) for p in self.limit)]
        # What register: sees depends on the step's own targets, never on --limit: a target left out
        # is registered as skipped (as Ansible does), and a step on several targets always has .results.
        outcomes = {n: Outcome("skipped", message="excluded by --limit") for n in names if n not in selected}
        if not selected:
            record = self._finished(self._record(step, ",".join(names), Outcome("skipped", message="excluded by --limit"),
                                                 started, 0))
            self._register(step, [outcomes[n] for n in names])
            return [record]
        batch_size = step.serial or len(selected)
        records: list[StepRecord] = []
        for i in range(0, len(selected), batch_size):
            batch = selected[i:i + batch_size]
            for name in batch:
                self._in_flight = (step, name, time.time())
                self.observer.step_started(step, name)
                record, outcomes[name] = self._on_target(step, name, ctx, executors)
                records.append(self._finished(record))
            if any(r.status == "failed" and not r.ignored for r in records):
                break  # a rolling step stops before touching the next batch
        not_run = Outcome("skipped", message="not run: an earlier batch failed")
        # the targets of the batches left are in the report too: "not in the report" reads as "never named"
        records += [self._record(step, n, not_run, time.time(), 0) for n in selected if n not in outcomes]
        self._register(step, [outcomes.get(n, not_run) for n in names])
        return records

    def _finished(self, record: StepRecord) -> StepRecord:
        """One step on one target is done: the progress line, and kept for an interrupted run's report."""
        self._in_flight = None
        self._finished_records.append(record)
        self.observer.step_finished(record)
        return record

    def _on_target(self, step: Step, name: str, base: dict[str, Any], executors: Executors
                   ) -> tuple[StepRecord, Outcome]:
        assert step.action is not None
        ctx = {**base, "target": name}
        started = time.time()
        if step.when is not None:
            try:
                go = self.templater.condition(step.when, ctx)
            except StepError as e:
                return self._done(step, name, Outcome("failed", message=f"when: {e.message}"), started, 0)
            if not go:
                return self._done(step, name, Outcome("skipped", message=f"when: {step.when} is false"), started, 0)
        check = self.check or step.check_mode
        explicit_retries = "retries" in step.option_lines
        attempts = 0
        while True:
            attempts += 1
            outcome = self._attempt(step, name, ctx, executors, check)
            if check and outcome.status == "changed":
                self._planned.setdefault(name, set()).update(
                    c.what for c in outcome.changes if c.field == "exists" and c.new is True)
            if outcome.status == "skipped":
                break  # nothing ran (a shell step under --check): until: has nothing to test
            if step.until is not None:
                reg = _registered_value(outcome)
                try:
                    ok = self.templater.condition(step.until, {**ctx, **_as_reg(step, reg)})
                except StepError as e:
                    outcome = Outcome("failed", outcome.changes, f"until: {e.message}", outcome.data)
                    break
                if ok:
                    break
                if attempts > step.retries:
                    outcome = Outcome("failed", outcome.changes,
                                      f"until: {step.until} still false after {attempts} attempt(s): "
                                      f"{outcome.message}", outcome.data)
                    break
            elif not (explicit_retries and outcome.status == "failed" and attempts <= step.retries):
                break
            self.sleep(step.delay)
        outcome = self._asserts(step, {**ctx, **_as_reg(step, _registered_value(outcome))}, outcome)
        return self._done(step, name, outcome, started, attempts)

    def _attempt(self, step: Step, name: str, ctx: dict[str, Any], executors: Executors, check: bool) -> Outcome:
        assert step.action is not None
        try:
            args = self.templater.render(step.args, ctx)
            for key, param in step.action.params.items():
                if key in args:
                    args[key] = check_value(step.action.name, key, param, args[key])
                elif param.default is not None:
                    args[key] = param.default
            target = self._target(name, ctx)
        except StepError as e:
            return Outcome("failed", message=e.message)
        if check:
            args[PLANNED_IN_CHECK] = sorted(self._planned.get(name, ()))
        return executors.execute(target, step.action, args, check)

    def _target(self, name: str, ctx: dict[str, Any]) -> Target:
        spec = self.templater.render(dict(self.pb.targets[name]), ctx)
        ssh = None
        if spec.get("ssh") is not None:
            s = spec["ssh"]
            try:
                ssh = SshSpec(host=str(s["host"]), user=str(s["user"]), key_file=str(s["key_file"]),
                              port=int(s.get("port", 22)), known_hosts=str(s.get("known_hosts", "~/.ssh/known_hosts")),
                              trust_on_first_use=_truthy(s.get("trust_on_first_use", False)),
                              timeout=float(s.get("timeout", DEFAULT_TIMEOUT)))
            except (TypeError, ValueError) as e:
                raise StepError(f"target {name}: bad ssh settings: {e}") from None
            if ssh_timeout_problem(ssh.timeout):
                raise StepError(f"target {name}: ssh.timeout {ssh_timeout_problem(ssh.timeout)}")
        store = str(spec.get("store") or "").strip() or None
        namesrv = str(spec.get("namesrv") or "").strip() or None
        if ssh is None and store and namesrv:
            raise StepError(f"target {name}: both store: ({store}) and namesrv: ({namesrv}) are set; give one")
        if ssh is None and not store and not namesrv:
            raise StepError(f"target {name}: " + ("store: and namesrv: both render empty; give -e store=DIR or "
                                                  "-e namesrv=HOST:PORT" if "namesrv" in spec
                                                  else "store: renders to an empty path"))
        create = check_value(f"target {name}", "create", Param((bool,)), spec.get("create", False))
        return Target(name, store, str(spec["config"]) if spec.get("config") else None, namesrv, ssh,
                      str(spec.get("mqadmin") or "mqadmin"), bool(create))

    def _asserts(self, step: Step, ctx: dict[str, Any], outcome: Outcome) -> Outcome:
        if outcome.status == "failed" or outcome.status == "skipped":
            return outcome
        for expr in step.asserts:
            try:
                holds = self.templater.condition(expr, ctx)
            except StepError as e:
                return Outcome("failed", outcome.changes, f"assert: {e.message}", outcome.data)
            if not holds:
                return Outcome("failed", outcome.changes, f"assertion failed: {expr}", outcome.data)
        return outcome

    def _done(self, step: Step, name: str, outcome: Outcome, started: float, attempts: int
              ) -> tuple[StepRecord, Outcome]:
        return self._record(step, name, outcome, started, attempts), outcome

    def _record(self, step: Step, target: str, outcome: Outcome, started: float, attempts: int) -> StepRecord:
        ignored = outcome.status == "failed" and step.ignore_errors
        return StepRecord(step.index, step.name, target, step.action_name, outcome.status,
                          [c.to_dict() for c in outcome.changes], outcome.message, started, time.time(),
                          attempts, ignored, outcome.data)

    def _register(self, step: Step, outcomes: list[Outcome]) -> None:
        """One outcome per target the step names (flat), or ``results`` when it names several."""
        if not step.register:
            return
        values = [_registered_value(o) for o in outcomes]
        if len(values) == 1:
            self.registered[step.register] = values[0]
        else:
            self.registered[step.register] = {
                "results": values, "changed": any(v["changed"] for v in values),
                "failed": any(v["failed"] for v in values), "skipped": all(v["skipped"] for v in values),
                "ok": all(v["ok"] or v["skipped"] for v in values)}


def _registered_value(outcome: Outcome) -> dict[str, Any]:
    return {**outcome.data, "data": outcome.data, "status": outcome.status, "changed": outcome.status == "changed",
            "failed": outcome.status == "failed", "skipped": outcome.status == "skipped",
            "ok": outcome.status in ("ok", "changed"), "msg": outcome.message,
            "changes": [c.to_dict() for c in outcome.changes]}


def _as_reg(step: Step, value: dict[str, Any]) -> dict[str, Any]:
    out = {"result": value}
    if step.register:
        out[step.register] = value
    return out


def _truthy(value: Any) -> bool:
    if isinstance(value, str):
        return value.strip().lower() in ("true", "yes", "1")
    return bool(value)


def _iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def parse_extra_vars(items: list[str]) -> dict[str, str]:
    """``-e KEY=VALUE`` (repeatable); a bad item is an invalid invocation."""
    out: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise PlaybookError(f"-e {item!r}: expected KEY=VALUE")
        out[key.strip()] = value
    return out


