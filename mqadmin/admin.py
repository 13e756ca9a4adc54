"""The Admin interface: what every operator front end (CLI, dashboard, playbooks) may ask of a cluster.

Why this module exists: ``mqadmin`` commands, the TUI and the playbooks must work the same on a local
store directory (EmbeddedAdmin) and on a running cluster (RemoteAdmin). They talk only to this
Protocol, whose methods take and return plain values and the dataclasses below — never a store, a
Broker or a socket. Failures are raised as ``mqadmin.errors`` exceptions.
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol

from broker_core.auth.evaluator import Explanation
from broker_core.auth.model import Acl, User

ProgressFn = Callable[[int, int], None]
"""``progress(done, total)``: commands pass a rich progress bar here for long scans."""


# ------------------------------------------------------------------------------------ value types

@dataclass(frozen=True)
class BrokerIdentity:
    cluster_name: str
    broker_name: str
    broker_addr: str
    broker_id: int = 0


@dataclass
class TopicInfo:
    """A topic's configuration (TopicConfig) plus its queue type."""

    topic_name: str
    read_queue_nums: int
    write_queue_nums: int
    perm: int
    topic_filter_type: str = "SINGLE_TAG"
    topic_sys_flag: int = 0
    order: bool = False
    attributes: dict[str, str] = field(default_factory=dict)

    @property
    def queue_type(self) -> str:
        return self.attributes.get("queue.type") or "SimpleCQ"

    def to_dict(self) -> dict[str, Any]:
        return {"topicName": self.topic_name, "readQueueNums": self.read_queue_nums,
                "writeQueueNums": self.write_queue_nums, "perm": self.perm,
                "topicFilterType": self.topic_filter_type, "topicSysFlag": self.topic_sys_flag,
                "order": self.order, "attributes": dict(self.attributes), "queueType": self.queue_type}


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


@dataclass
class MessageRecord:
    """A stored message as operators see it (all record fields, decoded properties, body both ways)."""

    msg_id: str
    uniq_key: str | None
    topic: str
    queue_id: int
    queue_offset: int
    commit_log_offset: int
    store_size: int
    sys_flag: int
    flag: int
    body_crc: int
    born_timestamp: int
    born_host: str
    store_timestamp: int
    store_host: str
    reconsume_times: int
    prepared_transaction_offset: int
    properties: dict[str, str]
    body: bytes = field(repr=False)

    @property
    def tags(self) -> str | None:
        return self.properties.get("TAGS")

    @property
    def keys(self) -> str | None:
        return self.properties.get("KEYS")

    @property
    def display_id(self) -> str:
        """What mqadmin prints as the message id: the unique key if present, else the offset id."""
        return self.uniq_key or self.msg_id

    def body_text(self, charset: str = "utf-8") -> str | None:
        try:
            return self.body.decode(charset)
        except (UnicodeDecodeError, LookupError):
            return None

    def to_dict(self) -> dict[str, Any]:
        return {
            "msgId": self.msg_id, "uniqKey": self.uniq_key, "topic": self.topic, "queueId": self.queue_id,
            "queueOffset": self.queue_offset, "commitLogOffset": self.commit_log_offset,
            "storeSize": self.store_size, "sysFlag": self.sys_flag, "flag": self.flag, "bodyCRC": self.body_crc,
            "bornTimestamp": self.born_timestamp, "bornHost": self.born_host,
            "storeTimestamp": self.store_timestamp, "storeHost": self.store_host,
            "reconsumeTimes": self.reconsume_times, "preparedTransactionOffset": self.prepared_transaction_offset,
            "tags": self.tags, "keys": self.keys, "properties": dict(self.properties),
            "body": self.body_text(), "bodyBase64": base64.b64encode(self.body).decode("ascii"),
        }


@dataclass
class QueueScan:
    """printMsg / printMsgByQueue: one queue's range and the messages read from it."""

    broker_name: str
    topic: str
    queue_id: int
    min_offset: int
    max_offset: int
    begin_offset: int
    end_offset: int
    messages: list[MessageRecord] = field(default_factory=list)
    status: str = "FOUND"


@dataclass(frozen=True)
class ConsumerProgressRow:
    topic: str
    broker_name: str
    queue_id: int
    broker_offset: int
    consumer_offset: int
    inflight: int
    last_timestamp: int
    client_ip: str = ""

    @property
    def diff(self) -> int:
        return self.broker_offset - self.consumer_offset

    def to_dict(self) -> dict[str, Any]:
        return {"topic": self.topic, "brokerName": self.broker_name, "queueId": self.queue_id,
                "brokerOffset": self.broker_offset, "consumerOffset": self.consumer_offset, "diff": self.diff,
                "inflight": self.inflight, "lastTimestamp": self.last_timestamp, "clientIp": self.client_ip}


