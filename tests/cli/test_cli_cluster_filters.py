"""mqadmin -c on a name server with two clusters: clusterList -c and topicStatus -c show only that
cluster's brokers, and topicList -c names each topic's own cluster (that of the first broker of its
route, as Apache's TopicListSubCommand), not the first broker's cluster for every topic.

One name server (in broker-a's mqbroker) and three brokers on free loopback ports: broker-a and
broker-b in DefaultCluster, broker-c in OtherCluster. Every process is stopped by its PID."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

import pytest

from mqadmin.transport.remoting import RemotingBrokerClient
from tests.cli.test_cli_remote import mqadmin, mqadmin_ok
from tests.remoting_broker import BrokerProcess, running_broker

PERIOD = ("--registerNameServerPeriod", "1000")


@dataclass
class TwoClusters:
    namesrv: str
    brokers: dict[str, BrokerProcess]

    def addr(self, name: str) -> str:
        return self.brokers[name].broker_addr


def _route_brokers(namesrv: str, topic: str) -> set[str]:
    r = mqadmin("topicRoute", "-n", namesrv, "-t", topic, "--output", "json")
    return {b["brokerName"] for b in json.loads(r.stdout)["brokerDatas"]} if r.returncode == 0 else set()


def _wait_route(namesrv: str, topic: str, brokers: set[str]) -> None:
    deadline = time.monotonic() + 30
    while _route_brokers(namesrv, topic) != brokers:
        assert time.monotonic() < deadline, f"route of {topic} never became {sorted(brokers)}"
        time.sleep(0.2)


@pytest.fixture(scope="module")
def clusters(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TwoClusters]:
    root = Path(tmp_path_factory.mktemp("cli-two-clusters"))
    with ExitStack() as stack:
        a = stack.enter_context(running_broker(root / "a", broker_name="broker-a", extra_args=PERIOD))
        n = a.namesrv_addr
        b = stack.enter_context(running_broker(root / "b", broker_name="broker-b", namesrv=n, extra_args=PERIOD))
        c = stack.enter_context(running_broker(root / "c", broker_name="broker-c", cluster="OtherCluster",
                                               namesrv=n, extra_args=PERIOD))
        env = TwoClusters(n, {"broker-a": a, "broker-b": b, "broker-c": c})
        deadline = time.monotonic() + 30
        while len(json.loads(mqadmin_ok("clusterList", "-n", n, "--output", "json"))) != 3:
            assert time.monotonic() < deadline, "the three brokers never registered"
            time.sleep(0.2)
        mqadmin_ok("updateTopic", "-n", n, "-b", c.broker_addr, "-t", "OnlyOnC", "-r", "2", "-w", "2")
        mqadmin_ok("updateTopic", "-n", n, "-c", "DefaultCluster", "-t", "OnlyOnDefault", "-r", "2", "-w", "2")
        for cluster in ("DefaultCluster", "OtherCluster"):
            mqadmin_ok("updateTopic", "-n", n, "-c", cluster, "-t", "Everywhere", "-r", "2", "-w", "2")
        for broker in (b, c):
            mqadmin_ok("updateTopic", "-n", n, "-b", broker.broker_addr, "-t", "OnBAndC", "-r", "2", "-w", "2")
        mqadmin_ok("updateTopic", "-n", n, "-b", c.broker_addr, "-t", "%RETRY%GC", "-r", "1", "-w", "1")
        # stored offsets: group GC on broker-c (OnlyOnC, OnBAndC), group GB on broker-b (OnBAndC)
        mqadmin_ok("updateSubGroup", "-n", n, "-b", c.broker_addr, "-g", "GC")
        mqadmin_ok("updateSubGroup", "-n", n, "-b", b.broker_addr, "-g", "GB")
        client = RemotingBrokerClient(n)
        try:
            client.reset_offset(c.broker_addr, "GC", "OnlyOnC", 0, True, 0, 0)
            client.reset_offset(c.broker_addr, "GC", "OnBAndC", 0, True, 0, 0)
            client.reset_offset(b.broker_addr, "GB", "OnBAndC", 0, True, 0, 0)
        finally:
            client.close()
        for topic, on in [("OnlyOnC", {"broker-c"}), ("OnlyOnDefault", {"broker-a", "broker-b"}),
                          ("Everywhere", {"broker-a", "broker-b", "broker-c"}), ("OnBAndC", {"broker-b", "broker-c"}),
                          ("%RETRY%GC", {"broker-c"})]:
            _wait_route(n, topic, on)
        yield env


def _cluster_rows(clusters: TwoClusters, *args: str) -> list[tuple[str, str]]:
    rows = json.loads(mqadmin_ok("clusterList", "-n", clusters.namesrv, *args, "--output", "json"))
    return [(r["clusterName"], r["brokerName"]) for r in rows]


def test_cluster_list_c_lists_only_that_clusters_brokers(clusters: TwoClusters) -> None:
    assert _cluster_rows(clusters) == [("DefaultCluster", "broker-a"), ("DefaultCluster", "broker-b"),
                                       ("OtherCluster", "broker-c")]
    assert _cluster_rows(clusters, "-c", "OtherCluster") == [("OtherCluster", "broker-c")]
    assert _cluster_rows(clusters, "-c", " DefaultCluster ") == [("DefaultCluster", "broker-a"),
                                                                 ("DefaultCluster", "broker-b")]
    for more in ([], ["-m"]):
        text = mqadmin_ok("clusterList", "-n", clusters.namesrv, "-c", "OtherCluster", *more).splitlines()
        assert text[0].startswith("#Cluster Name") and len(text) == 2, text
        assert text[1].split()[:2] == ["OtherCluster", "broker-c"]
    missing = mqadmin("clusterList", "-n", clusters.namesrv, "-c", "NoSuchCluster")
    assert missing.returncode == 3 and missing.stdout == "" and "NoSuchCluster" in missing.stderr


def _status_brokers(clusters: TwoClusters, topic: str, *args: str) -> list[tuple[str, int]]:
    rows = json.loads(mqadmin_ok("topicStatus", "-n", clusters.namesrv, "-t", topic, *args, "--output", "json"))
    return sorted((r["brokerName"], r["queueId"]) for r in rows)


def test_topic_status_c_shows_only_that_clusters_queues(clusters: TwoClusters) -> None:
    assert _status_brokers(clusters, "Everywhere") == [(b, q) for b in ("broker-a", "broker-b", "broker-c")
                                                       for q in (0, 1)]
    assert _status_brokers(clusters, "Everywhere", "-c", "OtherCluster") == [("broker-c", 0), ("broker-c", 1)]
    assert _status_brokers(clusters, "Everywhere", "-c", "DefaultCluster") == [
        ("broker-a", 0), ("broker-a", 1), ("broker-b", 0), ("broker-b", 1)]
    # a broker of the cluster without the topic adds nothing; the others' queues are shown
    assert _status_brokers(clusters, "OnBAndC", "-c", "DefaultCluster") == [("broker-b", 0), ("broker-b", 1)]
    text = mqadmin_ok("topicStatus", "-n", clusters.namesrv, "-t", "Everywhere", "-c", "OtherCluster")
    assert "broker-c" in text and "broker-a" not in text and "broker-b" not in text
    # no broker of the cluster has the topic: not found, and no queue of another cluster is printed
    outside = mqadmin("topicStatus", "-n", clusters.namesrv, "-t", "OnlyOnDefault", "-c", "OtherCluster")
    assert outside.returncode == 3 and "broker-a" not in outside.stdout and "broker-b" not in outside.stdout
    unknown = mqadmin("topicStatus", "-n", clusters.namesrv, "-t", "Everywhere", "-c", "NoSuchCluster")
    assert unknown.returncode == 3 and unknown.stdout == ""


def test_topic_list_c_names_each_topics_own_cluster(clusters: TwoClusters) -> None:
    rows = json.loads(mqadmin_ok("topicList", "-n", clusters.namesrv, "-c", "--output", "json"))
    by_topic: dict[str, list[tuple[str, str]]] = {}
    for r in rows:
        by_topic.setdefault(r["topic"], []).append((r["clusterName"], r["consumerGroup"]))
    assert by_topic["OnlyOnC"] == [("OtherCluster", "GC")]
    assert by_topic["OnlyOnDefault"] == [("DefaultCluster", "")]
    assert by_topic["Everywhere"] == [("DefaultCluster", "")]  # the route's first broker is broker-a
    # the route's first broker is broker-b: its cluster, and only the groups broker-b names (as Apache's
    # queryTopicConsumeByWho asks the first broker of the route), not broker-c's GC
    assert by_topic["OnBAndC"] == [("DefaultCluster", "GB")]
    # system topics go by their route too: the cluster's and broker's own topics are OtherCluster's
    for system in ("OtherCluster", "broker-c", "rmq_sys_SYNC_BROKER_MEMBER_broker-c"):
        assert by_topic[system] == [("OtherCluster", "")], system
    for system in ("DefaultCluster", "broker-a", "broker-b"):
        assert by_topic[system] == [("DefaultCluster", "")], system
    assert not [t for t in by_topic if t.startswith(("%RETRY%", "%DLQ%"))]  # left out, as Apache's
    text = mqadmin_ok("topicList", "-n", clusters.namesrv, "-c").splitlines()
    assert text[0].split() == ["#Cluster", "Name", "#Topic", "#Consumer", "Group"]
    assert [line.split() for line in text if " OnlyOnC " in line] == [["OtherCluster", "OnlyOnC", "GC"]]
    assert [line.split() for line in text if " OnlyOnDefault " in line] == [["DefaultCluster", "OnlyOnDefault"]]


def test_cluster_filters_on_a_store_directory(cli) -> None:
    """The embedded default: one broker, in DefaultCluster; the same commands work as before."""
    assert [(r["clusterName"], r["brokerName"]) for r in cli.json("clusterList", "-c", "DefaultCluster")] == [
        ("DefaultCluster", "broker-a")]
    assert cli("clusterList", "-c", "OtherCluster").exit_code == 3
    listed = cli.json("topicList", "-c")
    assert listed and {r["clusterName"] for r in listed} == {"DefaultCluster"}
    assert {r["topic"] for r in listed} >= {"TBW102", "DefaultCluster", "broker-a"}
    assert cli.json("topicStatus", "-t", "TBW102", "-c", "DefaultCluster")
    assert cli("topicStatus", "-t", "TBW102", "-c", "OtherCluster").exit_code == 3


def test_a_group_missing_on_one_broker_of_the_topic_is_named_with_that_broker(clusters: TwoClusters) -> None:
    # GB exists on broker-b only, OnBAndC is on broker-b and broker-c: the refusal said "Group GB does not
    # exist", though it does (on broker-b), with no word of which broker lacks it.
    r = mqadmin("resetOffsetByTime", "-n", clusters.namesrv, "-g", "GB", "-t", "OnBAndC", "-s", "now")
    assert r.returncode == 3, (r.stdout, r.stderr)
    assert f"Group GB does not exist on broker broker-c ({clusters.addr('broker-c')})" in r.stderr
