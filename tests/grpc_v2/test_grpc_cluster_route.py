"""gRPC routes in a cluster: one name server and two mqbroker processes (broker-a, broker-b), each with its
own gRPC port on 127.0.0.1.

Why: QueryRoute and QueryAssignment answered with the local broker's queues only, so a gRPC client that
dialled broker-a never sent to or received from broker-b, and ``mqadmin wipeWritePerm -b broker-a`` (a
route change at the name server) did not move its sends away from broker-a. They now answer from the
name server's route, every broker with its own gRPC endpoint (learnt with GET_BROKER_CONFIG).
Every process is stopped by its PID, even when a test fails.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

import grpc
import pytest

from broker_core.net.grpc_v2.cluster_route import BrokerQueues, NamesrvClusterRoutes
from broker_core.net.grpc_v2.stubs import pb, service_pb2_grpc
from broker_core.remoting import RemotingCommand, RequestCode, ResponseCode
from broker_core.remoting.bodies import TopicRouteData
from tests.net.net_util import Mqbroker, RawClient, mqadmin, run_mqadmin
from tests.remoting_broker import BrokerProcess, running_broker
from tests.waiting import wait_for

from .conftest import run_scenario

MD = (("x-mq-client-id", "route@1@0@abc"), ("x-mq-language", "PYTHON"), ("x-mq-client-version", "5.1.2"))
QUEUES = 4
NAMES = ("broker-a", "broker-b")
# No test here is about the 5 s / 10 s defaults: an empty receive long-polls 1 s (with the clients'
# await of 1 s) and a receive may hide a message for 1 s up, so the tests wait out less.
SHORT_WAITS = {"grpcClientConsumerMinLongPollingTimeoutMillis": "1000", "minInvisibleTimeMillsForRecv": "1000"}


@dataclass
class Cluster:
    namesrv: str
    brokers: dict[str, BrokerProcess]
    home: Path

    def grpc_port(self, name: str) -> int:
        addr = self.brokers[name].grpc_addr
        assert addr is not None
        return int(addr.rpartition(":")[2])


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    root = Path(tmp_path_factory.mktemp("grpc-cluster"))
    home = root / "home"
    home.mkdir()
    ns = Mqbroker(root / "ns", "--namesrv-only", expect_broker=False)
    try:
        assert ns.namesrv_addr is not None
        with ExitStack() as stack:
            brokers = {name: stack.enter_context(running_broker(
                root / name, SHORT_WAITS, broker_name=name, namesrv=ns.namesrv_addr,
                extra_args=("--registerNameServerPeriod", "1000"))) for name in NAMES}
            yield Cluster(ns.namesrv_addr, brokers, home)
    finally:
        ns.stop()


def create_topic(c: Cluster, topic: str, queues: int = QUEUES) -> None:
    """updateTopic -c on the cluster (every master), then wait for the name server to route both brokers."""
    mqadmin(c.namesrv, "updateTopic", "-c", "DefaultCluster", "-t", topic, "-r", str(queues), "-w", str(queues))
    ns = RawClient(c.namesrv)
    try:
        def both() -> bool:
            r = ns.call(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic})
            return r.code == ResponseCode.SUCCESS and \
                len(TopicRouteData.from_json(r.body).queue_datas) == len(NAMES)
        wait_for(both, f"{topic} routed on both brokers", 20, 0.1)
    finally:
        ns.close()


def stored(b: BrokerProcess, topic: str, queues: int = QUEUES) -> int:
    """Messages of ``topic`` on one broker: the sum of its queues' max offsets."""
    client = RawClient(b.broker_addr)
    try:
        return sum(int(client.call(RequestCode.GET_MAX_OFFSET, {"topic": topic, "queueId": str(q)})
                       .ext_fields["offset"]) for q in range(queues))
    finally:
        client.close()


def endpoints(port: int) -> object:
    return pb.Endpoints(scheme=pb.AddressScheme.IPv4, addresses=[pb.Address(host="127.0.0.1", port=port)])


def query_route(c: Cluster, via: str, topic: str) -> object:
    port = c.grpc_port(via)
    with grpc.insecure_channel(f"127.0.0.1:{port}") as ch:
        stub = service_pb2_grpc.MessagingServiceStub(ch)
        return stub.QueryRoute(pb.QueryRouteRequest(topic=pb.Resource(name=topic), endpoints=endpoints(port)),
                               metadata=MD, timeout=10)


def by_broker(route: object) -> dict[str, list[tuple[int, int]]]:
    out: dict[str, list[tuple[int, int]]] = {}
    for q in route.message_queues:  # type: ignore[attr-defined]
        out.setdefault(q.broker.name, []).append((q.id, q.permission))
    return out


