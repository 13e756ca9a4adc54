"""Broker handlers for readers: PULL_MESSAGE (long polling), POP / ACK / BATCH_ACK / CHANGE_INVISIBLETIME,
queue locks and consumer offsets (spec B.2, B.3, B.4, B.6)."""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

from broker_core.broker.request_context import RequestContext
from broker_core.broker.wait_steps import drive_in_workers
from broker_core.remoting import RemotingCommand, RequestCode, ResponseCode
from broker_core.remoting.bodies import (
    BatchAckMessageRequestBody,
    LockBatchRequestBody,
    LockBatchResponseBody,
    MessageQueue,
)
from broker_core.remoting.headers import (
    AckMessageRequestHeader,
    ChangeInvisibleTimeRequestHeader,
    ChangeInvisibleTimeResponseHeader,
    GetMaxOffsetRequestHeader,
    OffsetResponseHeader,
    PopMessageRequestHeader,
    PopMessageResponseHeader,
    PullMessageRequestHeader,
    PullMessageResponseHeader,
    QueryConsumerOffsetRequestHeader,
    SearchOffsetRequestHeader,
    TopicQueueRequestHeader,
    UpdateConsumerOffsetRequestHeader,
)
from broker_core.store.codec.wire_record import records_body

from .broker_context import BrokerContext, BrokerHandler
from .channel import Channel, encoded
from .remoting_server import RequestError

if TYPE_CHECKING:
    from broker_core.broker.pop import PopResult
    from broker_core.broker.pull import PullResult

# PullSysFlag (spec B.2.2)
FLAG_COMMIT_OFFSET = 0x1
FLAG_SUSPEND = 0x2
FLAG_SUBSCRIPTION = 0x4
EXTRA_INFO_FIELDS = 7  # ckQueueOffset popTime invisibleTime reviveQid retryFlag brokerName queueId


def receipt_handle(extra_info: str, offset: int) -> str:
    """A remoting ack's extraInfo + offset as the broker's receipt handle (same field order)."""
    parts = extra_info.split(" ")
    if len(parts) < EXTRA_INFO_FIELDS:
        raise RequestError(ResponseCode.MESSAGE_ILLEGAL, f"extraInfo {extra_info!r} has {len(parts)} fields, "
                                                         f"expected {EXTRA_INFO_FIELDS}")
    return " ".join(parts[:EXTRA_INFO_FIELDS] + [str(offset)])


def _pull_answer(req: RemotingCommand, result: PullResult) -> RemotingCommand:
    """PULL_MESSAGE's response, frame encoded (on the worker that read it: a 4 MB body is copied twice)."""
    header = PullMessageResponseHeader(suggest_which_broker_id=result.suggest_which_broker_id,
                                       next_begin_offset=result.next_begin_offset, min_offset=result.min_offset,
                                       max_offset=result.max_offset, topic_sys_flag=result.topic_sys_flag,
                                       group_sys_flag=result.group_sys_flag)
    body = records_body(result.messages) if result.response_code == ResponseCode.SUCCESS else b""
    return encoded(req.response(result.response_code, result.remark, header.to_ext_fields(), body))


def _pop_answer(req: RemotingCommand, result: PopResult) -> RemotingCommand:
    """POP_MESSAGE's response, frame encoded (on the worker that popped the messages)."""
    header = PopMessageResponseHeader(pop_time=result.pop_time, invisible_time=result.invisible_time,
                                      revive_qid=result.revive_qid, rest_num=result.rest_num,
                                      start_offset_info=result.start_offset_info or None,
                                      msg_offset_info=result.msg_offset_info or None,
                                      order_count_info=result.order_count_info or None)
    code = result.response_code
    body = records_body(result.messages) if code == ResponseCode.SUCCESS else b""
    return encoded(req.response(code, result.status.name, header.to_ext_fields(), body))


