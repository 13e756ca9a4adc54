"""The transport's value types for queues, sends, consumer groups and connections.

Why apart from ``mqadmin.transport.base`` (which re-exports every name here, loading this module on
first use): each dataclass costs its methods' compilation when its module loads, and a query by key
or id needs only the topic and message records; the commands that read queues or groups pay for these.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from broker_core.store.subscription_group_config import SubscriptionGroupConfig
    from mqadmin.transport.base import MessageRecord


@dataclass(frozen=True)
class QueueStatus:
    """One row of topicStatus (GET_TOPIC_STATS_INFO)."""

    broker_name: str
    queue_id: int
    min_offset: int
    max_offset: int
    last_update_timestamp: int

    def to_dict(self) -> dict[str, Any]:
        return {"brokerName": self.broker_name, "queueId": self.queue_id, "minOffset": self.min_offset,
                "maxOffset": self.max_offset, "lastUpdateTimestamp": self.last_update_timestamp}


@dataclass(frozen=True)
class TopicStatus:
    """One broker's GET_TOPIC_STATS_INFO answer (TopicStatsTable): its queues of the topic and the
    topic's put TPS on that broker (messages a second over the last minute)."""

    queues: list[QueueStatus]
    put_tps: float = 0.0


@dataclass(frozen=True)
class SendResult:
    broker_name: str
    queue_id: int
    send_status: str
    msg_id: str
    offset_msg_id: str
    queue_offset: int

    def to_dict(self) -> dict[str, Any]:
        return {"brokerName": self.broker_name, "queueId": self.queue_id, "sendStatus": self.send_status,
                "msgId": self.msg_id, "offsetMsgId": self.offset_msg_id, "queueOffset": self.queue_offset}


@dataclass
class SubscriptionGroupInfo:
    """A SubscriptionGroupConfig with every field Java's has. ``group_retry_policy`` is the
    GroupRetryPolicy object as subscriptionGroup.json holds it (``{"type": "EXPONENTIAL",
    "exponentialRetryPolicy": {...}}``), not its JSON text: exportMetadata and getConsumerConfig
    write it as an object, so what they export is a file updateSubGroupList and a Java broker read back."""

    group_name: str
    consume_enable: bool = True
    consume_from_min_enable: bool = False
    consume_broadcast_enable: bool = False
    consume_message_orderly: bool = False
    retry_queue_nums: int = 1
    retry_max_times: int = 16
    group_retry_policy: dict[str, Any] | None = None  # None: the default, {"type": "CUSTOMIZED"}
    broker_id: int = 0
    which_broker_when_consume_slowly: int = 1
    notify_consumer_ids_changed_enable: bool = True
    attributes: dict[str, str] = field(default_factory=dict)
    group_sys_flag: int = 0
    consume_timeout_minute: int = 15
    subscription_data_set: list[dict[str, Any]] | None = None  # SimpleSubscriptionData: topic, expressionType, expression, version

    @classmethod
    def of_config(cls, cfg: SubscriptionGroupConfig) -> SubscriptionGroupInfo:
        """The broker's config as the CLI shows it (both transports read one from the broker)."""
        return cls(
            cfg.group_name, cfg.consume_enable, cfg.consume_from_min_enable, cfg.consume_broadcast_enable,
            cfg.consume_message_orderly, cfg.retry_queue_nums, cfg.retry_max_times,
            copy.deepcopy(cfg.group_retry_policy) if cfg.group_retry_policy else None, cfg.broker_id,
            cfg.which_broker_when_consume_slowly, cfg.notify_consumer_ids_changed_enable, dict(cfg.attributes),
            cfg.group_sys_flag, cfg.consume_timeout_minute,
            None if cfg.subscription_data_set is None else [dict(s) for s in cfg.subscription_data_set])

    def to_config(self) -> SubscriptionGroupConfig:
        """The broker's config of these values: what UPDATE_AND_CREATE_SUBSCRIPTIONGROUP carries (both
        transports send this one), every field given so none keeps an old value."""
        from broker_core.store.subscription_group_config import SubscriptionGroupConfig

        return SubscriptionGroupConfig(
            group_name=self.group_name, consume_enable=self.consume_enable,
            consume_from_min_enable=self.consume_from_min_enable,
            consume_broadcast_enable=self.consume_broadcast_enable,
            consume_message_orderly=self.consume_message_orderly, retry_queue_nums=self.retry_queue_nums,
            retry_max_times=self.retry_max_times,
            group_retry_policy=copy.deepcopy(self.group_retry_policy or {"type": "CUSTOMIZED"}),
            broker_id=self.broker_id, which_broker_when_consume_slowly=self.which_broker_when_consume_slowly,
            notify_consumer_ids_changed_enable=self.notify_consumer_ids_changed_enable,
            group_sys_flag=self.group_sys_flag, consume_timeout_minute=self.consume_timeout_minute,
            subscription_data_set=copy.deepcopy(self.subscription_data_set), attributes=dict(self.attributes))

    def to_dict(self) -> dict[str, Any]:
        return {"groupName": self.group_name, "groupSysFlag": self.group_sys_flag,
                "consumeTimeoutMinute": self.consume_timeout_minute,
                "subscriptionDataSet": self.subscription_data_set, "consumeEnable": self.consume_enable,
                "consumeFromMinEnable": self.consume_from_min_enable,
                "consumeBroadcastEnable": self.consume_broadcast_enable,
                "consumeMessageOrderly": self.consume_message_orderly, "retryQueueNums": self.retry_queue_nums,
                "retryMaxTimes": self.retry_max_times,
                "groupRetryPolicy": copy.deepcopy(self.group_retry_policy or {"type": "CUSTOMIZED"}),
                "brokerId": self.broker_id, "whichBrokerWhenConsumeSlowly": self.which_broker_when_consume_slowly,
                "notifyConsumerIdsChangedEnable": self.notify_consumer_ids_changed_enable,
                "attributes": dict(self.attributes)}


