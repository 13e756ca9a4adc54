"""Consumer send-back of a message of a BatchCQ topic: the failed item comes back, not its batch.

Every item of an inner batch shares the record's commit log offset, which is what a send back names;
the broker picks the item out by the header's originMsgId (its UNIQ_KEY) or its queue offset (a gRPC
receipt handle's) and re-puts that item alone, as pop revive does.
"""

from __future__ import annotations

import pytest

from broker_core.broker.broker import Broker
from broker_core.broker.errors import BrokerSystemError
from broker_core.store.codec.batch import BatchItem
from broker_core.store.codec.message import MessageExt
from broker_core.store.codec.sys_flag import INNER_BATCH_FLAG, NEED_UNWRAP_FLAG

from .conftest import FakeClock

G = "G_bcq"
T = "BcqTopic"
RETRY, DLQ = "%RETRY%" + G, "%DLQ%" + G


def _pull(b: Broker, topic: str, queue_id: int = 0) -> list[MessageExt]:
    return b.pull_message(G, topic, queue_id, 0, 32).messages


def _setup(make_broker) -> tuple[Broker, list[MessageExt]]:  # type: ignore[no-untyped-def]
    b = make_broker(messageDelayLevel="1s 1s 1s 1s 1s")
    b.create_or_update_topic(T, 1, 1, attributes="+queue.type=BatchCQ")
    b.create_or_update_subscription_group(G, retry_max_times=3, retry_queue_nums=1)
    b.send_message(T, b"single", {"TAGS": "s"}, queue_id=0)  # the batch starts at queue offset 1
    b.send_batch(T, [BatchItem(b"b1", {"KEYS": "k1"}), BatchItem(b"b2", {"KEYS": "k2", "TAGS": "T2"}, 7),
                     BatchItem(b"b3", {"KEYS": "k3"})], {"UNIQ_KEY": "BATCHKEY"}, queue_id=0)
    items = _pull(b, T)[1:]
    assert [m.body for m in items] == [b"b1", b"b2", b"b3"] and [m.queue_offset for m in items] == [1, 2, 3]
    assert len({m.commit_log_offset for m in items}) == 1  # all of them name the same record
    return b, items


def _check_is_item(m: MessageExt, item: MessageExt) -> None:
    assert m.body == item.body and m.flag == item.flag
    assert m.uniq_key == item.uniq_key != "BATCHKEY"
    assert m.properties["KEYS"] == item.properties["KEYS"]
    assert "INNER_NUM" not in m.properties and "INNER_BASE" not in m.properties
    assert not m.sys_flag & (INNER_BATCH_FLAG | NEED_UNWRAP_FLAG)


def test_send_back_of_a_batch_item_retries_that_item(make_broker, clock: FakeClock) -> None:
    b, items = _setup(make_broker)
    failed = items[1]
    res = b.consumer_send_back(G, failed.commit_log_offset, 0, T, origin_msg_id=failed.uniq_key)
    assert res.topic == RETRY and not res.dlq
    clock.advance(1_000)
    b.tick()
    [retry] = _pull(b, RETRY)
    _check_is_item(retry, failed)
    assert retry.reconsume_times == 1 and retry.tags == "T2" and retry.properties["RETRY_TOPIC"] == T

    # the retried copy fails again and again: it is a plain message now, and the DLQ gets the item too
    msg = retry
    for _ in range(3):
        res = b.consumer_send_back(G, msg.commit_log_offset, 0, T, origin_msg_id=msg.uniq_key)
        if res.dlq:
            break
        clock.advance(1_000)
        b.tick()
        msg = _pull(b, RETRY)[-1]
    assert res.dlq
    [dead] = _pull(b, DLQ)
    _check_is_item(dead, failed)
    assert dead.properties["DLQ_ORIGIN_MESSAGE_ID"] == failed.uniq_key and dead.properties["DLQ_ORIGIN_TOPIC"] == T


def test_dead_lettering_a_batch_item_by_queue_offset(make_broker) -> None:
    """ForwardMessageToDeadLetterQueue: a gRPC receipt handle names the item by its queue offset."""
    b, items = _setup(make_broker)
    res = b.consumer_send_back(G, items[2].commit_log_offset, -1, T, queue_offset=items[2].queue_offset)
    assert res.dlq
    [dead] = _pull(b, DLQ)
    _check_is_item(dead, items[2])
    assert dead.properties["DLQ_ORIGIN_MESSAGE_ID"] == items[2].uniq_key and dead.reconsume_times == 1


def test_a_batch_item_nobody_names_is_refused_and_nothing_is_written(make_broker) -> None:
    b, items = _setup(make_broker)
    for kwargs in ({}, {"origin_msg_id": "NOT-AN-ITEM"}, {"queue_offset": 9}):
        with pytest.raises(BrokerSystemError, match="inner batch"):
            b.consumer_send_back(G, items[0].commit_log_offset, -1, T, **kwargs)
    assert b.get_topic(DLQ) is None or b.get_max_offset(DLQ, 0) == 0
    # the whole record is never re-put, whoever calls the retry service with it
    record = b.store.look_message_by_offset(items[0].commit_log_offset)
    assert record is not None and record.sys_flag & INNER_BATCH_FLAG
    with pytest.raises(BrokerSystemError, match="inner batch"):
        b.retry_service.send_to_dlq(G, record, T)


def test_a_plain_message_of_a_batchcq_topic_needs_no_name(make_broker, clock: FakeClock) -> None:
    b, _items = _setup(make_broker)
    single = _pull(b, T)[0]
    assert b.consumer_send_back(G, single.commit_log_offset, 0, T).topic == RETRY
    clock.advance(1_000)
    b.tick()
    assert [m.body for m in _pull(b, RETRY)] == [b"single"]
