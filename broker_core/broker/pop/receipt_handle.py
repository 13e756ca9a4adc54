"""Pop receipt handles (gRPC ``receipt_handle``, remoting ``extraInfo``) and pop retry topic names.

Why: a handle is the only thing a consumer brings back to ack or change a message's invisible
time, so it must carry exactly what RocketMQ's ExtraInfoUtil / ReceiptHandle carry (spec grpc-v2
§7): ``startOffset popTime invisibleTime reviveQid topicType brokerName queueId offset
[commitLogOffset]`` separated by single spaces. Handles built here mean the same thing to a Java
client, the proxy and our own broker; a malformed one is refused with the field that is wrong.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from broker_core.broker.errors import BrokerError
from broker_core.common.response_code import ResponseCode

KEY_SEPARATOR = " "
POP_ORDER_REVIVE_QUEUE = 999  # KeyBuilder.POP_ORDER_REVIVE_QUEUE: marks an orderly (FIFO) pop
RETRY_GROUP_TOPIC_PREFIX = "%RETRY%"
NORMAL_TOPIC = "0"
RETRY_TOPIC_V1 = "1"
RETRY_TOPIC_V2 = "2"
_TOPIC_TYPES = (NORMAL_TOPIC, RETRY_TOPIC_V1, RETRY_TOPIC_V2)
_FIELDS = ("startOffset", "retrieveTime", "invisibleTime", "reviveQueueId", "topicType", "brokerName",
           "queueId", "offset", "commitLogOffset")


class InvalidReceiptHandleError(BrokerError):
    """The handle is not one this broker (or any RocketMQ broker) hands out."""

    code = ResponseCode.INVALID_PARAMETER


def build_pop_retry_topic(topic: str, group: str, v2: bool) -> str:
    """KeyBuilder.buildPopRetryTopic: ``%RETRY%group+topic`` (v2) or ``%RETRY%group_topic`` (v1)."""
    return f"{RETRY_GROUP_TOPIC_PREFIX}{group}{'+' if v2 else '_'}{topic}"


def is_pop_retry_topic_v2(topic: str) -> bool:
    return topic.startswith(RETRY_GROUP_TOPIC_PREFIX) and "+" in topic


def topic_type_of(topic: str) -> str:
    """ExtraInfoUtil#getRetry: the topic-type field for a topic that was popped."""
    if is_pop_retry_topic_v2(topic):
        return RETRY_TOPIC_V2
    if topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
        return RETRY_TOPIC_V1
    return NORMAL_TOPIC


def real_topic(topic: str, group: str, topic_type: str) -> str:
    """ExtraInfoUtil#getRealTopic: the topic a handle's queue id and offsets belong to.

    ``topic`` may be that real topic already: Java's remoting client acks and changes the invisible
    time of a redelivered message with ``%RETRY%group_topic`` (it ran getRealTopic itself); adding the
    prefix again named a topic that does not exist, and every retried message it handled came back."""
    if topic_type == NORMAL_TOPIC or (topic.startswith(RETRY_GROUP_TOPIC_PREFIX) and topic_type in
                                      (RETRY_TOPIC_V1, RETRY_TOPIC_V2)):
        return topic
    if topic_type == RETRY_TOPIC_V1:
        return build_pop_retry_topic(topic, group, False)
    if topic_type == RETRY_TOPIC_V2:
        return build_pop_retry_topic(topic, group, True)
    raise InvalidReceiptHandleError(f"receipt handle topic type must be 0, 1 or 2, got {topic_type!r}")


def parse_normal_topic(topic: str, group: str) -> str:
    """KeyBuilder#parseNormalTopic(topic, cid): the business topic behind a pop retry topic."""
    if not topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
        return topic
    for sep in ("+", "_"):
        prefix = f"{RETRY_GROUP_TOPIC_PREFIX}{group}{sep}"
        if topic.startswith(prefix):
            return topic[len(prefix):]
    return topic


