"""The Admin's report records: what the queue, progress, stats, trace, reset and delete commands print.

Why a module of its own: every command imports ``mqadmin.admin``, and a dataclass costs its methods'
compilation when its module loads; a key query prints none of these. ``Admin`` imports them in the
methods that build them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mqadmin.transport.base import MessageRecord


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
    # (PullStatus, next offset) of each pull Java's printMsg reports: NO_MATCHED_MSG, and the
    # NO_NEW_MSG / OFFSET_ILLEGAL that end its loop; FOUND pulls print only their messages
    pull_notes: list[tuple[str, int]] = field(default_factory=list)


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
class ConsumerProgress:
    """consumerProgress -g: the group's queues on every broker and its consume TPS over all of them."""

    rows: list[ConsumerProgressRow]
    consume_tps: float


@dataclass(frozen=True)
class TraceView:
    """One trace context about a message (Apache's TraceView): who sent or consumed it, when, how long."""

    msg_type: str  # Pub, SubBefore, SubAfter, EndTransaction, Recall
    group_name: str
    client_host: str  # the tracing client: the trace message's born host
    time_stamp: int
    cost_time: int
    status: str  # success / failed
    msg_id: str
    offset_msg_id: str
    topic: str
    tags: str | None
    keys: str | None
    store_host: str

    def to_dict(self) -> dict[str, Any]:
        return {"msgType": self.msg_type, "groupName": self.group_name, "clientHost": self.client_host,
                "timeStamp": self.time_stamp, "costTime": self.cost_time, "status": self.status,
                "msgId": self.msg_id, "offsetMsgId": self.offset_msg_id, "topic": self.topic, "tags": self.tags,
                "keys": self.keys, "storeHost": self.store_host}


@dataclass(frozen=True)
class StatsAllRow:
    """One line of statsAll: a topic's put figures and one consumer group's lag and get figures
    (group None: nobody consumes the topic, Apache's NO_CONSUMER line)."""

    topic: str
    group: str | None
    accumulation: int
    in_tps: float
    out_tps: float
    in_msg_24h: int
    out_msg_24h: int

    def to_dict(self) -> dict[str, Any]:
        return {"topic": self.topic, "consumerGroup": self.group, "accumulation": self.accumulation,
                "inTPS": self.in_tps, "outTPS": self.out_tps, "inMsg24Hour": self.in_msg_24h,
                "outMsg24Hour": self.out_msg_24h}


@dataclass(frozen=True)
class GroupQueueLag:
    """brokerConsumeStats: one group's position on one queue of one broker."""

    group: str
    topic: str
    broker_name: str
    queue_id: int
    broker_offset: int
    consumer_offset: int
    last_timestamp: int

    @property
    def diff(self) -> int:
        return self.broker_offset - self.consumer_offset

    def to_dict(self) -> dict[str, Any]:
        return {"group": self.group, "topic": self.topic, "brokerName": self.broker_name, "queueId": self.queue_id,
                "brokerOffset": self.broker_offset, "consumerOffset": self.consumer_offset, "diff": self.diff,
                "lastTimestamp": self.last_timestamp}


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
    """One queue of a reset plan: where the group is and where it would go.

    cloneGroupOffset: ``timestamp_offset`` is the source group's offset, ``reset_offset`` what the
    destination holds afterwards as the broker answers it (read back), and ``status`` says whether the
    two agree ("applied") or not ("notApplied": e.g. a pending server-side reset of the destination,
    which the broker answers first). Other plans carry no status."""

    broker_name: str
    queue_id: int
    broker_offset: int
    consumer_offset: int
    timestamp_offset: int
    reset_offset: int
    status: str | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "brokerName": self.broker_name, "queueId": self.queue_id, "brokerOffset": self.broker_offset,
            "consumerOffset": self.consumer_offset, "timestampOffset": self.timestamp_offset,
            "resetOffset": self.reset_offset, "offset": self.reset_offset}
        if self.status is not None:
            out["status"] = self.status
        return out


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
