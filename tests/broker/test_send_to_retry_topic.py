"""A message SENT to %RETRY%group (Java orderly consumers, the client fallback of a failed send back)
goes to %DLQ%group once its retries are used up (SendMessageProcessor#handleRetryAndDLQ): when its
reconsume times exceed the maximum (the header's, else the group's retryMaxTimes), or at once when
the group holds an unexpired orderly queue lock."""

from __future__ import annotations

import pytest

from broker_core.broker.broker import Broker
from broker_core.broker.errors import SubscriptionGroupNotExistError
from broker_core.store.codec.message import MessageExt
from broker_core.store.dispatch import SCHEDULE_TOPIC

from .conftest import FakeClock

G = "G_sendretry"
RETRY, DLQ = "%RETRY%" + G, "%DLQ%" + G
PROPS = {"RETRY_TOPIC": "Orig", "UNIQ_KEY": "AABBCCDD0011223344556677889900FF", "KEYS": "k", "DELAY": "5"}


def _all(b: Broker, topic: str, queue_id: int = 0) -> list[MessageExt]:
    return b.pull_message(G, topic, queue_id, 0, 32).messages if b.get_topic(topic) else []


def _broker(make_broker) -> Broker:  # type: ignore[no-untyped-def]
    b = make_broker()
    b.create_or_update_subscription_group(G, retry_max_times=2, retry_queue_nums=1)
    return b


def test_over_the_header_maximum_goes_to_the_dlq(make_broker) -> None:
    b = _broker(make_broker)
    r = b.send_message(RETRY, b"dead", PROPS, reconsume_times=17, max_reconsume_times=16, queue_id=0)
    assert r.topic == DLQ and r.queue_id == 0
    [dead] = _all(b, DLQ)
    assert dead.body == b"dead" and dead.reconsume_times == 17 and dead.uniq_key == PROPS["UNIQ_KEY"]
    assert dead.properties["DELAY"] == "-1"  # as handleRetryAndDLQ: the client's delay does not apply
    assert dead.properties["DLQ_ORIGIN_TOPIC"] == "Orig" and dead.properties["DLQ_ORIGIN_MESSAGE_ID"] == PROPS["UNIQ_KEY"]
    assert b.get_max_offset(SCHEDULE_TOPIC, 4) == 0 and _all(b, RETRY) == []
    dlq = b.get_topic(DLQ)
    assert (dlq.read_queue_nums, dlq.write_queue_nums, dlq.perm) == (1, 1, 6)


def test_at_the_maximum_it_is_still_a_retry(make_broker) -> None:
    """RocketMQ 5 compares with ``>``: clients send the count of the attempt to come."""
    b = _broker(make_broker)
    r = b.send_message(RETRY, b"again", PROPS, reconsume_times=16, max_reconsume_times=16, queue_id=0)
    assert r.topic == RETRY
    assert b.get_max_offset(SCHEDULE_TOPIC, 4) == 1  # DELAY 5: scheduled back into the retry topic
    assert b.get_topic(DLQ) is None


def test_without_a_header_maximum_the_group_retry_max_times_decides(make_broker) -> None:
    b = _broker(make_broker)
    plain = {k: v for k, v in PROPS.items() if k != "DELAY"}
    assert b.send_message(RETRY, b"two", plain, reconsume_times=2, queue_id=0).topic == RETRY
    assert b.send_message(RETRY, b"three", plain, reconsume_times=3, queue_id=0).topic == DLQ
    assert [m.body for m in _all(b, RETRY)] == [b"two"] and [m.body for m in _all(b, DLQ)] == [b"three"]


def test_an_orderly_group_holding_a_queue_lock_dead_letters_at_once(make_broker, clock: FakeClock) -> None:
    b = _broker(make_broker)
    b.create_or_update_topic("OrderT", 1, 1)
    assert b.lock_batch_mq(G, "client-1", [("OrderT", 0)])
    assert b.send_message(RETRY, b"orderly", PROPS, reconsume_times=1, max_reconsume_times=16,
                          queue_id=0).topic == DLQ
    clock.advance(b.config.rebalance_lock_max_live_time + 1)  # the lock expired: a retry again
    assert b.send_message(RETRY, b"later", PROPS, reconsume_times=1, max_reconsume_times=16,
                          queue_id=0).topic == RETRY


def test_an_unknown_group_is_refused(make_broker) -> None:
    b = make_broker(autoCreateSubscriptionGroup="false")
    with pytest.raises(SubscriptionGroupNotExistError):
        b.send_message("%RETRY%NoSuchGroup", b"x", reconsume_times=1, queue_id=0)
    assert b.get_topic("%RETRY%NoSuchGroup") is None or b.get_max_offset("%RETRY%NoSuchGroup", 0) == 0
    assert b.get_topic("%DLQ%NoSuchGroup") is None
