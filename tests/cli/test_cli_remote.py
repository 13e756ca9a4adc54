"""mqadmin with -n against a real mqbroker: commands over the remoting transport, and ACL signing
from --ak/--sk, the environment, or $ROCKETMQ_HOME/conf/tools.yml."""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.remoting_broker import REPO, BrokerProcess, running_broker
from tests.waiting import wait_remote_dispatched

SUPER = ("rocketmq", "12345678")


def mqadmin(*args: str, env: dict[str, str] | None = None,
            cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    full = dict(os.environ, PYTHONPATH=str(REPO))
    for k in ("NAMESRV_ADDR", "ROCKETMQ_ACCESS_KEY", "ROCKETMQ_SECRET_KEY", "ROCKETMQ_HOME"):
        full.pop(k, None)
    full.update(env or {})
    return subprocess.run([sys.executable, "-m", "mqadmin.app", *args], capture_output=True, text=True,
                          timeout=120, env=full, cwd=str(cwd or REPO))


def mqadmin_ok(*args: str) -> str:
    """``mqadmin`` that must succeed: its stdout."""
    r = mqadmin(*args)
    assert r.returncode == 0, (args, r.stdout, r.stderr)
    return r.stdout


@pytest.fixture(scope="module")
def plain(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    with running_broker(Path(tmp_path_factory.mktemp("cli-remote"))) as b:
        yield b


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    conf = {"authenticationEnabled": "true", "authorizationEnabled": "true",
            "initAuthenticationUser": json.dumps({"username": SUPER[0], "password": SUPER[1]})}
    with running_broker(Path(tmp_path_factory.mktemp("cli-remote-acl")), conf) as b:
        yield b


def test_topic_send_consume_and_query_over_n(plain: BrokerProcess) -> None:
    n = plain.namesrv_addr
    r = mqadmin("updateTopic", "-n", n, "-c", "DefaultCluster", "-t", "CliTopic", "-r", "2", "-w", "2")
    assert r.returncode == 0, r.stderr
    assert "create topic to" in r.stdout and "CliTopic" in r.stdout
    r = mqadmin("topicList", "-n", n)
    assert "CliTopic" in r.stdout.split()
    sent = mqadmin("sendMessage", "-n", n, "-t", "CliTopic", "-p", "hello remote", "-k", "K1", "-c", "TagX",
                   "--output", "json")
    assert sent.returncode == 0, sent.stderr
    result = json.loads(sent.stdout)
    assert result["sendStatus"] == "SEND_OK" and result["brokerName"] == plain.broker_name
    wait_remote_dispatched(n, plain.broker_addr)  # consumeMessage and queryMsgByKey read the queue and index
    consumed = mqadmin("consumeMessage", "-n", n, "-t", "CliTopic", "--output", "json")
    assert consumed.returncode == 0, consumed.stderr
    msgs = json.loads(consumed.stdout)
    assert [(m["body"], m["tags"], m["keys"], m["uniqKey"]) for m in msgs] == [
        ("hello remote", "TagX", "K1", result["msgId"])]
    by_key = mqadmin("queryMsgByKey", "-n", n, "-t", "CliTopic", "-k", "K1")
    assert by_key.returncode == 0 and result["msgId"] in by_key.stdout
    route = mqadmin("topicRoute", "-n", n, "-t", "CliTopic", "--output", "json")
    assert plain.broker_addr in route.stdout
    missing = mqadmin("topicStatus", "-n", n, "-t", "NoSuchTopic")
    assert missing.returncode != 0 and len(missing.stderr.strip().splitlines()) == 1


def test_unreachable_name_server_is_one_line(tmp_path: Path) -> None:
    r = mqadmin("clusterList", "-n", "127.0.0.1:1")
    assert r.returncode == 1
    lines = r.stderr.strip().splitlines()
    assert lines == ["mqadmin clusterList: cannot connect to name server 127.0.0.1:1: connection refused"]
    both = mqadmin("clusterList", "-n", "127.0.0.1:1;127.0.0.1:2")
    assert both.returncode == 1 and both.stderr.strip().splitlines() == [
        "mqadmin clusterList: cannot connect to any name server (127.0.0.1:1; 127.0.0.1:2): connection refused"]
    assert "Errno" not in r.stderr + both.stderr and "Connect call failed" not in r.stderr + both.stderr


def test_acl_credentials_from_flags_env_and_tools_yml(secured: BrokerProcess, tmp_path: Path) -> None:
    n, b = secured.namesrv_addr, secured.broker_addr
    unsigned = mqadmin("listUser", "-n", n, "-b", b)
    assert unsigned.returncode == 1 and "username cannot be null" in unsigned.stderr
    wrong = mqadmin("listUser", "-n", n, "-b", b, "--ak", SUPER[0], "--sk", "nope")
    assert wrong.returncode == 1 and "check signature failed" in wrong.stderr
    flags = mqadmin("createUser", "-n", n, "-b", b, "-u", "bob", "-p", "bob-pw", "--ak", SUPER[0], "--sk", SUPER[1])
    assert flags.returncode == 0, flags.stderr
    env = mqadmin("listUser", "-n", n, "-b", b,
                  env={"ROCKETMQ_ACCESS_KEY": SUPER[0], "ROCKETMQ_SECRET_KEY": SUPER[1]})
    assert env.returncode == 0 and "bob" in env.stdout, env.stderr
    home = tmp_path / "rmqhome"
    (home / "conf").mkdir(parents=True)
    (home / "conf" / "tools.yml").write_text(f"accessKey: {SUPER[0]}\nsecretKey: {SUPER[1]}\n")
    yml = mqadmin("getUser", "-n", n, "-b", b, "-u", "bob", env={"ROCKETMQ_HOME": str(home)})
    assert yml.returncode == 0 and "bob" in yml.stdout, yml.stderr
    (home / "conf" / "tools.yml").write_text("accessKey: [unclosed\n")
    bad = mqadmin("getUser", "-n", n, "-b", b, "-u", "bob", env={"ROCKETMQ_HOME": str(home)})
    assert bad.returncode == 1 and "tools.yml" in bad.stderr and len(bad.stderr.strip().splitlines()) == 1
    half = mqadmin("getUser", "-n", n, "-b", b, "-u", "bob", "--ak", "x")
    assert half.returncode == 2 and "--ak/--accessKey and --sk/--secretKey must be given together" in half.stderr
    # sendMessage runs a producer, whose refused heartbeat the client library logs: one line still, its
    # warning only with --verbose (it used to print "heartbeat to ... failed" before the error)
    refused = mqadmin("sendMessage", "-n", n, "-t", "T", "-p", "x")
    assert refused.returncode == 1 and refused.stderr.strip().splitlines() == [
        "mqadmin sendMessage: username cannot be null."]
    verbose = mqadmin("sendMessage", "-n", n, "-t", "T", "-p", "x", "--verbose")
    assert verbose.returncode == 1 and "heartbeat to" in verbose.stderr


@pytest.mark.parametrize("command", [
    ["topicList"], ["topicStatus", "-t", "CmpTopic"], ["topicRoute", "-t", "CmpTopic"],
    ["topicRoute", "-t", "CmpTopic", "-l"], ["queryMsgByKey", "-t", "CmpTopic", "-k", "CMP"],
    ["consumeMessage", "-t", "CmpTopic"], ["printMsg", "-t", "CmpTopic"], ["consumerProgress"],
    ["topicList", "--output", "json"], ["topicStatus", "-t", "NoSuchTopic"],
])
def test_same_output_over_n_as_on_store(plain: BrokerProcess, command: list[str]) -> None:
    """Read-only commands print the same over -n as on --store of the very store the broker runs on
    (the store's own view names the configured listen port; the running broker uses a free one)."""
    n = plain.namesrv_addr
    if "CmpTopic" not in mqadmin("topicList", "-n", n).stdout.split():
        assert mqadmin("updateTopic", "-n", n, "-c", "DefaultCluster", "-t", "CmpTopic", "-r", "2", "-w", "2"
                       ).returncode == 0
        for i in range(3):
            assert mqadmin("sendMessage", "-n", n, "-t", "CmpTopic", "-p", f"cmp-{i}", "-k", "CMP").returncode == 0
    wait_remote_dispatched(n, plain.broker_addr)  # both views must read the three sends in the queues
    remote = mqadmin(*command, "-n", n)
    local = mqadmin(*command, "--store", str(plain.store))
    assert remote.returncode == local.returncode, (remote.stderr, local.stderr)
    configured = "127.0.0.1:10911"
    if command[0] == "topicStatus" and remote.returncode == 0:
        # the put TPS is the running broker's count of the last minute's sends; a store opened
        # by mqadmin has just started counting (0.0): every other line must match
        *remote_rows, remote_tps = remote.stdout.splitlines()
        *local_rows, local_tps = local.stdout.splitlines()
        assert local_tps == "Topic Put TPS: 0.0" and float(remote_tps.removeprefix("Topic Put TPS: ")) >= 0
        assert [r.replace(configured, plain.broker_addr) for r in local_rows] == remote_rows
        return
    assert local.stdout.replace(configured, plain.broker_addr) == remote.stdout
    assert local.stderr.replace(configured, plain.broker_addr) == remote.stderr


def _rounds(args: list[str], count: int) -> list[str]:
    """The first ``count`` stdout lines of a repeating mqadmin command, which is then stopped."""
    env = dict(os.environ, PYTHONPATH=str(REPO))
    env.pop("NAMESRV_ADDR", None)
    proc = subprocess.Popen([sys.executable, "-m", "mqadmin.app", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env, cwd=str(REPO))
    try:
        assert proc.stdout is not None
        lines: list[str] = []
        deadline = time.monotonic() + 30
        while len(lines) < count:
            left = deadline - time.monotonic()
            ready, _, _ = select.select([proc.stdout], [], [], max(left, 0))
            assert ready, f"{count} rounds not written within 30 s: {lines}"
            lines.append(proc.stdout.readline())
        return lines
    finally:
        proc.kill()
        proc.wait(10)


@pytest.mark.parametrize("command", [["clusterList"], ["clusterRT", "-a", "2", "-s", "16"]])
def test_a_repeating_command_writes_one_json_document_a_round(plain: BrokerProcess, command: list[str]) -> None:
    # clusterList -i wrote pretty JSON arrays back to back (no parser reads that); clusterRT -i gathered
    # its rounds to print after a loop without end, so a script got nothing at all
    lines = _rounds([*command, "-n", plain.namesrv_addr, "-i", "1", "--output", "json"], 2)
    rounds = [json.loads(line) for line in lines]
    assert all(isinstance(r, list) and r and r[0]["brokerName"] == plain.broker_name for r in rounds), lines


def test_dashboard_refuses_structured_output(plain: BrokerProcess) -> None:
    # it ran the terminal UI into the pipe, until killed
    r = mqadmin("dashboard", "-n", plain.namesrv_addr, "--output", "json")
    assert r.returncode == 2 and "interactive" in r.stderr and r.stdout == ""
