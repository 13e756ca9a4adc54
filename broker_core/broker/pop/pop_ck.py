"""Pop checkpoint and ack records of the revive log ``rmq_sys_REVIVE_LOG_{cluster}`` (spec §11.4).

Why: in-flight pop state must survive a restart, and RocketMQ keeps it as small JSON messages in the
revive topic: a checkpoint (``ck``) per popped batch, an ``ack`` / ``bAck`` per acknowledgement. We
write the same bodies, tags and UNIQ_KEYs so the log reads the same to a Java broker and to us.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from broker_core.store.codec.message import MessageInner
from broker_core.store.codec.properties import PROPERTY_TAGS, PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX

CK_TAG = "ck"
ACK_TAG = "ack"
BATCH_ACK_TAG = "bAck"
SPLIT = "@"
REVIVE_GROUP = "CID_RMQ_SYS_REVIVE_GROUP"
REVIVE_TOPIC_PREFIX = "rmq_sys_REVIVE_LOG_"


class ReviveRecordError(ValueError):
    """A revive-log body that is not a checkpoint or ack this broker understands."""


def build_cluster_revive_topic(cluster_name: str) -> str:
    return REVIVE_TOPIC_PREFIX + cluster_name


def _compact(obj: dict[str, Any]) -> bytes:
    # fastjson's JSON.toJSONString: compact, bean properties in alphabetical order, nulls omitted.
    return json.dumps({k: obj[k] for k in sorted(obj) if obj[k] is not None}, separators=(",", ":"),
                      ensure_ascii=False).encode("utf-8")


def _loads(body: bytes) -> dict[str, Any]:
    try:
        obj = json.loads(bytes(body).decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ReviveRecordError(f"revive record body is not JSON: {e}") from None
    if not isinstance(obj, dict):
        raise ReviveRecordError("revive record body is not a JSON object")
    return obj


def _pick(obj: dict[str, Any], short: str, long: str, default: Any = None) -> Any:
    return obj[short] if short in obj else obj.get(long, default)


@dataclass(slots=True)
class PopCheckPoint:
    """One popped batch of one queue: which offsets were handed out and which are acked (bit_map)."""

    start_offset: int
    pop_time: int
    invisible_time: int
    queue_id: int
    topic: str
    group: str
    broker_name: str
    queue_offset_diff: list[int] = field(default_factory=list)
    bit_map: int = 0
    revive_offset: int = -1
    re_put_times: str | None = None
    revive_queue_id: int = 0  # not serialized: the revive queue the record lives in

    @property
    def num(self) -> int:
        return len(self.queue_offset_diff)

    @property
    def revive_time(self) -> int:
        return self.pop_time + self.invisible_time

    def index_of_ack(self, ack_offset: int) -> int:
        """PopCheckPoint#indexOfAck: the bit for a queue offset, -1 when not in this batch."""
        if ack_offset < self.start_offset:
            return -1
        try:
            return self.queue_offset_diff.index(ack_offset - self.start_offset)
        except ValueError:
            return -1

    def ack_offset_by_index(self, index: int) -> int:
        return self.start_offset + self.queue_offset_diff[index]

    def is_acked(self, index: int) -> bool:
        return bool(self.bit_map >> index & 1)

    def unacked_offsets(self) -> list[int]:
        return [self.start_offset + d for i, d in enumerate(self.queue_offset_diff) if not self.bit_map >> i & 1]

    @property
    def done(self) -> bool:
        return self.bit_map == (1 << self.num) - 1

    def uniq_id(self) -> str:
        """PopMessageProcessor#genCkUniqueId."""
        return SPLIT.join((self.topic, str(self.queue_id), str(self.start_offset), self.group, str(self.pop_time),
                           self.broker_name, CK_TAG))

    def encode(self) -> bytes:
        return _compact({"so": self.start_offset, "pt": self.pop_time, "it": self.invisible_time,
                         "bm": self.bit_map, "n": self.num, "q": self.queue_id, "t": self.topic, "c": self.group,
                         "ro": self.revive_offset, "d": list(self.queue_offset_diff), "bn": self.broker_name,
                         "rp": self.re_put_times, "reviveTime": self.revive_time})

    @classmethod
    def decode(cls, body: bytes) -> PopCheckPoint:
        obj = _loads(body)
        try:
            start = int(_pick(obj, "so", "startOffset"))
            diff = _pick(obj, "d", "queueOffsetDiff")
            num = int(_pick(obj, "n", "num", 0))
            # Old checkpoints carry no diff list: the batch is startOffset .. startOffset+num-1.
            diffs = [int(d) for d in diff] if diff else list(range(num))
            rp = _pick(obj, "rp", "rePutTimes")
            return cls(start, int(_pick(obj, "pt", "popTime")), int(_pick(obj, "it", "invisibleTime")),
                       int(_pick(obj, "q", "queueId")), str(_pick(obj, "t", "topic")), str(_pick(obj, "c", "cid")),
                       str(_pick(obj, "bn", "brokerName", "")), diffs, int(_pick(obj, "bm", "bitMap", 0)),
                       int(_pick(obj, "ro", "reviveOffset", -1)), None if rp is None else str(rp))
        except (TypeError, ValueError) as e:
            raise ReviveRecordError(f"bad checkpoint record {obj!r}: {e}") from None


