"""The ``mqadmin`` console script: Apache mqadmin's commands over the Admin interface.

Command families live in ``mqadmin/commands/``; each registers its commands on its own Typer app,
and this module merges them into one case-insensitive group (mqadmin's lookup rule).

Start-up: importing a family builds every one of its commands' signatures, and a store command then
loads the Broker, so ``mqadmin queryMsgByKey --store DIR`` imports the one family that registers it
(``FAMILY_COMMANDS``) and nothing else of the CLI. The full group (``app``) is built on first use:
no command, ``--help``, ``help``, completion, an unknown name, a sub-group (``playbook``).
"""

from __future__ import annotations

import gc
import importlib
import os
import sys

import typer

from mqadmin.cli import CaseInsensitiveGroup

# Which commands each family module registers, in the order ``mqadmin --help`` lists them: the index
# that lets one command load one family. tests/cli/test_cli_startup.py checks it against the modules.
FAMILY_COMMANDS: dict[str, tuple[str, ...]] = {
    "auth": ("createUser", "updateUser", "deleteUser", "getUser", "listUser", "copyUser", "createAcl",
             "updateAcl", "deleteAcl", "getAcl", "listAcl", "copyAcl", "explainAcl"),
    "topic": ("updateTopic", "deleteTopic", "topicList", "topicRoute", "topicStatus", "updateTopicPerm",
              "topicClusterList", "allocateMQ", "updateTopicList", "queryCq"),
    "group": ("updateSubGroup", "deleteSubGroup", "consumerProgress", "getConsumerConfig", "updateSubGroupList",
              "setConsumeMode"),
    "offset": ("resetOffsetByTime", "skipAccumulatedMessage", "cloneGroupOffset"),
    "message": ("queryMsgById", "queryMsgByKey", "queryMsgByUniqueKey", "queryMsgByOffset", "printMsg",
                "printMsgByQueue", "sendMessage", "consumeMessage", "decodeMessageId", "checkMsgSendRT",
                "queryMsgTraceById"),
    "cluster": ("clusterList", "brokerStatus", "getBrokerConfig", "updateBrokerConfig", "brokerConsumeStats",
                "exportMetadata", "exportConfigs", "sendMsgStatus", "clusterRT", "statsAll"),
    "store": ("verifyStore", "rebuildStore"),
    "search": ("searchMessages", "exportMessages", "statsMessages"),
    "connection": ("consumerConnection", "producerConnection", "consumerStatus", "getConsumerStatus"),
    "namesrv": ("updateKvConfig", "deleteKvConfig", "updateOrderConf", "wipeWritePerm", "addWritePerm",
                "getNamesrvConfig", "updateNamesrvConfig"),
    "maintenance": ("cleanExpiredCQ", "deleteExpiredCommitLog", "cleanUnusedTopic"),
    "dashboard": ("dashboard",),
}
_FAMILY_OF = {name.lower(): family for family, names in FAMILY_COMMANDS.items() for name in names}

_SETTINGS = dict(cls=CaseInsensitiveGroup, pretty_exceptions_enable=False,
                 rich_markup_mode=None,  # plain help: rich (and its markdown parser) cost more than the whole command
                 context_settings={"help_option_names": ["-h", "--help"]})
_full: typer.Typer | None = None


def _family(name: str) -> typer.Typer:
    return importlib.import_module(f"mqadmin.commands.{name}").app


def full_app() -> typer.Typer:
    """The whole ``mqadmin`` group: every family's commands, then the ``playbook`` sub-group."""
    global _full
    if _full is None:
        built = typer.Typer(
            name="mqadmin",
            help="RocketMQ admin tool (rmqops): Apache mqadmin's commands on a store directory (--store) "
                 "or a running cluster (-n / NAMESRV_ADDR).",
            no_args_is_help=True,
            add_completion=True,
            **_SETTINGS,
        )
        for family in FAMILY_COMMANDS:
            built.registered_commands.extend(_family(family).registered_commands)
        built.add_typer(_family("playbook"), name="playbook")
        _full = built
    return _full


def __getattr__(name: str) -> typer.Typer:
    """``from mqadmin.app import app`` (tests, embedding): the full group, built on first access."""
    if name == "app":
        return full_app()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _app_for(argv: list[str]) -> typer.Typer:
    """Start-up: when argv names one command, a group holding only it, from its family alone (typer
    builds every registered command's parser before dispatching). Anything else — no command,
    ``help``, completion, an unknown name — gets the full group and its messages."""
    if not argv or argv[0].startswith("-") or "_MQADMIN_COMPLETE" in os.environ:
        return full_app()
    wanted = argv[0].lower()
    family = _FAMILY_OF.get(wanted)
    if family is None:
        return full_app()
    chosen = [c for c in _family(family).registered_commands if (c.name or "").lower() == wanted]
    single = typer.Typer(name="mqadmin", add_completion=False, **_SETTINGS)
    single.registered_commands.extend(chosen)
    single.callback()(_group)  # a callback keeps it a group: ``mqadmin <cmd> ...`` parses as with the full app
    return single


def _group() -> None:
    """RocketMQ admin tool (rmqops)."""


def main() -> None:
    try:
        _app_for(sys.argv[1:])(prog_name="mqadmin")  # exits through SystemExit, as click does
    finally:
        # Exit: the command is done and its store closed. The interpreter's shutdown collections
        # would walk every object the command's imports made (~5% of a key query's instructions);
        # frozen, they are skipped. Nothing is lost: no finalizer of ours is left to run by then.
        gc.freeze()


if __name__ == "__main__":
    main()
