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
    for heavy in ("rich", "yaml", "asyncio", "spark"):
        assert heavy not in loaded, heavy
