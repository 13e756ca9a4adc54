"""Issue 16, the last missing commands: on a store directory (embedded) and over -n against mqbroker."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cli.test_cli_remote import mqadmin
from tests.remoting_broker import BrokerProcess, running_broker


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    with running_broker(Path(tmp_path_factory.mktemp("cli-ops")),
                        extra_args=("--registerNameServerPeriod", "500")) as b:
        yield b


def _ok(*args: str) -> str:
    r = mqadmin(*args)
    assert r.returncode == 0, (args, r.stdout, r.stderr)
    return r.stdout


def _route_perm(n: str, topic: str) -> int:
    return json.loads(_ok("topicRoute", "-n", n, "-t", topic, "--output", "json"))["queueDatas"][0]["perm"]


# ------------------------------------------------------------------------------ wipe/addWritePerm
def test_wipe_and_add_write_perm_over_n(broker: BrokerProcess) -> None:
    n, name = broker.namesrv_addr, broker.broker_name
    _ok("updateTopic", "-n", n, "-c", "DefaultCluster", "-t", "WpT", "-r", "2", "-w", "2")
    out = _ok("wipeWritePerm", "-n", n, "-b", name)
    count = int(out.rsplit(", ", 1)[1])
    assert out == f"wipe write perm of broker[{name}] in name server[{n}] OK, {count}\n" and count >= 2
    assert _route_perm(n, "WpT") == 4
    time.sleep(1.5)  # periodic registrations (every 0.5 s) with an unchanged topic table keep the wipe
    assert _route_perm(n, "WpT") == 4
    out = _ok("addWritePerm", "-n", n, "-b", name)
    assert out == f"add write perm of broker[{name}] in name server[{n}] OK, {count}\n"
    assert _route_perm(n, "WpT") == 6
    doc = json.loads(_ok("wipeWritePerm", "-n", n, "-b", "no-such-broker", "--output", "json"))
    assert doc == [{"brokerName": "no-such-broker", "namesrvAddr": n, "wipeTopicCount": 0, "error": None}]


def test_write_perm_with_one_name_server_down_prints_failed_and_exits_1(broker: BrokerProcess) -> None:
    n, name = broker.namesrv_addr, broker.broker_name
    r = mqadmin("addWritePerm", "-n", f"{n};127.0.0.1:1", "-b", name)
    assert r.returncode == 1
    assert r.stdout.splitlines()[1] == f"add write perm of broker[{name}] in name server[127.0.0.1:1] Failed"
    assert r.stdout.splitlines()[0].startswith(f"add write perm of broker[{name}] in name server[{n}] OK, ")
    assert r.stderr.strip() == ("mqadmin addWritePerm: 127.0.0.1:1: cannot connect to name server 127.0.0.1:1: "
                                "connection refused")


def test_write_perm_on_a_store_directory_names_the_name_server(cli) -> None:
    for command in ("wipeWritePerm", "addWritePerm"):
        r = cli(command, "-b", "broker-a")
        assert r.exit_code == 1 and "a store directory has no name server; use -n" in r.stderr