@dataclass(slots=True)
class AckMsg:
    """An ack of one offset (``ack``) or several (``bAck``, ``ack_offsets`` set) of one popped batch."""

    ack_offset: int
    start_offset: int
    group: str
    topic: str
    queue_id: int
    pop_time: int
    broker_name: str
    ack_offsets: list[int] | None = None

    @property
    def offsets(self) -> list[int]:
        return list(self.ack_offsets) if self.ack_offsets is not None else [self.ack_offset]

    def uniq_id(self) -> str:
        if self.ack_offsets is not None:
            # genBatchAckUniqueId: Java List.toString() of the offsets, no broker name.
            listed = "[" + ", ".join(str(o) for o in self.ack_offsets) + "]"
            return SPLIT.join((self.topic, str(self.queue_id), listed, self.group, str(self.pop_time),
                               BATCH_ACK_TAG))
        return SPLIT.join((self.topic, str(self.queue_id), str(self.ack_offset), self.group, str(self.pop_time),
                           self.broker_name, ACK_TAG))

    @property
    def tag(self) -> str:
        return BATCH_ACK_TAG if self.ack_offsets is not None else ACK_TAG

    def encode(self) -> bytes:
        obj: dict[str, Any] = {"ao": self.ack_offset, "so": self.start_offset, "c": self.group, "t": self.topic,
                               "q": self.queue_id, "pt": self.pop_time, "bn": self.broker_name}
        if self.ack_offsets is not None:
            obj["aol"] = list(self.ack_offsets)
        return _compact(obj)

    @classmethod
    def decode(cls, body: bytes, batch: bool) -> AckMsg:
        obj = _loads(body)
        try:
            aol = _pick(obj, "aol", "ackOffsetList")
            return cls(int(_pick(obj, "ao", "ackOffset", -1)), int(_pick(obj, "so", "startOffset")),
                       str(_pick(obj, "c", "consumerGroup")), str(_pick(obj, "t", "topic")),
                       int(_pick(obj, "q", "queueId")), int(_pick(obj, "pt", "popTime")),
                       str(_pick(obj, "bn", "brokerName", "")),
                       [int(o) for o in (aol or [])] if batch else None)
        except (TypeError, ValueError) as e:
            raise ReviveRecordError(f"bad ack record {obj!r}: {e}") from None


def build_revive_message(revive_topic: str, revive_qid: int, tag: str, uniq_id: str, body: bytes, now_ms: int,
                         store_host: tuple[str, int]) -> MessageInner:
    """A revive-log record as PopMessageProcessor#buildCkMsg / AckMessageProcessor write it.

    RocketMQ routes these through the timer wheel (TIMER_DELIVER_MS) so the revive thread meets them
    when due; we store them immediately and keep the due times in memory, so no timer property.
    """
    props = {PROPERTY_TAGS: tag, PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX: uniq_id}
    return MessageInner(revive_topic, body, props, revive_qid, 0, 0, now_ms, store_host, store_host)
