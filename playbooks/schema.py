"""Playbook validation: the whole file is checked before anything runs, each error with its line.

Why: a playbook that fails on step 7 of 9 because of a typo leaves a half-done change behind. So
unknown actions and options, missing or unknown targets, wrong types, template syntax errors and
variables nobody defines are all found first (``mqadmin playbook check``; exit 2), naming the line.
Values that are templates are type-checked after rendering, at run time.
"""

from __future__ import annotations

import difflib
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import date, datetime
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

from playbooks.actions import REGISTRY
from playbooks.actions.base import Action, Param
from playbooks.errors import PlaybookError, StepError
from playbooks.templating import Templater
from playbooks.yaml_lines import LineList, LineMap, load_yaml

TOP_KEYS = ("name", "targets", "vars", "steps")
TARGET_KEYS = ("store", "create", "config", "namesrv", "ssh", "mqadmin")
SSH_KEYS = {"host": (str,), "port": (int,), "user": (str,), "key_file": (str,), "known_hosts": (str,),
            "trust_on_first_use": (bool,), "timeout": (int, float)}
STEP_OPTIONS = ("name", "target", "when", "register", "until", "retries", "delay", "ignore_errors", "serial",
                "assert", "check_mode")
BUILTIN_NAMES = {"env", "target", "check_mode", "playbook", "result"}
STORE_ACTIONS = ("store.verify", "store.rebuild", "broker.start", "broker.stop")
NAMESRV_ACTIONS = ("broker.wipe_write_perm", "broker.add_write_perm")  # name server route data
IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


@dataclass
class Step:
    index: int
    name: str
    line: int
    action: Action | None  # None: an assert-only step
    args: dict[str, Any]
    arg_lines: dict[str, int]
    target: Any = None  # str, list or template; None = the only target
    when: Any = None
    register: str | None = None
    until: Any = None
    retries: int = 3
    delay: float = 1.0
    ignore_errors: bool = False
    serial: int | None = None
    asserts: list[str] = field(default_factory=list)
    check_mode: bool = False
    option_lines: dict[str, int] = field(default_factory=dict)

    @property
    def action_name(self) -> str:
        return self.action.name if self.action is not None else "assert"


@dataclass
class Playbook:
    name: str
    source: str
    targets: dict[str, dict[str, Any]]  # raw (possibly templated) target specs
    target_lines: dict[str, int]
    vars: dict[str, Any]
    steps: list[Step]
    template_refs: list[tuple[int, set[str], set[str], int]] = field(default_factory=list)
    # (line, names, env names, step index) for the undefined-variable check done with -e known
    var_lines: dict[str, int] = field(default_factory=dict)
    var_order: list[str] = field(default_factory=list)
    """The vars: names in an order where each comes after the vars it reads (file order otherwise)."""


def load_playbook(path: str | Path) -> Playbook:
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as e:
        raise PlaybookError(f"cannot read playbook: {e.strerror}", None, str(p)) from None
    except UnicodeDecodeError as e:
        # A playbook saved as Latin-1 (or a binary file given by mistake): name the first bad byte so
        # the operator can find it, instead of a traceback.
        raise PlaybookError(f"not UTF-8 (byte 0x{e.object[e.start]:02x} at offset {e.start})", None,
                            str(p)) from None
    return parse_playbook(text, str(p))


def parse_playbook(text: str, source: str) -> Playbook:
    try:
        return _Validator(source).playbook(load_yaml(text, source))
    except PlaybookError as e:
        e.source = source
        raise


