"""The command framework: case-insensitive lookup, options every command has, output, exit codes.

Why this module exists: mqadmin has ~40 commands that must all accept ``--store/--config/-n/--output/
--verbose``, resolve names case-insensitively (``mqadmin topiclist``), print either mqadmin's table or
JSON/YAML, and turn every failure into one line on stderr with the documented exit code. Each command
module only declares its own options and renders what the Admin interface returns.
"""

from __future__ import annotations

import inspect
import io
import json
import logging
import os
import re
import sys
import traceback
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from enum import Enum, StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from typer._click.exceptions import ClickException, NoArgsIsHelpError, UsageError  # typer vendors click
from typer.core import TyperGroup, TyperOption

from broker_core.common.java_text import java_trim
from broker_core.store.store_dir import STORE_ENV, store_dir_from
from mqadmin.errors import EXIT_FAILURE, EXIT_USAGE, AdminError, NotAStoreError, UsageProblem

if TYPE_CHECKING:  # start-up: the Admin (and the broker under it) load when a command needs them
    from mqadmin.admin import Admin


class OutputFormat(StrEnum):
    table = "table"
    json = "json"
    yaml = "yaml"


# ------------------------------------------------------------------------------ case-insensitive group

class CaseInsensitiveGroup(TyperGroup):
    """mqadmin resolves sub-commands case-insensitively (``decodemessageid`` finds ``decodeMessageId``)."""

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        found = self.commands.get(cmd_name)
        if found is None:
            lowered = cmd_name.lower()
            found = next((cmd for name, cmd in self.commands.items() if name.lower() == lowered), None)
        if found is not None:
            _plain_flags(found, ctx)
        return found

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        """``mqadmin help CMD`` (Apache's habit) is ``mqadmin CMD --help``; ``mqadmin help`` the list."""
        if args and args[0].lower() == "help" and "help" not in self.commands:
            args = [args[1], "--help"] if len(args) > 1 else ["--help"]
        from mqadmin.fast_params import install

        install(self.get_params(ctx))
        return super().parse_args(ctx, args)

    def format_help(self, ctx: Any, formatter: Any) -> None:
        _plain_flags(self, ctx)
        super().format_help(ctx, formatter)

    def shell_complete(self, ctx: Any, incomplete: str) -> list[Any]:
        """Command names complete case-insensitively, as they are looked up (``topics`` -> topicStatus)."""
        from typer._click.shell_completion import CompletionItem

        results = [item for item in super().shell_complete(ctx, incomplete)
                   if not isinstance(item.value, str) or item.value not in self.commands]
        lowered = incomplete.lower()
        names = [CompletionItem(name, help=cmd.get_short_help_str()) for name, cmd in self.commands.items()
                 if name.lower().startswith(lowered) and not cmd.hidden]
        return names + results

    def main(self, args: Sequence[str] | None = None, prog_name: str | None = None,
             complete_var: str | None = None, standalone_mode: bool = True, **extra: Any) -> Any:
        """Usage errors as ONE line on stderr plus a hint to ``--help`` (exit 2), not a boxed panel."""
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, standalone_mode, **extra)
        try:
            rv = super().main(args, prog_name, complete_var, False, **extra)
        except NoArgsIsHelpError as e:  # bare ``mqadmin``: the command list, as before
            e.show()
            sys.exit(e.exit_code)
        except ClickException as e:
            path = e.ctx.command_path if isinstance(e, UsageError) and e.ctx is not None else (prog_name or "mqadmin")
            line = " ".join(e.format_message().split())
            typer.echo(f"{path}: {line} (see '{path} --help')", err=True)
            sys.exit(e.exit_code)
        except typer.Abort:
            typer.echo("Aborted!", err=True)
            sys.exit(1)
        sys.exit(rv if isinstance(rv, int) else 0)

    def resolve_command(self, ctx: Any, args: list[str]) -> Any:
        name = args[0] if args else ""
        cmd = self.get_command(ctx, name)
        if cmd is None and name and not name.startswith("-"):
            ctx.fail(f"The sub command {name} not exist.")
        return super().resolve_command(ctx, args)