@dataclass(frozen=True)
class ConsumeQueueStats:
    """One queue of GET_CONSUME_STATS (OffsetWrapper): where the broker and the group are."""

    topic: str
    broker_name: str
    queue_id: int
    broker_offset: int
    consumer_offset: int  # -1: the group never committed on this queue
    pull_offset: int
    inflight: int
    last_timestamp: int
    blocked: bool = False  # a FIFO queue waiting on an unacked message (seed 000); remoting cannot tell yet


@dataclass(frozen=True)
class ConsumeStatsView:
    """GET_CONSUME_STATS of one broker (or summed over several): the group's queues and its consume TPS,
    which arrive in one answer and are read from it once."""

    rows: list[ConsumeQueueStats]
    consume_tps: float = 0.0


@dataclass(frozen=True)
class BrokerConsumeStatsView:
    """GET_BROKER_CONSUME_STATS of one broker (Apache's ConsumeStatsList): each subscription group with
    one ConsumeStatsView a topic, and the lags summed over every listed queue. A queue the group never
    committed on has consumer offset 0, as the wire writes it (no request is made to tell it from -1)."""

    groups: list[tuple[str, list[ConsumeStatsView]]]
    total_diff: int = 0
    total_inflight_diff: int = 0


@dataclass(frozen=True)
class CqEntry:
    """One consume queue unit: where its message is in the commitlog, and its tag hash."""

    physic_offset: int
    physic_size: int
    tags_code: int


@dataclass
class ConsumeQueueView:
    """queryCq: a queue's min/max offsets and the units read."""

    min_queue_index: int
    max_queue_index: int
    entries: list[CqEntry] = field(default_factory=list)


@dataclass
class QueueRead:
    """PULL_MESSAGE-like read of one queue without a group: the store's status name and the messages."""

    status: str  # GetMessageStatus name: FOUND, NO_MATCHED_MESSAGE, OFFSET_OVERFLOW_ONE ...
    next_begin_offset: int
    min_offset: int
    max_offset: int
    messages: list[MessageRecord] = field(default_factory=list)


@dataclass(frozen=True)
class ClientConnection:
    """One online client of a group (GET_CONSUMER_CONNECTION_LIST's connectionSet)."""

    client_id: str
    client_addr: str
    language: str
    version: int


@dataclass(frozen=True)
class SubscriptionEntry:
    topic: str
    sub_string: str
    expression_type: str = "TAG"


@dataclass
class ConsumerConnection:
    """GET_CONSUMER_CONNECTION_LIST: how a group consumes and who is connected right now."""

    group: str
    consume_type: str
    message_model: str
    consume_from_where: str
    connections: list[ClientConnection] = field(default_factory=list)
    subscriptions: list[SubscriptionEntry] = field(default_factory=list)