def test_query_route_and_assignment_list_every_broker_with_its_own_endpoint(cluster: Cluster) -> None:
    create_topic(cluster, "ClusterRouteT")
    route = query_route(cluster, "broker-a", "ClusterRouteT")
    assert route.status.code == pb.Code.OK, route.status
    rw = [(i, pb.Permission.READ_WRITE) for i in range(QUEUES)]
    assert by_broker(route) == {"broker-a": rw, "broker-b": rw}
    ends = {q.broker.name: q.broker.endpoints for q in route.message_queues}
    # this broker: what the client dialled; the other: its host and the gRPC port it reports
    assert ends["broker-a"] == endpoints(cluster.grpc_port("broker-a"))
    assert ends["broker-b"] == endpoints(cluster.grpc_port("broker-b"))
    assert all(q.broker.id == 0 and list(q.accept_message_types) == [pb.MessageType.NORMAL]
               for q in route.message_queues)
    # asked through broker-b: the same brokers, broker-a at its own endpoint
    other = query_route(cluster, "broker-b", "ClusterRouteT")
    assert {q.broker.name: q.broker.endpoints for q in other.message_queues} == \
        {"broker-a": endpoints(cluster.grpc_port("broker-a")), "broker-b": endpoints(cluster.grpc_port("broker-b"))}

    port = cluster.grpc_port("broker-a")
    with grpc.insecure_channel(f"127.0.0.1:{port}") as ch:
        stub = service_pb2_grpc.MessagingServiceStub(ch)
        got = stub.QueryAssignment(pb.QueryAssignmentRequest(topic=pb.Resource(name="ClusterRouteT"),
                                                             group=pb.Resource(name="ClusterRouteG"),
                                                             endpoints=endpoints(port)), metadata=MD, timeout=10)
    assert got.status.code == pb.Code.OK, got.status
    assert sorted((a.message_queue.broker.name, a.message_queue.id, a.message_queue.permission)
                  for a in got.assignments) == [("broker-a", -1, pb.Permission.READ_WRITE),
                                                ("broker-b", -1, pb.Permission.READ_WRITE)]


def test_a_producer_on_broker_a_sends_to_both_brokers(cluster: Cluster) -> None:
    topic = "ClusterSendT"
    create_topic(cluster, topic)
    out = run_scenario(cluster.brokers["broker-a"].grpc_addr or "", cluster.home, "produce", topic=topic, count=16)
    assert not out["errors"] and len(out["sent"]) == 16
    counts = wait_for(lambda: (n := {name: stored(b, topic) for name, b in cluster.brokers.items()})
                      and sum(n.values()) == 16 and n, "16 messages stored", 20, 0.1)
    assert counts["broker-a"] > 0 and counts["broker-b"] > 0, counts


def test_a_simple_consumer_on_broker_a_receives_and_acks_broker_b_messages(cluster: Cluster) -> None:
    """One queue per broker: the official SimpleConsumer receives from the route's queues in turn (each
    receive pops the whole broker of its queue), so with 4 queues a broker it long-polled up to three
    empty queues of one broker (5 s each, the default minimum) before it tried the other."""
    topic, group = "ClusterConsumeT", "ClusterConsumeG"
    create_topic(cluster, topic, queues=1)
    for name in cluster.brokers:  # one message stored on each broker (remoting, -b names the broker)
        mqadmin(cluster.namesrv, "sendMessage", "-t", topic, "-b", name, "-p", f"on-{name}")
    wait_for(lambda: all(stored(b, topic, 1) == 1 for b in cluster.brokers.values()), "one message per broker",
             20, 0.1)
    out = run_scenario(cluster.brokers["broker-a"].grpc_addr or "", cluster.home, "simple_consume", topic=topic,
                       group=group, expect=2, timeout=40, invisible=3, **{"await": 1})
    assert sorted(m["body"] for m in out["received"]) == ["on-broker-a", "on-broker-b"], out
    assert not out["errors"], out["errors"]  # acks included: a failed ack raises in the scenario
    # acked: the group's next receive, after the invisible time (3 s from the last receipt) has passed,
    # gets nothing again; its client starts up meanwhile, and its 4 s make at least three 1 s receives:
    # both brokers, and past the revive of a message that had not been acked
    again = run_scenario(cluster.brokers["broker-a"].grpc_addr or "", cluster.home, "simple_consume", topic=topic,
                         group=group, expect=1, timeout=4, invisible=3, start_at=out["last_received_at"] + 3.5,
                         **{"await": 1})
    assert again["received"] == [], again