@dataclass(frozen=True)
class GroupSummary:
    """consumerProgress without -g: one row per consumer group."""

    group: str
    count: int
    version: str
    consume_type: str
    message_model: str
    consume_tps: float
    diff_total: int

    def to_dict(self) -> dict[str, Any]:
        return {"group": self.group, "count": self.count, "version": self.version, "type": self.consume_type,
                "model": self.message_model, "tps": self.consume_tps, "diffTotal": self.diff_total}


@dataclass(frozen=True)
class OffsetChange:
    """One queue of a reset plan: where the group is and where it would go."""

    broker_name: str
    queue_id: int
    broker_offset: int
    consumer_offset: int
    timestamp_offset: int
    reset_offset: int

    def to_dict(self) -> dict[str, Any]:
        return {"brokerName": self.broker_name, "queueId": self.queue_id, "brokerOffset": self.broker_offset,
                "consumerOffset": self.consumer_offset, "timestampOffset": self.timestamp_offset,
                "resetOffset": self.reset_offset, "offset": self.reset_offset}


@dataclass
class ResetPlan:
    """resetOffsetByTime / skipAccumulatedMessage / cloneGroupOffset: computed, then maybe applied."""

    group: str
    topic: str
    timestamp: int
    force: bool
    changes: list[OffsetChange]
    applied: bool

    def to_dict(self) -> dict[str, Any]:
        return {"group": self.group, "topic": self.topic, "timestamp": self.timestamp, "force": self.force,
                "applied": self.applied, "queues": [c.to_dict() for c in self.changes]}


@dataclass
class DeleteTopicPlan:
    topic: str
    cluster_name: str
    queues: int
    messages: int
    groups_with_offsets: list[str]
    applied: bool

    def to_dict(self) -> dict[str, Any]:
        return {"topic": self.topic, "clusterName": self.cluster_name, "queues": self.queues,
                "messages": self.messages, "groupsWithOffsets": list(self.groups_with_offsets),
                "applied": self.applied}


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
    group_name: str
    consume_enable: bool = True
    consume_from_min_enable: bool = False
    consume_broadcast_enable: bool = False
    consume_message_orderly: bool = False
    retry_queue_nums: int = 1
    retry_max_times: int = 16
    group_retry_policy: str | None = None
    broker_id: int = 0
    which_broker_when_consume_slowly: int = 1
    notify_consumer_ids_changed_enable: bool = True
    attributes: dict[str, str] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"groupName": self.group_name, "consumeEnable": self.consume_enable,
                "consumeFromMinEnable": self.consume_from_min_enable,
                "consumeBroadcastEnable": self.consume_broadcast_enable,
                "consumeMessageOrderly": self.consume_message_orderly, "retryQueueNums": self.retry_queue_nums,
                "retryMaxTimes": self.retry_max_times, "groupRetryPolicy": self.group_retry_policy,
                "brokerId": self.broker_id, "whichBrokerWhenConsumeSlowly": self.which_broker_when_consume_slowly,
                "notifyConsumerIdsChangedEnable": self.notify_consumer_ids_changed_enable,
                "attributes": dict(self.attributes)}


@dataclass(frozen=True)
class DecodedMessageId:
    ip: str
    date_ms: int
    pid: int | None = None
    offset_store_host: str | None = None
    offset_commit_log_offset: int | None = None


# ------------------------------------------------------------------------------------ the interface

