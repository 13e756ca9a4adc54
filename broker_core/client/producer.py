"""Producer: sync, async (future/callback), oneway, batch, ordered-by-key, transactional and AutoBatch sends.

Why this shape: it follows DefaultMQProducer's contract so RocketMQ users find what they expect —
queues picked round-robin with the failed broker avoided on retry (2 retries), SEND_MESSAGE_V2
headers, SendStatus from the response code, UNIQ_KEY as the user-visible msgId — and the
transactional producer answers the broker's CHECK_TRANSACTION_STATE with END_TRANSACTION on the
connection the check came in on. With ``auto_batch`` on, sync and async sends go through the
ProduceAccumulator (seed 004) and still answer one SendResult per message.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol

from broker_core.remoting import RemotingCommand, RequestCode, ResponseCode
from broker_core.remoting.bodies import MessageQueue, ProducerData
from broker_core.remoting.headers import (
    CheckTransactionStateRequestHeader,
    EndTransactionRequestHeader,
    SendMessageRequestHeader,
    SendMessageRequestHeaderV2,
    SendMessageResponseHeader,
)
from broker_core.store.codec.batch import BatchItem, encode_batch, encode_batch_item
from broker_core.store.codec.message import MessageExt, RecordError
from broker_core.store.codec.message_id import decode_offset_msg_id
from broker_core.store.codec.properties import encode_properties
from broker_core.store.codec.sys_flag import TRANSACTION_PREPARED_TYPE
from broker_core.store.codec.trace_data import MessageType as TraceMessageType
from broker_core.store.codec.trace_data import TraceBean, TraceContext, TraceType

from .config_check import JAVA_INT_MAX, check_int, check_positive_seconds
from .connection import RemotingConnection, RemotingError, RemotingTimeoutError
from .instance import BrokerError, ClientStateError, MQClientInstance
from .message import (
    DEFAULT_MAX_MESSAGE_SIZE,
    PROPERTY_DELAY_TIME_LEVEL,
    PROPERTY_KEYS,
    PROPERTY_PRODUCER_GROUP,
    PROPERTY_TAGS,
    PROPERTY_TRANSACTION_PREPARED,
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
    PROPERTY_WAIT_STORE_MSG_OK,
    Message,
    MessageCheckError,
    check_body_size,
    check_message,
    decode_records,
    new_uniq_key,
)
from .produce_accumulator import (
    DEFAULT_BATCH_MAX_BYTES,
    DEFAULT_BATCH_MAX_DELAY_MS,
    DEFAULT_TOTAL_BATCH_MAX_BYTES,
    AggregateKey,
    ProduceAccumulator,
    check_batch_settings,
)
from .selector import RoundRobinSelector, select_by_key
from .trace import DEFAULT_REGION, TraceDispatcher

log = logging.getLogger(__name__)

DEFAULT_TOPIC = "TBW102"
DEFAULT_TOPIC_QUEUE_NUMS = 4
# Codes after which Java's producer tries another queue/broker instead of failing at once.
_RETRY_CODES = {ResponseCode.TOPIC_NOT_EXIST, ResponseCode.SERVICE_NOT_AVAILABLE, ResponseCode.SYSTEM_ERROR,
                ResponseCode.NO_PERMISSION, ResponseCode.NO_BUYER_ID, ResponseCode.NOT_IN_CURRENT_UNIT,
                ResponseCode.SYSTEM_BUSY}
RETRY_GROUP_TOPIC_PREFIX = "%RETRY%"
# Properties that make a message unbatchable (delay/timer, transaction): the broker refuses them in a batch.
_UNBATCHABLE_PROPERTIES = (PROPERTY_DELAY_TIME_LEVEL, "TIMER_DELIVER_MS", "TIMER_DELAY_SEC", "TIMER_DELAY_MS",
                           PROPERTY_TRANSACTION_PREPARED, PROPERTY_PRODUCER_GROUP)


class _AttemptFailed(Exception):
    """One attempt of a send failed in a way another broker may not: which broker, and why."""

    def __init__(self, broker: str, error: BrokerError | RemotingError) -> None:
        super().__init__(str(error))
        self.broker = broker
        self.error = error


class SendStatus(StrEnum):
    SEND_OK = "SEND_OK"
    FLUSH_DISK_TIMEOUT = "FLUSH_DISK_TIMEOUT"
    FLUSH_SLAVE_TIMEOUT = "FLUSH_SLAVE_TIMEOUT"
    SLAVE_NOT_AVAILABLE = "SLAVE_NOT_AVAILABLE"


_STATUS_BY_CODE = {ResponseCode.SUCCESS: SendStatus.SEND_OK,
                   ResponseCode.FLUSH_DISK_TIMEOUT: SendStatus.FLUSH_DISK_TIMEOUT,
                   ResponseCode.FLUSH_SLAVE_TIMEOUT: SendStatus.FLUSH_SLAVE_TIMEOUT,
                   ResponseCode.SLAVE_NOT_AVAILABLE: SendStatus.SLAVE_NOT_AVAILABLE}


@dataclass(frozen=True)
class SendResult:
    status: SendStatus
    msg_id: str  # UNIQ_KEY (comma-joined for a batch)
    offset_msg_id: str
    message_queue: MessageQueue
    queue_offset: int
    transaction_id: str | None = None


class LocalTransactionState(StrEnum):
    COMMIT_MESSAGE = "COMMIT_MESSAGE"
    ROLLBACK_MESSAGE = "ROLLBACK_MESSAGE"
    UNKNOW = "UNKNOW"


_COMMIT_OR_ROLLBACK = {LocalTransactionState.COMMIT_MESSAGE: 8, LocalTransactionState.ROLLBACK_MESSAGE: 12,
                       LocalTransactionState.UNKNOW: 0}


class TransactionListener(Protocol):
    def execute_local_transaction(self, msg: Message, arg: object) -> LocalTransactionState: ...

    def check_local_transaction(self, msg: MessageExt) -> LocalTransactionState: ...


@dataclass(frozen=True)
class TransactionSendResult:
    send_result: SendResult
    local_state: LocalTransactionState


class Producer:
    def __init__(self, group: str, instance: MQClientInstance, *, send_timeout: float = 3.0,
                 retry_times_when_send_failed: int = 2, use_v2_header: bool = True, auto_batch: bool = False,
                 batch_max_bytes: int = DEFAULT_BATCH_MAX_BYTES, batch_max_delay_ms: int = DEFAULT_BATCH_MAX_DELAY_MS,
                 total_batch_max_bytes: int = DEFAULT_TOTAL_BATCH_MAX_BYTES, enable_msg_trace: bool = False,
                 custom_trace_topic: str | None = None, max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE) -> None:
        self.group = group
        self.instance = instance
        self.send_timeout = send_timeout
        self.retries = retry_times_when_send_failed
        self.use_v2_header = use_v2_header
        # Java's maxMessageSize (4 MiB): a larger body, or batch, is refused before it is sent
        self.max_message_size = max_message_size
        # AutoBatch (Java's setAutoBatch/batchMaxBytes/batchMaxDelayMs/totalBatchMaxBytes): read when the
        # first batched send creates the accumulator.
        self.auto_batch = auto_batch
        self.batch_max_bytes = batch_max_bytes
        self.batch_max_delay_ms = batch_max_delay_ms
        self.total_batch_max_bytes = total_batch_max_bytes
        self._accumulator: ProduceAccumulator | None = None
        self._selector = RoundRobinSelector()
        self._started = False
        self._shut_down = False
        # Java's enableMsgTrace/customizedTraceTopic: every send also writes a Pub trace context
        self.trace: TraceDispatcher | None = (TraceDispatcher(instance, group, custom_trace_topic)
                                              if enable_msg_trace else None)
        self._check_config()

    def _check_config(self) -> None:
        """Settings out of range raise ClientConfigError here, naming the parameter, not at a send far from
        their cause: before, ``retry_times_when_send_failed=-1`` or ``send_timeout<=0`` failed every send at
        once, unsent, with "got no answer within 3s", and bad AutoBatch settings turned batching off or
        failed every batch. Checked at construction and again by start() (the attributes are public)."""
        check_positive_seconds("send_timeout", self.send_timeout, "sendMsgTimeout")
        check_int("retry_times_when_send_failed", self.retries, 0, JAVA_INT_MAX, "retryTimesWhenSendFailed")
        check_int("max_message_size", self.max_message_size, 1, JAVA_INT_MAX, "maxMessageSize")
        check_batch_settings(self.batch_max_bytes, self.batch_max_delay_ms, self.total_batch_max_bytes)

    # ----------------------------------------------------------------- lifecycle
    async def start(self) -> None:
        self._check_config()
        self.instance.register_producer(self.group, self)
        await self.instance.start()
        # as Java's start: brokers learn the group now, not at the next periodic heartbeat (30 s), or a
        # transaction check-back meanwhile finds no live producer of the group. A new instance knows no
        # broker before its first send, so it reads TBW102's route first, as Java's producer puts TBW102
        # in its publish table at start: a restarted transaction producer was never asked about the
        # halves its predecessor left, and the broker gave them up after transactionCheckMax checks.
        await self._learn_brokers()
        await self.instance.send_heartbeat_to_all()
        self._started = True
        self._shut_down = False
        if self.trace is not None:
            await self.trace.start()

    async def _learn_brokers(self) -> None:
        try:
            if await self.instance.get_route(DEFAULT_TOPIC) is None:  # autoCreateTopicEnable=false: no TBW102
                await self.instance.cluster_info()
        except (RemotingError, BrokerError) as e:  # the name server is not up yet: the periodic tasks catch up
            log.warning("producer %s: no broker known at start (%s); heartbeats start with the first route",
                        self.group, e)

    async def shutdown(self) -> None:
        was_started, self._started = self._started, False  # sends from now on are refused
        self._shut_down = True
        if self._accumulator is not None:  # accepted messages are sent and answered, not dropped
            await self._accumulator.close()
            self._accumulator = None
        if self.trace is not None:
            await self.trace.shutdown()
        if was_started:
            await self.instance.unregister(producer_group=self.group)

    def _check_running(self) -> None:
        """Java's "service state not OK": a send outside start() .. shutdown() is refused, not sent
        through a client nobody will shut down. Checked when a send is called and again just before its
        request goes out, so a send still finding its route or connection when shutdown() begins fails
        too instead of being sent by a producer that is going away."""
        if not self._started:
            raise ClientStateError(
                f"The producer service state not OK, SHUTDOWN_ALREADY: producer {self.group} is shut down"
                if self._shut_down else
                f"The producer service state not OK, CREATE_JUST: producer {self.group} is not started: "
                "call start() first")

    def heartbeat_data(self) -> ProducerData:
        return ProducerData(group_name=self.group)

    async def handle_request(self, conn: RemotingConnection, req: RemotingCommand) -> RemotingCommand | None:
        return None  # plain producers do not answer transaction checks

    # ----------------------------------------------------------------- queue selection
    async def publish_queues(self, topic: str) -> list[MessageQueue]:
        route = await self.instance.get_route(topic)
        if route is None:
            # unknown topic: the broker may auto-create it from TBW102, as Java's producer relies on
            default = await self.instance.get_route(DEFAULT_TOPIC)
            if default is None:
                raise BrokerError(ResponseCode.TOPIC_NOT_EXIST, f"No route info of this topic: {topic}")
            return [MessageQueue(topic=topic, broker_name=q.broker_name, queue_id=q.queue_id)
                    for q in default.publish_queues() if q.queue_id < DEFAULT_TOPIC_QUEUE_NUMS]
        queues = route.publish_queues()
        if not queues:
            # routed but not writable (wipeWritePerm while draining a broker): Java's producer keeps that
            # route and fails, where the TBW102 fallback created the topic on another broker
            raise BrokerError(ResponseCode.NO_PERMISSION, f"No route info of this topic: {topic} "
                              "(no writable queue: its brokers' write permission is off)")
        return queues

    # ----------------------------------------------------------------- sends
    async def send(self, msg: Message, mq: MessageQueue | None = None, *, sharding_key: str | None = None,
                   timeout: float | None = None) -> SendResult:
        """Synchronous send: retries on another broker unless a queue was chosen, all within one
        ``send_timeout`` (or ``timeout``): a broker that does not answer in time fails the send, no retry.

        With ``auto_batch`` a batchable message waits (at most batch_max_delay_ms) in its accumulator and
        the answer is its own share of the batch's result; others are sent alone, as without AutoBatch.
        """
        self._check_running()
        _check_call_timeout(timeout)
        _check_queue_topic(msg.topic, mq)
        props = msg.wire_properties()
        # refused here, before it could join an AutoBatch: a bad message fails its own send only
        check_message(msg, props, self.max_message_size)
        # a send with its own timeout goes direct, as Java's send(msg, timeout) does
        if self.trace is None:
            if self.auto_batch and timeout is None and self._batchable(msg, props):
                return await self._send_accumulated(msg, props, mq, sharding_key)
            return await self._send_with_retry(msg.topic, msg.body, props, msg.flag, mq, sharding_key, timeout,
                                               sys_flag=0, batch=False)
        started = time.time()
        result: SendResult | None = None
        try:
            if self.auto_batch and timeout is None and self._batchable(msg, props):
                result = await self._send_accumulated(msg, props, mq, sharding_key)
            else:
                result = await self._send_with_retry(msg.topic, msg.body, props, msg.flag, mq, sharding_key,
                                                     timeout, sys_flag=0, batch=False)
            return result
        finally:
            self._trace_pub(msg, props, result, started)

    def _trace_pub(self, msg: Message, props: dict[str, str], result: SendResult | None, started: float) -> None:
        """SendMessageTraceHookImpl: one Pub context per send, failed ones included."""
        assert self.trace is not None
        broker = result.message_queue.broker_name if result is not None else ""
        bean = TraceBean(topic=msg.topic, msg_id=props.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX, ""),
                         offset_msg_id=result.offset_msg_id if result is not None else "",
                         tags=props.get(PROPERTY_TAGS), keys=props.get(PROPERTY_KEYS),
                         store_host=(self.instance.broker_addr(broker) or "") if broker else "",
                         body_length=len(msg.body),
                         msg_type=TraceMessageType.Delay_Msg if msg.delay_level > 0 else TraceMessageType.Normal_Msg)
        self.trace.append(TraceContext(TraceType.Pub, int(started * 1000), DEFAULT_REGION, self.group,
                                       cost_time=int((time.time() - started) * 1000),
                                       success=result is not None and result.status == SendStatus.SEND_OK,
                                       beans=[bean]))

    def send_async(self, msg: Message, callback: Callable[[SendResult | None, BaseException | None], None]
                   | None = None, mq: MessageQueue | None = None) -> asyncio.Task[SendResult]:
        """Start a send and return at once; ``callback(result, error)`` runs when it completes."""
        task = asyncio.get_running_loop().create_task(self.send(msg, mq))
        if callback is not None:
            def done(t: asyncio.Task[SendResult]) -> None:
                exc = t.exception() if not t.cancelled() else asyncio.CancelledError()
                callback(None if exc else t.result(), exc)
            task.add_done_callback(done)
        return task

    async def send_oneway(self, msg: Message, mq: MessageQueue | None = None) -> None:
        """Fire and forget: no response is asked for (errors after the write are not seen)."""
        self._check_running()
        _check_queue_topic(msg.topic, mq)
        props = msg.wire_properties()
        check_message(msg, props, self.max_message_size)
        queues = [mq] if mq else await self.publish_queues(msg.topic)
        target = mq or self._selector.select(queues)
        addr = await self.instance.find_broker_addr_in_publish(target)
        cmd = self._request(target, msg.body, props, msg.flag, 0, False)
        conn = await self.instance.connection(addr)
        self._check_running()
        conn.invoke_oneway(cmd)

    async def send_orderly(self, msg: Message, sharding_key: str) -> SendResult:
        """All messages of one key go to one queue (in send order)."""
        return await self.send(msg, sharding_key=sharding_key)

    async def send_batch(self, msgs: Sequence[Message], mq: MessageQueue | None = None,
                         timeout: float | None = None) -> SendResult:
        """SEND_BATCH_MESSAGE: one request, one queue; on a BatchCQ topic the broker stores one record."""
        self._check_running()
        _check_call_timeout(timeout)
        if not msgs:
            raise ValueError("empty batch")
        topic = msgs[0].topic
        if any(m.topic != topic for m in msgs):
            raise ValueError("all messages of a batch must have the same topic")
        _check_queue_topic(topic, mq)
        if any(m.delay_level > 0 for m in msgs):
            raise ValueError("delayed messages cannot be sent in a batch")
        items = [BatchItem(m.body, m.wire_properties(), m.flag) for m in msgs]
        for i, (m, item) in enumerate(zip(msgs, items, strict=True)):
            try:
                check_message(m, item.properties, self.max_message_size)
            except MessageCheckError as e:
                raise MessageCheckError(f"batch message {i}: {e.message}") from None
        body = encode_batch(items)
        check_body_size(topic, len(body), self.max_message_size)  # as Java, the whole batch too
        uniq = ",".join(i.properties[PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX] for i in items)
        # Java's DefaultMQProducer.batch() gives the batch its own UNIQ_KEY: on a BatchCQ topic that makes
        # it one inner-batch record (without one the broker stores the messages one by one)
        batch_props = {"WAIT": "true", PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX: new_uniq_key()}
        res = await self._send_with_retry(topic, body, batch_props, 0, mq, None, timeout, sys_flag=0, batch=True)
        return SendResult(res.status, uniq, res.offset_msg_id, res.message_queue, res.queue_offset,
                          res.transaction_id)

    # ----------------------------------------------------------------- AutoBatch
    def _batchable(self, msg: Message, props: dict[str, str]) -> bool:
        """The early batch model's constraints, checked per message: what fails them bypasses the accumulator
        (same topic and same wait flag are guaranteed by the aggregate key)."""
        if msg.topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
            return False
        if any(k in props for k in _UNBATCHABLE_PROPERTIES):
            return False
        return len(msg.body) < self.batch_max_bytes  # a message as big as a batch gains nothing by waiting

    def accumulator(self) -> ProduceAccumulator:
        if self._accumulator is None:
            self._accumulator = ProduceAccumulator(
                self._send_accumulation, batch_max_bytes=self.batch_max_bytes,
                batch_max_delay_ms=self.batch_max_delay_ms, total_batch_max_bytes=self.total_batch_max_bytes)
        return self._accumulator

    async def _send_accumulated(self, msg: Message, props: dict[str, str], mq: MessageQueue | None,
                                sharding_key: str | None) -> SendResult:
        if mq is None and sharding_key is not None:
            mq = select_by_key(await self.publish_queues(msg.topic), sharding_key)
        wait = props.get(PROPERTY_WAIT_STORE_MSG_OK, "true").lower() != "false"
        key = AggregateKey(msg.topic, mq, wait, props.get(PROPERTY_TAGS))
        item = encode_batch_item(BatchItem(msg.body, props, msg.flag))
        self._check_running()  # shutdown() may have begun while the route was looked up above
        # the caller gets its batch's own answer, as Java's MessageAccumulation does: the batch's send is
        # bounded by send_timeout (the call budget of _send_with_retry), so this wait ends too. A timer of
        # the caller's own would race the batch: it told the caller "failed" while a retry stored the batch
        outcome, i = await self.accumulator().add(key, item)
        assert isinstance(outcome, SendResult)
        ids = outcome.offset_msg_id.split(",")
        # SimpleCQ (early model): one offset id per message; BatchCQ: the one record's id for all
        offset_id = ids[i] if len(ids) > i and len(ids) > 1 else ids[0]
        return SendResult(outcome.status, props[PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX], offset_id,
                          outcome.message_queue, outcome.queue_offset + i)

    async def _send_accumulation(self, key: AggregateKey, items: list[bytes]) -> SendResult:
        """One accumulation as SEND_BATCH_MESSAGE; the outer UNIQ_KEY and TAGS make it one inner batch on a
        BatchCQ topic (the broker decides by the topic's queue.type), items are exploded on SimpleCQ."""
        props = {PROPERTY_WAIT_STORE_MSG_OK: "true" if key.wait_store_msg_ok else "false",
                 PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX: new_uniq_key()}
        if key.tags:
            props[PROPERTY_TAGS] = key.tags
        return await self._send_with_retry(key.topic, b"".join(items), props, 0, key.mq, None, None, sys_flag=0,
                                           batch=True, accepted=True)

    def _request(self, mq: MessageQueue, body: bytes, props: dict[str, str], flag: int, sys_flag: int,
                 batch: bool) -> RemotingCommand:
        now = int(time.time() * 1000)
        p = encode_properties(props)
        code = RequestCode.SEND_BATCH_MESSAGE if batch else (
            RequestCode.SEND_MESSAGE_V2 if self.use_v2_header else RequestCode.SEND_MESSAGE)
        if self.use_v2_header:
            h2 = SendMessageRequestHeaderV2(a=self.group, b=mq.topic, c=DEFAULT_TOPIC, d=DEFAULT_TOPIC_QUEUE_NUMS,
                                            e=mq.queue_id, f=sys_flag, g=now, h=flag, i=p, j=0, k=False,
                                            m=batch or None, n=mq.broker_name)
            fields = h2.to_ext_fields()
        else:
            h1 = SendMessageRequestHeader(producer_group=self.group, topic=mq.topic, default_topic=DEFAULT_TOPIC,
                                          default_topic_queue_nums=DEFAULT_TOPIC_QUEUE_NUMS, queue_id=mq.queue_id,
                                          sys_flag=sys_flag, born_timestamp=now, flag=flag, properties=p,
                                          reconsume_times=0, unit_mode=False, batch=batch or None,
                                          bname=mq.broker_name)
            fields = h1.to_ext_fields()
        return RemotingCommand.request(int(code), fields, body)

    async def _send_with_retry(self, topic: str, body: bytes, props: dict[str, str], flag: int,
                               mq: MessageQueue | None, sharding_key: str | None, timeout: float | None,
                               *, sys_flag: int, batch: bool, accepted: bool = False) -> SendResult:
        """``accepted``: the messages of an AutoBatch batch, accepted before shutdown() began, which sends
        and answers them; any other send is refused once shutdown() has begun."""
        timeout = self.send_timeout if timeout is None else timeout
        fixed = mq is not None or sharding_key is not None
        attempts = 1 if fixed else 1 + self.retries
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        last_broker: str | None = None
        last_err: Exception | None = None
        for _ in range(attempts):
            # one budget for the whole call, as Java's sendDefaultImpl: each attempt gets what is left and
            # none starts once it is spent. A retry after a timeout would store the message on a second
            # broker while the silent one may still store it: one send, two copies
            remaining = deadline - loop.time()
            if remaining <= 0:
                break
            try:
                # the request's own timeout ends the attempt (its error names the broker); this one only
                # bounds finding the route and connecting, so it ends a moment later
                async with asyncio.timeout(remaining + 0.05):
                    return await self._attempt(topic, body, props, flag, mq, sharding_key, deadline, last_broker,
                                               sys_flag, batch, accepted)
            except _AttemptFailed as e:
                last_broker, last_err = e.broker, e.error
                if isinstance(e.error, BrokerError) and e.error.code not in _RETRY_CODES:
                    raise e.error from None
            except TimeoutError:
                last_err = RemotingTimeoutError(f"send to {topic} found no broker that answered within "
                                                f"{timeout:g}s (route lookup or connect)")
                break
        if last_err is None:
            last_err = RemotingTimeoutError(f"send to {topic} got no answer within {timeout:g}s")
        raise last_err

    async def _attempt(self, topic: str, body: bytes, props: dict[str, str], flag: int, mq: MessageQueue | None,
                       sharding_key: str | None, deadline: float, last_broker: str | None, sys_flag: int,
                       batch: bool, accepted: bool) -> SendResult:
        """One attempt of a send: choose a queue (away from the broker that just failed), send, read the
        answer. A retryable failure comes back as _AttemptFailed naming the broker it was sent to."""
        if mq is not None:
            target = mq
        else:
            queues = await self.publish_queues(topic)
            target = select_by_key(queues, sharding_key) if sharding_key is not None else \
                self._selector.select(queues, last_broker)
        try:
            addr = await self.instance.find_broker_addr_in_publish(target)
            conn = await self.instance.connection(addr)
            if not accepted:
                self._check_running()
            timeout = max(deadline - asyncio.get_running_loop().time(), 0.001)
            resp = await conn.invoke(self._request(target, body, props, flag, sys_flag, batch), timeout)
            return self._result(resp, target, addr)
        except (BrokerError, RemotingError) as e:
            raise _AttemptFailed(target.broker_name, e) from None

    @staticmethod
    def _result(resp: RemotingCommand, mq: MessageQueue, addr: str) -> SendResult:
        status = _STATUS_BY_CODE.get(resp.code)  # type: ignore[call-overload]
        if status is None:
            raise BrokerError(resp.code, resp.remark, addr)
        h = SendMessageResponseHeader.from_ext_fields(resp.ext_fields)
        real = MessageQueue(topic=mq.topic, broker_name=mq.broker_name, queue_id=h.queue_id)
        return SendResult(status, h.transaction_id or h.msg_id, h.msg_id, real, h.queue_offset, h.transaction_id)


def _check_call_timeout(timeout: float | None) -> None:
    """A send's own ``timeout`` out of range fails the call, before anything is sent (a timeout <= 0 failed
    it unsent with "got no answer")."""
    if timeout is not None:
        check_positive_seconds("timeout", timeout)


def _check_queue_topic(topic: str, mq: MessageQueue | None) -> None:
    """Java's "message's topic not equal mq's topic": the request takes its topic from the queue, so a
    queue of another topic would store the message there, answered SEND_OK, unseen by its own consumers."""
    if mq is not None and mq.topic != topic:
        raise MessageCheckError(f"message's topic {topic!r} is not the queue's topic {mq.topic!r}; "
                                "nothing was sent")


class TransactionProducer(Producer):
    """Half message, local transaction, END_TRANSACTION; answers the broker's check-backs."""

    def __init__(self, group: str, instance: MQClientInstance, listener: TransactionListener, **kw: object) -> None:
        super().__init__(group, instance, **kw)  # type: ignore[arg-type]
        self.listener = listener

    async def send_in_transaction(self, msg: Message, arg: object = None) -> TransactionSendResult:
        self._check_running()
        if msg.delay_level > 0:
            raise ValueError("a transactional message cannot be delayed")
        props = msg.wire_properties()
        props[PROPERTY_TRANSACTION_PREPARED] = "true"
        props[PROPERTY_PRODUCER_GROUP] = self.group
        check_message(msg, props, self.max_message_size)
        res = await self._send_with_retry(msg.topic, msg.body, props, msg.flag, None, None, None,
                                          sys_flag=TRANSACTION_PREPARED_TYPE, batch=False)
        uniq = props[PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX]
        if res.status != SendStatus.SEND_OK:
            state = LocalTransactionState.ROLLBACK_MESSAGE
        else:
            try:
                state = self.listener.execute_local_transaction(msg, arg)
            except Exception:  # an exception leaves the outcome to the check-back, as in Java
                log.exception("local transaction of %s failed", uniq)
                state = LocalTransactionState.UNKNOW
        addr = await self.instance.find_broker_addr_in_publish(res.message_queue)
        offset = decode_offset_msg_id(res.offset_msg_id).commit_log_offset
        header = EndTransactionRequestHeader(
            producer_group=self.group, tran_state_table_offset=res.queue_offset, commit_log_offset=offset,
            commit_or_rollback=_COMMIT_OR_ROLLBACK[state], msg_id=uniq, from_transaction_check=False,
            transaction_id=res.transaction_id or uniq, topic=msg.topic)
        cmd = RemotingCommand.request(int(RequestCode.END_TRANSACTION), header.to_ext_fields())
        cmd.remark = f"executeLocalTransactionBranch: {state.value}"
        (await self.instance.connection(addr)).invoke_oneway(cmd)
        return TransactionSendResult(SendResult(res.status, uniq, res.offset_msg_id, res.message_queue,
                                                res.queue_offset, res.transaction_id or uniq), state)

    async def handle_request(self, conn: RemotingConnection, req: RemotingCommand) -> RemotingCommand | None:
        if req.code != RequestCode.CHECK_TRANSACTION_STATE:
            return None
        h = CheckTransactionStateRequestHeader.from_ext_fields(req.ext_fields)
        try:
            msgs = decode_records(req.body)
        except RecordError as e:
            log.warning("CHECK_TRANSACTION_STATE from %s with an undecodable message: %s", conn.addr, e)
            return None
        if not msgs:
            return None
        msg = msgs[0]
        group = msg.get_property(PROPERTY_PRODUCER_GROUP)
        if group and group != self.group:
            return None
        try:
            state = self.listener.check_local_transaction(msg)
        except Exception:
            log.exception("transaction check of %s failed", h.transaction_id)
            state = LocalTransactionState.UNKNOW
        uniq = msg.uniq_key or h.msg_id or msg.msg_id
        end = EndTransactionRequestHeader(
            producer_group=self.group, tran_state_table_offset=h.tran_state_table_offset,
            commit_log_offset=h.commit_log_offset, commit_or_rollback=_COMMIT_OR_ROLLBACK[state], msg_id=uniq,
            from_transaction_check=True, transaction_id=h.transaction_id, topic=msg.topic)
        cmd = RemotingCommand.request(int(RequestCode.END_TRANSACTION), end.to_ext_fields())
        cmd.remark = f"checkLocalTransactionState: {state.value}"
        try:
            conn.invoke_oneway(cmd)
        except RemotingError as e:
            log.warning("END_TRANSACTION after a check to %s failed: %s", conn.addr, e)
        return None