def test_a_push_consumer_on_broker_a_gets_both_brokers_messages(cluster: Cluster) -> None:
    """QueryAssignment hands out every broker (id -1 each), so the push consumer polls broker-b too."""
    topic, group = "ClusterPushT", "ClusterPushG"
    create_topic(cluster, topic)
    for name in cluster.brokers:
        mqadmin(cluster.namesrv, "sendMessage", "-t", topic, "-b", name, "-p", f"push-{name}")
    out = run_scenario(cluster.brokers["broker-a"].grpc_addr or "", cluster.home, "push_consume", topic=topic,
                       group=group, expect=2, timeout=40)
    assert sorted(m["body"] for m in out["received"]) == ["push-broker-a", "push-broker-b"], out


def test_wipe_write_perm_of_broker_a_moves_grpc_sends_to_broker_b(cluster: Cluster) -> None:
    topic = "ClusterWipeT"
    create_topic(cluster, topic)
    mqadmin(cluster.namesrv, "wipeWritePerm", "-b", "broker-a")
    try:
        # the route the name server gives is seen within the route cache time (seconds)
        wait_for(lambda: by_broker(query_route(cluster, "broker-a", topic)).get("broker-a") ==
                 [(i, pb.Permission.READ) for i in range(QUEUES)], "broker-a read-only in the gRPC route", 15, 0.2)
        before = stored(cluster.brokers["broker-a"], topic)
        out = run_scenario(cluster.brokers["broker-a"].grpc_addr or "", cluster.home, "produce", topic=topic,
                           count=8)
        assert not out["errors"] and len(out["sent"]) == 8
        wait_for(lambda: stored(cluster.brokers["broker-b"], topic) == 8, "8 messages on broker-b", 20, 0.1)
        assert stored(cluster.brokers["broker-a"], topic) == before == 0
    finally:
        mqadmin(cluster.namesrv, "addWritePerm", "-b", "broker-a")


def test_broker_config_reports_the_bound_grpc_port(cluster: Cluster) -> None:
    """GET_BROKER_CONFIG carries grpcServerPort = the port the endpoint bound (a free one here): how the
    other brokers learn where to send this broker's gRPC clients."""
    for name, b in cluster.brokers.items():
        client = RawClient(b.broker_addr)
        try:
            r = client.call(RequestCode.GET_BROKER_CONFIG)
        finally:
            client.close()
        assert r.code == ResponseCode.SUCCESS
        props = dict(line.split("=", 1) for line in r.body.decode().splitlines() if "=" in line)
        assert props["grpcServerPort"] == str(cluster.grpc_port(name))


def test_a_broker_with_grpc_off_is_left_out_of_grpc_routes(cluster: Cluster, tmp_path: Path) -> None:
    """broker-c runs without a gRPC endpoint (--grpc-port 0, so GET_BROKER_CONFIG says grpcServerPort=0): its
    queues are left out (its clients could reach it nowhere), the others are listed as before."""
    topic = "ClusterNoGrpcT"
    conf = tmp_path / "c.conf"
    conf.write_text("brokerName=broker-c\nbrokerClusterName=DefaultCluster\n")
    c = Mqbroker(tmp_path / "c", "--broker-only", "-n", cluster.namesrv, "--grpc-port", "0", config=conf,
                 expect_namesrv=False)
    try:
        assert "gRPC v2 endpoint boot success" not in c.output()
        mqadmin(cluster.namesrv, "updateTopic", "-c", "DefaultCluster", "-t", topic, "-r", "2", "-w", "2")
        ns = RawClient(cluster.namesrv)
        try:
            wait_for(lambda: len(TopicRouteData.from_json(ns.call(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic})
                                                          .body).queue_datas) == 3, "3 brokers routed", 20, 0.1)
        finally:
            ns.close()
        route = query_route(cluster, "broker-a", topic)
        assert route.status.code == pb.Code.OK
        assert sorted(by_broker(route)) == ["broker-a", "broker-b"]
        log = cluster.brokers["broker-a"].log_text()
        assert log.count(f"broker {c.broker_addr} has no gRPC endpoint (grpcServerPort=0)") == 1, log[-3000:]
    finally:
        c.stop()


class _CountingRoutes(NamesrvClusterRoutes):
    """Name server requests counted, answered by a stub: no sockets."""

    def __init__(self, answer: RemotingCommand | None) -> None:
        super().__init__(["127.0.0.1:1"], "127.0.0.1:2", lambda: 0)
        self.answer = answer
        self.asked = 0

    async def _request(self, addr: str, cmd: RemotingCommand) -> RemotingCommand:
        self.asked += 1
        await asyncio.sleep(0.05)
        if self.answer is None:
            raise ConnectionRefusedError("refused")
        return self.answer


