"""``mqadmin playbook run|check``: scripted, idempotent operations from a YAML file (issue 15).

Exit codes follow the CLI: 0 every step ok (or changed), 1 a step failed, 2 the playbook (or the
command line) is invalid and nothing ran. ``playbook step`` is the hidden half of SSH targets: the
runner executes it on the remote host with the action and its arguments as JSON on stdin, and reads
one JSON outcome back.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Annotated, Any

import typer

from mqadmin.cli import OutputFormat
from mqadmin.errors import EXIT_FAILURE, EXIT_USAGE

app = typer.Typer(name="playbook", help="Run YAML playbooks: scripted, idempotent operations (run, check).",
                  no_args_is_help=True, pretty_exceptions_enable=False)

STATUS_STYLE = {"ok": "green", "changed": "yellow", "failed": "red", "skipped": "cyan", "interrupted": "magenta"}
EXIT_INTERRUPTED = 130  # 128 + SIGINT, as a shell reports Ctrl-C (and as the other commands exit)


def _fail(message: str, code: int) -> typer.Exit:
    typer.echo(f"mqadmin playbook: {' '.join(message.splitlines())}", err=True)
    return typer.Exit(code)


def _default_log(playbook: Path) -> Path:
    """A new file per run: microseconds and the PID in the name, so two runs in the same second (a
    retry loop, two operators) never append to one log."""
    now = time.time()
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime(now)) + f".{int(now % 1 * 1_000_000):06d}Z"
    return Path.home() / ".rmqops" / "runs" / f"{playbook.stem}-{stamp}-{os.getpid()}.jsonl"


def _limits(limit: str | None, targets: list[str]) -> list[str] | None:
    """``--limit a,b*``: every part must match a target (a typo must not silently narrow the run)."""
    from playbooks.errors import PlaybookError

    if not limit:
        return None
    parts = [p.strip() for p in limit.split(",") if p.strip()]
    for part in parts:
        if not any(_match(t, part) for t in targets):
            raise PlaybookError(f"--limit {part!r} matches no target (defined: {', '.join(targets)})")
    return parts


@app.command("run", help="Run a playbook (--check: report what would change, change nothing).")
def run(
    file: Annotated[Path, typer.Argument(help="the playbook (YAML)")],
    check: Annotated[bool, typer.Option("--check", help="plan only: report what would change")] = False,
    extra: Annotated[list[str] | None, typer.Option("-e", "--extra-vars", help="KEY=VALUE (repeatable)")] = None,
    limit: Annotated[str | None, typer.Option("--limit", help="only these targets (names or globs, comma list)")]
    = None,
    output: Annotated[OutputFormat, typer.Option("--output", case_sensitive=False)] = OutputFormat.table,
    log: Annotated[Path | None, typer.Option("--log", help="JSON-lines run log (default ~/.rmqops/runs/)")] = None,
) -> None:
    from playbooks.errors import PlaybookError
    from playbooks.runner import Runner, parse_extra_vars
    from playbooks.schema import load_playbook

    log_path: Path | None = None
    try:
        pb = load_playbook(file)
        extra_vars = parse_extra_vars(extra or [])
        limits = _limits(limit, list(pb.targets))
        observer = _Progress() if output is OutputFormat.table and sys.stderr.isatty() else None
        log_path = log or _default_log(file)
        runner = Runner(pb, extra_vars, check=check, limit=limits, log_path=log_path, observer=observer)
        try:
            report = runner.run()
        finally:
            if observer is not None:
                observer.stop()
    except PlaybookError as e:
        raise _fail(str(e), EXIT_USAGE) from None
    except OSError as e:
        raise _fail(f"cannot write the run log {e.filename or log_path}: {e.strerror or e}", EXIT_USAGE) from None
    except KeyboardInterrupt:  # before the first step: nothing ran, nothing to report
        raise _fail("interrupted", EXIT_INTERRUPTED) from None
    doc = runner.secrets.mask(report.to_dict())
    _emit(doc, output)
    if report.interrupted:  # the report above says what ran and what was in flight
        raise _fail("interrupted" + (f"; {report.log_problem}" if report.log_problem else ""), EXIT_INTERRUPTED)
    if report.log_problem is not None:  # the run went on; the report above says all it did
        raise _fail(report.log_problem, EXIT_FAILURE)
    if report.failed:
        raise typer.Exit(EXIT_FAILURE)


@app.command("check", help="Validate a playbook (schema, types, targets, templates); run nothing.")
def check_cmd(
    file: Annotated[Path, typer.Argument(help="the playbook (YAML)")],
    extra: Annotated[list[str] | None, typer.Option("-e", "--extra-vars", help="KEY=VALUE (repeatable)")] = None,
    output: Annotated[OutputFormat, typer.Option("--output", case_sensitive=False)] = OutputFormat.table,
) -> None:
    from playbooks.errors import PlaybookError
    from playbooks.runner import Runner, parse_extra_vars
    from playbooks.schema import load_playbook

    try:
        pb = load_playbook(file)
        runner = Runner(pb, parse_extra_vars(extra or []))
        errors, warnings = runner.check_findings()  # what `run` would refuse, as `run` says it
        if errors:
            raise errors[0]
    except PlaybookError as e:
        raise _fail(str(e), EXIT_USAGE) from None
    for w in warnings:
        typer.echo(f"mqadmin playbook: warning: {w}", err=True)
    needs = [n for n in runner.needed_variables() if n not in (runner.extra or {})]
    doc = {"playbook": pb.name, "file": str(file), "valid": True, "targets": list(pb.targets),
           "steps": [{"step": s.index + 1, "name": s.name, "action": s.action_name} for s in pb.steps],
           "needs": needs, "warnings": [str(w) for w in warnings]}
    if output is OutputFormat.table:
        typer.echo(f"{file}: valid playbook {pb.name!r}: {len(pb.steps)} step(s), "
                   f"target(s) {', '.join(pb.targets)}")
        if needs:
            typer.echo(f"needs -e for: {', '.join(needs)}")
        return
    _emit(doc, output)


@app.command("step", hidden=True, help="Run one action on this host's store (JSON on stdin; used over SSH).")
def step(
    store: Annotated[Path, typer.Option("--store", help="store directory on this host")],
    config: Annotated[str | None, typer.Option("--config", help="broker config on this host")] = None,
    check: Annotated[bool, typer.Option("--check")] = False,
    create: Annotated[bool, typer.Option("--create", help="make a new store at --store when none is there "
                                         "(the target's create: true)")] = False,
    output: Annotated[OutputFormat, typer.Option("--output", case_sensitive=False,
                                                 help="json (the only form the runner reads)")] = OutputFormat.json,
    stop_on_eof: Annotated[bool, typer.Option("--stop-on-eof", help="the request is one line on stdin; stop "
                                              "when stdin closes (the runner went away)")] = False,
) -> None:
    if output is not OutputFormat.json:
        raise _fail("playbook step prints JSON only (--output json)", EXIT_USAGE)
    from playbooks.actions import REGISTRY
    from playbooks.actions.base import Outcome
    from playbooks.inventory import StoreContext, run_guarded

    try:
        request = json.loads((sys.stdin.readline() if stop_on_eof else sys.stdin.read()) or "{}")
        action = REGISTRY[request["action"]]
        args = dict(request.get("args") or {})
    except (ValueError, KeyError, TypeError) as e:
        outcome = Outcome("failed", message=f"bad step request on stdin: {e}")
    else:
        if stop_on_eof:
            _stop_when_stdin_closes()
        outcome = run_guarded(lambda: action.run(StoreContext(store, config, create=create), args, check))
    typer.echo(json.dumps(outcome.to_dict(), default=str))


def _stop_when_stdin_closes() -> None:
    """sshd does not signal a command without a terminal when its client goes away (Ctrl-C on the
    runner closes the channel); it only closes the command's stdin. So watch stdin: at EOF interrupt
    the action (KeyboardInterrupt: its Admin closes cleanly), and exit outright if that does not end it."""
    import _thread
    import signal
    import threading

    signal.signal(signal.SIGINT, signal.default_int_handler)  # sshd may start us with SIGINT ignored

    def watch() -> None:
        while sys.stdin.buffer.read(4096):
            pass
        _thread.interrupt_main()
        time.sleep(10)
        os._exit(EXIT_INTERRUPTED)

    threading.Thread(target=watch, name="stdin-eof", daemon=True).start()


def _match(name: str, pattern: str) -> bool:
    from fnmatch import fnmatchcase

    return fnmatchcase(name, pattern)


def _emit(doc: dict[str, Any], output: OutputFormat) -> None:
    if output is OutputFormat.json:
        typer.echo(json.dumps(doc, indent=2, ensure_ascii=False, default=str))
        return
    if output is OutputFormat.yaml:
        import yaml

        typer.echo(yaml.safe_dump(json.loads(json.dumps(doc, default=str)), sort_keys=False, allow_unicode=True),
                   nl=False)
        return
    from rich.console import Console  # rich loads only when a table is printed (fast `mqadmin --help`)
    from rich.table import Table
    from rich.text import Text

    console = Console(highlight=False)
    if not console.is_terminal:
        console = Console(highlight=False, width=200)
    # Every text below comes from the playbook or the store (step names, shell output, messages such as
    # "group [g] has no offsets"): Text prints it literally, where a str would be read as rich markup.
    title = Text(f"{doc['playbook']}" + (" (check: nothing changed)" if doc["check"] else ""))
    t = Table(title=title, title_justify="left", show_edge=False, box=None, pad_edge=False)
    t.add_column("#", no_wrap=True)
    t.add_column("step", max_width=32, overflow="fold")
    t.add_column("target", no_wrap=True)
    t.add_column("status", no_wrap=True)
    t.add_column("what", min_width=30, overflow="fold")
    for s in doc["steps"]:
        status = s["status"] + (" (ignored)" if s.get("ignored") else "")
        what = s["message"]
        if s["changes"] and s["status"] == "changed":
            what = "; ".join(_change_text(c) for c in s["changes"][:6]) + (" …" if len(s["changes"]) > 6 else "")
            if not s["message"].startswith(("changed: ", "would change: ")):
                # the action's own words say more than its changes (broker.start: the pid and the config
                # it started with); the "changed: <what>" summary would only repeat them
                what += f" ({s['message']})"
        t.add_row(str(s["step"]), Text(s["name"]), Text(s["target"]),
                  Text(status, style=STATUS_STYLE.get(s["status"], "")), Text(what))
    console.print(t)
    console.print(Text(f"ok={doc['ok']} changed={doc['changed']} failed={doc['failed']} skipped={doc['skipped']}"
                       + (f" ignored={doc['ignored']}" if doc["ignored"] else "")))
    if doc.get("stopped"):
        console.print(Text(doc["stopped"]))


def _change_text(c: dict[str, Any]) -> str:
    if "field" not in c:
        return c["what"]
    return f"{c['what']} {c['field']}: {_brief(c['old'])} -> {_brief(c['new'])}"


def _brief(value: Any) -> str:
    if isinstance(value, dict):
        return " ".join(f"{k}={_brief(v)}" for k, v in value.items() if v not in ([], None, ""))
    if isinstance(value, list):
        return ",".join(map(str, value))
    return "-" if value is None else str(value)


class _Progress:
    """A rich status line on stderr while steps run (only on a terminal)."""

    def __init__(self) -> None:
        from rich.console import Console

        self.console = Console(stderr=True)
        self.status = self.console.status("starting")
        self.status.start()
        self.done = 0

    def step_started(self, step: Any, target: str) -> None:
        from rich.text import Text

        self.status.update(Text(f"step {step.index + 1}: {step.name} @ {target}"))

    def step_finished(self, record: Any) -> None:
        self.done += 1
        style = STATUS_STYLE.get(record.status, "")
        from rich.text import Text

        self.console.print(Text.assemble((f"{record.status:>8}", style), f"  {record.name} @ {record.target}"))

    def stop(self) -> None:
        self.status.stop()
