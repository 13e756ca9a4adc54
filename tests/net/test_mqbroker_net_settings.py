"""mqbroker's network settings held to ranges that work: registerNameServerPeriod 0 spun the register
loop at 100% CPU (and SIGTERM could be lost), idleTimeout 0 closed every connection at once, a
frameMaxLength of 0 or a 0 ms scan/expiry interval was taken as given, a YAML list became a broker
name, and a brokerName too long for any frame still printed "boot success"."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from harness import bound_socket
from net_util import REPO, Mqbroker, RawClient

from broker_core.broker.broker import Broker
from broker_core.broker.broker_config import BrokerConfig
from broker_core.net.broker_server import BrokerRemotingServer
from broker_core.net.namesrv import NameServer, NamesrvConfig
from broker_core.remoting import RequestCode
from broker_core.remoting.bodies import ClusterInfo
from tests.waiting import wait_for


def run_mqbroker(store: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    return subprocess.run([sys.executable, "-m", "broker_core.mqbroker", "--store", str(store), "--listenPort", "0",
                           "--namesrvPort", "0", "--grpc-port", "0", *args], capture_output=True, text=True,
                          env=env, cwd=REPO, timeout=30)


def refusal(result: subprocess.CompletedProcess[str]) -> str:
    """The one ``mqbroker:`` line of a refused start (log lines of a store that opened aside)."""
    assert result.returncode == 1, result.stdout + result.stderr
    assert "boot success" not in result.stdout
    assert "Traceback" not in result.stderr
    lines = [ln for ln in result.stderr.splitlines() if ln.startswith("mqbroker:")]
    assert len(lines) == 1, result.stderr
    return lines[0]


def registered_names(namesrv_addr: str) -> list[str]:
    ns = RawClient(namesrv_addr)
    try:
        return sorted(ClusterInfo.from_json(ns.call(RequestCode.GET_BROKER_CLUSTER_INFO).body).broker_addr_table)
    finally:
        ns.close()


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


@pytest.mark.parametrize("period", ["0", "-5"])
def test_register_period_0_or_negative_neither_spins_nor_ignores_sigterm(tmp_path, procs, period):
    broker = Mqbroker(tmp_path / "s", "--grpc-port", "0", "--registerNameServerPeriod", period)
    procs.append(broker)
    assert broker.namesrv_addr
    wait_for(lambda: registered_names(broker.namesrv_addr or "") == ["broker-a"], "broker-a to register", 20)
    before, t0 = cpu_seconds(broker.proc.pid), time.monotonic()
    time.sleep(3)
    share = (cpu_seconds(broker.proc.pid) - before) / (time.monotonic() - t0)
    assert share < 0.5, f"mqbroker used {share:.0%} of a CPU while idle"
    assert "registerNameServerPeriod" in broker.output() and "registering every 100 ms" in broker.output()
    broker.signal(signal.SIGTERM)
    broker.proc.wait(15)
    assert broker.proc.returncode == 0, broker.output()


def test_stop_ends_the_register_loop_even_when_a_cancel_meets_a_reply(tmp_path):
    """Python 3.11's wait_for drops a cancel that meets the REGISTER_BROKER reply; one lost cancel made
    stop() (and so SIGTERM) wait for ever. Registering back to back makes that meeting likely."""
    async def start_and_stop(root: Path) -> bool:
        ns = NameServer(NamesrvConfig(listen_port=0))
        await ns.start()
        sock = bound_socket()
        broker = Broker(root, BrokerConfig.from_properties({"listenPort": str(sock.getsockname()[1])}, root)).start()
        server = BrokerRemotingServer(broker, [f"127.0.0.1:{ns.port}"])
        server.register_period_ms = 0  # back to back: the widest window for the race
        try:
            await server.start(sock=sock)
            await asyncio.sleep(0.2)
            stopping = asyncio.ensure_future(server.stop())
            done, _ = await asyncio.wait({stopping}, timeout=5)
            return bool(done)
        finally:
            broker.shutdown()
            await ns.server.stop()

    hung: list[int] = []

    async def many() -> None:
        for i in range(20):
            if not await start_and_stop(tmp_path / f"b{i}"):
                hung.append(i)
                return  # its register loop still runs: this loop could not be closed either

    # a thread of its own: a lost cancel leaves a task no event loop shutdown can end
    runner = threading.Thread(target=asyncio.run, args=(many(),), daemon=True)
    runner.start()
    runner.join(180)
    assert not runner.is_alive() and not hung, f"stop() hung (round {hung})"


def test_idle_timeout_0_never_closes_idle_connections(tmp_path, procs):
    broker = Mqbroker(tmp_path / "s", "--grpc-port", "0", "--idleTimeout", "0")
    procs.append(broker)
    wait_for(lambda: registered_names(broker.namesrv_addr or "") == ["broker-a"], "broker-a to register", 20)
    client = RawClient(broker.broker_addr or "")
    try:
        time.sleep(1.5)  # idle: with "0" taken as 0 s the connection was closed at once
        assert client.call(RequestCode.GET_BROKER_CONFIG).code == 0
    finally:
        client.close()
    assert "closing connection" not in broker.output()


@pytest.mark.parametrize(("flag", "value", "expected"), [
    ("--idleTimeout", "-1", "--idleTimeout=-1: must be a number of seconds in [0, 2147483647]"),
    ("--idleTimeout", "nan", "--idleTimeout=nan: must be a number of seconds"),
    ("--frameMaxLength", "0", "--frameMaxLength=0: must be an integer in [65536, 2147483647]"),
    ("--scanNotActiveBrokerInterval", "0", "--scanNotActiveBrokerInterval=0: must be an integer in [1, "),
    ("--brokerChannelExpiredTime", "-1", "--brokerChannelExpiredTime=-1: must be an integer in [1, "),
])
def test_net_flags_out_of_range_are_refused_in_one_line(tmp_path, flag, value, expected):
    line = refusal(run_mqbroker(tmp_path / "s", flag, value))
    assert expected in line, line
    assert not (tmp_path / "s").exists()  # refused before anything was created


@pytest.mark.parametrize(("key", "value", "expected"), [
    ("serverChannelMaxIdleTimeSeconds", "-1", "serverChannelMaxIdleTimeSeconds=-1: must be a number of seconds"),
    ("frameMaxLength", "0", "frameMaxLength=0: must be an integer in [65536, 2147483647]"),
    ("scanNotActiveBrokerInterval", "0", "scanNotActiveBrokerInterval=0: must be an integer in [1, "),
    ("brokerChannelExpiredTime", "-1", "brokerChannelExpiredTime=-1: must be an integer in [1, "),
])
def test_net_keys_out_of_range_in_the_config_file_are_refused_naming_the_file(tmp_path, key, value, expected):
    conf = tmp_path / "broker.conf"
    conf.write_text(f"{key}={value}\n")
    line = refusal(run_mqbroker(tmp_path / "s", "-c", str(conf)))
    assert str(conf) in line and expected in line, line


def test_yaml_list_or_mapping_value_is_refused_naming_file_and_key(tmp_path):
    conf = tmp_path / "broker.yaml"
    conf.write_text("brokerClusterName: C1\nbrokerName: [1, 2]\n")
    line = refusal(run_mqbroker(tmp_path / "s", "-c", str(conf)))
    assert str(conf) in line and "brokerName: expected a single value" in line and "list" in line, line
    conf.write_text("brokerName:\n  a: 1\n")
    line = refusal(run_mqbroker(tmp_path / "s", "-c", str(conf)))
    assert "brokerName: expected a single value" in line and "mapping" in line, line


def test_broker_name_too_long_for_any_registration_frame_is_refused(tmp_path):
    conf = tmp_path / "broker.conf"
    conf.write_text("brokerName=" + "b" * 70_000 + "\n")
    line = refusal(run_mqbroker(tmp_path / "s", "-c", str(conf), "--frameMaxLength", "65536"))
    assert "registration is" in line and "over frameMaxLength 65536" in line and "brokerName 70000" in line, line
