"""Big messages read through a real mqbroker: every answer fits the 16 MiB frame clients read.

Why: a pull answer had no byte limit. 40 messages of 512 KiB in one queue, read by ``mqadmin
consumeMessage -n`` (pulls of 32), made a 16.7 MB answer; the client refused the frame ("frame ...
length 16783453 exceeds the frame limit 16777216"), the command failed with "connection to ... closed"
and no consumer could ever read the queue. A read now ends as DefaultMessageStore's isTheBatchFull ends
it (maxTransferBytesOnMessageInMemory, 256 KiB, the first message always going out alone), and a pop
over several queues stops at the same byte budget, so each answer is small and nothing is skipped.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from net_util import RawClient, mqadmin, records, run_mqadmin

from broker_core.client.instance import MQClientInstance
from broker_core.client.message import Message
from broker_core.client.producer import Producer
from broker_core.remoting import RequestCode, ResponseCode
from broker_core.remoting.bodies import MessageQueue
from broker_core.remoting.frame import DEFAULT_FRAME_MAX_LENGTH
from tests.remoting_broker import BrokerProcess, running_broker
from tests.waiting import wait_for

KIB = 1024
BIG = 512 * KIB


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    with running_broker(Path(tmp_path_factory.mktemp("big"))) as b:
        yield b


def make_topic(b: BrokerProcess, topic: str, queues: int) -> None:
    mqadmin(b.namesrv_addr, "updateTopic", "-b", b.broker_addr, "-t", topic, "-r", str(queues), "-w", str(queues))
    wait_for(lambda: "queueDatas" in mqadmin(b.namesrv_addr, "topicRoute", "-t", topic), f"{topic} routed", 30)


def body(i: int) -> bytes:
    return b"%04d|" % i + b"x" * BIG


def send_big(b: BrokerProcess, topic: str, count: int, queues: int) -> None:
    """``count`` messages of 512 KiB with our producer, message i to queue i % queues."""
    async def run() -> None:
        inst = MQClientInstance(b.namesrv_addr)
        producer = Producer("BigP", inst)
        await producer.start()
        try:
            for i in range(count):
                mq = MessageQueue(topic=topic, broker_name=b.broker_name, queue_id=i % queues)
                await producer.send(Message(topic, body(i)), mq=mq)
        finally:
            await producer.shutdown()
            await inst.shutdown()

    asyncio.run(run())


def test_consume_message_reads_40_messages_of_512_kib_over_the_network(broker: BrokerProcess) -> None:
    topic = "Big40"
    make_topic(broker, topic, 1)
    send_big(broker, topic, 40, 1)
    r = run_mqadmin("consumeMessage", "-n", broker.namesrv_addr, "-t", topic, "-c", "40")
    assert r.returncode == 0, r.stderr[-2000:]
    offsets = [int(o) for o in re.findall(r"^MSGID: \S+ MessageExt \[.*?queueOffset=(\d+),", r.stdout, re.M)]
    assert offsets == list(range(40)), offsets
    assert "connection" not in r.stderr

    # a raw PULL of 32 gets one message (512 KiB > 256 KiB: the first goes out alone) and the offset after it
    bc = RawClient(broker.broker_addr, timeout=30)
    try:
        for offset in (0, 39):
            ext = {"consumerGroup": "BigRawG", "topic": topic, "queueId": "0", "queueOffset": str(offset),
                   "maxMsgNums": "32", "sysFlag": "4", "commitOffset": "0", "suspendTimeoutMillis": "0",
                   "subscription": "*", "subVersion": "0", "expressionType": "TAG"}
            resp = bc.call(RequestCode.PULL_MESSAGE, ext)
            assert resp.code == ResponseCode.SUCCESS, resp.remark
            got = records(resp.body)
            assert [m.queue_offset for m in got] == [offset] and got[0].body == body(offset)
            assert resp.ext_fields["nextBeginOffset"] == str(offset + 1)
    finally:
        bc.close()


def test_pop_hands_out_big_messages_in_answers_that_fit_a_frame(broker: BrokerProcess) -> None:
    topic = "BigPop"
    make_topic(broker, topic, 4)
    send_big(broker, topic, 40, 4)
    bc = RawClient(broker.broker_addr, timeout=30)
    seen: list[int] = []
    try:
        for _ in range(60):
            ext = {"consumerGroup": "BigPopG", "topic": topic, "queueId": "-1", "maxMsgNums": "32",
                   "invisibleTime": "60000", "pollTime": "1000", "bornTime": str(int(time.time() * 1000)),
                   "initMode": "0"}
            resp = bc.call(RequestCode.POP_MESSAGE, ext)
            if resp.code != ResponseCode.SUCCESS:
                break
            assert len(resp.body) < DEFAULT_FRAME_MAX_LENGTH // 8, len(resp.body)
            seen += [int(m.body[:4]) for m in records(resp.body)]
            if len(seen) >= 40:
                break
    finally:
        bc.close()
    assert sorted(seen) == list(range(40))