def _plain_flags(cmd: Any, ctx: Any) -> None:
    """Boolean flags take no value: show no ``<bool>`` type placeholder for them in --help; and plain
    options are coerced without pydantic (``mqadmin.fast_params``: start-up)."""
    from mqadmin.fast_params import install

    params = cmd.get_params(ctx)
    for param in params:
        if isinstance(param, TyperOption) and param.is_flag and param.metavar is None:
            param.metavar = ""
    install(params)


# ------------------------------------------------------------------------------ shared options

@dataclass
class GlobalOptions:
    store: str | None
    config: str | None
    namesrv_addr: str | None
    output: OutputFormat
    verbose: bool
    access_key: str | None = None
    secret_key: str | None = None
    create: bool = False

    @property
    def store_dir(self) -> Path:
        return store_dir_from(self.store, self._config_store_root())

    def _config_store_root(self) -> str | None:
        """``storePathRootDir`` of --config, as mqbroker reads it (a file that does not read: None here,
        its error comes when the config is loaded)."""
        if not self.config:
            return None
        from broker_core.config_loader import ConfigError, read_properties_file

        try:
            return read_properties_file(self.config).get("storePathRootDir") or None
        except ConfigError:
            return None

    @property
    def default_store(self) -> bool:
        """No --store, no $RMQ_STORE, no storePathRootDir: the store is ./store of the current directory."""
        return not self.store and not os.environ.get(STORE_ENV) and not self._config_store_root()

    @property
    def remote_target(self) -> str | None:
        if self.namesrv_addr is not None:
            if not self.namesrv_addr.strip(" ;"):  # -n "$UNSET": not a quiet fall back to ./store
                raise UsageProblem("-n/--namesrvAddr is empty (expected host:port[;host:port])")
            return checked_namesrv_list(self.namesrv_addr, "-n/--namesrvAddr")
        env = os.environ.get("NAMESRV_ADDR") or None
        return checked_namesrv_list(env, "$NAMESRV_ADDR") if env and env.strip(" ;") else env


def checked_namesrv_list(text: str, source: str) -> str:
    """``text`` when every entry of it is ``host:port`` (blank entries aside, as RocketMQ splits a
    namesrvAddr). Why check before connecting: a malformed entry is the operator's typo, a usage error
    (exit 2) naming it, not a connection failure (exit 1); and inside a list the client would skip it
    as a name server that does not answer, so a change meant for every name server missed one quietly."""
    from broker_core.net.outbound import IllegalAddressError, parse_address

    for entry in text.split(";"):
        if entry.strip():
            try:
                parse_address(entry)
            except IllegalAddressError as e:
                raise UsageProblem(f"{source}: name server address {e} (expected host:port[;host:port])") from None
    return text


def complete_topic(ctx: typer.Context, incomplete: str) -> list[str]:
    """Shell completion of topic names from the target store (read-only opening)."""
    return _complete(ctx, incomplete, lambda admin: admin.list_topics())


def complete_group(ctx: typer.Context, incomplete: str) -> list[str]:
    return _complete(ctx, incomplete, lambda admin: admin.list_groups())


def trimmed(value: str | None) -> str | None:
    """An option value as Apache's sub-commands read it, ``getOptionValue(..).trim()``: ``-t "Topic "``
    (a name pasted with a space) names Topic, not a topic that cannot exist."""
    return java_trim(value) if isinstance(value, str) else value


TopicOpt = Annotated[str, typer.Option("-t", "--topic", help="topic", autocompletion=complete_topic,
                                       callback=trimmed)]


def _complete(ctx: typer.Context, incomplete: str, fetch: Callable[[Admin], list[str]]) -> list[str]:
    from mqadmin.connect import open_admin

    params = ctx.params if ctx is not None else {}
    try:
        with open_admin(params.get("store"), params.get("namesrv_addr"), params.get("config")) as admin:
            return [n for n in fetch(admin) if n.startswith(incomplete)]
    except Exception:  # noqa: BLE001 - completion must never fail the shell
        return []


