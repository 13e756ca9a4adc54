"""Parked long-polling pulls woken together must not freeze the mqbroker process.

Why: a probe parked 100 PULL_MESSAGEs (10 connections x 10, suspend 60 s) on an empty queue, closed
the clients and sent one ~4 MB message: every parked pull, for clients long gone, read, copied and
encoded the message on the event loop, and the name server in the same process answered
GET_BROKER_CLUSTER_INFO after 5.1 s (14.5 s with 500; with 500 live readers a producer's send timed
out although the message was stored, and Java retried it into a duplicate). Now a parked pull whose
connection closes is dropped at once (brokerStatus pullLongPollingWaiting goes down), and each read
and answer encoding runs on a pull-lane worker, as Apache's PullRequestHoldService hands woken pulls
to the pullMessageExecutor.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from net_util import RawClient, mqadmin, records

from broker_core.client.instance import MQClientInstance
from broker_core.client.message import Message
from broker_core.client.producer import Producer
from broker_core.remoting import RemotingCommand, RequestCode, ResponseCode, encode_frame
from broker_core.remoting.bodies import MessageQueue
from tests.remoting_broker import BrokerProcess, running_broker
from tests.waiting import wait_for

CONNECTIONS = 10
PULLS_EACH = 10
LIVE_EACH = 20  # 200 live readers: the inline reads held the name server ~2.5 s, the producer's send ~2 s
BIG = 4_190_000  # under the 4 MiB maxMessageSize
NAMESRV_BOUND_S = 1.5  # the stall was 5.1 s for 100 parked pulls; an idle broker answers in ~0.04 s


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    with running_broker(Path(tmp_path_factory.mktemp("lpwake"))) as b:
        yield b


def make_topic(b: BrokerProcess, topic: str) -> None:
    mqadmin(b.namesrv_addr, "updateTopic", "-b", b.broker_addr, "-t", topic, "-r", "1", "-w", "1")
    wait_for(lambda: "queueDatas" in mqadmin(b.namesrv_addr, "topicRoute", "-t", topic), f"{topic} routed", 30)


def park_pulls(b: BrokerProcess, topic: str, group: str, each: int = PULLS_EACH) -> list[RawClient]:
    """CONNECTIONS clients, each with ``each`` long-polling pulls (60 s) of queue 0 from offset 0."""
    clients = []
    for c in range(CONNECTIONS):
        client = RawClient(b.broker_addr, timeout=30)
        ext = {"consumerGroup": f"{group}{c}", "topic": topic, "queueId": "0", "queueOffset": "0",
               "maxMsgNums": "32", "sysFlag": "6", "commitOffset": "0", "suspendTimeoutMillis": "60000",
               "subVersion": "0", "subscription": "*", "expressionType": "TAG"}
        client.send_raw(b"".join(encode_frame(RemotingCommand.request(RequestCode.PULL_MESSAGE, ext, opaque=i + 1))
                                 for i in range(each)))
        clients.append(client)
    return clients


def parked(b: BrokerProcess) -> int:
    """brokerStatus's pullLongPollingWaiting."""
    admin = RawClient(b.broker_addr)
    try:
        r = admin.call(RequestCode.GET_BROKER_RUNTIME_INFO)
        assert r.code == ResponseCode.SUCCESS, r.remark
        return int(json.loads(r.body)["table"]["pullLongPollingWaiting"])
    finally:
        admin.close()


def send_big(b: BrokerProcess, topic: str) -> float:
    """One BIG message to queue 0 with our producer; seconds the send took."""
    async def run() -> float:
        inst = MQClientInstance(b.namesrv_addr)
        producer = Producer("LpWakeP", inst)
        await producer.start()
        try:
            started = time.monotonic()
            await producer.send(Message(topic, b"Z" * BIG),
                                mq=MessageQueue(topic=topic, broker_name=b.broker_name, queue_id=0))
            return time.monotonic() - started
        finally:
            await producer.shutdown()
            await inst.shutdown()

    return asyncio.run(run())


class NamesrvProbe:
    """GET_BROKER_CLUSTER_INFO to the name server every 50 ms on a thread; the slowest answer seen."""

    def __init__(self, b: BrokerProcess) -> None:
        self.client = RawClient(b.namesrv_addr, timeout=60)
        self.worst = 0.0
        self.answers = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            started = time.monotonic()
            r = self.client.call(RequestCode.GET_BROKER_CLUSTER_INFO)
            assert r.code == ResponseCode.SUCCESS
            self.worst = max(self.worst, time.monotonic() - started)
            self.answers += 1
            self._stop.wait(0.05)

    def __enter__(self) -> NamesrvProbe:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(60)
        self.client.close()


def test_parked_pulls_of_closed_clients_are_dropped_and_a_big_message_does_not_stall_the_namesrv(
        broker: BrokerProcess) -> None:
    topic = "LpWakeClosed"
    make_topic(broker, topic)
    clients = park_pulls(broker, topic, "LpC")
    wait_for(lambda: parked(broker) == CONNECTIONS * PULLS_EACH, "the pulls to park", 30)
    for c in clients:
        c.close()
    # nothing woke them: the parked pulls of the closed connections are gone at once, not at their 60 s
    wait_for(lambda: parked(broker) == 0, "the closed clients' parked pulls to be dropped", 10)
    with NamesrvProbe(broker) as probe:
        time.sleep(0.3)
        send_big(broker, topic)
        time.sleep(2.0)
    assert probe.answers > 5
    assert probe.worst < NAMESRV_BOUND_S, f"the name server answered after {probe.worst:.2f} s"


def test_woken_pulls_of_live_clients_read_off_the_event_loop(broker: BrokerProcess) -> None:
    topic = "LpWakeLive"
    make_topic(broker, topic)
    before = parked(broker)
    clients = park_pulls(broker, topic, "LpL", LIVE_EACH)
    try:
        wait_for(lambda: parked(broker) == before + CONNECTIONS * LIVE_EACH, "the pulls to park", 30)
        answers: list[RemotingCommand] = []

        def read(c: RawClient) -> None:
            for _ in range(LIVE_EACH):
                got = c.recv(60)
                assert got is not None
                answers.append(got)

        readers = [threading.Thread(target=read, args=(c,), daemon=True) for c in clients]
        for t in readers:
            t.start()
        with NamesrvProbe(broker) as probe:
            time.sleep(0.3)
            took = send_big(broker, topic)
            for t in readers:
                t.join(60)
        assert len(answers) == CONNECTIONS * LIVE_EACH
        for a in answers:  # every woken pull answered with the message, in one frame
            assert a.code == ResponseCode.SUCCESS, a.remark
            (m,) = records(a.body)
            assert m.queue_offset == 0 and m.body == b"Z" * BIG
            assert a.ext_fields["nextBeginOffset"] == "1"
        assert took < 3.0, f"the producer's send took {took:.2f} s (a Java producer times out at 3 s and retries)"
        # inline on the loop: 2.1 s here (the 200 reads and encodes one after another); off it: ~0.2 s
        assert probe.worst < 1.0, f"the name server answered after {probe.worst:.2f} s"
    finally:
        for c in clients:
            c.close()
