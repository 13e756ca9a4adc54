"""Batch sends whose items the broker cannot store as given: refused with MESSAGE_ILLEGAL naming the
item, the size and the 32,767-byte limit, before anything is written (never a struct.error answered
as SYSTEM_ERROR with a traceback in the log)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from broker_core.broker.errors import MessageIllegalError
from broker_core.client.instance import MQClientInstance
from broker_core.client.producer import Producer
from broker_core.common.response_code import ResponseCode
from broker_core.remoting.bodies import MessageQueue
from broker_core.store.codec.batch import BatchItem, encode_batch
from broker_core.store.codec.errors import RecordError
from tests.client.conftest import create_topic
from tests.remoting_broker import running_broker

# 32,755 bytes of properties as sent: under the limit, over it once the broker adds its UNIQ_KEY
NEAR_LIMIT = {"WAIT": "true", "pad": "p" * 32740}


@pytest.mark.parametrize("queue_type", ["SimpleCQ", "BatchCQ"])
def test_embedded_batch_item_properties_over_the_limit_are_refused(make_broker, queue_type: str) -> None:
    b = make_broker()
    b.create_or_update_topic("B", 1, 1, attributes=f"+queue.type={queue_type}")
    items = [BatchItem(b"ok", {"WAIT": "true"}), BatchItem(b"a", dict(NEAR_LIMIT))]
    with pytest.raises(MessageIllegalError, match=r"batch item 1 properties size 32797 bytes exceeds the "
                                                  r"limit of 32767 bytes; nothing was stored") as ei:
        b.send_batch("B", items)
    assert ei.value.code == ResponseCode.MESSAGE_ILLEGAL
    assert b.get_max_offset("B", 0) == 0
    assert b.send_batch("B", [BatchItem(b"ok", {"WAIT": "true"})]).queue_offset == 0


def test_embedded_inner_batch_item_with_a_separator_is_refused(make_broker) -> None:
    """An inner-batch body is written as one record: its items' properties are checked here, or a value
    holding \\x01/\\x02 would be read back as other properties."""
    b = make_broker()
    b.create_or_update_topic("BQ", 1, 1, attributes="+queue.type=BatchCQ")
    with pytest.raises(MessageIllegalError, match="batch item 0: property KEYS .* property separator"):
        b.send_batch("BQ", [BatchItem(b"a", {"KEYS": "k1\x02KEYS\x01evil"})], {"UNIQ_KEY": "BATCHKEY"})
    assert b.get_max_offset("BQ", 0) == 0


def test_encode_batch_item_names_the_size_and_the_limit() -> None:
    with pytest.raises(RecordError, match="properties size 40007 bytes exceeds the limit of 32767 bytes"):
        encode_batch([BatchItem(b"a", {"big": "v" * 40_002})])


def test_remoting_batch_over_the_limit_answers_message_illegal(tmp_path: Path) -> None:
    async def go(broker) -> list:
        inst = MQClientInstance(broker.namesrv_addr)
        out = []
        try:
            producer = Producer("PLimits", inst)  # only to build SEND_BATCH_MESSAGE requests
            for topic, kind in (("TB", "SimpleCQ"), ("TBB", "BatchCQ")):
                await create_topic(inst, broker.broker_addr, topic, queues=1, attributes=f"+queue.type={kind}")
                mq = MessageQueue(topic=topic, broker_name=broker.broker_name, queue_id=0)
                conn = await inst.connection(broker.broker_addr)
                body = encode_batch([BatchItem(b"a", dict(NEAR_LIMIT))])
                bad = await conn.invoke(producer._request(mq, body, {"WAIT": "true"}, 0, 0, True), 10)
                ok = await conn.invoke(producer._request(mq, encode_batch([BatchItem(b"b", {"WAIT": "true"})]),
                                                         {"WAIT": "true"}, 0, 0, True), 10)
                out.append((topic, bad.code, bad.remark, ok.code, ok.ext_fields.get("queueOffset")))
        finally:
            await inst.shutdown()
        return out

    with running_broker(tmp_path / "b") as broker:
        results = asyncio.run(asyncio.wait_for(go(broker), 60))
        log = broker.log_text()
    for topic, code, remark, ok_code, ok_offset in results:
        assert code == ResponseCode.MESSAGE_ILLEGAL, (topic, code, remark)
        assert "properties size 32797 bytes exceeds the limit of 32767 bytes" in remark, remark
        assert ok_code == ResponseCode.SUCCESS and ok_offset == "0", topic  # nothing of the refused one stored
    assert "Traceback" not in log and "struct.error" not in log