_COMMON: list[inspect.Parameter] = [
    inspect.Parameter("store", inspect.Parameter.KEYWORD_ONLY, default=None, annotation=Annotated[
        str | None, typer.Option("--store", help="store directory (default: $RMQ_STORE, else storePathRootDir of --config, else ./store)",
                                 rich_help_panel="Target")]),
    inspect.Parameter("config", inspect.Parameter.KEYWORD_ONLY, default=None, annotation=Annotated[
        str | None, typer.Option("--config", help="RocketMQ-style broker config (broker.conf or YAML)",
                                 rich_help_panel="Target")]),
    inspect.Parameter("namesrv_addr", inspect.Parameter.KEYWORD_ONLY, default=None, annotation=Annotated[
        str | None, typer.Option("-n", "--namesrvAddr", help="name server address (remote mode)",
                                 rich_help_panel="Target")]),
    inspect.Parameter("access_key", inspect.Parameter.KEYWORD_ONLY, default=None, annotation=Annotated[
        str | None, typer.Option("--ak", "--accessKey", help="ACL access key for signing remote requests "
                                 "(default: $ROCKETMQ_ACCESS_KEY, else $ROCKETMQ_HOME/conf/tools.yml)",
                                 rich_help_panel="Target")]),
    inspect.Parameter("secret_key", inspect.Parameter.KEYWORD_ONLY, default=None, annotation=Annotated[
        str | None, typer.Option("--sk", "--secretKey", help="ACL secret key (with --ak)", rich_help_panel="Target")]),
    inspect.Parameter("output", inspect.Parameter.KEYWORD_ONLY, default=OutputFormat.table, annotation=Annotated[
        OutputFormat, typer.Option("--output", help="table (mqadmin's layout), json or yaml",
                                   case_sensitive=False, rich_help_panel="Output")]),
    inspect.Parameter("verbose", inspect.Parameter.KEYWORD_ONLY, default=False, annotation=Annotated[
        bool, typer.Option("--verbose", help="show the stack trace of a failure", rich_help_panel="Output")]),
    inspect.Parameter("create", inspect.Parameter.KEYWORD_ONLY, default=False, annotation=Annotated[
        bool, typer.Option("--create", help="a write may build a new store at --store (never by accident)",
                           rich_help_panel="Target")]),
]
_COMMON_NAMES = [p.name for p in _COMMON]


# ------------------------------------------------------------------------------ per-invocation context

_BROKER_ADDR = re.compile(r"(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9_.-]+):\d{1,5}")
"""A broker address as mqadmin takes it (``ip:port``, ``host:port``, ``[v6]:port``)."""