@dataclass(frozen=True, slots=True)
class ReceiptHandle:
    start_offset: int
    retrieve_time: int
    invisible_time: int
    revive_queue_id: int
    topic_type: str
    broker_name: str
    queue_id: int
    offset: int
    commit_log_offset: int = -1

    @property
    def next_visible_time(self) -> int:
        return self.retrieve_time + self.invisible_time

    @property
    def is_order(self) -> bool:
        return self.revive_queue_id == POP_ORDER_REVIVE_QUEUE

    @property
    def is_retry_topic(self) -> bool:
        return self.topic_type in (RETRY_TOPIC_V1, RETRY_TOPIC_V2)

    def is_expired(self, now_ms: int) -> bool:
        return self.next_visible_time <= now_ms

    def real_topic(self, topic: str, group: str) -> str:
        return real_topic(topic, group, self.topic_type)

    def extra_info(self) -> str:
        """The 8-field ExtraInfoUtil form (remoting ``extraInfo``, the Java client's ``POP_CK``)."""
        return KEY_SEPARATOR.join(str(v) for v in (
            self.start_offset, self.retrieve_time, self.invisible_time, self.revive_queue_id, self.topic_type,
            self.broker_name, self.queue_id, self.offset))

    def encode(self) -> str:
        """The 9-field gRPC receipt handle (extraInfo + the message's commit log offset)."""
        return self.extra_info() + KEY_SEPARATOR + str(self.commit_log_offset)

    def with_visibility(self, retrieve_time: int, invisible_time: int, revive_queue_id: int) -> ReceiptHandle:
        return replace(self, retrieve_time=retrieve_time, invisible_time=invisible_time,
                       revive_queue_id=revive_queue_id)

    @classmethod
    def build(cls, start_offset: int, pop_time: int, invisible_time: int, revive_qid: int, topic: str,
              broker_name: str, queue_id: int, offset: int, commit_log_offset: int = -1) -> ReceiptHandle:
        """ExtraInfoUtil#buildExtraInfo: ``topic`` is the topic actually popped (retry or normal)."""
        return cls(start_offset, pop_time, invisible_time, revive_qid, topic_type_of(topic), broker_name, queue_id,
                   offset, commit_log_offset)

    @classmethod
    def decode(cls, text: str) -> ReceiptHandle:
        """Parse either form; at least 8 fields as ReceiptHandle#decode requires."""
        if not isinstance(text, str) or not text.strip():
            raise InvalidReceiptHandleError("receipt handle is empty")
        parts = text.split(KEY_SEPARATOR)
        if len(parts) < 8:
            raise InvalidReceiptHandleError(
                f"receipt handle needs at least 8 space-separated fields ({' '.join(_FIELDS[:8])}), "
                f"got {len(parts)}: {text!r}")
        if len(parts) > 9:
            raise InvalidReceiptHandleError(f"receipt handle has {len(parts)} fields, at most 9 allowed: {text!r}")
        nums: list[int] = []
        for i in (0, 1, 2, 3, 6, 7, 8):
            if i >= len(parts):
                nums.append(-1)
                continue
            try:
                nums.append(int(parts[i]))
            except ValueError:
                raise InvalidReceiptHandleError(
                    f"receipt handle field {_FIELDS[i]} must be an integer, got {parts[i]!r}") from None
        start, retrieve, invisible, revive_qid, qid, offset, cl_offset = nums
        topic_type = parts[4]
        if topic_type not in _TOPIC_TYPES:
            raise InvalidReceiptHandleError(f"receipt handle field topicType must be 0, 1 or 2, got {topic_type!r}")
        if not parts[5]:
            raise InvalidReceiptHandleError("receipt handle field brokerName is empty")
        for name, value in (("startOffset", start), ("retrieveTime", retrieve), ("invisibleTime", invisible),
                            ("reviveQueueId", revive_qid), ("queueId", qid), ("offset", offset)):
            if value < 0:
                raise InvalidReceiptHandleError(f"receipt handle field {name} must be >= 0, got {value}")
        return cls(start, retrieve, invisible, revive_qid, topic_type, parts[5], qid, offset, cl_offset)
