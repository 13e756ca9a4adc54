"""The name server's KV config survives a restart (kvConfig.json, as Java's KVConfigManager keeps it)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from broker_core.broker.kv_config import KVConfigManager
from broker_core.store.config_file import ConfigFileError
from tests.cli.test_cli_remote import mqadmin
from tests.remoting_broker import REPO, _env, running_broker


def test_manager_writes_java_shape_and_reads_it_back(tmp_path: Path) -> None:
    path = tmp_path / "namesrv" / "kvConfig.json"
    kv = KVConfigManager(path)
    kv.load()  # no file yet: empty
    kv.put("NS", "k", "v")
    kv.put("ORDER_TOPIC_CONFIG", "T", "broker-a:4")
    kv.delete("NS", "k")
    assert json.loads(path.read_text()) == {"configTable": {"ORDER_TOPIC_CONFIG": {"T": "broker-a:4"}}}
    again = KVConfigManager(path)
    again.load()
    assert again.get("ORDER_TOPIC_CONFIG", "T") == "broker-a:4" and again.get("NS", "k") is None


def test_damaged_file_falls_back_to_bak_or_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "kvConfig.json"
    kv = KVConfigManager(path)
    kv.put("NS", "a", "1")
    kv.put("NS", "b", "2")  # the .bak now holds {a}
    path.write_text('{"configTable": {"NS": ')
    kv2 = KVConfigManager(path)
    kv2.load()
    assert kv2.namespace("NS") == {"a": "1"}
    path.with_name("kvConfig.json.bak").write_text("[1, 2]")
    with pytest.raises(ConfigFileError, match="kvConfig.json"):
        KVConfigManager(path).load()


def test_kv_config_survives_a_name_server_restart(tmp_path: Path) -> None:
    with running_broker(tmp_path) as b:
        n = b.namesrv_addr
        for args in (("updateKvConfig", "-s", "NS1", "-k", "k1", "-v", "v1"),
                     ("updateOrderConf", "-t", "OT", "-m", "put", "-v", "broker-a:4")):
            r = mqadmin(*args, "-n", n)
            assert r.returncode == 0, r.stderr
    stored = json.loads((tmp_path / "store" / "namesrv" / "kvConfig.json").read_text())
    assert stored["configTable"] == {"NS1": {"k1": "v1"}, "ORDER_TOPIC_CONFIG": {"OT": "broker-a:4"}}
    with running_broker(tmp_path) as b:  # a new process on new ports: the items are back
        got = mqadmin("updateOrderConf", "-n", b.namesrv_addr, "-t", "OT", "-m", "get")
        assert got.returncode == 0 and got.stdout == "get orderConf success. topic=[OT], orderConf=[broker-a:4] "
        assert mqadmin("deleteKvConfig", "-n", b.namesrv_addr, "-s", "NS1", "-k", "k1").returncode == 0
    stored = json.loads((tmp_path / "store" / "namesrv" / "kvConfig.json").read_text())
    assert stored["configTable"] == {"ORDER_TOPIC_CONFIG": {"OT": "broker-a:4"}}


def test_unreadable_kv_config_stops_the_name_server_with_one_line(tmp_path: Path) -> None:
    bad = tmp_path / "kv.json"
    bad.write_text("{not json")
    r = subprocess.run([sys.executable, "-m", "broker_core.mqbroker", "--namesrv-only", "--namesrvPort", "0",
                        "--store", str(tmp_path / "store"), "--kvConfigPath", str(bad)],
                       capture_output=True, text=True, timeout=60, env=_env(), cwd=REPO)
    assert r.returncode == 1
    assert r.stderr.strip().splitlines()[-1].startswith("mqbroker: name server: cannot load config file: ")
    assert str(bad) in r.stderr and "Traceback" not in r.stderr


def test_damaged_broker_config_file_is_the_broker_s_not_the_name_server_s(tmp_path: Path) -> None:
    """A damaged topics.json (and .bak) stopped mqbroker with "name server: cannot load config file",
    blaming the wrong server; mqadmin on that store said "unexpected failure ... --verbose" for a
    failure it had named exactly."""
    from broker_core.broker.broker import Broker

    store = tmp_path / "store"
    Broker(store).shutdown()
    topics = store / "config" / "topics.json"
    topics.write_text("{damaged")
    topics.with_name("topics.json.bak").unlink(missing_ok=True)
    r = subprocess.run([sys.executable, "-m", "broker_core.mqbroker", "--namesrvPort", "0", "--listenPort", "0",
                        "--store", str(store)], capture_output=True, text=True, timeout=60, env=_env(), cwd=REPO)
    assert r.returncode == 1
    assert r.stderr.strip().splitlines()[-1] == (
        f"mqbroker: cannot open store {store}: cannot load config file: {topics}: not valid JSON (Expecting "
        "property name enclosed in double quotes: line 1 column 2 (char 1)) (no topics.json.bak to fall back to)")
    listed = subprocess.run([sys.executable, "-m", "mqadmin.app", "topicList", "--store", str(store)],
                            capture_output=True, text=True, timeout=60, env=_env(), cwd=REPO)
    assert (listed.returncode, listed.stderr) == (1, f"mqadmin topicList: cannot load config file: {topics}: not "
                                                     "valid JSON (Expecting property name enclosed in double quotes: "
                                                     "line 1 column 2 (char 1)) (no topics.json.bak to fall back to)\n")
