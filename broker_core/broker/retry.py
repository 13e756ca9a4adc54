"""Consumer retries and dead letters (CONSUMER_SEND_MSG_BACK, spec B.5 and §11.1-11.2).

Why: a message a consumer failed to process goes back to the group's ``%RETRY%{group}`` topic with
a growing delay (level 3 + reconsume times: 10s, 30s, 1m ... 2h) until it has been consumed
``maxReconsumeTimes`` times, then to ``%DLQ%{group}``. The delay itself rides on the DELAY
property, which the broker's put hook turns into ``SCHEDULE_TOPIC_XXXX``; this module only decides
the target, the level and the properties, exactly as AbstractSendMessageProcessor does.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from broker_core.store.codec.message import MessageExt, MessageInner
from broker_core.store.codec.properties import (
    PROPERTY_DELAY_TIME_LEVEL,
    PROPERTY_DLQ_ORIGIN_MESSAGE_ID,
    PROPERTY_DLQ_ORIGIN_TOPIC,
    PROPERTY_MAX_RECONSUME_TIMES,
    PROPERTY_ORIGIN_MESSAGE_ID,
    PROPERTY_RETRY_TOPIC,
    PROPERTY_WAIT_STORE_MSG_OK,
)
from broker_core.store.codec.sys_flag import INNER_BATCH_FLAG, NEED_UNWRAP_FLAG
from broker_core.store.commit_log import PutMessageResult, PutMessageStatus
from broker_core.store.dispatch import inner_batch_position
from broker_core.store.message_store import unwrap_inner_batch
from broker_core.store.subscription_group_config import SubscriptionGroupConfig
from broker_core.store.topic_config import TopicConfig, TopicConfigTable

from .errors import BrokerSystemError, NoPermissionError, SubscriptionGroupNotExistError
from .topic_validator import DLQ_GROUP_TOPIC_PREFIX, RETRY_GROUP_TOPIC_PREFIX

DEFAULT_MAX_RECONSUME_TIMES = 16
DLQ_NUMS_PER_GROUP = 1
PERM_READ_WRITE = 6
RETRY_DELAY_LEVEL_BASE = 3  # delayLevel 0 means "3 + reconsumeTimes"


class TopicsLike(Protocol):
    def get(self, topic: str) -> TopicConfig | None: ...

    def create_if_absent(self, tc: TopicConfig) -> TopicConfig: ...


# The broker's subscription group lookup (SubscriptionGroupManager.find): None for a group that does not exist.
GroupLookup = Callable[[str], SubscriptionGroupConfig | None]


class TopicTableTopics:
    """TopicsLike over the store's topics.json table, for callers without a TopicManager."""

    def __init__(self, table: TopicConfigTable, clock: Callable[[], int]) -> None:
        self.table = table
        self.clock = clock

    def get(self, topic: str) -> TopicConfig | None:
        return self.table.get(topic)

    def create_if_absent(self, tc: TopicConfig) -> TopicConfig:
        old = self.table.get(tc.topic_name)
        if old is not None:
            return old
        with self.table.change():
            self.table.put(tc, self.clock())
        return tc


@dataclass(slots=True)
class SendBackResult:
    topic: str | None  # None: the group has no retry queue, nothing was written (as RocketMQ)
    queue_id: int
    delay_level: int
    reconsume_times: int
    dlq: bool
    put_result: PutMessageResult | None

    @property
    def ok(self) -> bool:
        return self.put_result is None or self.put_result.status in (PutMessageStatus.PUT_OK,
                                                                     PutMessageStatus.FLUSH_DISK_TIMEOUT)


def retry_topic(group: str) -> str:
    return RETRY_GROUP_TOPIC_PREFIX + group


def dlq_topic(group: str) -> str:
    return DLQ_GROUP_TOPIC_PREFIX + group


def retry_delay_level(reconsume_times: int, delay_level: int = 0) -> int:
    """The DELAY level of the next retry: the caller's level, or 3 + reconsume times for 0."""
    return RETRY_DELAY_LEVEL_BASE + reconsume_times if delay_level == 0 else delay_level


def resolve_max_reconsume_times(group_config: SubscriptionGroupConfig | None, msg: MessageExt | None = None,
                                explicit: int | None = None) -> int:
    """Explicit value, else the message's MAX_RECONSUME_TIMES, else the group's retryMaxTimes, else 16."""
    if explicit is not None:
        return explicit
    if msg is not None:
        text = msg.get_property(PROPERTY_MAX_RECONSUME_TIMES)
        if text is not None and text.strip().lstrip("-").isdigit():
            return int(text)
    if group_config is not None:
        return int(group_config.retry_max_times)
    return DEFAULT_MAX_RECONSUME_TIMES


def inner_batch_item(record: MessageExt, origin_msg_id: str | None = None,
                     queue_offset: int | None = None) -> MessageExt:
    """The item of a BatchCQ inner-batch ``record`` a consumer failed, as pull and pop hand it out
    (``unwrap_inner_batch``: its own body, flag, properties and UNIQ_KEY, its queue offset).

    Why: a send back names the message by its commit log offset, which every item of an inner batch
    shares; re-putting the record itself sent the whole encoded batch to %RETRY% / %DLQ% as one
    message and the failed item never came back (Apache's put hook refuses such a record, and its
    client then sends the item itself). The item is the one whose UNIQ_KEY is ``origin_msg_id`` (the
    header's originMsgId, what clients send), else the one at ``queue_offset`` (a gRPC receipt
    handle's), else the only item of a one-item batch; BrokerSystemError when none is named."""
    _num, base = inner_batch_position(record.properties_string, record.queue_offset)
    items = unwrap_inner_batch(record, base)
    if origin_msg_id:
        found = [m for m in items if m.uniq_key == origin_msg_id]
        if len(found) == 1:
            return found[0]
    if queue_offset is not None and queue_offset >= 0:
        found = [m for m in items if m.queue_offset == queue_offset]
        if found:
            return found[0]
    if len(items) == 1:
        return items[0]
    raise BrokerSystemError(f"the message at commit log offset {record.commit_log_offset} is an inner batch of "
                            f"{len(items)} messages of {record.topic}; none of them is {origin_msg_id!r}"
                            + (f" or at queue offset {queue_offset}" if queue_offset is not None else "")
                            + ": name the failed message by its msgId (UNIQ_KEY)")


