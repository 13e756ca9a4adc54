"""BatchCQ inner-batch records (one commitlog record holding a whole batch: SYSFLAG INNER_BATCH_FLAG |
NEED_UNWRAP_FLAG, properties INNER_NUM/INNER_BASE) over the network, against a real mqbroker.

- mqadmin queryMsgById / queryMsgByUniqueKey over -n show the stored record as it is (Apache's
  viewMessage and queryMessage decode without unwrapping), as --store does, and not its first inner
  message; a pull still hands the consumer the individual messages;
- a SQL92 long-poll pull parked on a BatchCQ queue is answered as soon as a batch arrives that holds a
  message its selector matches (the pull judges each inner message, so the wake-up must too), and not
  woken by a batch none of whose messages it matches;
- a TAG subscription gets the messages of ``Producer.send_batch`` batches (one record, no outer TAGS)
  whose own TAGS it names, by pull and by a long-poll woken when such a batch arrives.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from net_util import RawClient, mqadmin, run_mqadmin

from broker_core.client.instance import MQClientInstance
from broker_core.client.message import Message
from broker_core.client.producer import Producer
from broker_core.client.pull_consumer import PullConsumer
from broker_core.remoting import RequestCode, ResponseCode
from broker_core.remoting.bodies import MessageQueue
from broker_core.remoting.headers import SendMessageRequestHeaderV2
from broker_core.store.codec.batch import BatchItem, encode_batch
from broker_core.store.codec.properties import encode_properties
from tests.remoting_broker import BrokerProcess, running_broker
from tests.waiting import wait_for


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    with running_broker(Path(tmp_path_factory.mktemp("bcq")), {"enablePropertyFilter": "true"}) as b:
        yield b


def batch_cq_topic(b: BrokerProcess, topic: str) -> None:
    mqadmin(b.namesrv_addr, "updateTopic", "-b", b.broker_addr, "-t", topic, "-r", "1", "-w", "1",
            "-a", "+queue.type=BatchCQ")
    wait_for(lambda: "queueDatas" in mqadmin(b.namesrv_addr, "topicRoute", "-t", topic), f"{topic} routed", 30)


def send_inner_batch(b: BrokerProcess, topic: str, uniq_key: str, items: list[BatchItem]) -> dict[str, str]:
    """SEND_BATCH_MESSAGE with a batch-level UNIQ_KEY: a BatchCQ topic stores it as one inner-batch record."""
    header = SendMessageRequestHeaderV2(a="BcqP", b=topic, c="TBW102", d=4, e=0, f=0, g=int(time.time() * 1000),
                                        h=0, i=encode_properties({"UNIQ_KEY": uniq_key, "WAIT": "true"}), m=True)
    bc = RawClient(b.broker_addr)
    try:
        r = bc.call(RequestCode.SEND_BATCH_MESSAGE, header.to_ext_fields(), encode_batch(items))
    finally:
        bc.sock.close()
    assert r.code == ResponseCode.SUCCESS, r.remark
    return r.ext_fields


def items(n: int) -> list[BatchItem]:
    return [BatchItem(b"inner%d" % i, {"TAGS": "TagA", "KEYS": f"BatchT-key{i}", "UNIQ_KEY": f"INNERKEY{i}"})
            for i in range(n)]


def test_admin_queries_over_the_network_show_the_inner_batch_record_itself(broker: BrokerProcess) -> None:
    ns, topic, key = broker.namesrv_addr, "BcqView", "7F0000010000BCQ00000000000000001"
    batch_cq_topic(broker, topic)
    sent = send_inner_batch(broker, topic, key, items(3))
    offset_msg_id = sent["msgId"].split(",")[0]
    wait_for(lambda: run_mqadmin("queryMsgByUniqueKey", "-n", ns, "-t", topic, "-i", key).returncode == 0,
             "the batch indexed", 30, 0.2)
    for out in (mqadmin(ns, "queryMsgById", "-t", topic, "-i", offset_msg_id),
                mqadmin(ns, "queryMsgByUniqueKey", "-t", topic, "-i", key)):
        assert "System Flag:         192\n" in out and "Queue Offset:        0\n" in out, out
        assert f"UNIQ_KEY={key}" in out and "INNER_NUM=3" in out, out
        assert "INNERKEY0" not in out and "TAGS=TagA" not in out, out
    # a pull (what a consumer and queryMsgByOffset read) still sees the individual messages
    out = mqadmin(ns, "queryMsgByOffset", "-t", topic, "-b", broker.broker_name, "-i", "0", "-o", "2")
    assert "UNIQ_KEY=INNERKEY2" in out and "KEYS=BatchT-key2" in out, out


def test_sql92_long_poll_on_a_batch_cq_wakes_when_an_inner_message_matches(broker: BrokerProcess) -> None:
    topic = "BcqSql"
    batch_cq_topic(broker, topic)

    async def scenario() -> tuple[float, list[bytes], str]:
        inst = MQClientInstance(broker.namesrv_addr)
        consumer = PullConsumer("BcqSqlG", inst)
        await consumer.start()
        try:
            mq = MessageQueue(topic=topic, broker_name=broker.broker_name, queue_id=0)
            await inst.get_route(topic, refresh=True)
            pull = asyncio.create_task(consumer.pull(mq, "a > 5", 0, 32, block_ms=10000, expression_type="SQL92"))
            await asyncio.sleep(1.0)  # the pull is parked by now
            await asyncio.to_thread(send_inner_batch, broker, topic, "7F0000010000BCQ00000000000000002",
                                    [BatchItem(b"one", {"a": "1"}), BatchItem(b"two", {"a": "2"})])
            await asyncio.sleep(1.0)
            assert not pull.done(), "a batch of messages the selector refuses woke the pull"
            await asyncio.to_thread(send_inner_batch, broker, topic, "7F0000010000BCQ00000000000000003",
                                    [BatchItem(b"nine", {"a": "9"})])
            sent_at = time.monotonic()
            result = await pull
            return time.monotonic() - sent_at, [m.body for m in result.messages], result.status.name
        finally:
            await consumer.shutdown()
            await inst.shutdown()

    waited, bodies, status = asyncio.run(scenario())
    assert (status, bodies) == ("FOUND", [b"nine"])
    assert waited < 1.0, f"answered {waited:.2f} s after the send"


async def _send_batches(b: BrokerProcess, topic: str, batches: list[list[tuple[bytes, str]]],
                        producer: Producer | None = None) -> None:
    """Each batch through our producer's send_batch: on a BatchCQ topic one inner-batch record whose
    outer record has no TAGS, each message its own."""
    if producer is None:
        inst = MQClientInstance(b.namesrv_addr)
        own = Producer("BcqTagP", inst)
        await own.start()
        try:
            await _send_batches(b, topic, batches, own)
        finally:
            await own.shutdown()
            await inst.shutdown()
        return
    for batch in batches:
        await producer.send_batch([Message(topic, body, tags=tag) for body, tag in batch],
                                  mq=MessageQueue(topic=topic, broker_name=b.broker_name, queue_id=0))


def test_tag_pull_on_a_batch_cq_gets_each_inner_message_by_its_own_tag(broker: BrokerProcess) -> None:
    """A TAG subscription gets the messages of send_batch batches whose own TAGS it names (as SQL92
    ``TAGS = 'TagA'`` does), and the offsets it is handed never pass over one of them."""
    topic = "BcqTagPull"
    batch_cq_topic(broker, topic)
    asyncio.run(_send_batches(broker, topic, [[(b"a0", "TagA"), (b"b1", "TagB"), (b"a2", "TagA"), (b"c3", "TagC")],
                                              [(b"b4", "TagB")], [(b"c5", "TagC"), (b"a6", "TagA")]]))

    async def pull_all(expression: str, expression_type: str = "TAG") -> tuple[list[bytes], int]:
        inst = MQClientInstance(broker.namesrv_addr)
        consumer = PullConsumer("BcqTagG", inst)
        await consumer.start()
        try:
            mq = MessageQueue(topic=topic, broker_name=broker.broker_name, queue_id=0)
            await inst.get_route(topic, refresh=True)
            bodies, offset = [], 0
            for _ in range(20):
                result = await consumer.pull(mq, expression, offset, 2, expression_type=expression_type)
                bodies.extend(m.body for m in result.messages)
                if result.next_begin_offset == offset:
                    break
                offset = result.next_begin_offset
            return bodies, offset
        finally:
            await consumer.shutdown()
            await inst.shutdown()

    assert asyncio.run(pull_all("TagA")) == ([b"a0", b"a2", b"a6"], 7)
    assert asyncio.run(pull_all("TagA || TagC")) == ([b"a0", b"a2", b"c3", b"c5", b"a6"], 7)
    assert asyncio.run(pull_all("TAGS = 'TagA'", "SQL92")) == ([b"a0", b"a2", b"a6"], 7)


def test_tag_long_poll_on_a_batch_cq_wakes_when_an_inner_message_has_its_tag(broker: BrokerProcess) -> None:
    """A TagA pull parked on a BatchCQ queue is answered as soon as a send_batch batch holding a TagA
    message arrives (the batch's unit has no tagsCode of its own to match), and not by one without."""
    topic = "BcqTagPoll"
    batch_cq_topic(broker, topic)

    async def scenario() -> tuple[float, list[bytes], str]:
        inst = MQClientInstance(broker.namesrv_addr)
        consumer = PullConsumer("BcqTagPollG", inst)
        producer = Producer("BcqTagP", inst)
        await consumer.start()
        await producer.start()
        try:
            mq = MessageQueue(topic=topic, broker_name=broker.broker_name, queue_id=0)
            await inst.get_route(topic, refresh=True)
            # (within the hold's own 5 s round, which would answer NO_MATCHED_MSG past a refused batch)
            pull = asyncio.create_task(consumer.pull(mq, "TagA", 0, 32, block_ms=15000))
            await asyncio.sleep(1.0)  # the pull is parked by now
            await _send_batches(broker, topic, [[(b"b0", "TagB"), (b"c1", "TagC")]], producer)
            await asyncio.sleep(1.0)
            assert not pull.done(), "a batch without a TagA message woke the pull"
            await _send_batches(broker, topic, [[(b"b2", "TagB"), (b"a3", "TagA")]], producer)
            sent_at = time.monotonic()
            result = await pull
            return time.monotonic() - sent_at, [m.body for m in result.messages], result.status.name
        finally:
            await producer.shutdown()
            await consumer.shutdown()
            await inst.shutdown()

    waited, bodies, status = asyncio.run(scenario())
    assert (status, bodies) == ("FOUND", [b"a3"])
    assert waited < 1.0, f"answered {waited:.2f} s after the send"