class ConsumeHandlers:
    def __init__(self, ctx: BrokerContext) -> None:
        self.ctx = ctx
        self.broker = ctx.broker

    def table(self) -> dict[int, BrokerHandler]:
        return {
            RequestCode.PULL_MESSAGE: self.pull_message,
            RequestCode.POP_MESSAGE: self.pop_message,
            RequestCode.ACK_MESSAGE: self.ack_message,
            RequestCode.BATCH_ACK_MESSAGE: self.batch_ack_message,
            RequestCode.CHANGE_MESSAGE_INVISIBLETIME: self.change_invisible_time,
            RequestCode.LOCK_BATCH_MQ: self.lock_batch_mq,
            RequestCode.UNLOCK_BATCH_MQ: self.unlock_batch_mq,
            RequestCode.QUERY_CONSUMER_OFFSET: self.query_consumer_offset,
            RequestCode.UPDATE_CONSUMER_OFFSET: self.update_consumer_offset,
            RequestCode.GET_MAX_OFFSET: self.get_max_offset,
            RequestCode.GET_MIN_OFFSET: self.get_min_offset,
            RequestCode.SEARCH_OFFSET_BY_TIMESTAMP: self.search_offset_by_timestamp,
        }

    async def pull_message(self, ch: Channel, req: RemotingCommand, auth: RequestContext) -> RemotingCommand:
        h = PullMessageRequestHeader.from_ext_fields(req.ext_fields)
        suspend = bool(h.sys_flag & FLAG_SUSPEND)
        commit = h.commit_offset if (h.sys_flag & FLAG_COMMIT_OFFSET and suspend) else None
        # Its own subscription (SUBSCRIPTION flag), else the one its group's heartbeats declared
        own = bool(h.sys_flag & FLAG_SUBSCRIPTION)
        steps = self.broker.pull_message_steps(h.consumer_group, h.topic, h.queue_id, h.queue_offset, h.max_msg_nums,
                                               h.expression_type or "TAG", h.subscription if own else None,
                                               h.suspend_timeout_millis if suspend else 0, commit,
                                               registered_sub_version=None if own else h.sub_version, auth=auth)
        # a suspended pull awaits the Broker's waiter (dispatch wakes it): no thread is parked; each read
        # and the answer's body and frame are made on a pull-lane worker, not on the event loop
        return await drive_in_workers(steps, self.ctx.run, functools.partial(_pull_answer, req))

    async def pop_message(self, ch: Channel, req: RemotingCommand, auth: RequestContext) -> RemotingCommand:
        h = PopMessageRequestHeader.from_ext_fields(req.ext_fields)
        # PopMessageProcessor: a missing or empty exp pops every message (TAG "*"), whatever expType says
        exp_type, exp = (h.exp_type or "TAG", h.exp) if h.exp else ("TAG", "*")
        steps = self.broker.pop_message_steps(h.consumer_group, h.topic, h.queue_id if h.queue_id >= 0 else None,
                                              h.max_msg_nums, h.invisible_time, exp_type, exp,
                                              attempt_id=h.attempt_id, order=h.order, poll_time_ms=h.poll_time,
                                              init_mode=h.init_mode, auth=auth)
        return await drive_in_workers(steps, self.ctx.run, functools.partial(_pop_answer, req))

    async def ack_message(self, ch: Channel, req: RemotingCommand, auth: RequestContext) -> RemotingCommand:
        h = AckMessageRequestHeader.from_ext_fields(req.ext_fields)
        result = await self.ctx.run(self.broker.ack_message, h.consumer_group, h.topic,
                                    receipt_handle(h.extra_info, h.offset), auth=auth)
        return req.response(result.response_code, result.remark or None)

    async def batch_ack_message(self, ch: Channel, req: RemotingCommand, auth: RequestContext) -> RemotingCommand:
        body = BatchAckMessageRequestBody.from_json(req.body)
        broker_name = body.broker_name or self.broker.config.broker_name
        by_group: dict[tuple[str, str], list[str]] = {}
        for ack in body.acks:
            bits = int.from_bytes(ack.bit_set, "little")
            handles = by_group.setdefault((ack.consumer_group, ack.topic), [])
            i = 0
            while bits >> i:
                if bits >> i & 1:
                    handles.append(f"{ack.start_offset} {ack.pop_time} {ack.invisible_time} {ack.revive_queue_id} "
                                   f"{ack.retry} {broker_name} {ack.queue_id} {ack.start_offset + i}")
                i += 1
        for (group, topic), handles in by_group.items():
            await self.ctx.run(self.broker.batch_ack, group, topic, handles, auth=auth)
        return req.response()

    async def change_invisible_time(self, ch: Channel, req: RemotingCommand, auth: RequestContext) -> RemotingCommand:
        h = ChangeInvisibleTimeRequestHeader.from_ext_fields(req.ext_fields)
        result = await self.ctx.run(self.broker.change_invisible_time, h.consumer_group, h.topic,
                                    receipt_handle(h.extra_info, h.offset), h.invisible_time, auth=auth)
        header = ChangeInvisibleTimeResponseHeader(pop_time=result.pop_time, invisible_time=result.invisible_time,
                                                   revive_qid=result.revive_qid)
        return req.response(ext_fields=header.to_ext_fields())

    async def lock_batch_mq(self, ch: Channel, req: RemotingCommand, auth: RequestContext) -> RemotingCommand:
        body = LockBatchRequestBody.from_json(req.body)
        locked = await self.ctx.run(self.broker.lock_batch_mq, body.consumer_group, body.client_id,
                                    [(mq.topic, mq.queue_id) for mq in body.mq_set], auth=auth)
        out = sorted(MessageQueue(topic=mq.topic, broker_name=mq.broker_name, queue_id=mq.queue_id) for mq in locked)
        return req.response(body=LockBatchResponseBody(lock_ok_mq_set=out).to_json())

    async def unlock_batch_mq(self, ch: Channel, req: RemotingCommand, auth: RequestContext) -> RemotingCommand:
        body = LockBatchRequestBody.from_json(req.body)
        await self.ctx.run(self.broker.unlock_batch_mq, body.consumer_group, body.client_id,
                           [(mq.topic, mq.queue_id) for mq in body.mq_set], auth=auth)
        return req.response()

    async def query_consumer_offset(self, ch: Channel, req: RemotingCommand, auth: RequestContext) -> RemotingCommand:
        h = QueryConsumerOffsetRequestHeader.from_ext_fields(req.ext_fields)
        offset = await self.ctx.run(self.broker.query_offset, h.consumer_group, h.topic, h.queue_id, auth=auth)
        if offset < 0:
            # ConsumerManageProcessor#queryConsumerOffset: no stored offset answers 0 only when the
            # queue still holds its message 0, so a new group starts from the first message of a young
            # queue; an empty queue is "not found" and the client picks its consumeFromWhere
            if h.set_zero_if_not_found is False:
                return req.response(ResponseCode.QUERY_NOT_FOUND,
                                    "Not found, do not set to zero, maybe this group boot first")
            min_offset = await self.ctx.run(self.broker.get_min_offset, h.topic, h.queue_id)
            max_offset = await self.ctx.run(self.broker.get_max_offset, h.topic, h.queue_id)
            if min_offset > 0 or max_offset <= 0:
                return req.response(ResponseCode.QUERY_NOT_FOUND,
                                    "Not found, V3_0_6_SNAPSHOT maybe this group consumer boot first")
            offset = 0
        return req.response(ext_fields=OffsetResponseHeader(offset=offset).to_ext_fields())

    async def update_consumer_offset(self, ch: Channel, req: RemotingCommand, auth: RequestContext) -> RemotingCommand:
        h = UpdateConsumerOffsetRequestHeader.from_ext_fields(req.ext_fields)
        applied = await self.ctx.run(self.broker.commit_offset, h.consumer_group, h.topic, h.queue_id,
                                     h.commit_offset, auth=auth)
        return req.response(remark=None if applied else "Offset has been previously reset")

    async def get_max_offset(self, ch: Channel, req: RemotingCommand, auth: RequestContext) -> RemotingCommand:
        h = GetMaxOffsetRequestHeader.from_ext_fields(req.ext_fields)
        offset = await self.ctx.run(self.broker.get_max_offset, h.topic, h.queue_id, auth=auth)
        return req.response(ext_fields=OffsetResponseHeader(offset=offset).to_ext_fields())

    async def get_min_offset(self, ch: Channel, req: RemotingCommand, auth: RequestContext) -> RemotingCommand:
        h = TopicQueueRequestHeader.from_ext_fields(req.ext_fields)
        offset = await self.ctx.run(self.broker.get_min_offset, h.topic, h.queue_id, auth=auth)
        return req.response(ext_fields=OffsetResponseHeader(offset=offset).to_ext_fields())

    async def search_offset_by_timestamp(self, ch: Channel, req: RemotingCommand,
                                         auth: RequestContext) -> RemotingCommand:
        h = SearchOffsetRequestHeader.from_ext_fields(req.ext_fields)
        offset = await self.ctx.run(self.broker.search_offset_by_timestamp, h.topic, h.queue_id, h.timestamp,
                                    (h.boundary_type or "LOWER").lower(), auth=auth)
        return req.response(ext_fields=OffsetResponseHeader(offset=offset).to_ext_fields())
