"""The typed request/response headers of the codes we serve and send (spec B), by RocketMQ's class names.

Why here and not next to each handler: the server decodes them and our client encodes them; one
definition keeps the two sides from drifting. Field comments only where the wire name or meaning is
not obvious from the spec table. Integer fields carry their Java type: ``int`` is a Java ``int``,
``Long`` a Java ``long`` (as RocketMQ declares them), so a value out of that range is refused.
"""

from __future__ import annotations

from dataclasses import dataclass

from .header_base import CommandHeader, Long, wire

H = dataclass(kw_only=True, slots=True)


# -- name server (B.1) -----------------------------------------------------------------------------
@H
class RegisterBrokerRequestHeader(CommandHeader):
    broker_name: str
    broker_addr: str
    cluster_name: str
    ha_server_addr: str
    broker_id: Long
    heartbeat_timeout_millis: Long | None = None
    enable_acting_master: bool | None = None
    compressed: bool = False
    body_crc32: int = 0


@H
class RegisterBrokerResponseHeader(CommandHeader):
    ha_server_addr: str | None = None
    master_addr: str | None = None


@H
class UnRegisterBrokerRequestHeader(CommandHeader):
    broker_name: str
    broker_addr: str
    cluster_name: str
    broker_id: Long


@H
class GetRouteInfoRequestHeader(CommandHeader):
    topic: str
    accept_standard_json_only: bool | None = None


@H
class DeleteTopicFromNamesrvRequestHeader(CommandHeader):
    topic: str
    cluster_name: str | None = None


@H
class PutKVConfigRequestHeader(CommandHeader):
    namespace: str
    key: str
    value: str


@H
class GetKVConfigRequestHeader(CommandHeader):
    namespace: str
    key: str


@H
class GetKVConfigResponseHeader(CommandHeader):
    value: str | None = None


@H
class DeleteKVConfigRequestHeader(CommandHeader):
    namespace: str
    key: str


@H
class WipeWritePermOfBrokerRequestHeader(CommandHeader):
    broker_name: str


@H
class WipeWritePermOfBrokerResponseHeader(CommandHeader):
    wipe_topic_count: int


@H
class AddWritePermOfBrokerRequestHeader(CommandHeader):
    broker_name: str


@H
class AddWritePermOfBrokerResponseHeader(CommandHeader):
    add_topic_count: int


@H
class GetTopicsByClusterRequestHeader(CommandHeader):
    cluster: str


# -- produce / pull / query (B.2) ------------------------------------------------------------------
@H
class SendMessageRequestHeader(CommandHeader):
    producer_group: str
    topic: str
    default_topic: str
    default_topic_queue_nums: int
    queue_id: int
    sys_flag: int
    born_timestamp: Long
    flag: int
    properties: str | None = None
    reconsume_times: int | None = None
    unit_mode: bool | None = None
    batch: bool | None = None
    max_reconsume_times: int | None = None
    bname: str | None = None


@H
class SendMessageRequestHeaderV2(CommandHeader):
    """SEND_MESSAGE_V2's one-letter names (spec B.2 table)."""

    a: str  # producerGroup
    b: str  # topic
    c: str  # defaultTopic
    d: int  # defaultTopicQueueNums
    e: int  # queueId
    f: int  # sysFlag
    g: Long  # bornTimestamp
    h: int  # flag
    i: str | None = None  # properties
    j: int | None = None  # reconsumeTimes
    k: bool | None = None  # unitMode
    l: int | None = None  # noqa: E741  maxReconsumeTimes
    m: bool | None = None  # batch
    n: str | None = None  # brokerName

    def to_v1(self) -> SendMessageRequestHeader:
        return SendMessageRequestHeader(
            producer_group=self.a, topic=self.b, default_topic=self.c, default_topic_queue_nums=self.d,
            queue_id=self.e, sys_flag=self.f, born_timestamp=self.g, flag=self.h, properties=self.i,
            reconsume_times=self.j, unit_mode=self.k, max_reconsume_times=self.l, batch=self.m, bname=self.n)

    @classmethod
    def from_v1(cls, v1: SendMessageRequestHeader) -> SendMessageRequestHeaderV2:
        return cls(a=v1.producer_group, b=v1.topic, c=v1.default_topic, d=v1.default_topic_queue_nums,
                   e=v1.queue_id, f=v1.sys_flag, g=v1.born_timestamp, h=v1.flag, i=v1.properties,
                   j=v1.reconsume_times, k=v1.unit_mode, l=v1.max_reconsume_times, m=v1.batch, n=v1.bname)


@H
class SendMessageResponseHeader(CommandHeader):
    msg_id: str
    queue_id: int
    queue_offset: Long
    transaction_id: str | None = None
    batch_uniq_id: str | None = None
    recall_handle: str | None = None