def test_routes_are_cached_shared_and_absent_without_a_name_server() -> None:
    """A burst of QueryRoute costs one name server request; none reachable (or no route) is None, which
    makes the service answer with this broker's own queues, as before."""
    from broker_core.remoting.bodies import BrokerData, QueueData

    data = TopicRouteData(broker_datas=[BrokerData(cluster="C", broker_name="me", broker_addrs={0: "127.0.0.1:2"})],
                          queue_datas=[QueueData(broker_name="me", read_queue_nums=2, write_queue_nums=2, perm=4)])
    ok = RemotingCommand.request(0, body=data.to_json())
    ok.code = ResponseCode.SUCCESS

    async def burst(routes: NamesrvClusterRoutes) -> list:
        return await asyncio.gather(*(routes.topic_route("T") for _ in range(20)))

    routes = _CountingRoutes(ok)
    got = asyncio.run(burst(routes))
    assert routes.asked == 1
    assert {r.brokers for r in got} == {(BrokerQueues("me", 4, 2, 2, None),)}
    down = _CountingRoutes(None)
    assert asyncio.run(burst(down)) == [None] * 20 and down.asked == 1


def test_a_group_with_only_its_slave_registered_offers_no_queue_through_that_slave() -> None:
    """A name server that keeps a master-less group's queue data (Apache's keeps a prime slave's): the
    slave this client dialled is not offered as a writable broker (it takes no writes, every send failed
    "message store is in slave mode"); the route has no queue of that group, QueryAssignment then finds
    no readable one."""
    from types import SimpleNamespace

    from broker_core.net.grpc_v2.service import MessagingService
    from broker_core.remoting.bodies import BrokerData, QueueData
    from broker_core.store.topic_config import TopicConfig

    data = TopicRouteData(broker_datas=[BrokerData(cluster="C", broker_name="a", broker_addrs={1: "127.0.0.1:2"})],
                          queue_datas=[QueueData(broker_name="a", read_queue_nums=4, write_queue_nums=4, perm=6)])
    ok = RemotingCommand.request(0, body=data.to_json())
    ok.code = ResponseCode.SUCCESS
    routes = _CountingRoutes(ok)
    route = asyncio.run(routes.topic_route("T"))
    assert route is not None and route.brokers == () and route.masterless == ("a",)
    service = MessagingService.__new__(MessagingService)  # only what _route_brokers reads
    service.broker = SimpleNamespace(is_slave=True, config=SimpleNamespace(broker_name="a"))  # type: ignore
    service.cluster_routes = routes
    slave_topic = TopicConfig("T", read_queue_nums=4, write_queue_nums=4, perm=6)
    assert asyncio.run(service._route_brokers("T", slave_topic, endpoints(1))) == []


def test_a_topic_only_on_broker_b_is_routed_through_broker_a(cluster: Cluster) -> None:
    """README: a client that dials one broker's endpoint reaches every broker of the topic. QueryRoute and
    QueryAssignment looked the topic up in the dialled broker's own table first, so a topic created on
    broker-b alone was TOPIC_NOT_FOUND through broker-a ('failed to fetch topic:OnlyOnB route.'). The route
    now comes from the name server, and the accepted message type from broker-b's topic config (as the
    proxy's ClusterMetadataService asks a broker of the route, GET_TOPIC_CONFIG)."""
    topic = "OnlyOnB"
    mqadmin(cluster.namesrv, "updateTopic", "-b", cluster.brokers["broker-b"].broker_addr, "-t", topic,
            "-r", "2", "-w", "2", "-a", "+message.type=DELAY")
    ns = RawClient(cluster.namesrv)
    try:
        wait_for(lambda: ns.call(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic}).code == ResponseCode.SUCCESS,
                 f"{topic} routed", 20, 0.1)
    finally:
        ns.close()
    for via in NAMES:
        route = query_route(cluster, via, topic)
        assert route.status.code == pb.Code.OK, (via, route.status)
        assert by_broker(route) == {"broker-b": [(0, pb.Permission.READ_WRITE), (1, pb.Permission.READ_WRITE)]}
        assert {q.broker.name: q.broker.endpoints for q in route.message_queues} == \
            {"broker-b": endpoints(cluster.grpc_port("broker-b"))}
        assert all(list(q.accept_message_types) == [pb.MessageType.DELAY] for q in route.message_queues), via
    port = cluster.grpc_port("broker-a")
    with grpc.insecure_channel(f"127.0.0.1:{port}") as ch:
        got = service_pb2_grpc.MessagingServiceStub(ch).QueryAssignment(
            pb.QueryAssignmentRequest(topic=pb.Resource(name=topic), group=pb.Resource(name="OnlyOnBG"),
                                      endpoints=endpoints(port)), metadata=MD, timeout=10)
    assert got.status.code == pb.Code.OK, got.status
    assert [(a.message_queue.broker.name, a.message_queue.id) for a in got.assignments] == [("broker-b", -1)]
    # the official producer dialling broker-a sends its delay messages to broker-b
    out = run_scenario(cluster.brokers["broker-a"].grpc_addr or "", cluster.home, "produce", topic=topic, count=2,
                       delay_s=1)
    assert not out["errors"] and len(out["sent"]) == 2, out
    client = RawClient(cluster.brokers["broker-b"].broker_addr)
    try:
        wait_for(lambda: sum(int(client.call(RequestCode.GET_MAX_OFFSET, {"topic": topic, "queueId": str(q)})
                                 .ext_fields["offset"]) for q in range(2)) == 2, "2 messages on broker-b", 20, 0.1)
    finally:
        client.close()
    # no route at the name server (and none here): still TOPIC_NOT_FOUND
    missing = query_route(cluster, "broker-a", "NoSuchTopicAnywhere")
    assert missing.status.code == pb.Code.TOPIC_NOT_FOUND, missing.status


