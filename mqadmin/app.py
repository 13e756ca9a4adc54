"""The ``mqadmin`` console script: Apache mqadmin's commands over the Admin interface.

Command families live in ``mqadmin/commands/``; each registers its commands on its own Typer app,
and this module merges them into one case-insensitive group (mqadmin's lookup rule).
"""

from __future__ import annotations

import typer

from mqadmin.cli import CaseInsensitiveGroup
from mqadmin.commands import auth, cluster, group, message, offset, playbook, search, store, topic

app = typer.Typer(
    name="mqadmin",
    cls=CaseInsensitiveGroup,
    help="RocketMQ admin tool (rmqops): Apache mqadmin's commands on a store directory (--store) "
         "or, later, a cluster (-n).",
    no_args_is_help=True,
    add_completion=True,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)

for family in (auth, topic, group, offset, message, cluster, store, search):
    app.registered_commands.extend(family.app.registered_commands)
app.add_typer(playbook.app, name="playbook")


def main() -> None:
    app(prog_name="mqadmin")


if __name__ == "__main__":
    main()