class Cmd:
    """What a command body gets: the Admin to talk to, and the output helpers."""

    def __init__(self, name: str, opts: GlobalOptions, writes: bool) -> None:
        self.name = name
        self.opts = opts
        self.writes = writes
        self._admins: list[Admin] = []
        self._admin: Admin | None = None

    # -- targets --------------------------------------------------------------------------------------
    def admin(self) -> Admin:
        """The Admin for this command's target: the store directory, or remoting when -n is given."""
        if self._admin is None:
            from mqadmin.connect import open_admin

            self._admin = open_admin(self.opts.store_dir, self.opts.remote_target, self.opts.config, self.writes,
                                     access_key=self.opts.access_key, secret_key=self.opts.secret_key,
                                     create=self.opts.create)
            self._admins.append(self._admin)
        return self._admin

    def open_target(self, target: str, writes: bool) -> tuple[Admin, str | None]:
        """copyUser/copyAcl -f/-t: ``host:port`` is a broker address reached through this command's -n
        Admin; anything else is a store directory (its own Admin; a new one only with --create).
        Returns (admin, address)."""
        path = Path(target).expanduser()
        if path.exists() or not _BROKER_ADDR.fullmatch(target.strip()):
            from mqadmin.connect import open_local_admin

            admin = open_local_admin(path, self.opts.config, writes, create=self.opts.create)
            self._admins.append(admin)
            return admin, None
        if not self.opts.remote_target:  # reached through a name server, as Apache's copyUser/copyAcl do
            raise UsageProblem(f"broker address {target.strip()} in -f/-t needs -n <namesrv> (or $NAMESRV_ADDR); "
                               "a store directory needs neither")
        return self.admin(), target

    def close(self, failed: bool = False) -> None:
        """``failed``: the command failed, so a store it built (``--create``) goes again."""
        while self._admins:
            self._admins.pop().close(failed)

    # -- output ---------------------------------------------------------------------------------------
    @property
    def structured(self) -> bool:
        return self.opts.output is not OutputFormat.table

    def emit(self, data: Any, render: Callable[[], None]) -> None:
        """JSON/YAML of ``data``, or mqadmin's text via ``render``."""
        if self.opts.output is OutputFormat.json:
            typer.echo(json.dumps(data, indent=2, ensure_ascii=False, default=_json_default))
        elif self.opts.output is OutputFormat.yaml:
            import yaml

            typer.echo(yaml.safe_dump(json.loads(json.dumps(data, default=_json_default)), sort_keys=False,
                                      allow_unicode=True), nl=False)
        else:
            render()

    def emit_round(self, data: Any, render: Callable[[], None]) -> None:
        """One round of a repeating command (``-i N``): each round a document of its own, written at once
        (JSON Lines: one compact JSON text a line; YAML: a ``---`` document), so a script reading the
        stream gets every round as it comes. Why: ``emit`` per round wrote pretty JSON arrays back to back
        (no parser reads that) and YAML rounds that merged into one list; a command that gathered its
        rounds to emit at the end never printed anything, its loop having no end."""
        if self.opts.output is OutputFormat.json:
            typer.echo(json.dumps(data, ensure_ascii=False, default=_json_default))
        elif self.opts.output is OutputFormat.yaml:
            import yaml

            typer.echo("---\n" + yaml.safe_dump(json.loads(json.dumps(data, default=_json_default)), sort_keys=False,
                                                allow_unicode=True), nl=False)
        else:
            render()
        sys.stdout.flush()

    def print(self, text: str = "", end: str = "\n") -> None:
        typer.echo(text + end, nl=False)

    def printf(self, fmt: str, *values: Any) -> None:
        """Java's ``System.out.printf`` as Apache mqadmin prints its tables: fixed widths, so scripts
        that cut columns by position work on our output too (``jformat``)."""
        typer.echo(jformat(fmt, *values), nl=False)

    def table(self, headers: Sequence[str], rows: Sequence[Sequence[Any]], right: Sequence[int] = ()) -> None:
        """A plain table with mqadmin's column names (``#Broker Name`` ...), no borders."""
        from rich.console import Console
        from rich.table import Table
        from rich.text import Text

        t = Table(box=None, show_edge=False, pad_edge=False, show_lines=False)
        for i, h in enumerate(headers):
            t.add_column(Text(h), justify="right" if i in right else "left", no_wrap=True, overflow="fold")
        for row in rows:
            t.add_row(*[Text("" if v is None else str(v)) for v in row])
        buf = io.StringIO()
        Console(file=buf, width=4096, markup=False, highlight=False, color_system=None).print(t)
        typer.echo("\n".join(line.rstrip() for line in buf.getvalue().rstrip("\n").split("\n")))

    @contextmanager
    def progress(self, description: str) -> Iterator[Callable[[int, int], None]]:
        """A rich progress bar on stderr (only on a terminal); yields ``update(done, total)``."""
        if not sys.stderr.isatty() or self.structured:
            yield lambda done, total: None
            return
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        err_console = Console(stderr=True, markup=False, highlight=False)
        with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                      console=err_console, transient=True) as bar:
            task = bar.add_task(description, total=None)

            def update(done: int, total: int) -> None:
                bar.update(task, completed=done, total=total)

            yield update


def java_text(value: Any) -> Any:
    """A value as Java's %s prints it: true/false, null, a map as {k=v, ...}; numbers unchanged."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}={java_text(v)}" for k, v in value.items()) + "}"
    return value


def jformat(fmt: str, *values: Any) -> str:
    """``String.format`` for the subset mqadmin uses (%-Ns, %Nd, %.2f, %n): Python's % does the rest."""
    return fmt.replace("%n", "\n") % tuple(java_text(v) for v in values)


def front(text: str, size: int) -> str:
    """UtilAll.frontStringAtLeast: at most ``size`` characters (Apache cuts long names in tables)."""
    return text[:size]


def _json_default(value: Any) -> Any:
    if hasattr(value, "to_dict"):
        return value.to_dict()
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, Path):
        return str(value)
    raise TypeError(f"cannot serialize {type(value).__name__}")


