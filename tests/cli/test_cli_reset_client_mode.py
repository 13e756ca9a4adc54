"""resetOffsetByTime / skipAccumulatedMessage over -n against a real mqbroker in client mode
(useServerSideResetOffset=false), with a live Python PushConsumer.

Why these tests: in client mode the broker ignores a request's queueId/offset (Broker2Client.resetOffset)
and builds the consumers' table from the request's timestamp. mqadmin used to reset queue by queue with
timestamp 0, so a live group was rewound to the start of every queue whatever -s said (once per queue),
and it printed its own table rather than the broker's. As Apache's ResetOffsetByTimeCommand, mqadmin
now sends the whole topic once per broker with the real timestamp (-1 for skipAccumulatedMessage), and
with no consumer online (CONSUMER_NOT_ONLINE) it commits the offsets itself, as Apache's fallback
(ResetOffsetByTimeOldCommand.resetOffset, UPDATE_CONSUMER_OFFSET per queue) does.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.cli.test_cli_remote import mqadmin
from tests.remoting_broker import BrokerProcess, running_broker

N = 10  # old and new messages each


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    with running_broker(Path(tmp_path_factory.mktemp("cli-reset-client-mode")), {"useServerSideResetOffset": "false"},
                        extra_args=("--registerNameServerPeriod", "1000")) as b:
        yield b


def _ok(*args: str) -> str:
    r = mqadmin(*args)
    assert r.returncode == 0, (args, r.stdout, r.stderr)
    return r.stdout


def _wait(cond: Callable[[], bool], timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.2)
    return True


def _table(out: str) -> dict[int, int]:
    """queueId -> offset of the printed ``#brokerName #queueId #offset`` table."""
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("#brokerName"))
    return {int(q): int(o) for _, q, o in (line.split() for line in lines[start + 1:] if line.strip())}


def _committed(n: str, group: str, topic: str) -> dict[int, int]:
    """The group's stored offsets, as the dry run reads them."""
    plan = json.loads(_ok("resetOffsetByTime", "-n", n, "-g", group, "-t", topic, "-s", "now", "--dry-run",
                          "--output", "json"))
    return {q["queueId"]: q["consumerOffset"] for q in plan["queues"]}


def _max_offsets(n: str, group: str, topic: str) -> dict[int, int]:
    plan = json.loads(_ok("resetOffsetByTime", "-n", n, "-g", group, "-t", topic, "-s", "now", "--dry-run",
                          "--output", "json"))
    return {q["queueId"]: q["brokerOffset"] for q in plan["queues"]}


class _Group:
    """Topic ``topic`` (2 queues) holding old0..9 then new0..9, ``ts_mid`` the time between them, and a
    live PushConsumer of group ``group`` that consumed them all and committed the ends (``ends``)."""

    def __init__(self, n: str, topic: str, group: str) -> None:
        from broker_core.client.instance import MQClientInstance
        from broker_core.client.producer import Producer
        from broker_core.client.push_consumer import PushConsumer
        from broker_core.client.rebalance import ConsumeFromWhere
        from broker_core.client.sync_bridge import LoopThread

        self.n, self.topic, self.group = n, topic, group
        self.consumed: list[str] = []
        self.loop = LoopThread(f"test-reset-{group}")
        self.inst = MQClientInstance(n)
        self.producer = Producer(group + "P", self.inst)
        self.consumer = PushConsumer(group, self.inst, consume_from=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET)
        self.consumer.subscribe(topic, "*")
        self.consumer.register_concurrently(self._listen)
        self.ts_mid = 0
        self.ends: dict[int, int] = {}

    def _listen(self, msgs: list) -> object:
        from broker_core.client.push_consumer import ConsumeConcurrentlyStatus

        self.consumed.extend(m.body.decode() for m in msgs)
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    async def _produce(self, prefix: str) -> None:
        from broker_core.client.message import Message

        for i in range(N):
            await self.producer.send(Message(self.topic, f"{prefix}{i}".encode()))

    def start(self) -> None:
        _ok("updateTopic", "-n", self.n, "-c", "DefaultCluster", "-t", self.topic, "-r", "2", "-w", "2")
        _ok("updateSubGroup", "-n", self.n, "-c", "DefaultCluster", "-g", self.group)
        self.loop.run(self.producer.start(), timeout=30)
        self.loop.run(self._produce("old"), timeout=30)
        time.sleep(0.05)
        self.ts_mid = int(time.time() * 1000)
        time.sleep(0.05)
        self.loop.run(self._produce("new"), timeout=30)
        self.loop.run(self.consumer.start(), timeout=30)
        assert _wait(lambda: len(self.consumed) >= 2 * N, 30), self.consumed
        self.ends = _max_offsets(self.n, self.group, self.topic)
        assert self.committed_ends(), "the consumer never committed"

    def committed_ends(self) -> bool:
        return _wait(lambda: _committed(self.n, self.group, self.topic) == self.ends, 20)

    def stop_consumer(self) -> None:
        self.loop.run(self.consumer.shutdown(), timeout=30)

    def close(self) -> None:
        async def stop() -> None:
            await self.consumer.shutdown()
            await self.producer.shutdown()
            await self.inst.shutdown()

        try:
            self.loop.run(stop(), timeout=30)
        finally:
            self.loop.close()


