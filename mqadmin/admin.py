"""The Admin interface: what every operator front end (CLI, dashboard, playbooks) may ask of a cluster.

Why this module exists: ``mqadmin`` commands, the TUI and the playbooks must work the same on a local
store directory (EmbeddedAdmin) and on a running cluster (RemoteAdmin). They talk only to this
Protocol, whose methods take and return plain values and the dataclasses below — never a store, a
Broker or a socket. Failures are raised as ``mqadmin.errors`` exceptions.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol

from broker_core.auth.evaluator import Explanation
from broker_core.auth.model import Acl, User
from mqadmin.transport.base import (
    MessageRecord,
    ProgressFn,
    QueueStatus,
    SendResult,
    SubscriptionGroupInfo,
    TopicInfo,
)

# ------------------------------------------------------------------------------------ value types

@dataclass(frozen=True)
class BrokerIdentity:
    cluster_name: str
    broker_name: str
    broker_addr: str
    broker_id: int = 0


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
