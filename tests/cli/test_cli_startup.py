"""Issue 16, start-up: a command loads only what it needs (timed figures: bench/cli_start.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

_PROBE = """
import json, sys
from mqadmin.app import main
sys.argv = ["mqadmin", *json.loads(sys.argv[1])]
try:
    main()
except SystemExit:
    pass
print(json.dumps(sorted(sys.modules)), file=sys.stderr)
"""


def _modules_after(*argv: str) -> set[str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT), NAMESRV_ADDR="", RMQ_STORE="")
    out = subprocess.run([sys.executable, "-c", _PROBE, json.dumps(list(argv))], env=env, capture_output=True,
                         text=True, timeout=120, cwd=ROOT)
    return set(json.loads(out.stderr.strip().splitlines()[-1]))


def test_help_loads_no_broker_no_rich_no_admin():
    loaded = _modules_after("--help")
    for heavy in ("rich", "mqadmin.admin", "broker_core.broker.broker", "broker_core.auth.manager", "pydantic"):
        assert heavy not in loaded, heavy


def test_a_read_loads_no_yaml_no_asyncio_no_rich(cli):
    cli("updateTopic", "-c", "DefaultCluster", "-t", "T")
    loaded = _modules_after("topicStatus", "-t", "T", "--store", str(cli.store))
    assert "broker_core.broker.broker" in loaded  # the Broker owns the read
    for heavy in ("rich", "yaml", "asyncio", "spark", "pydantic", "typer._adapters"):
        assert heavy not in loaded, heavy


def test_plain_options_are_coerced_as_typer_does_without_pydantic(cli):
    """mqadmin.fast_params: the same values and the same one-line messages as typer's pydantic path."""
    assert cli("updateTopic", "-c", "DefaultCluster", "-t", "T", "-r", " +3 ", "-w", "3").exit_code == 0
    assert cli.json("topicStatus", "-t", "T")[-1]["queueId"] == 2
    for value, message in (("1025", "Input should be less than or equal to 1024"),
                           ("0x10", "Input should be a valid integer, unable to parse string as an integer"),
                           ("-1", "Input should be greater than or equal to")):
        r = cli("updateTopic", "-c", "DefaultCluster", "-t", "T", "-r", value)
        assert r.exit_code == 2 and message in r.stderr, (value, r.stderr)
    r = cli("topicStatus", "-t", "T", "--output", "XML")
    assert r.exit_code == 2 and "Value error, 'XML' is not one of 'table', 'json', 'yaml'." in r.stderr
    assert cli("topicStatus", "-t", "T", "--output", "JSON").exit_code == 0  # case-insensitive, as declared
    loaded = _modules_after("updateTopic", "-c", "DefaultCluster", "-t", "T", "-r", "4", "--store", str(cli.store))
    assert "pydantic" not in loaded


def test_every_command_is_in_the_family_index_and_loads_from_it():
    """mqadmin.app.FAMILY_COMMANDS names exactly what each family registers (a new command must be added)."""
    import importlib

    from mqadmin.app import FAMILY_COMMANDS

    for family, names in FAMILY_COMMANDS.items():
        registered = importlib.import_module(f"mqadmin.commands.{family}").app.registered_commands
        assert tuple(c.name for c in registered) == names, family
    modules = [p.stem for p in (ROOT / "mqadmin" / "commands").glob("*.py")]
    with_commands = {m for m in modules if m != "__init__" and m != "playbook"
                     and getattr(importlib.import_module(f"mqadmin.commands.{m}"), "app", None) is not None}
    assert with_commands == set(FAMILY_COMMANDS)


def test_query_by_key_on_a_store_loads_one_family_and_no_network_or_ui_stack(cli):
    """``mqadmin queryMsgByKey --store DIR`` answers (the Broker reads the index) without loading the other
    command families, the remoting client, gRPC, the dashboard, Spark, SSH, YAML or the SQL92 parser."""
    cli("updateTopic", "-c", "DefaultCluster", "-t", "T")
    sent = cli.json("sendMessage", "-t", "T", "-p", "hello", "-k", "order-42")
    env = dict(os.environ, PYTHONPATH=str(ROOT), NAMESRV_ADDR="", RMQ_STORE="")
    argv = ["queryMsgByKey", "--store", str(cli.store), "-t", "T", "-k", "order-42", "--output", "json"]
    out = subprocess.run([sys.executable, "-c", _PROBE, json.dumps(argv)], env=env, capture_output=True, text=True,
                         timeout=120, cwd=ROOT)
    found = json.loads(out.stdout)
    assert [(m["msgId"], m["body"]) for m in found] == [(sent["offsetMsgId"], "hello")], found  # the answer
    loaded = set(json.loads(out.stderr.strip().splitlines()[-1]))
    assert "broker_core.broker.broker" in loaded  # the Broker owns the read
    for heavy in ("grpc", "google.protobuf", "textual", "rich", "pyspark", "paramiko", "yaml", "asyncio",
                  "mqadmin.transport.remoting", "broker_core.broker.filter.sql92", "mqadmin.commands.topic",
                  "mqadmin.commands.auth", "mqadmin.commands.playbook", "tui", "spark", "playbooks"):
        assert heavy not in loaded, heavy
    # The read-only Broker builds its services on first use, and Admin's report records and the transport's
    # queue/group records load with the commands that print them: a key query touches none of them.
    for service in ("broker_core.broker.pop.pop_service", "broker_core.broker.transaction.transactional_message_service",
                    "broker_core.store.timer.timer_message_store", "broker_core.store.schedule.schedule_message_service",
                    "broker_core.auth.manager", "broker_core.auth.authorization", "broker_core.broker.client_registry",
                    "broker_core.broker.stats", "broker_core.broker.send", "broker_core.broker.pull",
                    "broker_core.broker.retry", "broker_core.broker.queue_lock", "broker_core.broker.long_polling",
                    "broker_core.auth.model", "mqadmin.reports", "mqadmin.transport.values",
                    "broker_core.broker.route_info"):
        assert service not in loaded, service
