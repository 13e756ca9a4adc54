"""mqadmin -n "A;B" with two name servers (a broker registered with both): changes of name server data
(KV config, orderConf, a deleted topic's route) reach every name server of the list, as Apache's
MQClientAPIImpl sends them; -b commands talk to the broker at that address without asking a name
server; and a request that waited on several frozen name servers says how long it really waited."""

from __future__ import annotations

import re
import socket
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from harness import LoopThread, bound_socket
from net_util import run_mqadmin as mqadmin

from broker_core.broker.broker import Broker
from broker_core.broker.broker_config import BrokerConfig
from broker_core.net.broker_server import BrokerRemotingServer
from broker_core.net.namesrv import NameServer, NamesrvConfig
from tests.waiting import wait_for

ORDER_NS = "ORDER_TOPIC_CONFIG"


@dataclass
class TwoNameServers:
    """Name servers A and B (and C, which no broker registers with) plus broker-a registered with A and B."""

    loop: LoopThread
    namesrvs: list[NameServer] = field(default_factory=list)
    broker: Broker | None = None
    server: BrokerRemotingServer | None = None
    broker_addr: str = ""

    def addr(self, i: int) -> str:
        return f"127.0.0.1:{self.namesrvs[i].port}"

    @property
    def both(self) -> str:
        return f"{self.addr(0)};{self.addr(1)}"


@pytest.fixture
def two_ns(tmp_path: Path) -> Iterator[TwoNameServers]:
    env = TwoNameServers(LoopThread())
    try:
        for _ in range(3):
            ns = NameServer(NamesrvConfig(listen_port=0))
            env.loop.run(ns.start())
            env.namesrvs.append(ns)
        sock = bound_socket()
        port = sock.getsockname()[1]
        config = BrokerConfig.from_properties({"brokerName": "broker-a", "listenPort": str(port)}, tmp_path / "b")
        env.broker = Broker(tmp_path / "b", config).start()
        env.server = BrokerRemotingServer(env.broker, [env.addr(0), env.addr(1)], register_period_ms=500)
        env.loop.run(env.server.start(sock=sock))
        env.broker_addr = f"127.0.0.1:{port}"
        for ns in env.namesrvs[:2]:
            wait_for(lambda ns=ns: ns.routes.cluster_info().broker_addr_table, "broker registered", 20)
        yield env
    finally:
        try:
            if env.server is not None:
                env.loop.run(env.server.stop())
            if env.broker is not None:
                env.broker.shutdown()
            for ns in env.namesrvs:
                env.loop.run(ns.stop())
        finally:
            env.loop.close()



def ok(*args: str) -> str:
    r = mqadmin(*args)
    assert r.returncode == 0, (args, r.stdout, r.stderr)
    return r.stdout