@H
class PullMessageRequestHeader(CommandHeader):
    consumer_group: str
    topic: str
    queue_id: int
    queue_offset: Long
    max_msg_nums: int
    sys_flag: int
    commit_offset: Long
    suspend_timeout_millis: Long
    sub_version: Long
    subscription: str | None = None
    expression_type: str | None = None
    max_msg_bytes: int | None = None
    request_source: int | None = None
    proxy_froward_client_id: str | None = wire("proxyFrowardClientId", None)  # (sic) upstream spelling
    bname: str | None = None


@H
class PullMessageResponseHeader(CommandHeader):
    suggest_which_broker_id: Long
    next_begin_offset: Long
    min_offset: Long
    max_offset: Long
    offset_delta: Long | None = None
    topic_sys_flag: int | None = None
    group_sys_flag: int | None = None
    forbidden_type: int | None = None


@H
class QueryMessageRequestHeader(CommandHeader):
    topic: str
    key: str
    max_num: int
    begin_timestamp: Long
    end_timestamp: Long


@H
class QueryMessageResponseHeader(CommandHeader):
    index_last_update_timestamp: Long
    index_last_update_phyoffset: Long


@H
class ViewMessageRequestHeader(CommandHeader):
    offset: Long
    topic: str | None = None


# -- topics, groups, offsets (B.3) -----------------------------------------------------------------
@H
class CreateTopicRequestHeader(CommandHeader):
    topic: str
    default_topic: str
    read_queue_nums: int
    write_queue_nums: int
    perm: int
    topic_filter_type: str
    order: bool = False
    topic_sys_flag: int | None = None
    attributes: str | None = None
    force: bool | None = None


@H
class DeleteTopicRequestHeader(CommandHeader):
    topic: str


@H
class GetTopicConfigRequestHeader(CommandHeader):
    topic: str
    lo: bool | None = None


@H
class GetAllTopicConfigResponseHeader(CommandHeader):
    total_topic_num: int | None = None


@H
class QueryConsumeQueueRequestHeader(CommandHeader):
    """QUERY_CONSUME_QUEUE (mqadmin queryCq)."""

    topic: str
    queue_id: int
    index: Long
    count: int
    consumer_group: str | None = None


@H
class TopicQueueRequestHeader(CommandHeader):
    """GET_MIN_OFFSET, GET_EARLIEST_MSG_STORETIME (topic + queueId)."""

    topic: str
    queue_id: int


@H
class GetMaxOffsetRequestHeader(CommandHeader):
    topic: str
    queue_id: int
    committed: bool = True


@H
class OffsetResponseHeader(CommandHeader):
    """GET_MAX_OFFSET, GET_MIN_OFFSET, SEARCH_OFFSET_BY_TIMESTAMP, QUERY_CONSUMER_OFFSET answers."""

    offset: Long


@H
class GetEarliestMsgStoretimeResponseHeader(CommandHeader):
    timestamp: Long


@H
class SearchOffsetRequestHeader(CommandHeader):
    topic: str
    queue_id: int
    timestamp: Long
    boundary_type: str | None = None


@H
class QueryConsumerOffsetRequestHeader(CommandHeader):
    consumer_group: str
    topic: str
    queue_id: int
    set_zero_if_not_found: bool | None = None


@H
class UpdateConsumerOffsetRequestHeader(CommandHeader):
    consumer_group: str
    topic: str
    queue_id: int
    commit_offset: Long


@H
class GetConsumerListByGroupRequestHeader(CommandHeader):
    consumer_group: str


@H
class GetConsumeStatsRequestHeader(CommandHeader):
    consumer_group: str
    topic: str | None = None
    topic_list: str | None = None


@H
class GetConsumeStatsInBrokerHeader(CommandHeader):
    """GET_BROKER_CONSUME_STATS: ``isOrder`` (required, as Apache's @CFNotNull) keeps orderly topics only."""

    is_order: bool


@H
class TopicRequestHeader(CommandHeader):
    """GET_TOPIC_STATS_INFO, QUERY_TOPIC_CONSUME_BY_WHO (topic only)."""

    topic: str


@H
class GetConsumerConnectionListRequestHeader(CommandHeader):
    consumer_group: str


@H
class ResetOffsetRequestHeader(CommandHeader):
    topic: str
    group: str
    timestamp: Long
    is_force: bool = wire("isForce")
    queue_id: int = -1
    offset: Long | None = None


@H
class DeleteSubscriptionGroupRequestHeader(CommandHeader):
    group_name: str
    clean_offset: bool = False


@H
class GetSubscriptionGroupConfigRequestHeader(CommandHeader):
    group: str


@H
class QueryTopicsByConsumerRequestHeader(CommandHeader):
    group: str


