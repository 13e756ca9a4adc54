"""A send has one time budget, as Java's sendDefaultImpl: a broker that stops answering uses it up and
no retry stores the message on another broker. Two mqbroker processes (broker-a, broker-b) under one
name server; broker-a is stopped with SIGSTOP, so it accepts the send and stores it once it resumes.

What a user must never see: a send reported failed (or answered SEND_OK by a retry) whose message ends
up stored on both brokers.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from broker_core.client.connection import RemotingError
from broker_core.client.instance import MQClientInstance
from broker_core.client.message import Message
from broker_core.client.producer import Producer, SendResult, SendStatus
from mqadmin.connect import open_remote_admin
from mqadmin.transport.base import TopicInfo
from tests.client.test_client_produce_pull import run
from tests.remoting_broker import BrokerProcess, running_broker

TOPIC = "SplitTopic"
SEND_TIMEOUT_S = 1.0


@pytest.fixture(scope="module")
def brokers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[BrokerProcess, BrokerProcess]]:
    """broker-a and broker-b with TOPIC on both (one queue each, so sends alternate between them)."""
    root = Path(tmp_path_factory.mktemp("budget"))
    with running_broker(root / "a") as a, \
            running_broker(root / "b", broker_name="broker-b", namesrv=a.namesrv_addr) as b:
        admin = open_remote_admin(a.namesrv_addr)
        try:
            admin.update_topic(TopicInfo(TOPIC, 1, 1, 6))
        finally:
            admin.close()
        yield a, b


def _copies(namesrv: str, key: str) -> list[str]:
    """The store hosts of every stored copy of the message keyed ``key``, on every broker of TOPIC."""
    admin = open_remote_admin(namesrv)
    try:
        return sorted(r.store_host for r in admin.query_msg_by_key(TOPIC, key))
    finally:
        admin.close()


def _sends_with_broker_a_stopped(a: BrokerProcess, auto_batch: bool, tag: str) -> dict[str, object]:
    """Two sends while broker-a is stopped (round robin puts one of them on broker-a first): each
    message key and what its send answered (a SendResult or the error)."""
    outcomes: dict[str, object] = {}

    async def go() -> None:
        inst = MQClientInstance(a.namesrv_addr)
        p = Producer(f"Budget{tag}P", inst, send_timeout=SEND_TIMEOUT_S, batch_max_delay_ms=10)
        p.auto_batch = auto_batch
        await p.start()
        for _ in range(50):  # both brokers in the route before broker-a stops
            if len({q.broker_name for q in await p.publish_queues(TOPIC)}) == 2:
                break
            await inst.get_route(TOPIC, refresh=True)
            await asyncio.sleep(0.1)
        await p.send(Message(TOPIC, b"warm"))  # connections to both made by the round robin below
        await p.send(Message(TOPIC, b"warm"))
        os.kill(a.proc.pid, signal.SIGSTOP)
        try:
            for i in range(2):
                key = f"{tag}-{i}"
                t0 = time.monotonic()
                try:
                    outcomes[key] = await p.send(Message(TOPIC, key.encode(), keys=key))
                except RemotingError as e:
                    outcomes[key] = e
                outcomes[key + ":waited"] = time.monotonic() - t0
        finally:
            os.kill(a.proc.pid, signal.SIGCONT)
        await p.shutdown()
        await inst.shutdown()

    run(go())
    return outcomes


def _stored_once_each(a: BrokerProcess, outcomes: dict[str, object], tag: str) -> dict[str, list[str]]:
    """Wait until broker-a, resumed, has stored what it was sent; then every message's copies."""
    keys = [f"{tag}-{i}" for i in range(2)]
    deadline = time.monotonic() + 15
    copies = {k: _copies(a.namesrv_addr, k) for k in keys}
    while any(not c for c in copies.values()) and time.monotonic() < deadline:
        time.sleep(0.2)
        copies = {k: _copies(a.namesrv_addr, k) for k in keys}
    time.sleep(1.0)  # anything still on its way (a late retry) has landed by now
    return {k: _copies(a.namesrv_addr, k) for k in keys}


@pytest.mark.parametrize("auto_batch", [False, True], ids=["direct", "autobatch"])
def test_a_send_to_a_broker_that_stops_answering_is_not_stored_twice(
        brokers: tuple[BrokerProcess, BrokerProcess], auto_batch: bool) -> None:
    a, b = brokers
    tag = "batch" if auto_batch else "direct"
    outcomes = _sends_with_broker_a_stopped(a, auto_batch, tag)
    failed = [k for k in (f"{tag}-0", f"{tag}-1") if isinstance(outcomes[k], RemotingError)]
    answered = [k for k in (f"{tag}-0", f"{tag}-1") if isinstance(outcomes[k], SendResult)]
    # the send that went to the stopped broker used its whole budget there and failed; the other went
    # to broker-b at once
    assert len(failed) == 1 and len(answered) == 1, outcomes
    assert f"wait response from {a.broker_addr} timed out" in str(outcomes[failed[0]])
    assert SEND_TIMEOUT_S - 0.05 < outcomes[failed[0] + ":waited"] < SEND_TIMEOUT_S + 1.0  # type: ignore[operator]
    ok = outcomes[answered[0]]
    assert isinstance(ok, SendResult) and ok.status == SendStatus.SEND_OK
    assert ok.message_queue.broker_name == "broker-b"

    copies = _stored_once_each(a, outcomes, tag)
    # the failed send's message is stored once, by broker-a once it resumed (a timeout never says "not
    # stored"), and never a second time on broker-b by a retry
    assert copies[failed[0]] == [a.broker_addr], copies
    assert copies[answered[0]] == [b.broker_addr], copies