def _suggest(word: str, choices: Iterable[str]) -> str:
    close = difflib.get_close_matches(word, list(choices), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def is_template(value: Any) -> bool:
    return isinstance(value, str) and ("{{" in value or "{%" in value)


class _Validator:
    def __init__(self, source: str) -> None:
        self.source = source
        self.templater = Templater()
        self.refs: list[tuple[int, set[str], set[str], int]] = []

    def fail(self, message: str, line: int | None) -> PlaybookError:
        return PlaybookError(message, line, self.source)

    # -- templates ---------------------------------------------------------------------------------
    def scan(self, value: Any, line: int, step: int, expression: bool = False) -> None:
        """Syntax-check every template inside ``value`` and remember the names it uses."""
        if isinstance(value, str):
            if expression or is_template(value):
                err = self.templater.check(value, expression)
                if err:
                    raise self.fail(err, line)
                names, env_names = self.templater.names(value, expression)
                self.refs.append((line, names, env_names, step))
        elif isinstance(value, LineMap):
            for k, v in value.items():
                self.scan(v, value.line_of(k), step)
        elif isinstance(value, dict):
            for v in value.values():
                self.scan(v, line, step)
        elif isinstance(value, LineList):
            for i, v in enumerate(value):
                self.scan(v, value.line_of(i), step)
        elif isinstance(value, list):
            for v in value:
                self.scan(v, line, step)

    # -- the document --------------------------------------------------------------------------------
    def playbook(self, doc: Any) -> Playbook:
        if not isinstance(doc, LineMap):
            raise self.fail("a playbook is a mapping with name:, targets:, steps: (and optional vars:)",
                            getattr(doc, "line", 1))
        for key in doc:
            if key not in TOP_KEYS:
                raise self.fail(f"unknown top-level key {key!r}{_suggest(key, TOP_KEYS)}", doc.line_of(key))
        for key in ("name", "targets", "steps"):
            if key not in doc:
                raise self.fail(f"missing {key}:", doc.line)
        name = doc["name"]
        if not isinstance(name, str) or not name.strip():
            raise self.fail("name: must be a non-empty string", doc.line_of("name"))
        variables = doc.get("vars") or LineMap()
        if not isinstance(variables, dict):
            raise self.fail("vars: must be a mapping of names to values", doc.line_of("vars"))
        for key in variables:
            if not IDENT.match(key):
                raise self.fail(f"variable name {key!r} must be an identifier", _line_of(variables, key))
        self.scan(variables, doc.line_of("vars"), -1)
        var_lines = {k: _line_of(variables, k, doc.line_of("vars")) for k in variables}
        var_order = self.var_order(variables, var_lines)
        targets = self.targets(doc["targets"], doc.line_of("targets"))
        steps_node = doc["steps"]
        if not isinstance(steps_node, LineList) or not steps_node:
            raise self.fail("steps: must be a non-empty list", doc.line_of("steps"))
        steps = [self.step(i, s, steps_node.line_of(i), targets) for i, s in enumerate(steps_node)]
        return Playbook(name, self.source, dict(targets), {k: _line_of(doc["targets"], k) for k in targets},
                        dict(variables), steps, self.refs, var_lines, var_order)

    def var_order(self, variables: dict[str, Any], lines: dict[str, int]) -> list[str]:
        """The order to render vars: in: each after the vars its value reads, as Ansible's lazy vars
        resolve whatever the order in the file. Why: rendered in file order, ``group: "{{ team }}"``
        above ``team: orders`` stored an Undefined that failed a later step after earlier ones ran.
        A var reading itself (``team: "{{ team | default('x') }}"``) sees -e or nothing, as before;
        vars reading each other in a cycle are refused, naming the line of the first."""
        reads = {name: self.templater.all_names(value) & set(variables) - {name} for name, value in variables.items()}
        order: list[str] = []
        state: dict[str, str] = {}  # "visiting" on the current path, "done" once placed

        def visit(name: str, path: list[str]) -> None:
            if state.get(name) == "done":
                return
            if state.get(name) == "visiting":
                cycle = path[path.index(name):] + [name]
                raise self.fail(f"vars: {' -> '.join(cycle)} read each other in a cycle", lines[cycle[0]])
            state[name] = "visiting"
            for dep in sorted(reads[name], key=list(variables).index):
                visit(dep, [*path, name])
            state[name] = "done"
            order.append(name)

        for name in variables:
            visit(name, [])
        return order

    def targets(self, node: Any, line: int) -> dict[str, dict[str, Any]]:
        if not isinstance(node, LineMap) or not node:
            raise self.fail("targets: must map target names to {store: DIR} / {namesrv: host:port} / {ssh: ...}",
                            line)
        out: dict[str, dict[str, Any]] = {}
        for tname, spec in node.items():
            tline = node.line_of(tname)
            if not isinstance(spec, LineMap):
                raise self.fail(f"target {tname!r} must be a mapping", tline)
            for key in spec:
                if key not in TARGET_KEYS:
                    raise self.fail(f"unknown key {key!r} in target {tname!r}{_suggest(key, TARGET_KEYS)}",
                                    spec.line_of(key))
            kinds = [k for k in ("namesrv", "ssh") if k in spec]
            if len(kinds) > 1:
                raise self.fail(f"target {tname!r} has both namesrv: and ssh:; give one", spec.line)
            if not kinds and "store" not in spec:
                raise self.fail(f"target {tname!r} needs store: (a directory), namesrv: (host:port) or ssh:", tline)
            if "namesrv" in spec and "store" in spec and not (is_template(spec["namesrv"]) and is_template(spec["store"])):
                # Both may be given as templates (one playbook for a store and a cluster: -e store=... or
                # -e namesrv=...); exactly one must render non-empty at run time.
                raise self.fail(f"target {tname!r}: namesrv: and store: exclude each other", spec.line_of("store"))
            for key in ("store", "config", "namesrv", "mqadmin"):
                if key in spec and not isinstance(spec[key], str):
                    raise self.fail(f"target {tname!r}: {key}: must be a string", spec.line_of(key))
            if "create" in spec:
                self.create(tname, spec)
            if "ssh" in spec:
                self.ssh(tname, spec["ssh"], spec.line_of("ssh"))
            self.scan(spec, tline, -1)
            out[tname] = spec
        return out

    def create(self, tname: str, spec: LineMap) -> None:
        """``create: true`` lets a store target build a new store where there is none (mqadmin's
        --create); without it a store: path that does not exist is refused, so a typo builds nothing."""
        value, line = spec["create"], spec.line_of("create")
        if not isinstance(value, bool) and not is_template(value):
            raise self.fail(f"target {tname!r}: create: must be true, false or a template, got {_show(value)}", line)
        if "store" not in spec:
            raise self.fail(f"target {tname!r}: create: is for a store: target (a new store directory)", line)

    def ssh(self, tname: str, node: Any, line: int) -> None:
        if not isinstance(node, LineMap):
            raise self.fail(f"target {tname!r}: ssh: must be a mapping {{host, port, user, key_file}}", line)
        for key, value in node.items():
            if key not in SSH_KEYS:
                raise self.fail(f"unknown key {key!r} in ssh of target {tname!r}{_suggest(key, SSH_KEYS)}",
                                node.line_of(key))
            if not is_template(value) and not _is_type(value, SSH_KEYS[key]):
                raise self.fail(f"target {tname!r}: ssh.{key} must be {Param(SSH_KEYS[key]).type_names()}, "
                                f"got {_show(value)}", node.line_of(key))
            if key == "port" and not is_template(value) and not 1 <= value <= 65535:
                raise self.fail(f"target {tname!r}: ssh.port must be 1-65535, got {value}", node.line_of(key))
            if key == "timeout" and not is_template(value) and ssh_timeout_problem(value):
                raise self.fail(f"target {tname!r}: ssh.timeout {ssh_timeout_problem(value)}", node.line_of(key))
        for key in ("host", "user", "key_file"):
            if key not in node:
                raise self.fail(f"target {tname!r}: ssh needs {key}:", line)

    # -- steps -------------------------------------------------------------------------------------
    def step(self, index: int, node: Any, line: int, targets: dict[str, dict[str, Any]]) -> Step:
        if not isinstance(node, LineMap):
            raise self.fail(f"step {index + 1} must be a mapping with name: and one action", line)
        actions = [k for k in node if k in REGISTRY]
        for key in node:
            if key not in REGISTRY and key not in STEP_OPTIONS:
                raise self.fail(f"unknown action or option {key!r}{_suggest(key, [*REGISTRY, *STEP_OPTIONS])}",
                                node.line_of(key))
        if len(actions) > 1:
            raise self.fail(f"step has more than one action: {', '.join(actions)}", node.line_of(actions[1]))
        if not actions and "assert" not in node:
            raise self.fail(f"step has no action (one of: {', '.join(sorted(REGISTRY))})", line)
        name = node.get("name", actions[0] if actions else "assert")
        if not isinstance(name, str):
            raise self.fail("name: must be a string", node.line_of("name"))
        step = Step(index, name, line, REGISTRY[actions[0]] if actions else None, {}, {},
                    option_lines={k: node.line_of(k) for k in node})
        if actions:
            self.action_args(step, node[actions[0]], node.line_of(actions[0]))
        self.options(step, node)
        self.check_target(step, targets)
        return step

    def action_args(self, step: Step, node: Any, line: int) -> None:
        action = step.action
        assert action is not None
        if node is None:
            node = LineMap()
            node.line, node.key_lines = line, {}
        if not isinstance(node, dict):
            raise self.fail(f"{action.name}: arguments must be a mapping", line)
        for key, value in node.items():
            kline = _line_of(node, key, line)
            if key == "target":
                step.target = value
                step.option_lines["target"] = kline
                continue
            if key not in action.params:
                raise self.fail(f"{action.name}: unknown option {key!r}{_suggest(key, action.params)} "
                                f"(known: {', '.join(sorted(action.params)) or 'none'})", kline)
            param = action.params[key]
            if not is_template(value) and not _contains_template(value):
                try:
                    check_value(action.name, key, param, value)
                except StepError as e:
                    raise self.fail(e.message, kline) from None
            step.args[key] = value
            step.arg_lines[key] = kline
        for key, param in action.params.items():
            if param.required and key not in step.args:
                raise self.fail(f"{action.name}: missing required option {key!r}", line)
        check_args = getattr(action, "check_args", None)
        if check_args is not None:  # rules over several arguments (offset.reset: timestamp: or offset:)
            try:
                check_args(step.args)
            except StepError as e:
                raise self.fail(e.message, line) from None
        self.scan(node, line, step.index)

    def options(self, step: Step, node: LineMap) -> None:
        def typed(key: str, types: tuple[type, ...], what: str) -> Any:
            value = node[key]
            if not _is_type(value, types):
                raise self.fail(f"{key}: must be {what}, got {_show(value)}", node.line_of(key))
            return value

        if "target" in node:
            if step.target is not None:
                raise self.fail("target given twice (step and action arguments)", node.line_of("target"))
            step.target = node["target"]
            self.scan(node["target"], node.line_of("target"), step.index)
        if "when" in node:
            step.when = typed("when", (str, bool), "an expression")
            self.scan(step.when, node.line_of("when"), step.index, expression=isinstance(step.when, str))
        if "register" in node:
            reg = typed("register", (str,), "a variable name")
            if not IDENT.match(reg) or reg in BUILTIN_NAMES:
                raise self.fail(f"register: {reg!r} is not a usable variable name", node.line_of("register"))
            step.register = reg
        if "until" in node:
            step.until = typed("until", (str, bool), "an expression")
            self.scan(step.until, node.line_of("until"), step.index, expression=isinstance(step.until, str))
        if "retries" in node:
            step.retries = typed("retries", (int,), "a whole number")
            if step.retries < 0:
                raise self.fail("retries: must be >= 0", node.line_of("retries"))
        if "delay" in node:
            step.delay = float(typed("delay", (int, float), "a number of seconds"))
            if not math.isfinite(step.delay) or step.delay < 0:
                raise self.fail(f"delay: must be a finite number of seconds >= 0, got {step.delay!r}",
                                node.line_of("delay"))
        if "ignore_errors" in node:
            step.ignore_errors = typed("ignore_errors", (bool,), "true or false")
        if "check_mode" in node:
            step.check_mode = typed("check_mode", (bool,), "true or false")
        if "serial" in node:
            step.serial = typed("serial", (int,), "a whole number of targets per batch")
            if step.serial < 1:
                raise self.fail("serial: must be >= 1", node.line_of("serial"))
        if "assert" in node:
            value = node["assert"]
            items = [value] if isinstance(value, str) else value
            if not isinstance(items, list) or not all(isinstance(i, str) for i in items):
                raise self.fail("assert: must be an expression or a list of expressions", node.line_of("assert"))
            for i, item in enumerate(items):
                line = items.line_of(i) if isinstance(items, LineList) else node.line_of("assert")
                self.scan(item, line, step.index, expression=True)
            step.asserts = list(items)

    def check_target(self, step: Step, targets: dict[str, dict[str, Any]]) -> None:
        line = step.option_lines.get("target", step.line)
        if step.action is None:
            return
        if step.target is None:
            if len(targets) != 1:
                raise self.fail(f"{step.action.name}: missing target (one of: {', '.join(targets)})", step.line)
            step.target = next(iter(targets))
        names = [step.target] if isinstance(step.target, str) else step.target
        if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
            raise self.fail("target: must be a target name, a glob, or a list of them", line)
        for n in names:
            if is_template(n):
                continue
            matched = [t for t in targets if fnmatchcase(t, n)]
            if not matched:
                raise self.fail(f"unknown target {n!r}{_suggest(n, targets)} (defined: {', '.join(targets)})", line)
            for t in matched:
                spec = targets[t]
                if "namesrv" in spec and "store" not in spec and (step.action.placement == "host"
                                                                  or step.action.name in STORE_ACTIONS):
                    raise self.fail(f"{step.action.name} cannot run on cluster target {t!r}: it needs a host "
                                    "(an ssh target, or a store directory here)", line)
                if step.action.name in NAMESRV_ACTIONS and "namesrv" not in spec:
                    raise self.fail(f"{step.action.name} needs a namesrv: target (a broker's write permission "
                                    f"is in the name servers' routes), not {t!r}", line)
                if "ssh" in spec and "store" not in spec and step.action.placement == "admin":
                    raise self.fail(f"{step.action.name} on ssh target {t!r} needs store: on that target", line)
                if step.action.name == "broker.config" and "store" in spec and "namesrv" not in spec and \
                        not (is_template(spec.get("config")) or str(spec.get("config") or "").strip()):
                    # the run refuses it at its first change (broker.config's can_apply): say so before anything runs
                    raise self.fail(f"broker.config on store target {t!r} needs config: on that target (the broker's "
                                    "config file, where the change is persisted); to change a running broker use a "
                                    "namesrv: target", line)


def ssh_timeout_problem(value: float) -> str | None:
    """Why an ssh timeout: (seconds to connect and for each operation) is unusable: paramiko refuses a
    negative or NaN one with a bare ValueError, and ``.inf`` waits for ever on a host that does not answer."""
    if not math.isfinite(value) or value <= 0:
        return f"must be a finite number of seconds > 0, got {value!r}"
    return None


def check_value(action: str, key: str, param: Param, value: Any) -> Any:
    """Type-check (and coerce rendered strings: "4" -> 4, "true" -> True) one argument value."""
    if value is None and not param.required:
        return None
    if isinstance(value, datetime | date) and int in param.types:
        value = int((value if isinstance(value, datetime) else datetime(value.year, value.month, value.day))
                    .timestamp() * 1000)
    if type(value) is int and str in param.types and not _is_type(value, param.types):
        # ``vars: {team: 42}`` in ``topic: "{{ team }}"`` keeps its native int; -e team=42 gives "42".
        # The same value must work the same from either (a YAML number where a name is wanted is text).
        value = str(value)
    if isinstance(value, str) and not _is_type(value, param.types):
        text = value.strip()
        if int in param.types and re.fullmatch(r"-?\d+", text):
            value = int(text)
        elif float in param.types and re.fullmatch(r"-?\d+(\.\d+)?", text):
            value = float(text)
        elif bool in param.types and text.lower() in ("true", "false"):
            value = text.lower() == "true"
    if not _is_type(value, param.types):
        raise StepError(f"{action}: {key} must be {param.type_names()}, got {_show(value)}")
    if isinstance(value, float) and not math.isfinite(value):
        raise StepError(f"{action}: {key} must be a finite number, got {value!r}")
    if param.choices is not None and value not in param.choices:
        lowered = {str(c).lower(): c for c in param.choices}
        if isinstance(value, str) and value.lower() in lowered:
            return lowered[value.lower()]
        raise StepError(f"{action}: {key} must be one of {', '.join(map(str, param.choices))}, got {_show(value)}")
    if param.parse is not None:
        try:
            value = param.parse(value)
        except ValueError as e:
            raise StepError(f"{action}: {key} {e}") from None
    return value


def _is_type(value: Any, types: tuple[type, ...]) -> bool:
    if isinstance(value, bool):
        return bool in types
    if isinstance(value, int) and float in types:
        return True
    return isinstance(value, types)


def _contains_template(value: Any) -> bool:
    if isinstance(value, dict):
        return any(is_template(v) or _contains_template(v) for v in value.values())
    if isinstance(value, list):
        return any(is_template(v) or _contains_template(v) for v in value)
    return False


def _line_of(node: Any, key: str, default: int = 0) -> int:
    return node.line_of(key) if isinstance(node, LineMap) else default


def _show(value: Any) -> str:
    """A wrong value as the playbook's author wrote it, named by its YAML kind: the loader's own classes
    (LineList, LineMap) mean nothing to them."""
    if isinstance(value, str):
        return repr(value)
    if isinstance(value, Mapping):
        return f"mapping {dict(value)!r}"
    if isinstance(value, list):
        return f"list {list(value)!r}"
    return f"{type(value).__name__} {value!r}"
