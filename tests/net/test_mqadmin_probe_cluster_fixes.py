"""mqadmin against a two-broker cluster (broker-a, broker-b in ProbeCluster, one name server): what a
probe of the cluster commands found wrong.

- updateTopic -o true writes the topic's orderConf at the name server (it only printed that it did);
- deleteSubGroup -c removes the group's %RETRY%/%DLQ% routes from the name server too;
- updateTopic -c that one broker would refuse changes no broker;
- deleteSubGroup -r true of a group that does not exist is not found (exit 3), not success;
- queryMsgByOffset of a queue the topic does not have is not found (exit 3);
- a malformed -b is a usage error (exit 2), and a server given to the wrong option says so;
- a topic's orderConf reaches clients in its route only with the name server's orderMessageEnable (off by
  default, as Apache's): else wipeWritePerm did not drain a topic with one, and a garbage one made the
  topic unsendable.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import subprocess
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from net_util import run_mqadmin as mqadmin

from broker_core.client.instance import MQClientInstance
from broker_core.client.message import Message
from broker_core.client.producer import Producer
from tests.remoting_broker import BrokerProcess, running_broker
from tests.waiting import wait_for

CLUSTER = "ProbeCluster"



@dataclass
class Cluster:
    a: BrokerProcess
    b: BrokerProcess

    @property
    def n(self) -> str:
        assert self.a.namesrv_addr is not None
        return self.a.namesrv_addr

    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        return mqadmin(args[0], "-n", self.n, *args[1:])

    def ok(self, *args: str) -> str:
        r = self.run(*args)
        assert r.returncode == 0, (args, r.stdout, r.stderr)
        return r.stdout


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    root = tmp_path_factory.mktemp("probe")
    with running_broker(root / "a", cluster=CLUSTER) as a, \
            running_broker(root / "b", broker_name="broker-b", cluster=CLUSTER, namesrv=a.namesrv_addr) as b:
        env = Cluster(a, b)
        wait_for(lambda: "broker-b" in env.run("clusterList").stdout, "broker-b registered", 30)
        yield env


def order_conf(c: Cluster, topic: str) -> subprocess.CompletedProcess[str]:
    return c.run("updateOrderConf", "-t", topic, "-m", "get")


@contextlib.contextmanager
def order_message_enabled(c: Cluster) -> Iterator[None]:
    """The name server's orderMessageEnable on for the block (off again after it, the module's cluster
    is shared)."""
    c.ok("updateNamesrvConfig", "-k", "orderMessageEnable", "-v", "true")
    try:
        yield
    finally:
        c.ok("updateNamesrvConfig", "-k", "orderMessageEnable", "-v", "false")


# ------------------------------------------------------------------------------ 1. updateTopic -o true

def test_update_topic_order_writes_the_order_conf_at_the_name_server(cluster: Cluster) -> None:
    out = cluster.ok("updateTopic", "-c", CLUSTER, "-t", "TO", "-o", "true", "-r", "2", "-w", "2")
    assert "set cluster orderConf. isOrder=true, orderConf=[broker-a:2;broker-b:2]" in out
    got = order_conf(cluster, "TO")
    assert got.returncode == 0 and "orderConf=[broker-a:2;broker-b:2]" in got.stdout, got.stdout + got.stderr
    # the route carries it only when the name server's orderMessageEnable is on (section 7)
    with order_message_enabled(cluster):
        route = json.loads(cluster.ok("topicRoute", "-t", "TO"))
    assert route["orderTopicConf"] == "broker-a:2;broker-b:2"
    # -b: this broker's entry is replaced, the other broker's kept (createOrUpdateOrderConf, not cluster)
    out = cluster.ok("updateTopic", "-b", cluster.b.broker_addr, "-t", "TO", "-o", "true", "-r", "8", "-w", "8")
    assert "set broker orderConf. isOrder=true, orderConf=[broker-b:8]" in out
    assert "orderConf=[broker-a:2;broker-b:8]" in order_conf(cluster, "TO").stdout
    # -b of a topic with no orderConf yet: this broker's entry alone
    cluster.ok("updateTopic", "-b", cluster.a.broker_addr, "-t", "TO1", "-o", "true", "-w", "4", "-r", "4")
    assert "orderConf=[broker-a:4]" in order_conf(cluster, "TO1").stdout
    # not ordered: no orderConf is written
    cluster.ok("updateTopic", "-c", CLUSTER, "-t", "TNO")
    assert order_conf(cluster, "TNO").returncode == 3


# ------------------------------------------------------------------------------ 2. deleteSubGroup -c routes

def test_delete_sub_group_in_a_cluster_removes_its_retry_and_dlq_routes(cluster: Cluster) -> None:
    cluster.ok("updateSubGroup", "-c", CLUSTER, "-g", "G4")
    for topic in ("%RETRY%G4", "%DLQ%G4"):
        cluster.ok("updateTopic", "-c", CLUSTER, "-t", topic, "-r", "1", "-w", "1")
        assert cluster.run("topicRoute", "-t", topic).returncode == 0
    cluster.ok("deleteSubGroup", "-c", CLUSTER, "-g", "G4")
    for topic in ("%RETRY%G4", "%DLQ%G4"):
        r = cluster.run("topicRoute", "-t", topic)
        assert r.returncode == 3, (topic, r.stdout, r.stderr)


# ------------------------------------------------------------------------------ 3. updateTopic -c all or nothing

def test_update_topic_that_one_broker_refuses_changes_no_broker(cluster: Cluster) -> None:
    cluster.ok("updateTopic", "-b", cluster.b.broker_addr, "-t", "TBQ3", "-a", "+queue.type=BatchCQ")
    cluster.ok("sendMessage", "-t", "TBQ3", "-p", "x", "-b", "broker-b")
    r = cluster.run("updateTopic", "-c", CLUSTER, "-t", "TBQ3", "-a", "+queue.type=SimpleCQ")
    assert r.returncode == 1 and r.stdout == "", r.stdout + r.stderr
    assert "unchangeable attribute" in r.stderr and "nothing was changed" in r.stderr
    assert "already changed" not in r.stderr
    route = json.loads(cluster.ok("topicRoute", "-t", "TBQ3"))
    assert [q["brokerName"] for q in route["queueDatas"]] == ["broker-b"]  # broker-a was not given the topic


# ------------------------------------------------------------------------------ 4. deleteSubGroup -r of nothing

def test_delete_sub_group_removing_offsets_of_no_group_is_not_found(cluster: Cluster) -> None:
    r = cluster.run("deleteSubGroup", "-c", CLUSTER, "-g", "NOSUCH", "-r", "true")
    assert r.returncode == 3 and "does not exist" in r.stderr and "success" not in r.stdout, r.stdout + r.stderr
    cluster.ok("updateSubGroup", "-c", CLUSTER, "-g", "GR")
    assert "success" in cluster.ok("deleteSubGroup", "-c", CLUSTER, "-g", "GR", "-r", "true")


# ------------------------------------------------------------------------------ 5. queryMsgByOffset bad queue

def test_query_msg_by_offset_of_a_queue_the_topic_has_not_is_not_found(cluster: Cluster) -> None:
    cluster.ok("updateTopic", "-c", CLUSTER, "-t", "TC", "-r", "4", "-w", "4")
    r = cluster.run("queryMsgByOffset", "-t", "TC", "-b", "broker-a", "-i", "9", "-o", "0")
    assert r.returncode == 3 and "queue 9 of topic [TC] does not exist" in r.stderr, r.stdout + r.stderr


# ------------------------------------------------------------------------------ 6. malformed / mixed-up addresses

@pytest.mark.parametrize("args", [("brokerStatus", "-b", "127.0.0.1:abc"),
                                  ("updateTopic", "-b", "broker-a", "-t", "X")])
def test_malformed_broker_address_is_a_usage_error(cluster: Cluster, args: tuple[str, ...]) -> None:
    r = cluster.run(*args)
    assert r.returncode == 2 and r.stdout == "", r.stdout + r.stderr
    line, = r.stderr.strip().splitlines()
    assert f"broker address {args[2]!r}" in line and "expected host:port" in line
    assert line.endswith(f"(see 'mqadmin {args[0]} --help')")


def test_a_server_given_to_the_wrong_option_is_named(cluster: Cluster) -> None:
    as_namesrv = mqadmin("clusterList", "-n", cluster.a.broker_addr)
    assert as_namesrv.returncode == 1
    assert cluster.a.broker_addr in as_namesrv.stderr and "is that a broker's address?" in as_namesrv.stderr
    as_broker = cluster.run("brokerStatus", "-b", cluster.n)
    assert as_broker.returncode == 1
    assert cluster.n in as_broker.stderr and "is that a name server's address?" in as_broker.stderr


# ------------------------------------------------------------------------------ 7. orderTopicConf in routes

def sends_by_broker(c: Cluster, topic: str, count: int = 12) -> Counter[str]:
    """Where a producer (our client, which takes a route's orderTopicConf as its queue list, as Java's
    topicRouteData2TopicPublishInfo) puts ``count`` messages: broker name, or the error's text."""
    async def scenario() -> Counter[str]:
        inst = MQClientInstance(c.n, instance_name=f"order-{topic}")
        await inst.start()
        producer = Producer(f"P{topic}", inst)
        await producer.start()
        got: Counter[str] = Counter()
        try:
            for _ in range(count):
                try:
                    got[(await producer.send(Message(topic, b"x"))).message_queue.broker_name] += 1
                except Exception as e:  # noqa: BLE001 - the test counts what the user would see
                    got[f"error: {e}"[:80]] += 1
        finally:
            await producer.shutdown()
            await inst.shutdown()
        return got
    return asyncio.run(scenario())