def parse_bool(value: str | None, option: str, default: bool) -> bool:
    """mqadmin's boolean options take a value (``-f true``), parsed like Java's Boolean.parseBoolean."""
    if value is None:
        return default
    text = value.strip().lower()
    if text in ("true", "false"):
        return text == "true"
    raise UsageProblem(f"invalid value {value!r} for {option}: expected true or false")


def split_list(value: str | None) -> list[str] | None:
    """Comma lists (``-r Topic:a,Group:b``), blanks dropped; None when the option is absent."""
    if value is None:
        return None
    return [p.strip() for p in value.split(",") if p.strip()]


# ------------------------------------------------------------------------------ registration

def register(app: typer.Typer, name: str, help_text: str, *, writes: bool = False) -> Callable:
    """Register ``fn(cmd: Cmd, **options)`` as mqadmin command ``name`` with the common options added."""

    def decorate(fn: Callable[..., None]) -> Callable[..., None]:
        sig = inspect.signature(fn, eval_str=True)
        own = list(sig.parameters.values())[1:]

        def wrapper(**kwargs: Any) -> None:
            opts = GlobalOptions(**{k: kwargs.pop(k) for k in _COMMON_NAMES})
            run_command(name, opts, writes, fn, kwargs)

        wrapper.__signature__ = sig.replace(parameters=own + _COMMON)  # type: ignore[attr-defined]
        wrapper.__annotations__ = {}
        wrapper.__name__ = fn.__name__
        wrapper.__doc__ = help_text
        app.command(name=name, help=help_text)(wrapper)
        return fn

    return decorate


def _blames_default_store(message: str, opts: GlobalOptions) -> bool:
    """Whether a NotAStoreError is about the default ./store that nobody named. Why by its path: a
    copyUser/copyAcl -f/-t store directory fails the same way, and the hint (give --store or set
    RMQ_STORE) would then point at an option that was not the fault. The message starts with the path
    (``not_a_store_reason``), exactly as the store's client holds it."""
    if not opts.default_store:
        return False
    return message.startswith(f"{opts.store_dir} is not a store directory")


def run_command(name: str, opts: GlobalOptions, writes: bool, fn: Callable[..., None],
                kwargs: dict[str, Any]) -> None:
    # The command's own error says what failed; the client library's warnings on the way (a heartbeat
    # refused, a connection lost) would print a second, rawer line before it. --verbose shows them.
    logging.getLogger("broker_core.client").setLevel(logging.WARNING if opts.verbose else logging.ERROR)
    cmd = Cmd(name, opts, writes)
    code = 0
    try:
        fn(cmd, **kwargs)
    except AdminError as e:
        code = e.exit_code
        message = e.message
        if isinstance(e, NotAStoreError) and _blames_default_store(message, opts):
            message += " (the default store, ./store of the current directory: give --store DIR or set RMQ_STORE)"
        _report(cmd, message, opts.verbose, usage=code == EXIT_USAGE)
    except (typer.Exit, typer.Abort, typer.TyperException):
        raise
    except BrokenPipeError:
        # The reader went away (``| head``): stop quietly, as a filter should.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        code = 0
    except KeyboardInterrupt:
        code = 130
        _report(cmd, "interrupted", False)
    except Exception as e:  # noqa: BLE001 - one line, never a stack trace or a type name (unless --verbose)
        code = EXIT_FAILURE
        from broker_core.store.config_file import ConfigFileError  # loaded already when it is one

        if isinstance(e, ConfigFileError):  # a damaged config file (and .bak), met wherever: it names them
            _report(cmd, str(e), opts.verbose)
        else:
            _report(cmd, f"unexpected failure: {e} (run with --verbose for the details)", opts.verbose)
    finally:
        try:
            cmd.close(failed=code != 0)
        except Exception as e:  # noqa: BLE001
            if code == 0:
                code = EXIT_FAILURE
                _report(cmd, f"closing the store failed: {e}", opts.verbose)
    if code:
        raise typer.Exit(code)


def _report(cmd: Cmd, message: str, verbose: bool, usage: bool = False) -> None:
    if verbose:
        traceback.print_exc(file=sys.stderr)
    line = " ".join(message.split("\n"))
    hint = f" (see 'mqadmin {cmd.name} --help')" if usage else ""
    typer.echo(f"mqadmin {cmd.name}: {line}{hint}", err=True)
