"""One real mqbroker per module for the client tests; each test makes its own topics and groups."""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from broker_core.client.instance import MQClientInstance
from broker_core.client.message import Message
from broker_core.client.producer import Producer
from broker_core.remoting import RequestCode, ResponseCode
from broker_core.remoting.bodies import GetConsumerListByGroupResponseBody
from broker_core.remoting.headers import CreateTopicRequestHeader, GetConsumerListByGroupRequestHeader
from tests.net.harness import Servers
from tests.remoting_broker import REPO, BrokerProcess, running_broker

_names = itertools.count()
# Retries and transaction checks on a test's time scale: every delay level 1 s, checks after 1 s.
FAST_CONF = {"messageDelayLevel": " ".join(["1s"] * 18), "transactionTimeOut": "1000",
             "transactionCheckInterval": "1000"}
# The broker publishes a group's new %RETRY% topic to the name server only at its periodic registration
# (30 s; Java registers at once when HEART_BEAT creates it): register every 2 s so retry tests stay short.
FAST_ARGS = ("--registerNameServerPeriod", "2000")


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    with running_broker(Path(tmp_path_factory.mktemp("mqbroker")), FAST_CONF,
                        extra_args=FAST_ARGS) as b:
        yield b


@pytest.fixture
def servers(tmp_path: Path) -> Iterator[Servers]:
    """A name server and one broker in this process (``tests.net.harness.Servers``), for tests that
    stop or restart the name server; the broker registers every 30 s (the default)."""
    s = Servers(tmp_path)
    try:
        s.add_broker()
        yield s
    finally:
        s.close()


def free_port() -> int:
    """A loopback port nobody listens on now (the OS's choice), for a server that must keep its address."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def name_server(tmp_path: Path) -> Iterator[str]:
    """A name server process of its own, so that it outlives the broker's restarts."""
    port = free_port()
    env = dict(os.environ, PYTHONPATH=str(REPO))
    with (tmp_path / "namesrv.log").open("w") as log:
        proc = subprocess.Popen([sys.executable, "-m", "broker_core.mqbroker", "--namesrv-only", "--host", "127.0.0.1",
                                 "--namesrvPort", str(port)], stdout=log, stderr=subprocess.STDOUT, env=env)
        try:
            deadline = time.monotonic() + 30
            while "boot success" not in (tmp_path / "namesrv.log").read_text():
                assert proc.poll() is None and time.monotonic() < deadline, (tmp_path / "namesrv.log").read_text()
                time.sleep(0.1)
            yield f"127.0.0.1:{port}"
        finally:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                proc.kill()


@pytest.fixture
def unique() -> str:
    return f"t{next(_names)}"


async def create_topic(inst: MQClientInstance, broker_addr: str, topic: str, queues: int = 4,
                       attributes: str | None = None) -> None:
    """UPDATE_AND_CREATE_TOPIC then wait until the name server routes it."""
    header = CreateTopicRequestHeader(topic=topic, default_topic="TBW102", read_queue_nums=queues,
                                      write_queue_nums=queues, perm=6, topic_filter_type="SINGLE_TAG",
                                      attributes=attributes)
    inst.check(await inst.invoke(broker_addr, RequestCode.UPDATE_AND_CREATE_TOPIC, header))
    for _ in range(50):
        if await inst.get_route(topic, refresh=True):
            return
        await asyncio.sleep(0.1)
    raise AssertionError(f"no route for {topic}")


async def create_group(inst: MQClientInstance, broker_addr: str, group: str) -> None:
    """UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, as an admin does: a commit alone never creates a group."""
    body = json.dumps({"groupName": group}).encode()
    inst.check(await inst.invoke(broker_addr, RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, None, body))


async def produce(inst: MQClientInstance, topic: str, n: int, prefix: str) -> None:
    """``n`` messages with bodies ``{prefix}0``.., sent one by one by a producer of their own."""
    p = Producer(topic + prefix + "P", inst)
    await p.start()
    for i in range(n):
        await p.send(Message(topic, f"{prefix}{i}".encode()))
    await p.shutdown()


async def wait_dispatched(inst: MQClientInstance, topic: str, broker_name: str, want: dict[int, int],
                          timeout: float = 10.0) -> None:
    """Wait until each queue's max offset reaches ``want[queue_id]``: the broker answers a send once the
    commitlog has it and dispatches to the consume queue just after (reput), as RocketMQ does."""
    from broker_core.client.consumer_api import ConsumerApi
    from broker_core.remoting.bodies import MessageQueue

    api = ConsumerApi(inst, "probe")
    deadline = asyncio.get_running_loop().time() + timeout
    for qid, n in want.items():
        mq = MessageQueue(topic=topic, broker_name=broker_name, queue_id=qid)
        while await api.max_offset(mq) < n:
            if asyncio.get_running_loop().time() > deadline:
                raise AssertionError(f"{mq} not dispatched up to {n} within {timeout}s")
            await asyncio.sleep(0.02)


async def consumer_ids(admin: MQClientInstance, broker_addr: str, group: str) -> set[str]:
    """The group's consumers as the broker knows them (what mqadmin consumerConnection shows)."""
    resp = await admin.invoke(broker_addr, RequestCode.GET_CONSUMER_LIST_BY_GROUP,
                              GetConsumerListByGroupRequestHeader(consumer_group=group))
    if resp.code != ResponseCode.SUCCESS or not resp.body:
        return set()
    return set(GetConsumerListByGroupResponseBody.from_json(resp.body).consumer_id_list)