class Admin(Protocol):
    """One interface, two implementations (EmbeddedAdmin now, RemoteAdmin with the network layer)."""

    def close(self) -> None: ...

    # identity / cluster
    def identity(self) -> BrokerIdentity: ...
    def check_target(self, cluster_name: str | None = None, broker_addr: str | None = None,
                     broker_name: str | None = None) -> list[BrokerIdentity]: ...
    def cluster_list(self) -> list[dict[str, Any]]: ...
    def broker_status(self) -> dict[str, str]: ...
    def get_broker_config(self) -> dict[str, str]: ...

    # topics
    def list_topics(self) -> list[str]: ...
    def topic_info(self, topic: str) -> TopicInfo: ...
    def topic_status(self, topic: str) -> list[QueueStatus]: ...
    def topic_route(self, topic: str) -> dict[str, Any]: ...
    def update_topic(self, topic: TopicInfo) -> TopicInfo: ...
    def delete_topic(self, topic: str, cluster_name: str, dry_run: bool = False) -> DeleteTopicPlan: ...
    def topic_groups(self, topic: str) -> list[str]: ...

    # groups and offsets
    def list_groups(self) -> list[str]: ...
    def update_sub_group(self, config: SubscriptionGroupInfo) -> SubscriptionGroupInfo: ...
    def delete_sub_group(self, group: str, remove_offset: bool = False,
                         delete_retry_topics: bool = False) -> None: ...
    def consumer_progress(self, group: str, topic: str | None = None) -> list[ConsumerProgressRow]: ...
    def group_summaries(self) -> list[GroupSummary]: ...
    def reset_offset_by_time(self, group: str, topic: str, timestamp: int, force: bool = True,
                             queue_id: int | None = None, offset: int | None = None,
                             dry_run: bool = False) -> ResetPlan: ...
    def skip_accumulated_message(self, group: str, topic: str, force: bool = True,
                                 dry_run: bool = False) -> ResetPlan: ...
    def clone_group_offset(self, src_group: str, dest_group: str, topic: str) -> ResetPlan: ...

    # messages
    def query_msg_by_id(self, topic: str, msg_id: str) -> list[MessageRecord]: ...
    def query_msg_by_key(self, topic: str, key: str, max_num: int = 64, begin: int = 0,
                         end: int = 2**63 - 1) -> list[MessageRecord]: ...
    def query_msg_by_unique_key(self, topic: str, key: str, max_num: int = 32) -> list[MessageRecord]: ...
    def query_msg_by_offset(self, topic: str, broker_name: str, queue_id: int, offset: int) -> MessageRecord: ...
    def print_msg_by_queue(self, topic: str, broker_name: str, queue_id: int, sub_expression: str = "*",
                           begin_timestamp: int | None = None, end_timestamp: int | None = None,
                           progress: ProgressFn | None = None) -> QueueScan: ...
    def iter_print_msg(self, topic: str, sub_expression: str = "*", begin_timestamp: int | None = None,
                       end_timestamp: int | None = None, progress: ProgressFn | None = None
                       ) -> Iterator[QueueScan]: ...
    def send_message(self, topic: str, body: bytes, keys: str | None = None, tags: str | None = None,
                     broker_name: str | None = None, queue_id: int | None = None) -> SendResult: ...
    def consume_message(self, topic: str, group: str, broker_name: str | None = None,
                        queue_id: int | None = None, offset: int | None = None,
                        begin_timestamp: int | None = None, end_timestamp: int | None = None,
                        max_num: int = 128) -> list[QueueScan]: ...
    def decode_message_id(self, msg_id: str) -> DecodedMessageId: ...
    def message_tracks(self, record: MessageRecord) -> list[dict[str, Any]]: ...

    # ACL 2.0
    def create_user(self, username: str, password: str, user_type: str | None = None) -> User: ...
    def update_user(self, username: str, password: str | None = None, user_type: str | None = None,
                    user_status: str | None = None) -> User: ...
    def delete_user(self, username: str) -> None: ...
    def get_user(self, username: str) -> User | None: ...
    def list_users(self, filter_text: str | None = None) -> list[User]: ...
    def create_acl(self, acl: Acl) -> Acl: ...
    def update_acl(self, acl: Acl) -> Acl: ...
    def delete_acl(self, subject: str, resource: str | None = None) -> None: ...
    def get_acl(self, subject: str) -> Acl | None: ...
    def list_acls(self, subject_filter: str | None = None, resource_filter: str | None = None) -> list[Acl]: ...
    def copy_users_to(self, target: Admin, usernames: list[str] | None = None) -> list[str]: ...
    def copy_acls_to(self, target: Admin, subjects: list[str] | None = None,
                     progress: ProgressFn | None = None) -> list[str]: ...
    def explain_acl(self, subject: str, resource: str, actions: list[str], source_ip: str | None) -> Explanation: ...

    # store maintenance (embedded only; RemoteAdmin raises)
    def verify_store(self, progress: ProgressFn | None = None) -> Any: ...
    def rebuild_store(self, parts: list[str], master: str, verify: bool, config_file: str | None = None,
                      progress: Callable[[str, int, int], None] | None = None) -> Any: ...
