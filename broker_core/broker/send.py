"""Produce path: one message or a batch into a topic (SendMessageProcessor, spec B.2 / store §1.11).

Why: topic checks (existence, auto-creation from TBW102, permission, queue id), the properties the
broker adds (UNIQ_KEY when absent, CLUSTER), the batch rules and the choice between an exploded
batch and one BatchCQ inner-batch record must be the same for remoting, gRPC and embedded callers.
Every write goes through the ``PutPipeline`` given at construction (put hooks, then the store), the
same pipeline the Broker's own writers use; ``prepare_transaction`` (given by the Broker) turns
TRAN_MSG sends into half messages.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum

from broker_core.broker.transaction.transactional_message_util import is_transaction_prepare_message
from broker_core.store.codec.batch import BatchItem, encode_batch
from broker_core.store.codec.errors import RecordError
from broker_core.store.codec.message import MessageInner
from broker_core.store.codec.message_id import UniqKeyGenerator
from broker_core.store.codec.properties import (
    PROPERTY_CLUSTER,
    PROPERTY_DELAY_TIME_LEVEL,
    PROPERTY_INNER_NUM,
    PROPERTY_SHARDING_KEY,
    PROPERTY_TIMER_DELAY_MS,
    PROPERTY_TIMER_DELAY_SEC,
    PROPERTY_TIMER_DELIVER_MS,
    PROPERTY_TRANSACTION_PREPARED,
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
    PROPERTY_WAIT_STORE_MSG_OK,
)
from broker_core.store.codec.sys_flag import (
    INNER_BATCH_FLAG,
    MULTI_TAGS_FLAG,
    NEED_UNWRAP_FLAG,
    TRANSACTION_TYPE_MASK,
)
from broker_core.store.codec.validate import PropertiesSizeError, check_properties_fit
from broker_core.store.commit_log import PutMessageResult, PutMessageStatus
from broker_core.store.message_store import MessageStore
from broker_core.store.topic_config import BATCH_CQ, TopicConfig

from .broker_config import BrokerConfig
from .errors import (
    BodyTooLargeError,
    BrokerSystemError,
    InvalidParameterError,
    MessageIllegalError,
    NoPermissionError,
    PropertiesTooLargeError,
    ServiceNotAvailableError,
    TopicNotExistError,
)
from .put_pipeline import PutPipeline
from .queue_selector import RoundRobinSelector, queue_for_message_group
from .subscription_group_manager import SubscriptionGroupManager
from .topic_manager import TopicManager, is_writeable
from .topic_validator import (
    AUTO_CREATE_TOPIC_KEY_TOPIC,
    NOT_ALLOWED_SEND_TOPICS,
    RETRY_GROUP_TOPIC_PREFIX,
    is_retry_topic,
    validate_topic,
)

PutMessage = Callable[[MessageInner], PutMessageResult]

FAQ = "\nSee https://rocketmq.apache.org/docs/bestPractice/06FAQ for further details."


class SendStatus(StrEnum):
    SEND_OK = "SEND_OK"
    FLUSH_DISK_TIMEOUT = "FLUSH_DISK_TIMEOUT"
    FLUSH_SLAVE_TIMEOUT = "FLUSH_SLAVE_TIMEOUT"
    SLAVE_NOT_AVAILABLE = "SLAVE_NOT_AVAILABLE"


@dataclass(slots=True)
class SendResult:
    status: SendStatus
    msg_id: str  # offset msg id(s), comma-joined for an exploded batch
    uniq_key: str  # UNIQ_KEY (what users call msgId); the batch's UNIQ_KEY for batches
    queue_id: int
    queue_offset: int
    topic: str
    transaction_id: str | None = None
    batch_uniq_id: str | None = None
    region_id: str = "DefaultRegion"
    trace_on: bool = True
    commit_log_offset: int = -1
    store_timestamp: int = 0
    msg_num: int = 1
    msg_ids: list[str] = field(default_factory=list)
    uniq_keys: list[str] = field(default_factory=list)

    @property
    def response_code(self) -> int:
        return {SendStatus.SEND_OK: 0, SendStatus.FLUSH_DISK_TIMEOUT: 10, SendStatus.SLAVE_NOT_AVAILABLE: 11,
                SendStatus.FLUSH_SLAVE_TIMEOUT: 12}[self.status]


def _has_timer_or_delay(props: dict[str, str]) -> bool:
    level = props.get(PROPERTY_DELAY_TIME_LEVEL)
    if level is not None and level.strip() not in ("", "0"):
        return True
    return any(k in props for k in (PROPERTY_TIMER_DELIVER_MS, PROPERTY_TIMER_DELAY_SEC, PROPERTY_TIMER_DELAY_MS))


class MessageSender:
    def __init__(self, store: MessageStore, topics: TopicManager, groups: SubscriptionGroupManager,
                 config: BrokerConfig, clock: Callable[[], int], pipeline: PutPipeline | None = None,
                 on_put: Callable[[str, int], None] | None = None,
                 prepare_transaction: PutMessage | None = None) -> None:
        self.store = store
        self.topics = topics
        self.groups = groups
        self.config = config
        self.clock = clock
        self.uniq_keys = UniqKeyGenerator(config.broker_ip1, clock)
        self.pipeline = pipeline or PutPipeline(store)
        self.prepare_transaction = prepare_transaction
        self.round_robin = RoundRobinSelector()
        self._on_put = on_put

    # -- checks (AbstractSendMessageProcessor#msgCheck) --------------------------------------------
    def _resolve_topic(self, topic: str, default_topic: str, default_topic_queue_nums: int | None,
                       topic_sys_flag: int) -> TopicConfig:
        if not is_writeable(self.config.broker_permission):
            raise NoPermissionError(f"the broker[{self.config.broker_ip1}] sending message is forbidden")
        bad = validate_topic(topic)
        if bad:
            raise InvalidParameterError(bad)
        if topic in NOT_ALLOWED_SEND_TOPICS:
            raise NoPermissionError(f"Sending message to topic[{topic}] is forbidden.")
        tc = self.topics.get(topic)
        if tc is None and is_retry_topic(topic):
            group = topic[len(RETRY_GROUP_TOPIC_PREFIX):]
            sgc = self.groups.get(group)
            n = sgc.retry_queue_nums if sgc is not None else 1
            tc = self.topics.create_if_absent(TopicConfig(topic, n, n, 6))
        if tc is None:
            tc = self.topics.create_in_send(topic, default_topic, default_topic_queue_nums, topic_sys_flag)
        if tc is None:
            raise TopicNotExistError(f"topic[{topic}] not exist, apply first please!" + FAQ)
        if not is_writeable(tc.perm):
            raise NoPermissionError(f"the topic[{topic}] sending message is forbidden")
        return tc

    def _select_queue(self, tc: TopicConfig, queue_id: int | None, message_group: str | None) -> int:
        writable = tc.write_queue_nums
        if writable <= 0:
            raise NoPermissionError(f"the topic[{tc.topic_name}] has no write queue")
        if message_group:
            return queue_for_message_group(message_group, writable)
        if queue_id is None or queue_id < 0:
            return self.round_robin.select(tc.topic_name, writable)
        max_qid = max(tc.read_queue_nums, tc.write_queue_nums)
        if queue_id >= max_qid:
            raise InvalidParameterError(
                f"request queueId[{queue_id}] is illegal, topic:[{tc.topic_name}] topicConfig.writeQueueNums: "
                f"[{tc.write_queue_nums}] consumer:[{tc.read_queue_nums}]")
        return queue_id

    def _check_size(self, body: bytes, what: str = "message body") -> None:
        limit = self.config.store.max_message_size
        if len(body) > limit:
            raise BodyTooLargeError(f"{what} size {len(body)} exceeds maxMessageSize {limit}; nothing was stored")

    # -- single message ------------------------------------------------------------------------------
    def send_message(self, topic: str, body: bytes, properties: dict[str, str] | None = None, *,
                     queue_id: int | None = None, message_group: str | None = None, flag: int = 0,
                     born_host: tuple[str, int] = ("127.0.0.1", 0), born_timestamp: int | None = None,
                     sys_flag: int = 0, reconsume_times: int = 0, default_topic: str = AUTO_CREATE_TOPIC_KEY_TOPIC,
                     default_topic_queue_nums: int | None = None, topic_sys_flag: int = 0,
                     max_reconsume_times: int | None = None,
                     group_locked: Callable[[str], bool] | None = None) -> SendResult:
        """One message. To ``%RETRY%group`` (a client's own retry or dead-lettering send) it goes to
        ``%DLQ%group`` instead when its retries are used up (``_retry_or_dlq``): ``max_reconsume_times``
        is the header's (None: the group's retryMaxTimes), ``group_locked`` tells whether the group
        holds an unexpired orderly queue lock."""
        props = dict(properties or {})
        tc = self._resolve_topic(topic, default_topic, default_topic_queue_nums, topic_sys_flag)
        self._check_size(body)
        group = message_group or props.get(PROPERTY_SHARDING_KEY) or None
        qid = self._select_queue(tc, queue_id, group)
        uniq = props.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
        if not uniq:
            uniq = self.uniq_keys.next_id()
            props[PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX] = uniq
        props[PROPERTY_CLUSTER] = self.config.broker_cluster_name
        if is_retry_topic(topic):
            tc, qid = self._retry_or_dlq(tc, qid, props, reconsume_times, max_reconsume_times, group_locked)
            topic = tc.topic_name
        if tc.topic_filter_type == "MULTI_TAG":
            sys_flag |= MULTI_TAGS_FLAG
        if props.get(PROPERTY_TRANSACTION_PREPARED, "").lower() == "true" and self.config.reject_transaction_message:
            raise NoPermissionError(f"the broker[{self.config.broker_ip1}] sending transaction message is forbidden")
        msg = MessageInner(topic, bytes(body), props, qid, flag, sys_flag,
                           self.clock() if born_timestamp is None else born_timestamp, born_host,
                           self.config.store_host, reconsume_times)
        if self.prepare_transaction is not None and is_transaction_prepare_message(msg):
            # The producer gets the half's offsets back (msgId, queue offset): END_TRANSACTION names them.
            result = self.prepare_transaction(msg)
        else:
            result = self.pipeline.put(msg)
        self._raise_for(result)
        self._count(topic, 1)
        return SendResult(self._status(result), result.msg_id, uniq, qid, result.queue_offset, topic,
                          transaction_id=uniq, region_id=self.config.region_id, trace_on=self.config.trace_on,
                          commit_log_offset=result.wrote_offset, store_timestamp=result.store_timestamp,
                          msg_ids=list(result.msg_ids or [result.msg_id]), uniq_keys=[uniq])

    def _retry_or_dlq(self, tc: TopicConfig, qid: int, props: dict[str, str], reconsume_times: int,
                      max_reconsume_times: int | None, group_locked: Callable[[str], bool] | None
                      ) -> tuple[TopicConfig, int]:
        """SendMessageProcessor#handleRetryAndDLQ for a send to ``%RETRY%group``: the message goes to
        ``%DLQ%group`` (queue 0, DELAY -1 so no delay the client asked for applies) when its reconsume
        times exceed the maximum (the header's, else the group's retryMaxTimes; ``>`` as RocketMQ 5:
        clients send the next attempt's count) or when the group holds an unexpired orderly queue
        lock (an orderly consumer only sends here to dead-letter). Why: Java orderly consumers and the
        client fallback of a failed send back dead-letter this way; without it such a message went
        back to %RETRY% forever. Like the send-back DLQ copy it keeps DLQ_ORIGIN_TOPIC / _MESSAGE_ID."""
        from broker_core.store.codec.properties import (
            PROPERTY_DLQ_ORIGIN_MESSAGE_ID,
            PROPERTY_DLQ_ORIGIN_TOPIC,
            PROPERTY_RETRY_TOPIC,
        )

        from .retry import DLQ_NUMS_PER_GROUP, PERM_READ_WRITE, dlq_topic

        name = tc.topic_name[len(RETRY_GROUP_TOPIC_PREFIX):]
        parts = name.split("+")  # KeyBuilder.parseGroup: a pop retry topic v2 is %RETRY%group+topic
        group = parts[0] if len(parts) == 2 else name
        cfg = self.groups.find(group)  # SubscriptionGroupNotExistError as RocketMQ's SUBSCRIPTION_GROUP_NOT_EXIST
        max_times = cfg.retry_max_times if max_reconsume_times is None else max_reconsume_times
        locked = group_locked is not None and group_locked(group)
        if reconsume_times <= max_times and not locked:
            return tc, qid
        dlq = self.topics.create_if_absent(TopicConfig(dlq_topic(group), DLQ_NUMS_PER_GROUP, DLQ_NUMS_PER_GROUP,
                                                       PERM_READ_WRITE))
        props[PROPERTY_DELAY_TIME_LEVEL] = "-1"
        props.setdefault(PROPERTY_DLQ_ORIGIN_TOPIC, props.get(PROPERTY_RETRY_TOPIC) or tc.topic_name)
        props.setdefault(PROPERTY_DLQ_ORIGIN_MESSAGE_ID, props[PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX])
        return dlq, 0  # DLQ_NUMS_PER_GROUP is 1: randomQueueId(1)

    # -- batch ---------------------------------------------------------------------------------------
    def send_batch(self, topic: str, messages: Sequence[BatchItem], properties: dict[str, str] | None = None, *,
                   queue_id: int | None = None, message_group: str | None = None,
                   born_host: tuple[str, int] = ("127.0.0.1", 0), born_timestamp: int | None = None,
                   sys_flag: int = 0, flag: int = 0, default_topic: str = AUTO_CREATE_TOPIC_KEY_TOPIC,
                   default_topic_queue_nums: int | None = None) -> SendResult:
        """SEND_BATCH_MESSAGE. Every rule is checked before anything is written: all or nothing."""
        items = list(messages)
        if not items:
            raise MessageIllegalError("batch has no messages")
        batch_props = dict(properties or {})
        if is_retry_topic(topic):
            raise MessageIllegalError(f"batch request does not support retry group {topic}")
        if len(topic) > 127:
            raise MessageIllegalError(f"message topic length too long {len(topic)}")
        if sys_flag & TRANSACTION_TYPE_MASK or batch_props.get(PROPERTY_TRANSACTION_PREPARED, "").lower() == "true":
            raise MessageIllegalError("batch messages cannot be transactional")
        if _has_timer_or_delay(batch_props):
            raise MessageIllegalError("batch messages cannot carry a delay level or timer properties")
        waits = set()
        for i, item in enumerate(items):
            if _has_timer_or_delay(item.properties):
                raise MessageIllegalError(f"batch item {i} carries a delay level or timer properties; "
                                          "delayed messages cannot be batched")
            if item.properties.get(PROPERTY_TRANSACTION_PREPARED, "").lower() == "true":
                raise MessageIllegalError(f"batch item {i} is a transaction message; it cannot be batched")
            waits.add(item.properties.get(PROPERTY_WAIT_STORE_MSG_OK, "true").lower())
            self._check_size(item.body, f"batch item {i} body")
        if len(waits) > 1:
            raise MessageIllegalError("all messages of a batch must have the same WAIT (waitStoreMsgOK) flag")
        item_keys = []
        for item in items:
            uk = item.properties.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
            if not uk:
                uk = self.uniq_keys.next_id()
                item.properties[PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX] = uk
            item_keys.append(uk)
        for i, item in enumerate(items):
            # what is stored (the item's properties with the UNIQ_KEY just added) must encode faithfully
            # and fit the i16 PROPERTIES length of a batch item and of a record: refused here, before
            # any write (an inner-batch body is not checked record by record)
            try:
                check_properties_fit(item.properties)
            except PropertiesSizeError as e:
                raise PropertiesTooLargeError(f"batch item {i} {e}; nothing was stored") from None
            except RecordError as e:
                raise MessageIllegalError(f"batch item {i}: {e}; nothing was stored") from None
        tc = self._resolve_topic(topic, default_topic, default_topic_queue_nums, 0)
        group = message_group or batch_props.get(PROPERTY_SHARDING_KEY) or None
        qid = self._select_queue(tc, queue_id, group)
        if tc.topic_filter_type == "MULTI_TAG":
            sys_flag |= MULTI_TAGS_FLAG
        born = self.clock() if born_timestamp is None else born_timestamp
        if waits == {"false"}:
            batch_props.setdefault(PROPERTY_WAIT_STORE_MSG_OK, "false")
        # Apache's sendBatchMessage: an inner batch only when the batch itself carries a UNIQ_KEY (Java's
        # producer and the proxy set one); a batch without one is stored message by message on a BatchCQ
        # topic too, each with its own TAGS, KEYS and index entries (an inner batch has only the outer ones)
        if tc.queue_type == BATCH_CQ and batch_props.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX):
            return self._put_inner_batch(tc, qid, items, batch_props, sys_flag, flag, born, born_host, item_keys)
        return self._put_exploded(tc, qid, items, sys_flag, born, born_host, item_keys, batch_props)

    def _put_inner_batch(self, tc: TopicConfig, qid: int, items: list[BatchItem], batch_props: dict[str, str],
                         sys_flag: int, flag: int, born: int, born_host: tuple[str, int],
                         item_keys: list[str]) -> SendResult:
        body = encode_batch(items)
        self._check_size(body, "inner batch body")
        uniq = batch_props[PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX]
        props = dict(batch_props)
        props[PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX] = uniq
        props[PROPERTY_CLUSTER] = self.config.broker_cluster_name
        props[PROPERTY_INNER_NUM] = str(len(items))
        msg = MessageInner(tc.topic_name, body, props, qid, flag, sys_flag | NEED_UNWRAP_FLAG | INNER_BATCH_FLAG,
                           born, born_host, self.config.store_host)
        result = self.pipeline.put_inner_batch(msg, len(items))
        self._raise_for(result)
        self._count(tc.topic_name, len(items))
        return SendResult(self._status(result), result.msg_id, uniq, qid, result.queue_offset, tc.topic_name,
                          transaction_id=uniq, batch_uniq_id=uniq, region_id=self.config.region_id,
                          trace_on=self.config.trace_on, commit_log_offset=result.wrote_offset,
                          store_timestamp=result.store_timestamp, msg_num=len(items),
                          msg_ids=[result.msg_id], uniq_keys=item_keys)

    def _put_exploded(self, tc: TopicConfig, qid: int, items: list[BatchItem], sys_flag: int, born: int,
                      born_host: tuple[str, int], item_keys: list[str], batch_props: dict[str, str]) -> SendResult:
        self._check_size(encode_batch(items), "batch")
        msgs = [MessageInner(tc.topic_name, item.body, dict(item.properties), qid, item.flag, sys_flag, born,
                             born_host, self.config.store_host) for item in items]
        if batch_props.get(PROPERTY_WAIT_STORE_MSG_OK) == "false":
            msgs[0].properties.setdefault(PROPERTY_WAIT_STORE_MSG_OK, "false")
        result = self.pipeline.put_batch(msgs)
        self._raise_for(result)
        self._count(tc.topic_name, len(items))
        uniq = batch_props.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX) or ",".join(item_keys)
        return SendResult(self._status(result), result.msg_id, uniq, qid, result.queue_offset, tc.topic_name,
                          transaction_id=uniq, region_id=self.config.region_id, trace_on=self.config.trace_on,
                          commit_log_offset=result.wrote_offset, store_timestamp=result.store_timestamp,
                          msg_num=len(items), msg_ids=list(result.msg_ids or []), uniq_keys=item_keys)

    # -- results -------------------------------------------------------------------------------------
    @staticmethod
    def _status(result: PutMessageResult) -> SendStatus:
        if result.status is PutMessageStatus.FLUSH_DISK_TIMEOUT:
            return SendStatus.FLUSH_DISK_TIMEOUT
        return SendStatus.SEND_OK

    @staticmethod
    def _raise_for(result: PutMessageResult) -> None:
        status = result.status
        if status in (PutMessageStatus.PUT_OK, PutMessageStatus.FLUSH_DISK_TIMEOUT):
            return
        if status is PutMessageStatus.WHEEL_TIMER_MSG_ILLEGAL:
            raise MessageIllegalError(result.remark or status.value)
        if status in (PutMessageStatus.WHEEL_TIMER_NOT_ENABLE, PutMessageStatus.WHEEL_TIMER_FLOW_CONTROL):
            # SYSTEM_ERROR, as Apache's SendMessageProcessor answers both: a producer retries it on another
            # broker, whose wheel may be enabled or less crowded (MESSAGE_ILLEGAL failed the send outright)
            raise BrokerSystemError(result.remark or status.value)
        if status is PutMessageStatus.PROPERTIES_SIZE_EXCEEDED:
            raise PropertiesTooLargeError(
                f"the message is illegal, maybe msg body or properties length not matched: {result.remark}")
        if status is PutMessageStatus.MESSAGE_ILLEGAL:
            raise MessageIllegalError(
                f"the message is illegal, maybe msg body or properties length not matched: {result.remark}")
        if status is PutMessageStatus.SERVICE_NOT_AVAILABLE:
            raise ServiceNotAvailableError(f"service not available now: {result.remark or 'store is not writable'}")
        raise BrokerSystemError(f"put message failed: {status.value} {result.remark}".strip())

    def _count(self, topic: str, n: int) -> None:
        if self._on_put is not None:
            self._on_put(topic, n)