@pytest.mark.parametrize("started_with", ["no name server (-n ';')", "its own name server (no -n)"])
def test_a_broker_given_a_name_server_at_runtime_routes_grpc_clients_to_the_whole_cluster(
        tmp_path: Path, started_with: str) -> None:
    """broker-b starts apart from broker-a's name server, then ``updateBrokerConfig -k namesrvAddr`` points it
    there: broker-b registers, and its gRPC endpoint (QueryRoute, and so an official client's sends) must
    list broker-a too, as Apache's proxy takes routes from the name server the broker uses now. Started with
    no name server at all, the endpoint had no name server routes to redirect, so until a restart its
    clients saw broker-b's queues only. Setting namesrvAddr to empty is refused and changes nothing."""
    topic = "JoinedLaterT"
    period = ("--registerNameServerPeriod", "500")
    with running_broker(tmp_path / "a", broker_name="broker-a", extra_args=period) as a, \
            running_broker(tmp_path / "b", broker_name="broker-b", extra_args=period,
                           namesrv=";" if started_with.startswith("no") else None) as b:
        c = Cluster(a.namesrv_addr, {"broker-a": a, "broker-b": b}, tmp_path / "home")
        c.home.mkdir()
        if started_with.startswith("no"):
            assert "and no name server (cluster DefaultCluster" in b.log_text()
            wait_for(lambda: "No name server: -n names none, so the broker registers nowhere" in b.log_text(),
                     "the boot lines to say broker-b has no name server")
        mqadmin(c.namesrv, "updateTopic", "-b", b.broker_addr, "-t", topic, "-r", str(QUEUES), "-w", str(QUEUES))
        assert sorted(by_broker(query_route(c, "broker-b", topic))) == ["broker-b"]  # alone, as it is

        mqadmin(c.namesrv, "updateBrokerConfig", "-b", b.broker_addr, "-k", "namesrvAddr", "-v", c.namesrv)
        create_topic(c, topic)  # on every master of the cluster: waits until the name server routes both
        both = {name: endpoints(c.grpc_port(name)) for name in NAMES}
        wait_for(lambda: {q.broker.name: q.broker.endpoints for q in query_route(c, "broker-b", topic).message_queues}
                 == both, "broker-b's gRPC route to list broker-a at its own endpoint", 15, 0.2)
        out = run_scenario(b.grpc_addr or "", c.home, "produce", topic=topic, count=16)
        assert not out["errors"] and len(out["sent"]) == 16, out
        counts = wait_for(lambda: (n := {name: stored(x, topic) for name, x in c.brokers.items()})
                          and sum(n.values()) == 16 and n, "16 messages stored", 20, 0.1)
        assert counts["broker-a"] > 0 and counts["broker-b"] > 0, counts

        r = run_mqadmin("updateBrokerConfig", "-n", c.namesrv, "-b", b.broker_addr, "-k", "namesrvAddr", "-v", "")
        assert r.returncode == 1 and r.stderr.startswith(
            "mqadmin updateBrokerConfig: invalid broker config: namesrvAddr: empty"), r.stdout + r.stderr
        time.sleep(1.5)  # two registration periods: broker-b still registered, its route unchanged
        assert {q.broker.name: q.broker.endpoints for q in query_route(c, "broker-b", topic).message_queues} == both
