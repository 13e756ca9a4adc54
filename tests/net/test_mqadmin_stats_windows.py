"""``mqadmin -n`` clusterList / brokerStatus / topicStatus on brokers whose stats run on an injected
clock: the TPS windows are Apache's (StoreStatsService: 10 s, 60 s and 600 s; BrokerStatsManager's
minute for a topic's put TPS), so a burst three seconds ago still shows, and no test sleeps."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from harness import Servers, bound_socket
from net_util import mqadmin

from broker_core.broker.broker import Broker
from broker_core.broker.broker_config import BrokerConfig
from broker_core.net.broker_server import BrokerRemotingServer
from broker_core.store.commit_log import now_ms


class FakeClock:
    def __init__(self, now: int) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now

    def advance(self, ms: int) -> None:
        self.now += ms


def _add_broker(servers: Servers, name: str, clock: FakeClock, topic: str) -> tuple[Broker, str]:
    """A broker on ``clock`` with ``topic`` (one queue) created before it registers."""
    sock = bound_socket()
    port = sock.getsockname()[1]
    config = BrokerConfig.from_properties({"brokerName": name, "listenPort": str(port)}, servers.root / name)
    broker = Broker(servers.root / name, config, clock=clock).start()
    broker.create_or_update_topic(topic, 1, 1)
    server = BrokerRemotingServer(broker, [servers.namesrv_addr], server_config=servers.server_config)
    servers.brokers.append((broker, server))
    servers.loop.run(server.start(sock=sock))
    return broker, f"127.0.0.1:{port}"


@pytest.fixture
def servers(tmp_path: Path):
    s = Servers(tmp_path)
    try:
        yield s
    finally:
        s.close()


def _burst(broker: Broker, topic: str, n: int) -> None:
    for _ in range(n):
        broker.send_message(topic, b"x", queue_id=0)


def _status_line(text: str, key: str) -> str:
    [line] = [line for line in text.splitlines() if line.split(":")[0].strip() == key]
    return line.split(":", 1)[1].strip()


def test_cluster_list_and_broker_status_use_the_10_60_600_second_windows(servers):
    clock = FakeClock(now_ms() // 1000 * 1000)
    broker, addr = _add_broker(servers, "broker-a", clock, "R1")
    ns = servers.namesrv_addr
    # a broker up for less than 10 s has no window yet: Apache leaves each blank, clusterList shows 0
    [row] = json.loads(mqadmin(ns, "clusterList", "--output", "json"))
    assert row["inTps"] == 0.0 and row["outTps"] == 0.0
    assert json.loads(mqadmin(ns, "brokerStatus", "-b", addr, "--output", "json"))["putTps"] == "  "
    clock.advance(600_000)
    _burst(broker, "R1", 300)
    pulled = 0
    while pulled < 300:
        pulled += len(broker.pull_message("g", "R1", 0, pulled, max_msgs=32).messages)
    clock.advance(3_000)  # the burst was three seconds ago: inside the 10 s window, not the last second
    [row] = json.loads(mqadmin(ns, "clusterList", "--output", "json"))
    assert (row["inTps"], row["outTps"]) == (30.0, 30.0)
    assert "30.00" in mqadmin(ns, "clusterList").splitlines()[1]
    status = mqadmin(ns, "brokerStatus", "-b", addr)
    assert _status_line(status, "putTps") == "30.0 5.0 0.5"
    assert _status_line(status, "getTransferredTps") == "30.0 5.0 0.5"
    clock.advance(60_000)  # out of the 10 s and the 60 s windows, still in the 600 s one
    assert _status_line(mqadmin(ns, "brokerStatus", "-b", addr), "putTps") == "0.0 0.0 0.5"


def test_topic_status_prints_the_put_tps_summed_over_brokers(servers):
    clock = FakeClock(now_ms() // 1000 * 1000)
    a, _ = _add_broker(servers, "broker-a", clock, "R1")
    b, _ = _add_broker(servers, "broker-b", clock, "R1")
    ns = servers.namesrv_addr
    assert mqadmin(ns, "topicStatus", "-t", "R1").splitlines()[-1] == "Topic Put TPS: 0.0"
    _burst(a, "R1", 120)
    _burst(b, "R1", 60)
    clock.advance(3_000)
    # the minute window of each broker (BrokerStatsManager.tpsTopicPutNums): 120/60 + 60/60
    assert mqadmin(ns, "topicStatus", "-t", "R1").splitlines()[-1] == "Topic Put TPS: 3.0"
    assert mqadmin(ns, "topicStatus", "-t", "R1", "-c", "DefaultCluster").splitlines()[-1] == "Topic Put TPS: 3.0"
