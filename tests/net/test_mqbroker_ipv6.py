"""mqbroker on an IPv6 address (``--host ::1``, or brokerIP1=::1 in its -c file): the name server, the
broker's remoting port and the gRPC endpoint listen on it, as Apache's broker does; it failed with
"cannot listen for the name server on ::1:P: Address family for hostname not supported". Broker
addresses keep Apache's form, ``ip:port`` with the raw IPv6 text ("::1:10911", split at the last
``:``); ``-n`` takes that and the bracketed "[::1]:9876" alike. Every process is stopped by PID."""

from __future__ import annotations

import asyncio
import socket
from pathlib import Path

import grpc
import pytest
from net_util import Mqbroker, mqadmin

from broker_core.client.consumer_api import PullStatus
from broker_core.client.instance import MQClientInstance
from broker_core.client.message import Message
from broker_core.client.producer import Producer, SendStatus
from broker_core.client.pull_consumer import PullConsumer
from broker_core.net.grpc_v2.stubs import pb, service_pb2_grpc
from tests.client.conftest import create_topic, wait_dispatched


def _ipv6_loopback() -> bool:
    if not socket.has_ipv6:
        return False
    try:
        with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as s:
            s.bind(("::1", 0))
    except OSError:
        return False
    return True


pytestmark = pytest.mark.skipif(not _ipv6_loopback(), reason="no IPv6 loopback (::1) on this machine")

MD = (("x-mq-client-id", "ipv6@1@0@abc"), ("x-mq-language", "PYTHON"), ("x-mq-client-version", "5.1.2"))


def _bracketed(addr: str) -> str:
    host, _, port = addr.rpartition(":")
    return f"[{host}]:{port}"


async def _send_and_pull(namesrv: str, broker_addr: str, topic: str) -> tuple[object, list]:
    inst = MQClientInstance(namesrv)
    try:
        await create_topic(inst, broker_addr, topic, queues=1)
        producer = Producer(topic + "P", inst)
        await producer.start()
        sent = await producer.send(Message(topic, b"over-ipv6", keys=["k6"], properties={"pv": "v6"}))
        await wait_dispatched(inst, topic, sent.message_queue.broker_name, {0: 1})
        consumer = PullConsumer(topic + "C", inst)
        await consumer.start()
        (mq,) = await consumer.fetch_subscribe_queues(topic)
        pulled = await consumer.pull(mq, "*", 0, 32)
        assert pulled.status == PullStatus.FOUND, pulled
        await producer.shutdown()
        await consumer.shutdown()
        return sent, pulled.messages
    finally:
        await inst.shutdown()


def test_mqbroker_on_ipv6_loopback_serves_remoting_and_grpc(tmp_path: Path, procs) -> None:
    b = Mqbroker(tmp_path / "store", "--host", "::1", "--registerNameServerPeriod", "1000")
    procs.append(b)
    assert b.namesrv_addr and b.broker_addr, b.output()
    assert b.namesrv_addr.startswith("::1:") and b.broker_addr.startswith("::1:"), b.output()

    # the route carries Apache's address form; -n takes it raw and bracketed
    for ns in (b.namesrv_addr, _bracketed(b.namesrv_addr)):
        assert b.broker_addr in mqadmin(ns, "clusterList")

    # our client, through the bracketed name server address: send, then pull what the store stamped
    sent, got = asyncio.run(asyncio.wait_for(_send_and_pull(_bracketed(b.namesrv_addr), b.broker_addr, "T6"), 60))
    assert sent.status == SendStatus.SEND_OK
    (msg,) = got
    assert msg.body == b"over-ipv6" and msg.properties["pv"] == "v6"
    assert msg.store_host == ("::1", int(b.broker_addr.rpartition(":")[2]))  # STOREHOSTADDRESS_V6
    assert msg.born_host[0] == "::1"

    # mqadmin reads it back over IPv6
    assert sent.msg_id in mqadmin(b.namesrv_addr, "queryMsgByKey", "-t", "T6", "-k", "k6")
    assert "Keys:                [k6]" in mqadmin(b.namesrv_addr, "queryMsgById", "-t", "T6", "-i", sent.offset_msg_id)

    # the gRPC endpoint listens on ::1 (and answers a route for the endpoint dialled there)
    grpc_port = int(next(line for line in b.lines if "gRPC v2 endpoint boot success on ::1:" in line)
                    .rpartition(":")[2])
    dialled = pb.Endpoints(scheme=pb.AddressScheme.IPv6, addresses=[pb.Address(host="::1", port=grpc_port)])
    with grpc.insecure_channel(f"[::1]:{grpc_port}") as channel:
        stub = service_pb2_grpc.MessagingServiceStub(channel)
        route = stub.QueryRoute(pb.QueryRouteRequest(topic=pb.Resource(name="T6"), endpoints=dialled),
                                metadata=MD, timeout=10)
    assert route.status.code == pb.Code.OK, route.status
    assert route.message_queues and all(q.broker.endpoints == dialled for q in route.message_queues), route


def test_broker_ip1_ipv6_in_the_config_file(tmp_path: Path, procs) -> None:
    conf = tmp_path / "b.conf"
    conf.write_text("brokerIP1=::1\n")
    b = Mqbroker(tmp_path / "store", config=conf)
    procs.append(b)
    assert b.namesrv_addr and b.namesrv_addr.startswith("::1:"), b.output()
    assert b.broker_addr and b.broker_addr.startswith("::1:"), b.output()
    assert b.broker_addr in mqadmin(_bracketed(b.namesrv_addr), "clusterList")
