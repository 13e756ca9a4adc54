"""The messages say what is true (issue 11 item 13).

Why: when another mqadmin (not a broker) held the store, the refusal told the user to use ``-n``,
which cannot help (no broker serves the store). A refusal names who holds the lock, pid included.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from typer.testing import CliRunner

from broker_core.store.message_store import MessageStore
from broker_core.store.store_config import StoreConfig
from mqadmin.app import app

HOLD = textwrap.dedent("""
    import sys
    from pathlib import Path
    from broker_core.store import store_lock
    store_lock.PROCESS_ROLE = sys.argv[2]
    lock = store_lock.StoreLock(Path(sys.argv[1]))
    lock.acquire()
    print("locked", flush=True)
    sys.stdin.readline()
""")


@pytest.mark.parametrize("role", ["mqadmin", "broker"])
def test_refusal_names_the_holder(tmp_path: Path, role: str) -> None:
    MessageStore(tmp_path, StoreConfig()).open().shutdown()  # a store directory to refuse
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[2]))
    proc = subprocess.Popen([sys.executable, "-c", HOLD, str(tmp_path), role], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True, env=env)
    try:
        assert proc.stdout.readline().strip() == "locked"
        res = CliRunner().invoke(app, ["updateTopic", "--store", str(tmp_path), "-c", "DefaultCluster", "-t", "T"])
        assert res.exit_code == 1
        err = res.stderr.strip()
        assert f"pid {proc.pid}" in err and "\n" not in err, err
        if role == "mqadmin":
            assert "another mqadmin" in err and "-n" not in err, err
        else:
            assert "running broker" in err and "-n 127.0.0.1:9876" in err, err
    finally:
        proc.stdin.close()
        proc.wait(10)


def test_refusal_names_the_name_server_the_running_broker_registers_with(tmp_path: Path) -> None:
    """A broker started with --namesrvPort 0 (or -n elsewhere) is not reached at the default 127.0.0.1:9876:
    the refusal gives the -n the broker wrote beside its lock."""
    from tests.remoting_broker import running_broker

    with running_broker(tmp_path / "b") as b:
        store = tmp_path / "b" / "store"
        res = CliRunner().invoke(app, ["updateTopic", "--store", str(store), "-c", "DefaultCluster", "-t", "T"],
                                 env={"NAMESRV_ADDR": ""})
    assert b.namesrv_addr != "127.0.0.1:9876"
    assert res.exit_code == 1 and res.stderr.strip().endswith(f"run this command against it with -n {b.namesrv_addr}")
