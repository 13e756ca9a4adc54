"""Broker handlers for writers: SEND_MESSAGE / V2 / BATCH, END_TRANSACTION, CONSUMER_SEND_MSG_BACK (spec B.2, B.5)."""

from __future__ import annotations

from typing import Any

from broker_core.broker.errors import MessageIllegalError
from broker_core.broker.request_context import RequestContext
from broker_core.broker.send import SendResult
from broker_core.remoting import RemotingCommand, RequestCode, ResponseCode
from broker_core.remoting.codes import V3_4_9
from broker_core.remoting.headers import (
    ConsumerSendMsgBackRequestHeader,
    EndTransactionRequestHeader,
    SendMessageRequestHeader,
    SendMessageRequestHeaderV2,
    SendMessageResponseHeader,
)
from broker_core.store.codec.batch import decode_batch
from broker_core.store.codec.errors import RecordError
from broker_core.store.codec.properties import decode_properties

from .broker_context import BrokerContext, BrokerHandler
from .channel import Channel

# What Apache's remoting server answers a request its processor rejects (NettyRemotingAbstract): a
# slave's SendMessageProcessor.rejectRequest() is true, so sends and send-backs never reach its store.
REJECT_REQUEST_REMARK = "[REJECTREQUEST]system busy, start flow control for a while"


def _max_reconsume_times(req: RemotingCommand,
                         h: SendMessageRequestHeader | ConsumerSendMsgBackRequestHeader) -> int | None:
    """The header's maxReconsumeTimes from a client of V3_4_9 or later; None (the group's
    retryMaxTimes) for older ones, as SendMessageProcessor and consumerSendMsgBack decide."""
    return h.max_reconsume_times if req.version >= V3_4_9 else None


def authorized_group(req: RemotingCommand, h: SendMessageRequestHeader) -> str | None:
    """The group a send to a retry topic is authorized as (Group [Sub]), as DefaultAuthorizationContextBuilder
    reads it: SEND_MESSAGE_V2 and SEND_BATCH_MESSAGE take the producer group (field ``a``), SEND_MESSAGE the
    ext field ``group``, which a V1 header does not have, so the retry topic's own group is checked. Taking
    V1's producerGroup let a sender choose the group checked and write into another group's retry queue."""
    if req.code == RequestCode.SEND_MESSAGE:
        return req.ext_fields.get("group") or None
    return h.producer_group


def send_header(req: RemotingCommand) -> SendMessageRequestHeader:
    """V1 names or V2 one-letter names; Java picks V2 for SEND_MESSAGE_V2 and for smart batch sends."""
    if req.code == RequestCode.SEND_MESSAGE_V2 or ("b" in req.ext_fields and "topic" not in req.ext_fields):
        return SendMessageRequestHeaderV2.from_ext_fields(req.ext_fields).to_v1()
    return SendMessageRequestHeader.from_ext_fields(req.ext_fields)


class ProduceHandlers:
    def __init__(self, ctx: BrokerContext) -> None:
        self.ctx = ctx
        self.broker = ctx.broker

    def table(self) -> dict[int, BrokerHandler]:
        return {
            RequestCode.SEND_MESSAGE: self.send_message,
            RequestCode.SEND_MESSAGE_V2: self.send_message,
            RequestCode.SEND_BATCH_MESSAGE: self.send_message,
            RequestCode.END_TRANSACTION: self.end_transaction,
            RequestCode.CONSUMER_SEND_MSG_BACK: self.consumer_send_msg_back,
        }

    def _rejected(self, req: RemotingCommand) -> RemotingCommand | None:
        """SYSTEM_BUSY on a slave for SEND_MESSAGE / V2 / BATCH and CONSUMER_SEND_MSG_BACK, as Apache's
        SendMessageProcessor.rejectRequest (no slave acting master here): a producer must write to the
        master; the put pipeline refuses any other path to a slave's store."""
        if self.broker.is_slave:
            return req.response(ResponseCode.SYSTEM_BUSY, REJECT_REQUEST_REMARK)
        return None

    async def send_message(self, ch: Channel, req: RemotingCommand, auth: RequestContext) -> RemotingCommand:
        rejected = self._rejected(req)
        if rejected is not None:
            return rejected
        h = send_header(req)
        props = decode_properties(h.properties) if h.properties else {}
        host, _, port = ch.remote_addr.rpartition(":")
        common = {"queue_id": h.queue_id if h.queue_id >= 0 else None, "born_host": (host, int(port or 0)),
                  "born_timestamp": h.born_timestamp, "sys_flag": h.sys_flag, "producer_group": authorized_group(req, h),
                  "default_topic": h.default_topic, "default_topic_queue_nums": h.default_topic_queue_nums,
                  "auth": auth}
        if req.code == RequestCode.SEND_BATCH_MESSAGE or h.batch:
            limit = self.broker.config.store.max_message_size
            if len(req.body) > limit:  # before decoding: 4 MiB of 22-byte items is ~190k items to build
                raise MessageIllegalError(f"batch body size {len(req.body)} exceeds maxMessageSize {limit}; "
                                          "nothing was stored")
            result = await self.ctx.run(self._send_batch, h.topic, req.body, props, common)
        else:
            result = await self.ctx.run(self.broker.send_message, h.topic, req.body, props, flag=h.flag,
                                        reconsume_times=h.reconsume_times or 0,
                                        max_reconsume_times=_max_reconsume_times(req, h), **common)
        header = SendMessageResponseHeader(msg_id=result.msg_id, queue_id=result.queue_id,
                                           queue_offset=result.queue_offset,
                                           transaction_id=result.transaction_id or result.uniq_key or None,
                                           batch_uniq_id=result.batch_uniq_id)
        ext = header.to_ext_fields() | {"MSG_REGION": result.region_id, "TRACE_ON": "true" if result.trace_on else "false"}
        return req.response(result.response_code, None, ext)

    def _send_batch(self, topic: str, body: bytes, props: dict[str, str], common: dict[str, Any]) -> SendResult:
        """Decode and store a batch on a worker thread (a big batch's decoding would stall the event loop).
        A body that is not a well-formed batch is the client's error: MESSAGE_ILLEGAL, one line."""
        try:
            items = decode_batch(body)
        except RecordError as e:
            raise MessageIllegalError(f"the batch body is malformed: {e}") from None
        return self.broker.send_batch(topic, items, props, **common)

    async def end_transaction(self, ch: Channel, req: RemotingCommand, auth: RequestContext) -> RemotingCommand | None:
        h = EndTransactionRequestHeader.from_ext_fields(req.ext_fields)
        result = await self.ctx.run(self.broker.end_transaction, h.producer_group, h.tran_state_table_offset,
                                    h.commit_log_offset, h.commit_or_rollback, msg_id=h.msg_id,
                                    transaction_id=h.transaction_id, from_transaction_check=h.from_transaction_check,
                                    topic=h.topic, auth=auth)
        code = result.response_code
        return None if code is None else req.response(code, result.remark or None)

    async def consumer_send_msg_back(self, ch: Channel, req: RemotingCommand, auth: RequestContext) -> RemotingCommand:
        rejected = self._rejected(req)
        if rejected is not None:
            return rejected
        h = ConsumerSendMsgBackRequestHeader.from_ext_fields(req.ext_fields)
        await self.ctx.run(self.broker.consumer_send_back, h.group, h.offset, h.delay_level,
                           origin_topic=h.origin_topic, max_reconsume_times=_max_reconsume_times(req, h),
                           auth=auth, origin_msg_id=h.origin_msg_id)
        return req.response()