@pytest.fixture
def live(broker: BrokerProcess, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[_Group]:
    from broker_core.client import push_consumer

    # the consumer commits its offsets every 0.5 s instead of Java's 5 s: the setup and the tests wait for
    # those commits (committed_ends), and what they check is which offsets are committed, not how often
    monkeypatch.setattr(push_consumer, "PERSIST_INTERVAL_S", 0.5)
    name = "".join(ch for ch in request.node.name if ch.isalnum())[-40:]
    g = _Group(broker.namesrv_addr, "T" + name, "G" + name)
    try:
        g.start()
        yield g
    finally:
        g.close()


def test_live_reset_to_the_middle_consumes_only_the_newer_messages_again(broker: BrokerProcess, live: _Group) -> None:
    out = _ok("resetOffsetByTime", "-n", live.n, "-g", live.group, "-t", live.topic, "-s", str(live.ts_mid))
    assert sum(_table(out).values()) == N, out  # the broker's table: the old ones stay consumed
    # one request for the whole topic: the consumer is told once, not once per queue
    told = f"reset offset sent. topic={live.topic}, group={live.group}"
    assert _wait(lambda: told in broker.log_text(), 5), "the broker told no consumer"
    time.sleep(0.5)
    assert broker.log_text().count(told) == 1, broker.log_text().count(told)
    assert _wait(lambda: len(live.consumed) >= 3 * N, 20), live.consumed
    time.sleep(3)  # a rewind to the start would deliver the old ones too by now
    assert sorted(live.consumed[2 * N:]) == sorted(f"new{i}" for i in range(N)), live.consumed[2 * N:]
    assert live.committed_ends()


def test_live_skip_consumes_nothing_again(live: _Group) -> None:
    out = _ok("skipAccumulatedMessage", "-n", live.n, "-g", live.group, "-t", live.topic)
    assert _table(out) == live.ends, out
    time.sleep(3)
    assert live.consumed[2 * N:] == []


def test_live_reset_of_one_queue_to_an_offset_moves_that_queue_only(broker: BrokerProcess, live: _Group) -> None:
    to = live.ends[0] - 2
    out = _ok("resetOffsetByTime", "-n", live.n, "-g", live.group, "-t", live.topic, "-s", "now",
              "-b", broker.broker_addr, "-q", "0", "-o", str(to))
    assert f"reset consumer offset to {to}" in out, out
    assert _wait(lambda: len(live.consumed) >= 2 * N + 2, 20), live.consumed
    time.sleep(3)
    assert len(live.consumed) == 2 * N + 2, live.consumed[2 * N:]  # queue 1 was not rewound
    assert live.committed_ends()


def test_offline_reset_and_skip_commit_the_offsets(live: _Group) -> None:
    live.stop_consumer()
    r = mqadmin("resetOffsetByTime", "-n", live.n, "-g", live.group, "-t", live.topic, "-s", str(live.ts_mid))
    assert r.returncode == 0, r.stdout + r.stderr
    middle = _committed(live.n, live.group, live.topic)
    assert sum(middle.values()) == N and middle == _table(r.stdout), (middle, r.stdout)
    r = mqadmin("skipAccumulatedMessage", "-n", live.n, "-g", live.group, "-t", live.topic)
    assert r.returncode == 0, r.stdout + r.stderr
    assert _committed(live.n, live.group, live.topic) == live.ends
