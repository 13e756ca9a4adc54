"""A broker group whose master is gone, only its slave (brokerId 1, brokerRole=SLAVE) registered:
nothing is written to the slave, as in Apache RocketMQ. A SEND_MESSAGE to it is rejected
(SendMessageProcessor.rejectRequest: SYSTEM_BUSY [REJECTREQUEST]) and stores nothing; a producer sends
to masters only (findBrokerAddressInPublish: "The broker[broker-a] not exist"); mqadmin's -c fan-out
goes to the cluster's masters (fetchMasterAddrByClusterName), brokerStatus -c to masters and slaves.
A gRPC client that dials a slave is routed to the masters only; a slave reports brokerActive false;
updateBrokerConfig -c -a and getBrokerConfig -c reach the slaves too."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from dataclasses import dataclass

import grpc
import pytest
from net_util import RawClient
from net_util import run_mqadmin as mqadmin

from broker_core.client.instance import BrokerError, MQClientInstance
from broker_core.client.message import Message
from broker_core.client.producer import Producer
from broker_core.net.grpc_v2.stubs import pb, service_pb2_grpc
from broker_core.remoting import RequestCode, ResponseCode
from broker_core.remoting.bodies import MessageQueue
from broker_core.remoting.headers import GetMaxOffsetRequestHeader, SendMessageRequestHeader
from tests.remoting_broker import BrokerProcess, running_broker
from tests.waiting import wait_for

SLAVE = {"brokerId": "1", "brokerRole": "SLAVE"}


@dataclass
class Group:
    namesrv: str
    master_b: BrokerProcess  # broker-b's master, DefaultCluster (its process holds the name server)
    slave_b: BrokerProcess  # broker-b's slave, beside its master
    slave_a: BrokerProcess  # broker-a's slave, DefaultCluster: broker-a has no master
    slave_c: BrokerProcess  # broker-c's slave, cluster C2: a cluster with no master at all


@pytest.fixture(scope="module")
def group(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Group]:
    root = tmp_path_factory.mktemp("slaves")
    with running_broker(root / "b", broker_name="broker-b") as b, \
            running_broker(root / "b1", SLAVE, broker_name="broker-b", namesrv=b.namesrv_addr) as b1, \
            running_broker(root / "a1", SLAVE, namesrv=b.namesrv_addr) as a1, \
            running_broker(root / "c1", SLAVE, broker_name="broker-c", cluster="C2", namesrv=b.namesrv_addr) as c1:
        for addr in (a1.broker_addr, b.broker_addr):  # topic configs: a slave takes them (Apache's too)
            made = mqadmin("updateTopic", "-n", b.namesrv_addr, "-b", addr, "-t", "TS")
            assert made.returncode == 0, made.stdout + made.stderr
        wait_for(lambda: all(x.broker_addr in mqadmin("clusterList", "-n", b.namesrv_addr).stdout
                             for x in (b1, a1, c1)), "the slaves registered", 20)
        yield Group(b.namesrv_addr, b, b1, a1, c1)


def _max_offset(addr: str, topic: str, queue_id: int) -> int:
    c = RawClient(addr)
    try:
        resp = c.call(RequestCode.GET_MAX_OFFSET, GetMaxOffsetRequestHeader(topic=topic, queue_id=queue_id)
                      .to_ext_fields())
    finally:
        c.close()
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    return int(resp.ext_fields["offset"])


def test_a_send_to_a_slave_is_rejected_and_stores_nothing(group: Group) -> None:
    h = SendMessageRequestHeader(producer_group="PG", topic="TS", default_topic="TBW102", default_topic_queue_nums=4,
                                 queue_id=1, sys_flag=0, born_timestamp=int(time.time() * 1000), flag=0, properties="")
    c = RawClient(group.slave_a.broker_addr)
    try:
        resp = c.call(RequestCode.SEND_MESSAGE, h.to_ext_fields(), b"direct-to-slave")
    finally:
        c.close()
    assert resp.code == ResponseCode.SYSTEM_BUSY, (resp.code, resp.remark)
    assert resp.remark == "[REJECTREQUEST]system busy, start flow control for a while"
    assert _max_offset(group.slave_a.broker_addr, "TS", 1) == 0


def test_a_producer_does_not_send_to_a_slave_when_the_master_is_gone(group: Group) -> None:
    async def send() -> BaseException | None:
        inst = MQClientInstance(group.namesrv)
        p = Producer("PG_slave", inst)
        await p.start()
        await inst.cluster_info()  # the client knows broker-a, by its slave's address only
        try:
            await p.send(Message("TS", b"lost"), MessageQueue(topic="TS", broker_name="broker-a", queue_id=2))
        except BrokerError as e:
            return e
        finally:
            await p.shutdown()
            await inst.shutdown()
        return None

    err = asyncio.run(send())
    assert err is not None and "The broker[broker-a] not exist" in str(err), err
    assert _max_offset(group.slave_a.broker_addr, "TS", 2) == 0


@pytest.mark.parametrize("args", [("updateTopic", "-t", "TY"), ("updateSubGroup", "-g", "GY")])
def test_cluster_fan_out_goes_to_masters_only(group: Group, args: tuple[str, ...]) -> None:
    done = mqadmin(args[0], "-n", group.namesrv, "-c", "DefaultCluster", *args[1:])
    assert done.returncode == 0, done.stdout + done.stderr
    assert group.master_b.broker_addr in done.stdout, done.stdout
    assert group.slave_a.broker_addr not in done.stdout, done.stdout
    assert group.slave_b.broker_addr not in done.stdout, done.stdout
    code = RequestCode.GET_ALL_TOPIC_CONFIG if args[0] == "updateTopic" else \
        RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG
    c = RawClient(group.slave_a.broker_addr)
    try:
        on_slave = c.call(code).body.decode()
    finally:
        c.close()
    assert f'"{args[2]}"' not in on_slave, on_slave


def test_delete_topic_of_a_cluster_with_no_master_names_its_slaves(group: Group) -> None:
    done = mqadmin("deleteTopic", "-n", group.namesrv, "-c", "C2", "-t", "TS")
    assert done.returncode != 0, done.stdout + done.stderr
    line = done.stderr.strip()
    assert len(line.splitlines()) == 1 and "Traceback" not in line, line
    assert "has no master broker" in line and group.slave_c.broker_addr in line, line


def test_broker_status_of_a_cluster_lists_its_slaves(group: Group) -> None:
    done = mqadmin("brokerStatus", "-n", group.namesrv, "-c", "DefaultCluster")
    assert done.returncode == 0, done.stdout + done.stderr
    addrs = {line.split()[0] for line in done.stdout.splitlines() if line.strip()}
    assert addrs == {group.master_b.broker_addr, group.slave_b.broker_addr, group.slave_a.broker_addr}, addrs


MD = (("x-mq-client-id", "slave-route@1@0@abc"), ("x-mq-language", "PYTHON"), ("x-mq-client-version", "5.1.2"))


def _grpc_port(b: BrokerProcess) -> int:
    assert b.grpc_addr is not None
    return int(b.grpc_addr.rpartition(":")[2])


def _route_and_assignment(via: BrokerProcess, topic: str) -> tuple[object, object]:
    """QueryRoute and QueryAssignment (group G1) as a gRPC client that dialled ``via`` asks them."""
    port = _grpc_port(via)
    ep = pb.Endpoints(scheme=pb.AddressScheme.IPv4, addresses=[pb.Address(host="127.0.0.1", port=port)])
    with grpc.insecure_channel(f"127.0.0.1:{port}") as ch:
        stub = service_pb2_grpc.MessagingServiceStub(ch)
        route = stub.QueryRoute(pb.QueryRouteRequest(topic=pb.Resource(name=topic), endpoints=ep),
                                metadata=MD, timeout=10)
        assignment = stub.QueryAssignment(pb.QueryAssignmentRequest(topic=pb.Resource(name=topic),
                                                                    group=pb.Resource(name="G1"), endpoints=ep),
                                          metadata=MD, timeout=10)
    return route, assignment


def _brokers(queues: object) -> set[tuple[str, int, int]]:
    """(broker name, broker id, gRPC port) of each message queue listed."""
    return {(q.broker.name, q.broker.id, q.broker.endpoints.addresses[0].port) for q in queues}  # type: ignore


def test_grpc_through_a_slave_routes_to_its_master_only(group: Group) -> None:
    for addr in (group.master_b.broker_addr, group.slave_b.broker_addr):
        made = mqadmin("updateTopic", "-n", group.namesrv, "-b", addr, "-t", "TG")
        assert made.returncode == 0, made.stdout + made.stderr
    master = {("broker-b", 0, _grpc_port(group.master_b))}
    # TG: broker-b, master and slave; TS: broker-b's master and broker-a's slave (broker-a has no master)
    for via, topic in ((group.slave_b, "TG"), (group.slave_a, "TS")):
        route, assignment = _route_and_assignment(via, topic)
        assert route.status.code == pb.Code.OK, route.status  # type: ignore[attr-defined]
        assert _brokers(route.message_queues) == master, (via.broker_addr, topic, route)  # type: ignore
        assert assignment.status.code == pb.Code.OK, assignment.status  # type: ignore[attr-defined]
        assert _brokers(a.message_queue for a in assignment.assignments) == master, assignment  # type: ignore


def test_grpc_through_a_slave_whose_master_is_gone_offers_no_queue(group: Group) -> None:
    made = mqadmin("updateTopic", "-n", group.namesrv, "-b", group.slave_a.broker_addr, "-t", "TA")
    assert made.returncode == 0, made.stdout + made.stderr
    route, assignment = _route_and_assignment(group.slave_a, "TA")  # TA: on broker-a's slave only
    for answer in (route, assignment):
        assert answer.status.code == pb.Code.TOPIC_NOT_FOUND, answer  # type: ignore[attr-defined]
        assert answer.status.message == ("topic TA not found at the name server (this broker is a slave of "  # type: ignore
                                         "broker-a: it routes to masters only)"), answer
    assert not route.message_queues  # type: ignore[attr-defined]
    assert _max_offset(group.slave_a.broker_addr, "TA", 0) == 0


def test_a_slave_reports_itself_not_active(group: Group) -> None:
    for b, active in ((group.slave_a, "false"), (group.slave_b, "false"), (group.master_b, "true")):
        done = mqadmin("brokerStatus", "-n", group.namesrv, "-b", b.broker_addr)
        assert done.returncode == 0, done.stdout + done.stderr
        lines = [ln.split(":", 1)[1].strip() for ln in done.stdout.splitlines() if ln.startswith("brokerActive ")]
        assert lines == [active], (b.broker_addr, done.stdout)


def test_update_broker_config_all_of_a_cluster_reaches_its_slaves(group: Group) -> None:
    done = mqadmin("updateBrokerConfig", "-n", group.namesrv, "-c", "DefaultCluster", "-a", "true",
                   "-k", "maxMessageSize", "-v", "4194305")
    assert done.returncode == 0, done.stdout + done.stderr
    updated = {ln.rsplit(", ", 1)[1] for ln in done.stdout.splitlines() if ln.startswith("update broker config")}
    assert updated == {group.master_b.broker_addr, group.slave_b.broker_addr, group.slave_a.broker_addr}, done.stdout
    for b in (group.slave_a, group.slave_b):
        seen = mqadmin("getBrokerConfig", "-n", group.namesrv, "-b", b.broker_addr)
        assert any(ln.split() == ["maxMessageSize", "=", "4194305"] for ln in seen.stdout.splitlines()), seen.stdout


def test_get_broker_config_of_a_cluster_prints_its_slaves(group: Group) -> None:
    done = mqadmin("getBrokerConfig", "-n", group.namesrv, "-c", "DefaultCluster")
    assert done.returncode == 0, done.stdout + done.stderr
    heads = [ln for ln in done.stdout.splitlines() if ln.startswith("============")]
    m, s_b, s_a = group.master_b.broker_addr, group.slave_b.broker_addr, group.slave_a.broker_addr
    assert heads == ["============Master: NO_MASTER============",
                     f"============My Master: NO_MASTER=====Slave: {s_a}============",
                     f"============Master: {m}============",
                     f"============My Master: {m}=====Slave: {s_b}============"], heads
