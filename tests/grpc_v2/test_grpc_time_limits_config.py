"""The gRPC endpoint's time limits are broker config keys (the proxy's ProxyConfig names and defaults):
grpcClientConsumerMinLongPollingTimeoutMillis / grpcClientConsumerMaxLongPollingTimeoutMillis (5 s / 20 s)
and minInvisibleTimeMillsForRecv / maxInvisibleTimeMills (10 s / 12 h).

Why: they were constants, so an empty ReceiveMessage always parked at least 5 s and the invisible
duration a receive may ask was fixed at [10 s, 12 h], whatever the operator configured; Apache's proxy
reads all four from its config. Here they come from mqbroker's -c file, getBrokerConfig shows them,
updateBrokerConfig changes them for the next request, and a value out of range is refused at start."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from google.protobuf.duration_pb2 import Duration

from broker_core.net.grpc_v2.stubs import pb, service_pb2_grpc
from tests.net.net_util import run_mqadmin as mqadmin
from tests.remoting_broker import BrokerProcess, running_broker

MD = (("x-mq-client-id", "limits@1@0@abc"), ("x-mq-language", "PYTHON"), ("x-mq-client-version", "5.1.2"))
R = pb.Resource
KEYS = {"grpcClientConsumerMinLongPollingTimeoutMillis": "1000",
        "grpcClientConsumerMaxLongPollingTimeoutMillis": "15000",
        "minInvisibleTimeMillsForRecv": "2000",
        "maxInvisibleTimeMills": "60000"}


@pytest.fixture(scope="module")
def process(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    with running_broker(Path(tmp_path_factory.mktemp("grpc-time-limits")), KEYS) as b:
        assert mqadmin("updateTopic", "-n", b.namesrv_addr, "-b", b.broker_addr, "-t", "Empty").returncode == 0
        yield b


@pytest.fixture(scope="module")
def stub(process: BrokerProcess) -> Iterator[service_pb2_grpc.MessagingServiceStub]:
    assert process.grpc_addr is not None
    with grpc.insecure_channel(process.grpc_addr) as ch:
        yield service_pb2_grpc.MessagingServiceStub(ch)


def receive(stub: service_pb2_grpc.MessagingServiceStub, invisible_ms: int, polling_ms: int = 1000) -> tuple[
        pb.Status, float]:
    """A ReceiveMessage of the empty topic: its status and how long the answer took."""
    req = pb.ReceiveMessageRequest(group=R(name="GLimits"), message_queue=pb.MessageQueue(topic=R(name="Empty"), id=0),
                                   batch_size=4, invisible_duration=Duration(seconds=invisible_ms // 1000,
                                                                             nanos=invisible_ms % 1000 * 1_000_000),
                                   long_polling_timeout=Duration(seconds=polling_ms // 1000,
                                                                 nanos=polling_ms % 1000 * 1_000_000))
    t0 = time.monotonic()
    items = list(stub.ReceiveMessage(req, metadata=MD, timeout=polling_ms / 1000 + 10))
    return items[0].status, time.monotonic() - t0


def test_an_empty_receive_long_polls_for_the_configured_minimum(stub: service_pb2_grpc.MessagingServiceStub) -> None:
    got, took = receive(stub, 30_000, polling_ms=500)  # asked below the minimum: raised to 1000 ms, not 5 s
    assert got.code == pb.Code.MESSAGE_NOT_FOUND, got
    assert 0.8 <= took < 3.0, took


def test_invisible_durations_are_held_to_the_configured_range(process: BrokerProcess,
                                                              stub: service_pb2_grpc.MessagingServiceStub) -> None:
    below, _ = receive(stub, 1500)
    assert below.code == pb.Code.ILLEGAL_INVISIBLE_TIME and "[2000 ms, 60000 ms]" in below.message, below
    above, _ = receive(stub, 61_000)
    assert above.code == pb.Code.ILLEGAL_INVISIBLE_TIME and "[2000 ms, 60000 ms]" in above.message, above
    inside, _ = receive(stub, 3000)  # refused by the 10 s default; taken here
    assert inside.code == pb.Code.MESSAGE_NOT_FOUND, inside
    change = pb.ChangeInvisibleDurationRequest(group=R(name="GLimits"), topic=R(name="Empty"),
                                               receipt_handle="0 1 30000 0 0 broker-a 0 0 0",
                                               invisible_duration=Duration(seconds=61))
    changed = stub.ChangeInvisibleDuration(change, metadata=MD, timeout=10).status
    assert changed.code == pb.Code.ILLEGAL_INVISIBLE_TIME and "60000 ms" in changed.message, changed
    # getBrokerConfig shows what the file set; updateBrokerConfig applies to the next receive
    n = process.namesrv_addr
    shown = mqadmin("getBrokerConfig", "-n", n, "-b", process.broker_addr)
    assert shown.returncode == 0, shown.stderr
    listed = {k.strip(): v.strip() for k, _, v in (line.partition("=") for line in shown.stdout.splitlines())}
    assert {k: listed.get(k) for k in KEYS} == KEYS, shown.stdout
    up = mqadmin("updateBrokerConfig", "-n", n, "-b", process.broker_addr, "-k", "minInvisibleTimeMillsForRecv",
                 "-v", "5000")
    assert up.returncode == 0, up.stdout + up.stderr
    try:
        now_below, _ = receive(stub, 3000)
        assert now_below.code == pb.Code.ILLEGAL_INVISIBLE_TIME and "[5000 ms, 60000 ms]" in now_below.message, \
            now_below
        # the pair is checked together: a minimum above the maximum is refused, the running values kept
        bad = mqadmin("updateBrokerConfig", "-n", n, "-b", process.broker_addr, "-k", "minInvisibleTimeMillsForRecv",
                      "-v", "70000")
        assert bad.returncode == 1 and "maxInvisibleTimeMills must be at least minInvisibleTimeMillsForRecv" in \
            bad.stderr, bad.stdout + bad.stderr
    finally:
        assert mqadmin("updateBrokerConfig", "-n", n, "-b", process.broker_addr, "-k",
                       "minInvisibleTimeMillsForRecv", "-v", "2000").returncode == 0
