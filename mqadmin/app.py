"""The ``mqadmin`` console script: Apache mqadmin's commands over the Admin interface.

Command families live in ``mqadmin/commands/``; each registers its commands on its own Typer app,
and this module merges them into one case-insensitive group (mqadmin's lookup rule).
"""

from __future__ import annotations

import os
import sys

import typer

from mqadmin.cli import CaseInsensitiveGroup
from mqadmin.commands import (
    auth,
    cluster,
    connection,
    dashboard,
    group,
    maintenance,
    message,
    namesrv,
    offset,
    playbook,
    search,
    store,
    topic,
)

app = typer.Typer(
    name="mqadmin",
    cls=CaseInsensitiveGroup,
    help="RocketMQ admin tool (rmqops): Apache mqadmin's commands on a store directory (--store) "
         "or a running cluster (-n / NAMESRV_ADDR).",
    no_args_is_help=True,
    add_completion=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,  # plain help: rich (and its markdown parser) cost more than the whole command
    context_settings={"help_option_names": ["-h", "--help"]},
)

for family in (auth, topic, group, offset, message, cluster, store, search, connection, namesrv, maintenance,
               dashboard):
    app.registered_commands.extend(family.app.registered_commands)
app.add_typer(playbook.app, name="playbook")


def _app_for(argv: list[str]) -> typer.Typer:
    """Start-up: when argv names one command, a group holding only it (typer builds every registered
    command's parser before dispatching; ~40 of them cost more than a small read). Anything else —
    no command, ``help``, completion, an unknown name — gets the full group and its messages."""
    if not argv or argv[0].startswith("-") or "_MQADMIN_COMPLETE" in os.environ:
        return app
    wanted = argv[0].lower()
    chosen = [c for c in app.registered_commands if (c.name or "").lower() == wanted]
    if not chosen:
        return app
    single = typer.Typer(name="mqadmin", cls=CaseInsensitiveGroup, add_completion=False,
                         pretty_exceptions_enable=False, rich_markup_mode=None,
                         context_settings={"help_option_names": ["-h", "--help"]})
    single.registered_commands.extend(chosen)
    single.callback()(_group)  # a callback keeps it a group: ``mqadmin <cmd> ...`` parses as with the full app
    return single


def _group() -> None:
    """RocketMQ admin tool (rmqops)."""


def main() -> None:
    _app_for(sys.argv[1:])(prog_name="mqadmin")


if __name__ == "__main__":
    main()