def _check_not_inner_batch(msg: MessageExt) -> None:
    """A whole inner-batch record is never re-put as one message (its body is every item's frames)."""
    if msg.sys_flag & INNER_BATCH_FLAG:
        raise BrokerSystemError(f"the message at commit log offset {msg.commit_log_offset} is an inner batch of "
                                f"{msg.topic}: send back one of its messages (inner_batch_item), not the batch")


class RetryService:
    def __init__(self, put_message: Callable[[MessageInner], PutMessageResult],
                 groups: GroupLookup, topics: TopicsLike, store_host: tuple[str, int],
                 rng: random.Random | None = None) -> None:
        self.put_message = put_message
        self.groups = groups
        self.topics = topics
        self.store_host = store_host
        self.random = rng or random.Random()

    def _group(self, group: str) -> SubscriptionGroupConfig:
        cfg = self.groups(group)
        if cfg is None:
            raise SubscriptionGroupNotExistError(f"subscription group not exist, {group}")
        return cfg

    def send_back(self, group: str, msg: MessageExt, delay_level: int = 0, max_reconsume_times: int | None = None,
                  origin_topic: str | None = None) -> SendBackResult:
        """consumerSendMsgBack: retry with a delay level, or the DLQ when retries are used up.

        ``delay_level`` 0 means 3 + reconsume times; a negative level sends straight to the DLQ.
        """
        _check_not_inner_batch(msg)
        cfg = self._group(group)
        if cfg.retry_queue_nums <= 0:
            return SendBackResult(None, -1, 0, msg.reconsume_times, False, None)
        # The retry topic is created and must be writable before the DLQ is chosen, as in Java's
        # consumerSendMsgBack: a read-only %RETRY% topic refuses every send-back, DLQ-bound ones too.
        topic = retry_topic(group)
        tc = self.topics.create_if_absent(TopicConfig(topic, cfg.retry_queue_nums, cfg.retry_queue_nums,
                                                      PERM_READ_WRITE))
        if not tc.perm & 2:
            raise NoPermissionError(f"the topic[{topic}] sending message is forbidden")
        max_times = resolve_max_reconsume_times(cfg, msg, max_reconsume_times)
        if msg.reconsume_times >= max_times or delay_level < 0:
            return self.send_to_dlq(group, msg, origin_topic)
        level = retry_delay_level(msg.reconsume_times, delay_level)
        qid = self.random.randrange(cfg.retry_queue_nums)
        props = self._retry_properties(msg)
        props[PROPERTY_DELAY_TIME_LEVEL] = str(level)
        result = self._put(topic, qid, msg, props)
        return SendBackResult(topic, qid, level, msg.reconsume_times + 1, False, result)

    def send_to_dlq(self, group: str, msg: MessageExt, origin_topic: str | None = None) -> SendBackResult:
        """%DLQ%{group} queue 0, no delay; keeps where the message came from for operators."""
        _check_not_inner_batch(msg)
        topic = dlq_topic(group)
        self.topics.create_if_absent(TopicConfig(topic, DLQ_NUMS_PER_GROUP, DLQ_NUMS_PER_GROUP, PERM_READ_WRITE))
        props = self._retry_properties(msg)
        props[PROPERTY_DELAY_TIME_LEVEL] = "0"
        props.setdefault(PROPERTY_DLQ_ORIGIN_TOPIC, origin_topic or props.get(PROPERTY_RETRY_TOPIC) or msg.topic)
        props.setdefault(PROPERTY_DLQ_ORIGIN_MESSAGE_ID, msg.uniq_key or props[PROPERTY_ORIGIN_MESSAGE_ID])
        qid = self.random.randrange(DLQ_NUMS_PER_GROUP)
        result = self._put(topic, qid, msg, props)
        return SendBackResult(topic, qid, 0, msg.reconsume_times + 1, True, result)

    @staticmethod
    def _retry_properties(msg: MessageExt) -> dict[str, str]:
        props = dict(msg.properties)
        props.setdefault(PROPERTY_RETRY_TOPIC, msg.topic)
        props[PROPERTY_WAIT_STORE_MSG_OK] = "false"
        if not props.get(PROPERTY_ORIGIN_MESSAGE_ID):
            props[PROPERTY_ORIGIN_MESSAGE_ID] = msg.msg_id
        return props

    def _put(self, topic: str, qid: int, msg: MessageExt, props: dict[str, str]) -> PutMessageResult:
        # An item unwrapped from a BatchCQ record is re-put as a plain message.
        sys_flag = msg.sys_flag & ~(INNER_BATCH_FLAG | NEED_UNWRAP_FLAG)
        inner = MessageInner(topic, msg.body, props, qid, msg.flag, sys_flag, msg.born_timestamp, msg.born_host,
                             self.store_host, msg.reconsume_times + 1)
        result = self.put_message(inner)
        if result.status not in (PutMessageStatus.PUT_OK, PutMessageStatus.FLUSH_DISK_TIMEOUT):
            raise BrokerSystemError(f"send back to {topic} failed: {result.status.value} {result.remark}".strip())
        return result