@H
class CloneGroupOffsetRequestHeader(CommandHeader):
    """CLONE_GROUP_OFFSET (314). No topic: every topic the source group holds offsets of. ``offline``
    false: a source group online copies only the topics it subscribes to (AdminBrokerProcessor)."""

    src_group: str
    dest_group: str
    topic: str | None = None
    offline: bool = False


# -- clients, retry, transactions (B.4/B.5/B.9) ----------------------------------------------------
@H
class UnregisterClientRequestHeader(CommandHeader):
    client_id: str = wire("clientID")
    producer_group: str | None = None
    consumer_group: str | None = None


@H
class ConsumerSendMsgBackRequestHeader(CommandHeader):
    offset: Long
    group: str
    delay_level: int
    origin_msg_id: str | None = None
    origin_topic: str | None = None
    unit_mode: bool = False
    max_reconsume_times: int | None = None


@H
class EndTransactionRequestHeader(CommandHeader):
    producer_group: str
    tran_state_table_offset: Long
    commit_log_offset: Long
    commit_or_rollback: int
    msg_id: str
    from_transaction_check: bool = False
    transaction_id: str | None = None
    topic: str | None = None


@H
class CheckTransactionStateRequestHeader(CommandHeader):
    tran_state_table_offset: Long
    commit_log_offset: Long
    topic: str | None = None
    msg_id: str | None = None
    transaction_id: str | None = None
    offset_msg_id: str | None = None


@H
class NotifyConsumerIdsChangedRequestHeader(CommandHeader):
    consumer_group: str


@H
class GetProducerConnectionListRequestHeader(CommandHeader):
    producer_group: str


@H
class GetConsumerRunningInfoRequestHeader(CommandHeader):
    consumer_group: str
    client_id: str
    jstack_enable: bool = False


@H
class ViewBrokerStatsDataRequestHeader(CommandHeader):
    stats_name: str
    stats_key: str


@H
class ConsumeMessageDirectlyResultRequestHeader(CommandHeader):
    consumer_group: str
    client_id: str | None = None
    msg_id: str | None = None
    broker_name: str | None = None
    topic: str | None = None
    topic_sys_flag: int | None = None
    group_sys_flag: int | None = None


@H
class GetConsumerStatusRequestHeader(CommandHeader):
    topic: str
    group: str
    client_addr: str | None = None  # the one client id to ask; empty: every client of the group


# -- pop (B.6) ----------------------------------------------------------------------------------
@H
class PopMessageRequestHeader(CommandHeader):
    consumer_group: str
    topic: str
    queue_id: int
    max_msg_nums: int
    invisible_time: Long
    poll_time: Long
    born_time: Long
    init_mode: int
    exp_type: str | None = None
    exp: str | None = None
    order: bool | None = None
    attempt_id: str | None = None


@H
class PopMessageResponseHeader(CommandHeader):
    pop_time: Long
    invisible_time: Long
    revive_qid: int
    rest_num: Long
    start_offset_info: str | None = None
    msg_offset_info: str | None = None
    order_count_info: str | None = None


@H
class AckMessageRequestHeader(CommandHeader):
    consumer_group: str
    topic: str
    queue_id: int
    extra_info: str
    offset: Long


@H
class ChangeInvisibleTimeRequestHeader(CommandHeader):
    consumer_group: str
    topic: str
    queue_id: int
    extra_info: str
    offset: Long
    invisible_time: Long


@H
class ChangeInvisibleTimeResponseHeader(CommandHeader):
    pop_time: Long
    invisible_time: Long
    revive_qid: int


# -- config (B.7) ----------------------------------------------------------------------------------
@H
class GetBrokerConfigResponseHeader(CommandHeader):
    version: str


# GET_BROKER_CONFIG has no request header in Apache's protocol; an rmqops broker reads this ext field:
# "true" asks for the ACL keys, identity and ports as updateBrokerConfig wrote them to the -c file for
# the next start, not the running ones (an Apache broker ignores it and answers those values anyway).
GET_BROKER_CONFIG_NEXT_START = "nextStart"


# -- ACL 2.0 (B.8) ---------------------------------------------------------------------------------
@H
class UserRequestHeader(CommandHeader):
    """AUTH_CREATE/UPDATE/DELETE/GET_USER."""

    username: str | None = None


@H
class ListUsersRequestHeader(CommandHeader):
    filter: str | None = None


@H
class AclRequestHeader(CommandHeader):
    """AUTH_CREATE/UPDATE/GET_ACL."""

    subject: str | None = None


@H
class DeleteAclRequestHeader(CommandHeader):
    subject: str | None = None
    policy_type: str | None = None
    resource: str | None = None


@H
class ListAclsRequestHeader(CommandHeader):
    subject_filter: str | None = None
    resource_filter: str | None = None
