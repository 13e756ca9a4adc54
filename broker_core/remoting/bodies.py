"""The JSON bodies of the codes we serve and send (spec B.1-B.10), by RocketMQ's class names.

Why typed: both the servers and our client read and write these; a field typo would otherwise only
show up against a Java peer. Enum-valued fields (consumeType, messageModel, userType ...) stay
strings with RocketMQ's names.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .body_base import JsonBody, wire

B = dataclass(kw_only=True)


@dataclass(kw_only=True, frozen=True, order=True)
class MessageQueue(JsonBody):
    """Natural order: topic, brokerName, queueId (spec B.10); hashable, so it can key a map."""

    topic: str
    broker_name: str
    queue_id: int


@B
class DataVersion(JsonBody):
    counter: int = 0
    state_version: int = 0
    timestamp: int = 0


@B
class TopicConfigBody(JsonBody):
    """TopicConfig as it travels (GET_TOPIC_CONFIG, REGISTER_BROKER's topicConfigTable)."""

    topic_name: str
    read_queue_nums: int = 16
    write_queue_nums: int = 16
    perm: int = 6
    topic_filter_type: str = "SINGLE_TAG"
    topic_sys_flag: int = 0
    order: bool = False
    attributes: dict[str, str] = field(default_factory=dict)


@B
class TopicConfigSerializeWrapper(JsonBody):
    topic_config_table: dict[str, TopicConfigBody] = field(default_factory=dict)
    data_version: DataVersion = field(default_factory=DataVersion)
    mapping_data_version: DataVersion | None = None
    topic_queue_mapping_info_map: dict[str, dict[str, int]] | None = None


@B
class RegisterBrokerBody(JsonBody):
    topic_config_serialize_wrapper: TopicConfigSerializeWrapper = field(default_factory=TopicConfigSerializeWrapper)
    filter_server_list: list[str] = field(default_factory=list)


@B
class BrokerData(JsonBody):
    cluster: str
    broker_name: str
    broker_addrs: dict[int, str] = field(default_factory=dict)  # brokerId -> ip:port (0 = master)
    enable_acting_master: bool = False
    zone_name: str | None = None


@B
class QueueData(JsonBody):
    broker_name: str
    read_queue_nums: int
    write_queue_nums: int
    perm: int
    topic_sys_flag: int = 0


@B
class TopicRouteData(JsonBody):
    broker_datas: list[BrokerData] = field(default_factory=list)
    queue_datas: list[QueueData] = field(default_factory=list)
    filter_server_table: dict[str, list[str]] = field(default_factory=dict)
    order_topic_conf: str | None = None


@B
class ClusterInfo(JsonBody):
    broker_addr_table: dict[str, BrokerData] = field(default_factory=dict)
    cluster_addr_table: dict[str, list[str]] = field(default_factory=dict)


@B
class KVTable(JsonBody):
    table: dict[str, str] = field(default_factory=dict)


@B
class TopicList(JsonBody):
    topic_list: list[str] = field(default_factory=list)
    broker_addr: str | None = None


@B
class GroupList(JsonBody):
    group_list: list[str] = field(default_factory=list)


@B
class GetConsumerListByGroupResponseBody(JsonBody):
    consumer_id_list: list[str] = field(default_factory=list)


# -- heartbeats and connections (B.4) --------------------------------------------------------------
@B
class SubscriptionData(JsonBody):
    topic: str
    sub_string: str = "*"
    expression_type: str = "TAG"
    sub_version: int = 0
    tags_set: list[str] = field(default_factory=list)
    code_set: list[int] = field(default_factory=list)
    class_filter_mode: bool = False


@B
class CheckClientRequestBody(JsonBody):
    """CHECK_CLIENT_CONFIG's body (a Java push or lite pull consumer's start): one subscription to check."""

    client_id: str = ""
    group: str = ""
    subscription_data: SubscriptionData | None = None


@B
class ConsumerData(JsonBody):
    group_name: str
    consume_type: str = "CONSUME_PASSIVELY"
    message_model: str = "CLUSTERING"
    consume_from_where: str = "CONSUME_FROM_LAST_OFFSET"
    subscription_data_set: list[SubscriptionData] = field(default_factory=list)
    unit_mode: bool = False


@B
class ProducerData(JsonBody):
    group_name: str


@B
class HeartbeatData(JsonBody):
    client_id: str = wire("clientID")
    producer_data_set: list[ProducerData] = field(default_factory=list)
    consumer_data_set: list[ConsumerData] = field(default_factory=list)
    heartbeat_fingerprint: int = 0
    without_sub: bool = False


@B
class Connection(JsonBody):
    client_id: str
    client_addr: str
    language: str = "JAVA"
    version: int = 0


@B
class ConsumerConnection(JsonBody):
    connection_set: list[Connection] = field(default_factory=list)
    subscription_table: dict[str, SubscriptionData] = field(default_factory=dict)
    consume_type: str | None = None
    message_model: str | None = None
    consume_from_where: str | None = None


@B
class ConsumeQueueData(JsonBody):
    physic_offset: int = 0
    physic_size: int = 0
    tags_code: int = 0
    extend_data_json: str | None = None
    bit_map: str | None = None
    eval: bool = False
    msg: str | None = None


@B
class QueryConsumeQueueResponseBody(JsonBody):
    """QUERY_CONSUME_QUEUE's answer (no subscription/filter data: no consumer group filter is applied)."""

    queue_data: list[ConsumeQueueData] = field(default_factory=list)
    max_queue_index: int = 0
    min_queue_index: int = 0


@B
class ProducerConnection(JsonBody):
    connection_set: list[Connection] = field(default_factory=list)


@B
class LockBatchRequestBody(JsonBody):
    consumer_group: str
    client_id: str
    mq_set: list[MessageQueue] = field(default_factory=list)
    only_this_broker: bool = False


@B
class LockBatchResponseBody(JsonBody):
    lock_ok_mq_set: list[MessageQueue] = wire("lockOKMQSet", default_factory=list)


# -- stats and offsets (B.3) -----------------------------------------------------------------------
@B
class OffsetWrapper(JsonBody):
    broker_offset: int = 0
    consumer_offset: int = 0
    pull_offset: int = 0
    last_timestamp: int = 0


@B
class ConsumeStats(JsonBody):
    offset_table: dict[MessageQueue, OffsetWrapper] = field(default_factory=dict)
    consume_tps: float = 0.0


@B
class ConsumeStatsList(JsonBody):
    """GET_BROKER_CONSUME_STATS' body: one ``{group: [ConsumeStats of each topic]}`` map a subscription
    group, the broker's address, and the lags summed over every queue."""

    consume_stats_list: list[dict[str, list[ConsumeStats]]] = field(default_factory=list)
    broker_addr: str | None = None
    total_diff: int = 0
    total_inflight_diff: int = 0


@B
class TopicOffset(JsonBody):
    min_offset: int = 0
    max_offset: int = 0
    last_update_timestamp: int = 0


@B
class TopicStatsTable(JsonBody):
    offset_table: dict[MessageQueue, TopicOffset] = field(default_factory=dict)
    topic_put_tps: float = 0.0


@B
class ResetOffsetBody(JsonBody):
    offset_table: dict[MessageQueue, int] = field(default_factory=dict)


@B
class TopicConfigAndMappingSerializeWrapper(JsonBody):
    """GET_ALL_TOPIC_CONFIG's body."""

    topic_config_table: dict[str, TopicConfigBody] = field(default_factory=dict)
    data_version: DataVersion = field(default_factory=DataVersion)
    mapping_data_version: DataVersion = field(default_factory=DataVersion)
    topic_queue_mapping_detail_map: dict[str, str] = field(default_factory=dict)


@B
class CreateTopicListRequestBody(JsonBody):
    """UPDATE_AND_CREATE_TOPIC_LIST's body (Apache: @CFNotNull, so the list is required); each
    TopicConfig's attributes are signed changes (``{"+queue.type": "BatchCQ"}``)."""

    topic_config_list: list[TopicConfigBody]


@B
class SubscriptionGroupList(JsonBody):
    """UPDATE_AND_CREATE_SUBSCRIPTIONGROUP_LIST's body (the list is required); group configs stay plain
    objects, read as UPDATE_AND_CREATE_SUBSCRIPTIONGROUP reads its one (the store's JSON shape)."""

    group_config_list: list[dict[str, object]]


@B
class SubscriptionGroupWrapper(JsonBody):
    """GET_ALL_SUBSCRIPTIONGROUP_CONFIG's body; group configs stay plain objects (their shape is
    owned by the store's SubscriptionGroupConfig JSON)."""

    subscription_group_table: dict[str, dict[str, object]] = field(default_factory=dict)
    forbidden_table: dict[str, dict[str, int]] = field(default_factory=dict)
    data_version: DataVersion = field(default_factory=DataVersion)


# -- pop (B.6) -----------------------------------------------------------------------------------
@B
class BatchAck(JsonBody):
    consumer_group: str = wire("c")
    topic: str = wire("t")
    retry: str = wire("r")
    start_offset: int = wire("so")
    queue_id: int = wire("q")
    revive_queue_id: int = wire("rq")
    pop_time: int = wire("pt")
    invisible_time: int = wire("it")
    bit_set: bytes = wire("b")  # java.util.BitSet.toByteArray(): little-endian bits


@B
class BatchAckMessageRequestBody(JsonBody):
    broker_name: str | None = None
    acks: list[BatchAck] = field(default_factory=list)


# -- ACL 2.0 (B.8) ---------------------------------------------------------------------------------
@B
class UserInfo(JsonBody):
    username: str | None = None
    password: str | None = None
    user_type: str | None = None
    user_status: str | None = None


@B
class PolicyEntryInfo(JsonBody):
    resource: str | None = None
    actions: list[str] | None = None
    source_ips: list[str] | None = None
    decision: str | None = None


@B
class PolicyInfo(JsonBody):
    policy_type: str | None = None
    entries: list[PolicyEntryInfo] | None = None


@B
class AclInfo(JsonBody):
    subject: str | None = None
    policies: list[PolicyInfo] | None = None


# -- client diagnostics (consumerStatus, getConsumerStatus, queryMsgById -g -d) ----------------------
@B
class ProcessQueueInfo(JsonBody):
    """One owned queue of a consumer as GET_CONSUMER_RUNNING_INFO reports it (Java's field names,
    ``droped`` included)."""

    commit_offset: int = 0
    cached_msg_min_offset: int = 0
    cached_msg_max_offset: int = 0
    cached_msg_count: int = 0
    cached_msg_size_in_mi_b: int = wire("cachedMsgSizeInMiB", 0)
    transaction_msg_min_offset: int = 0
    transaction_msg_max_offset: int = 0
    transaction_msg_count: int = 0
    locked: bool = False
    try_unlock_times: int = 0
    last_lock_timestamp: int = 0
    droped: bool = False
    last_pull_timestamp: int = 0
    last_consume_timestamp: int = 0


@B
class ConsumeStatus(JsonBody):
    """Per topic: pull/consume round trips (ms) and rates (per second), failures in the last hour."""

    pull_rt: float = wire("pullRT", 0.0)
    pull_tps: float = wire("pullTPS", 0.0)
    consume_rt: float = wire("consumeRT", 0.0)
    consume_ok_tps: float = wire("consumeOKTPS", 0.0)
    consume_failed_tps: float = wire("consumeFailedTPS", 0.0)
    consume_failed_msgs: int = 0


@B
class ConsumerRunningInfo(JsonBody):
    """GET_CONSUMER_RUNNING_INFO (307): what a client answers about one of its consumers."""

    properties: dict[str, str] = field(default_factory=dict)
    subscription_set: list[SubscriptionData] = field(default_factory=list)
    mq_table: dict[MessageQueue, ProcessQueueInfo] = field(default_factory=dict)
    mq_pop_table: dict[MessageQueue, dict[str, object]] = field(default_factory=dict)
    status_table: dict[str, ConsumeStatus] = field(default_factory=dict)
    user_consumer_info: dict[str, str] = field(default_factory=dict)
    jstack: str | None = None


@B
class GetConsumerStatusBody(JsonBody):
    """GET_CONSUMER_STATUS_FROM_CLIENT (221) answer (messageQueueTable) and the broker's gathered
    INVOKE_BROKER_TO_GET_CONSUMER_STATUS (223) answer (consumerTable: clientId -> queue -> offset)."""

    message_queue_table: dict[MessageQueue, int] = field(default_factory=dict)
    consumer_table: dict[str, dict[MessageQueue, int]] = field(default_factory=dict)


@B
class ConsumeMessageDirectlyResult(JsonBody):
    """CONSUME_MESSAGE_DIRECTLY (309) answer; consumeResult is a CMResult name (CR_SUCCESS ...)."""

    order: bool = False
    auto_commit: bool = True
    consume_result: str | None = None
    remark: str | None = None
    spent_time_mills: int = 0


@B
class SetMessageRequestModeRequestBody(JsonBody):
    """SET_MESSAGE_REQUEST_MODE (401): mode is a MessageRequestMode name (PULL, POP)."""

    topic: str
    consumer_group: str
    mode: str = "PULL"
    pop_share_queue_num: int = 0


@B
class BrokerStatsItem(JsonBody):
    sum: int = 0
    tps: float = 0.0
    avgpt: float = 0.0


@B
class BrokerStatsData(JsonBody):
    """VIEW_BROKER_STATS_DATA (315): one stats item over the last minute, hour and day."""

    stats_minute: BrokerStatsItem = field(default_factory=BrokerStatsItem)
    stats_hour: BrokerStatsItem = field(default_factory=BrokerStatsItem)
    stats_day: BrokerStatsItem = field(default_factory=BrokerStatsItem)
