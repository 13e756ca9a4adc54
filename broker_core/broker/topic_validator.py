"""Topic and group naming rules and the system-topic catalogue (RocketMQ's TopicValidator, spec §11.1)."""

from __future__ import annotations

import re

AUTO_CREATE_TOPIC_KEY_TOPIC = "TBW102"
RMQ_SYS_SCHEDULE_TOPIC = "SCHEDULE_TOPIC_XXXX"
RMQ_SYS_BENCHMARK_TOPIC = "BenchmarkTest"
RMQ_SYS_TRANS_HALF_TOPIC = "RMQ_SYS_TRANS_HALF_TOPIC"
RMQ_SYS_TRACE_TOPIC = "RMQ_SYS_TRACE_TOPIC"
RMQ_SYS_TRANS_OP_HALF_TOPIC = "RMQ_SYS_TRANS_OP_HALF_TOPIC"
RMQ_SYS_TRANS_CHECK_MAX_TIME_TOPIC = "TRANS_CHECK_MAX_TIME_TOPIC"
RMQ_SYS_SELF_TEST_TOPIC = "SELF_TEST_TOPIC"
RMQ_SYS_OFFSET_MOVED_EVENT = "OFFSET_MOVED_EVENT"
RMQ_SYS_ROCKSDB_OFFSET_TOPIC = "CHECKPOINT_TOPIC"
TIMER_TOPIC = "rmq_sys_wheel_timer"
SYSTEM_TOPIC_PREFIX = "rmq_sys_"
SYNC_BROKER_MEMBER_GROUP_PREFIX = SYSTEM_TOPIC_PREFIX + "SYNC_BROKER_MEMBER_"
REVIVE_TOPIC_PREFIX = "rmq_sys_REVIVE_LOG_"
REPLY_TOPIC_POSTFIX = "REPLY_TOPIC"
RETRY_GROUP_TOPIC_PREFIX = "%RETRY%"
DLQ_GROUP_TOPIC_PREFIX = "%DLQ%"
LMQ_PREFIX = "%LMQ%"
SCHEDULE_TOPIC_QUEUE_NUM = 18

TOPIC_MAX_LENGTH = 127
GROUP_MAX_LENGTH = 120
RETRY_OR_DLQ_TOPIC_MAX_LENGTH = 255

SYSTEM_TOPICS = frozenset({
    AUTO_CREATE_TOPIC_KEY_TOPIC, RMQ_SYS_SCHEDULE_TOPIC, RMQ_SYS_BENCHMARK_TOPIC, RMQ_SYS_TRANS_HALF_TOPIC,
    RMQ_SYS_TRACE_TOPIC, RMQ_SYS_TRANS_OP_HALF_TOPIC, RMQ_SYS_TRANS_CHECK_MAX_TIME_TOPIC, RMQ_SYS_SELF_TEST_TOPIC,
    RMQ_SYS_OFFSET_MOVED_EVENT, RMQ_SYS_ROCKSDB_OFFSET_TOPIC,
})
NOT_ALLOWED_SEND_TOPICS = frozenset({
    RMQ_SYS_SCHEDULE_TOPIC, RMQ_SYS_TRANS_HALF_TOPIC, RMQ_SYS_TRANS_OP_HALF_TOPIC,
    RMQ_SYS_TRANS_CHECK_MAX_TIME_TOPIC, RMQ_SYS_SELF_TEST_TOPIC, RMQ_SYS_OFFSET_MOVED_EVENT,
})

# MixAll.CID_RMQ_SYS_PREFIX: groups under it are the broker's own (e.g. CID_RMQ_SYS_TRANS).
CID_RMQ_SYS_PREFIX = "CID_RMQ_SYS_"

# System consumer groups created at start (SubscriptionGroupManager#init).
TOOLS_CONSUMER_GROUP = "TOOLS_CONSUMER"
SYSTEM_GROUPS: tuple[tuple[str, bool], ...] = (
    (TOOLS_CONSUMER_GROUP, True), ("FILTERSRV_CONSUMER", True), ("SELF_TEST_C_GROUP", True),
    ("CID_ONS-HTTP-PROXY", True), ("CID_ONSAPI_PULL", True), ("CID_ONSAPI_PERMISSION", True),
    ("CID_ONSAPI_OWNER", True), ("CID_RMQ_SYS_TRANS", True),
)

_VALID = re.compile(r"^[%|a-zA-Z0-9_-]+$")


def validate_topic(topic: str | None) -> str | None:
    """None when ``topic`` is a legal name, else RocketMQ's remark saying why not."""
    if topic is None or not topic.strip():
        return "The specified topic is blank."
    if not _VALID.match(topic):
        return f"The specified topic: {topic}, contains illegal characters, allowing only ^[%|a-zA-Z0-9_-]+$"
    if topic.startswith(RETRY_GROUP_TOPIC_PREFIX) or topic.startswith(DLQ_GROUP_TOPIC_PREFIX):
        if len(topic) > RETRY_OR_DLQ_TOPIC_MAX_LENGTH:
            return (f"The specified topic is DLQ or Retry topic: {topic}, and it's longer than topic max "
                    f"length: {RETRY_OR_DLQ_TOPIC_MAX_LENGTH}")
    elif len(topic) > TOPIC_MAX_LENGTH:
        return f"The specified topic: {topic}, is longer than topic max length: {TOPIC_MAX_LENGTH}"
    return None


def validate_group(group: str | None) -> str | None:
    if group is None or not group.strip():
        return "The specified group is blank."
    if not _VALID.match(group):
        return f"The specified group: {group}, contains illegal characters, allowing only ^[%|a-zA-Z0-9_-]+$"
    if len(group) > GROUP_MAX_LENGTH:
        return f"The specified group: {group}, is longer than group max length: {GROUP_MAX_LENGTH}"
    return None


def is_sys_consumer_group(group: str) -> bool:
    """MixAll.isSysConsumerGroup: a group reserved for the broker's own consumers."""
    return group.startswith(CID_RMQ_SYS_PREFIX)


def is_retry_topic(topic: str) -> bool:
    return topic.startswith(RETRY_GROUP_TOPIC_PREFIX)


def is_dlq_topic(topic: str) -> bool:
    return topic.startswith(DLQ_GROUP_TOPIC_PREFIX)


def retry_topic(group: str) -> str:
    return RETRY_GROUP_TOPIC_PREFIX + group


def dlq_topic(group: str) -> str:
    return DLQ_GROUP_TOPIC_PREFIX + group


def revive_topic(cluster_name: str) -> str:
    return REVIVE_TOPIC_PREFIX + cluster_name
