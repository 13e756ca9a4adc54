"""The broker calls every consumer makes: pull, offsets, consumer ids, queue locks, send-back.

Why one module: the pull consumer, the push consumer and its rebalancer need the same calls with the
same error handling (which codes mean "not found" rather than failure), addressed by broker name
through the instance's route cache.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from enum import StrEnum

from broker_core.remoting import RequestCode, ResponseCode
from broker_core.remoting.bodies import (
    GetConsumerListByGroupResponseBody,
    LockBatchRequestBody,
    LockBatchResponseBody,
    MessageQueue,
    SubscriptionData,
)
from broker_core.remoting.headers import (
    ConsumerSendMsgBackRequestHeader,
    GetConsumerListByGroupRequestHeader,
    GetMaxOffsetRequestHeader,
    OffsetResponseHeader,
    PullMessageRequestHeader,
    PullMessageResponseHeader,
    QueryConsumerOffsetRequestHeader,
    SearchOffsetRequestHeader,
    TopicQueueRequestHeader,
    UpdateConsumerOffsetRequestHeader,
)
from broker_core.store.codec.message import MessageExt

from .connection import RemotingError
from .instance import BrokerError, MQClientInstance
from .message import decode_records
from .subscription import matches

log = logging.getLogger(__name__)

# Java's unlockBatchMQ timeout (RebalanceImpl.unlock/unlockAll pass 1000 ms)
UNLOCK_TIMEOUT_S = 1.0

PULL_FLAG_COMMIT_OFFSET = 0x1
PULL_FLAG_SUSPEND = 0x2
PULL_FLAG_SUBSCRIPTION = 0x4


class PullStatus(StrEnum):
    FOUND = "FOUND"
    NO_NEW_MSG = "NO_NEW_MSG"
    NO_MATCHED_MSG = "NO_MATCHED_MSG"
    OFFSET_ILLEGAL = "OFFSET_ILLEGAL"


_PULL_STATUS = {ResponseCode.SUCCESS: PullStatus.FOUND, ResponseCode.PULL_NOT_FOUND: PullStatus.NO_NEW_MSG,
                ResponseCode.PULL_RETRY_IMMEDIATELY: PullStatus.NO_MATCHED_MSG,
                ResponseCode.PULL_OFFSET_MOVED: PullStatus.OFFSET_ILLEGAL}


@dataclass
class PullResult:
    status: PullStatus
    next_begin_offset: int
    min_offset: int
    max_offset: int
    messages: list[MessageExt] = field(default_factory=list)


class ConsumerApi:
    def __init__(self, instance: MQClientInstance, group: str) -> None:
        self.instance = instance
        self.group = group

    async def pull(self, mq: MessageQueue, offset: int, max_nums: int, sub: SubscriptionData, *,
                   commit_offset: int = 0, suspend_ms: int = 0, timeout: float = 10.0) -> PullResult:
        sys_flag = PULL_FLAG_SUBSCRIPTION
        if commit_offset > 0:
            sys_flag |= PULL_FLAG_COMMIT_OFFSET
        if suspend_ms > 0:
            sys_flag |= PULL_FLAG_SUSPEND
        header = PullMessageRequestHeader(
            consumer_group=self.group, topic=mq.topic, queue_id=mq.queue_id, queue_offset=offset,
            max_msg_nums=max_nums, sys_flag=sys_flag, commit_offset=max(commit_offset, 0),
            suspend_timeout_millis=suspend_ms, sub_version=sub.sub_version, subscription=sub.sub_string,
            expression_type=sub.expression_type, bname=mq.broker_name)
        addr = await self.instance.find_broker_addr(mq)
        resp = await self.instance.invoke(addr, RequestCode.PULL_MESSAGE, header,
                                          timeout=max(timeout, suspend_ms / 1000.0 + 5.0))
        status = _PULL_STATUS.get(resp.code)  # type: ignore[call-overload]
        if status is None:
            raise BrokerError(resp.code, resp.remark, addr)
        h = PullMessageResponseHeader.from_ext_fields(resp.ext_fields)
        msgs: list[MessageExt] = []
        if status == PullStatus.FOUND:
            msgs = [m for m in decode_records(resp.body) if matches(sub, m)]
        return PullResult(status, h.next_begin_offset, h.min_offset, h.max_offset, msgs)

    async def query_consumer_offset(self, mq: MessageQueue) -> int | None:
        addr = await self.instance.find_broker_addr(mq)
        header = QueryConsumerOffsetRequestHeader(consumer_group=self.group, topic=mq.topic, queue_id=mq.queue_id,
                                                  set_zero_if_not_found=False)
        resp = await self.instance.invoke(addr, RequestCode.QUERY_CONSUMER_OFFSET, header)
        if resp.code == ResponseCode.QUERY_NOT_FOUND:
            return None
        self.instance.check(resp, addr=addr)
        return OffsetResponseHeader.from_ext_fields(resp.ext_fields).offset

    async def update_consumer_offset(self, mq: MessageQueue, offset: int) -> None:
        addr = await self.instance.find_broker_addr(mq)
        header = UpdateConsumerOffsetRequestHeader(consumer_group=self.group, topic=mq.topic, queue_id=mq.queue_id,
                                                   commit_offset=offset)
        self.instance.check(await self.instance.invoke(addr, RequestCode.UPDATE_CONSUMER_OFFSET, header), addr=addr)

    async def max_offset(self, mq: MessageQueue) -> int:
        addr = await self.instance.find_broker_addr(mq)
        resp = await self.instance.invoke(addr, RequestCode.GET_MAX_OFFSET,
                                          GetMaxOffsetRequestHeader(topic=mq.topic, queue_id=mq.queue_id))
        self.instance.check(resp, addr=addr)
        return OffsetResponseHeader.from_ext_fields(resp.ext_fields).offset

    async def min_offset(self, mq: MessageQueue) -> int:
        addr = await self.instance.find_broker_addr(mq)
        resp = await self.instance.invoke(addr, RequestCode.GET_MIN_OFFSET,
                                          TopicQueueRequestHeader(topic=mq.topic, queue_id=mq.queue_id))
        self.instance.check(resp, addr=addr)
        return OffsetResponseHeader.from_ext_fields(resp.ext_fields).offset

    async def search_offset(self, mq: MessageQueue, timestamp_ms: int) -> int:
        addr = await self.instance.find_broker_addr(mq)
        resp = await self.instance.invoke(addr, RequestCode.SEARCH_OFFSET_BY_TIMESTAMP,
                                          SearchOffsetRequestHeader(topic=mq.topic, queue_id=mq.queue_id,
                                                                    timestamp=timestamp_ms))
        self.instance.check(resp, addr=addr)
        return OffsetResponseHeader.from_ext_fields(resp.ext_fields).offset

    async def subscribe_queues(self, topic: str) -> list[MessageQueue]:
        route = await self.instance.get_route(topic)
        return route.subscribe_queues() if route else []

    async def find_consumer_ids(self, topic: str, group: str) -> list[str] | None:
        """GET_CONSUMER_LIST_BY_GROUP of the topic's brokers in turn, until one has the group's list. None
        when none has (Java's findConsumerIdList answers null): a broker answers SYSTEM_ERROR "no consumer
        for this group" until it has a heartbeat of the group (just after its restart), and one may not
        be reachable; the rebalancer then leaves the topic's queues as they are rather than dropping them."""
        route = await self.instance.get_route(topic)
        if route is None:
            return None
        for b in sorted(route.data.broker_datas, key=lambda b: b.broker_name):
            addr = b.broker_addrs.get(0) or next(iter(b.broker_addrs.values()), None)
            if addr is None:
                continue
            try:
                resp = await self.instance.invoke(addr, RequestCode.GET_CONSUMER_LIST_BY_GROUP,
                                                  GetConsumerListByGroupRequestHeader(consumer_group=group))
            except RemotingError as e:
                log.warning("getting the consumers of %s from %s failed: %s", group, addr, e)
                continue
            if resp.code == ResponseCode.SUCCESS and resp.body:
                return GetConsumerListByGroupResponseBody.from_json(resp.body).consumer_id_list
        return None

    async def lock_batch(self, broker_name: str, mqs: list[MessageQueue]) -> set[MessageQueue]:
        addr = self.instance.broker_addr(broker_name)
        if addr is None:
            return set()
        body = LockBatchRequestBody(consumer_group=self.group, client_id=self.instance.client_id, mq_set=mqs)
        resp = await self.instance.invoke(addr, RequestCode.LOCK_BATCH_MQ, None, body.to_json())
        self.instance.check(resp, addr=addr)
        return set(LockBatchResponseBody.from_json(resp.body).lock_ok_mq_set) if resp.body else set()

    async def unlock_batch(self, broker_name: str, mqs: list[MessageQueue], *, oneway: bool = False) -> None:
        """UNLOCK_BATCH_MQ, as Java's unlockBatchMQ(addr, body, 1000, oneway): a rebalance dropping a queue
        sends it oneway (RebalanceImpl.unlock(mq, true)), so a broker that stops answering does not hold
        the rebalance up by a timeout per queue; shutdown's unlockAll(false) waits, at most 1 s."""
        addr = self.instance.broker_addr(broker_name)
        if addr is None:
            return
        body = LockBatchRequestBody(consumer_group=self.group, client_id=self.instance.client_id, mq_set=mqs)
        if oneway:
            await self.instance.invoke_oneway(addr, RequestCode.UNLOCK_BATCH_MQ, None, body.to_json())
            return
        resp = await self.instance.invoke(addr, RequestCode.UNLOCK_BATCH_MQ, None, body.to_json(),
                                          timeout=UNLOCK_TIMEOUT_S)
        self.instance.check(resp, addr=addr)

    async def send_back(self, msg: MessageExt, broker_name: str, delay_level: int = 0,
                        max_reconsume_times: int = 16) -> None:
        """CONSUMER_SEND_MSG_BACK: the broker re-puts the message to %RETRY%group (or %DLQ%)."""
        addr = self.instance.master_addr(broker_name)  # a write: the master only (findBrokerAddressInPublish)
        if addr is None:
            raise BrokerError(ResponseCode.SYSTEM_ERROR, f"The broker[{broker_name}] not exist")
        header = ConsumerSendMsgBackRequestHeader(offset=msg.commit_log_offset, group=self.group,
                                                  delay_level=delay_level, origin_msg_id=msg.uniq_key or msg.msg_id,
                                                  origin_topic=msg.topic, unit_mode=False,
                                                  max_reconsume_times=max_reconsume_times)
        self.instance.check(await self.instance.invoke(addr, RequestCode.CONSUMER_SEND_MSG_BACK, header), addr=addr)