def dead_addr() -> str:
    """An address nothing listens on (a port just freed)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{s.getsockname()[1]}"


# ------------------------------------------------------------------------------ 1. KV config on every one

def test_kv_config_and_order_conf_reach_every_name_server(two_ns: TwoNameServers) -> None:
    a, b = two_ns.namesrvs[:2]
    ok("updateKvConfig", "-n", two_ns.both, "-s", "NS1", "-k", "k", "-v", "v")
    assert a.kv.get("NS1", "k") == "v" and b.kv.get("NS1", "k") == "v"
    ok("updateOrderConf", "-n", two_ns.both, "-t", "RT", "-m", "put", "-v", "broker-a:8")
    assert a.kv.get(ORDER_NS, "RT") == "broker-a:8" and b.kv.get(ORDER_NS, "RT") == "broker-a:8"
    assert "orderConf=[broker-a:8]" in ok("updateOrderConf", "-n", two_ns.addr(1), "-t", "RT", "-m", "get")
    ok("deleteKvConfig", "-n", two_ns.both, "-s", "NS1", "-k", "k")
    ok("updateOrderConf", "-n", two_ns.both, "-t", "RT", "-m", "delete")
    assert [ns.kv.get(n, k) for ns in (a, b) for n, k in (("NS1", "k"), (ORDER_NS, "RT"))] == [None] * 4


def test_kv_change_with_a_name_server_down_is_not_a_success(two_ns: TwoNameServers) -> None:
    a, b = two_ns.namesrvs[:2]
    down = dead_addr()
    first = mqadmin("updateKvConfig", "-n", f"{down};{two_ns.addr(1)}", "-s", "NS2", "-k", "k", "-v", "v")
    assert first.returncode == 1 and "success" not in first.stdout
    assert first.stderr.strip().splitlines() == [
        f"mqadmin updateKvConfig: cannot connect to name server {down}: connection refused"]
    assert b.kv.get("NS2", "k") is None  # stopped at the first: nothing half done
    last = mqadmin("updateOrderConf", "-n", f"{two_ns.addr(0)};{down}", "-t", "RT", "-m", "put", "-v", "broker-a:4")
    assert last.returncode == 1 and "success" not in last.stdout
    assert last.stderr.strip().splitlines() == [
        f"mqadmin updateOrderConf: cannot connect to name server {down}: connection refused "
        f"(changed only on name server {two_ns.addr(0)})"]
    assert a.kv.get(ORDER_NS, "RT") == "broker-a:4"
    a.kv.put("NS3", "k", "v")
    b.kv.put("NS3", "k", "v")
    gone = mqadmin("deleteKvConfig", "-n", f"{down};{two_ns.addr(1)}", "-s", "NS3", "-k", "k")
    assert gone.returncode == 1 and "success" not in gone.stdout


# ------------------------------------------------------------------------------ 2. deleteTopic on every one

def test_delete_topic_removes_the_route_from_every_name_server(two_ns: TwoNameServers) -> None:
    ok("updateTopic", "-n", two_ns.both, "-c", "DefaultCluster", "-t", "RT")
    for i in (0, 1):
        wait_for(lambda i=i: mqadmin("topicRoute", "-n", two_ns.addr(i), "-t", "RT").returncode == 0,
                 f"route of RT on name server {i}", 20)
    out = ok("deleteTopic", "-n", two_ns.both, "-c", "DefaultCluster", "-t", "RT")
    assert "delete topic [RT] from NameServer success." in out
    for i in (0, 1):
        r = mqadmin("topicRoute", "-n", two_ns.addr(i), "-t", "RT")
        assert r.returncode == 3, (i, r.stdout, r.stderr)


# ------------------------------------------------------------------------------ 3. -b without a name server

@pytest.mark.parametrize("namesrv", ["down", "unaware"])
def test_broker_addr_commands_need_no_name_server(two_ns: TwoNameServers, namesrv: str) -> None:
    """-n at a name server that is down, or up but without this broker (C): -b still reaches it."""
    n = dead_addr() if namesrv == "down" else two_ns.addr(2)
    b = two_ns.broker_addr
    assert "brokerVersionDesc" in ok("brokerStatus", "-n", n, "-b", b)
    assert "update broker config success" in ok("updateBrokerConfig", "-n", n, "-b", b, "-k",
                                                "flushIntervalCommitLog", "-v", "777")
    conf = ok("getBrokerConfig", "-n", n, "-b", b)
    assert re.search(r"^brokerName\s+=\s+broker-a$", conf, re.M) and \
        re.search(r"^flushIntervalCommitLog\s+=\s+777$", conf, re.M)
    assert f"create topic to {b} success." in ok("updateTopic", "-n", n, "-b", b, "-t", "ByAddr")
    assert two_ns.broker is not None and two_ns.broker.topic_manager.get("ByAddr") is not None
    assert "create subscription group to" in ok("updateSubGroup", "-n", n, "-b", b, "-g", "GByAddr")


def test_unreachable_broker_addr_is_refused_in_one_line(two_ns: TwoNameServers) -> None:
    down = dead_addr()
    r = mqadmin("brokerStatus", "-n", two_ns.both, "-b", down)
    assert r.returncode == 1 and r.stdout == ""
    assert r.stderr.strip().splitlines() == [
        f"mqadmin brokerStatus: broker {down} cannot be reached: cannot connect to {down}: connection refused"]
    # -c is still checked against the name server
    wrong = mqadmin("brokerStatus", "-n", two_ns.both, "-c", "NoSuchCluster")
    assert wrong.returncode == 3 and "cluster 'NoSuchCluster' not found" in wrong.stderr


# ------------------------------------------------------------------------------ 4. the wait the message states

def test_frozen_name_servers_message_states_the_real_wait() -> None:
    """Two name servers that accept connections and never answer (SIGSTOPped): the request waits for
    each in turn, and the message must not claim a shorter wait than the one the operator sat through."""
    silent = [socket.socket() for _ in range(2)]
    try:
        for s in silent:
            s.bind(("127.0.0.1", 0))
            s.listen(16)
        ns = ";".join(f"127.0.0.1:{s.getsockname()[1]}" for s in silent)
        started = time.monotonic()
        r = mqadmin("clusterList", "-n", ns)
        waited = time.monotonic() - started
    finally:
        for s in silent:
            s.close()
    assert r.returncode == 1 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    stated = max(float(x) for x in re.findall(r"(\d+(?:\.\d+)?)s\b", r.stderr))
    assert waited - 2.5 <= stated <= waited + 0.5, (waited, r.stderr)
