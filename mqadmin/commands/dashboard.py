"""``mqadmin dashboard``: the live Textual dashboard (tui/) over the same Admin as every command."""

from __future__ import annotations

import io
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from mqadmin.cli import Cmd, register
from mqadmin.errors import AdminError, UsageProblem
from mqadmin.timefmt import now_ms

if TYPE_CHECKING:  # `mqadmin --help` must not load the Admin or the Broker
    from mqadmin.admin import Admin

app = typer.Typer()


class StoreTarget:
    """A store directory: read-only for watching (reopened every refresh, so it is safe beside a
    running broker and sees what it writes), writable only for the call that applies a reset."""

    reopen_each_refresh = True

    def __init__(self, store_dir: Path, config_file: str | Path | None,
                 clock: Callable[[], int] = now_ms, description: str | None = None) -> None:
        self.store_dir = store_dir
        self.config_file = config_file
        self.clock = clock
        self.description = description or f"store {store_dir}"

    def open(self, writes: bool = False) -> Admin:
        from mqadmin.connect import open_local_admin

        return open_local_admin(self.store_dir, self.config_file, writes=writes, clock=self.clock)


class ClusterTarget:
    """A running cluster behind a name server (``-n``): one connection, kept until it fails.

    It carries ``--ak/--sk`` because every (re)connection must sign its requests as the command's
    own Admin does: without them a cluster with ACL on refuses each refresh ("username cannot be null")."""

    reopen_each_refresh = False

    def __init__(self, namesrv_addr: str, access_key: str | None = None, secret_key: str | None = None) -> None:
        self.namesrv_addr = namesrv_addr
        self.access_key = access_key
        self.secret_key = secret_key
        self.description = f"name server {namesrv_addr}"

    def open(self, writes: bool = False) -> Admin:
        from mqadmin.connect import open_remote_admin

        # a lone --ak or --sk is refused here (UsageProblem, exit 2), as for every other command
        return open_remote_admin(self.namesrv_addr, access_key=self.access_key, secret_key=self.secret_key)


@register(app, "dashboard", "Live dashboard (Textual) of topics, consumer lag, timers, messages and ACL.")
def dashboard(
    cmd: Cmd,
    refresh: Annotated[float, typer.Option("--refresh", help="seconds between refreshes")] = 1.0,
    timeout: Annotated[float, typer.Option("--timeout", help="seconds one Admin call may take")] = 5.0,
    screen: Annotated[str, typer.Option("--screen", help="first screen: overview, topics, consumers, timers, "
                                                         "messages or acl")] = "overview",
) -> None:
    from tui.app import SCREENS_IN_ORDER, DashboardApp

    if cmd.structured:  # a script asking for JSON got a terminal UI on its pipe, running until killed
        raise UsageProblem("dashboard is interactive: --output json/yaml is not supported "
                           "(for figures use topicStatus, consumerProgress or brokerStatus with --output)")
    if refresh <= 0 or timeout <= 0:
        raise UsageProblem("--refresh and --timeout must be positive")
    if screen not in {m for m, _ in SCREENS_IN_ORDER}:
        raise UsageProblem(f"--screen {screen!r}: expected one of {', '.join(m for m, _ in SCREENS_IN_ORDER)}")
    remote = cmd.opts.remote_target
    target: StoreTarget | ClusterTarget = (
        ClusterTarget(remote, cmd.opts.access_key, cmd.opts.secret_key) if remote
        else StoreTarget(cmd.opts.store_dir, cmd.opts.config))
    admin = target.open()
    try:  # fail here, in one line, on a missing store or an unreachable cluster
        admin.identity()
        admin.list_topics()
    finally:
        admin.close()
    dash = DashboardApp(target, refresh_s=refresh, call_timeout_s=timeout, start_screen=screen)
    if not cmd.opts.verbose:  # a crash is one line, as every mqadmin failure (--verbose: Textual's trace too)
        from rich.console import Console

        dash.error_console = Console(file=io.StringIO(), markup=False, highlight=False)
    dash.run()
    if dash.return_code:  # an unexpected error stopped the app: exit 1, not a silent 0
        from tui.errors import describe_error

        why = describe_error(dash.crash) if dash.crash is not None else f"exit code {dash.return_code}"
        raise AdminError(f"the dashboard stopped: {why} (run with --verbose for the details)")