def test_order_conf_reaches_routes_only_with_order_message_enable(cluster: Cluster) -> None:
    cluster.ok("updateTopic", "-c", CLUSTER, "-t", "TW", "-r", "4", "-w", "4")
    cluster.ok("updateTopic", "-c", CLUSTER, "-t", "TG", "-r", "4", "-w", "4")
    cluster.ok("updateOrderConf", "-t", "TW", "-m", "put", "-v", "broker-a:4;broker-b:4")
    cluster.ok("updateOrderConf", "-t", "TG", "-m", "put", "-v", "garbage")
    try:
        assert "orderTopicConf" not in json.loads(cluster.ok("topicRoute", "-t", "TW"))
        cluster.ok("wipeWritePerm", "-b", "broker-a")
        try:
            assert sends_by_broker(cluster, "TW") == {"broker-b": 12}  # broker-a drained
        finally:
            cluster.ok("addWritePerm", "-b", "broker-a")
        garbage = sends_by_broker(cluster, "TG")  # a bad orderConf no longer leaves no queue to send to
        assert sum(garbage.values()) == 12 and set(garbage) == {"broker-a", "broker-b"}, garbage
        with order_message_enabled(cluster):  # Apache's orderMessageEnable=true: the client is given it
            assert json.loads(cluster.ok("topicRoute", "-t", "TW"))["orderTopicConf"] == "broker-a:4;broker-b:4"
            got = cluster.ok("getNamesrvConfig")
            assert any(line.split() == ["orderMessageEnable", "=", "true"] for line in got.splitlines()), got
        assert "orderTopicConf" not in json.loads(cluster.ok("topicRoute", "-t", "TW"))
    finally:
        for topic in ("TW", "TG"):
            cluster.ok("updateOrderConf", "-t", topic, "-m", "delete")


# ------------------------------------------------------------------------------ 8. a topic not on the broker given

def test_update_topic_perm_of_a_topic_on_another_broker_names_both(cluster: Cluster) -> None:
    cluster.ok("updateTopic", "-b", cluster.a.broker_addr, "-t", "TA", "-r", "2", "-w", "2")
    r = cluster.run("updateTopicPerm", "-t", "TA", "-b", cluster.b.broker_addr, "-p", "6")
    assert r.returncode == 3 and r.stdout == "", r.stdout + r.stderr
    line, = r.stderr.strip().splitlines()
    assert f"topic [TA] is not on broker broker-b ({cluster.b.broker_addr}); the name server routes it to broker-a" \
        in line, line
    r = cluster.run("updateTopicPerm", "-t", "NoWhere", "-b", cluster.b.broker_addr, "-p", "6")
    assert r.returncode == 3 and "topic [NoWhere] not found in name server" in r.stderr, r.stdout + r.stderr
    out = cluster.ok("updateTopicPerm", "-t", "TA", "-b", cluster.a.broker_addr, "-p", "4")
    assert "success" in out
