"""Push consumer: cluster-mode rebalancing, long-polling pull loops, concurrent or orderly consumption.

Why these behaviours (DefaultMQPushConsumer's): each owned queue has one pull loop that long-polls
(15 s suspend) and hands messages to the listener; in concurrent mode a failed message is sent back
to the broker (CONSUMER_SEND_MSG_BACK -> %RETRY%group, delayed) and the offset commits past it; the
group's retry topic is subscribed automatically. In orderly mode a queue is consumed only while this
client holds its broker lock, one batch at a time in offset order, and a failure suspends the queue
and retries the same messages. Rebalance runs every 20 s and at once on NOTIFY_CONSUMER_IDS_CHANGED;
offsets persist every 5 s and at shutdown. A queue caching too many messages or MiB is not pulled
until its listener catches up (pullThreshold*), and a concurrent listener call that hangs past
consume_timeout has its message sent back so the queue's offset moves on (consumeTimeout).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import inspect
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from enum import StrEnum
from typing import TypeVar

from broker_core.remoting import RemotingCommand, RequestCode, ResponseCode
from broker_core.remoting.bodies import (
    ConsumeMessageDirectlyResult,
    ConsumerData,
    ConsumerRunningInfo,
    GetConsumerStatusBody,
    MessageQueue,
    ResetOffsetBody,
    SubscriptionData,
)
from broker_core.remoting.codes import CURRENT_VERSION
from broker_core.remoting.headers import (
    ConsumeMessageDirectlyResultRequestHeader,
    GetConsumerRunningInfoRequestHeader,
    GetConsumerStatusRequestHeader,
)
from broker_core.store.codec.message import MessageExt, RecordError
from broker_core.store.codec.trace_data import ConsumeReturnType, TraceBean, TraceContext, TraceType

from .allocate import AllocateStrategy, allocate_averagely
from .config_check import ClientConfigError, check_int
from .connection import RemotingConnection, RemotingError
from .consumer_api import ConsumerApi, PullStatus
from .instance import BrokerError, ClientStateError, MQClientInstance
from .local_offset_store import LocalFileOffsetStore
from .message import PROPERTY_RETRY_TOPIC, decode_records, new_uniq_key
from .message import PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX as PROPERTY_UNIQ_KEY
from .offset_store import OffsetStore, RemoteBrokerOffsetStore
from .process_queue import ProcessQueue
from .rebalance import RETRY_GROUP_TOPIC_PREFIX, ConsumeFromWhere, PullRequest, Rebalancer
from .running_info import (
    PROP_CLIENT_VERSION,
    PROP_CONSUME_ORDERLY,
    PROP_CONSUME_TYPE,
    PROP_CONSUMER_START_TIMESTAMP,
    PROP_NAMESERVER_ADDR,
    PROP_THREADPOOL_CORE_SIZE,
    ConsumeStatsRecorder,
    build_running_info,
    process_queue_info,
)
from .subscription import build_subscription, check_client_in_broker
from .tasks import cancel_and_wait, finish_and_wait
from .trace import DEFAULT_REGION, TraceDispatcher

log = logging.getLogger(__name__)

REBALANCE_INTERVAL_S = 20.0
REBALANCE_RETRY_S = 1.0  # while a subscribed topic has no route yet
LOCK_RENEW_INTERVAL_S = 20.0
PERSIST_INTERVAL_S = 5.0
PULL_SUSPEND_MS = 15_000
PULL_DELAY_ON_ERROR_S = 3.0
# Java's DefaultMQPushConsumer defaults: at most 1000 messages and 100 MiB cached a queue, no topic-wide
# limit (-1); a queue over a limit is pulled again 50 ms later (PULL_TIME_DELAY_MILLS_WHEN_CACHE_FLOW_CONTROL)
PULL_THRESHOLD_FOR_QUEUE = 1000
PULL_THRESHOLD_SIZE_FOR_QUEUE_MIB = 100
PULL_DELAY_WHEN_FLOW_CONTROL_S = 0.05
# Java's consumeTimeout (minutes): a concurrently consumed message whose listener call began longer ago is
# sent back (delay level 3) and leaves the queue, checked every consumeTimeout (ConsumeMessageConcurrentlyService)
CONSUME_TIMEOUT_MIN = 15
CONSUME_TIMEOUT_DELAY_LEVEL = 3
CLEAN_EXPIRED_PER_QUEUE = 16  # messages a queue sends back a round at most (ProcessQueue.cleanExpiredMsg)
MIB = 1024 * 1024
SUSPEND_ORDERLY_S = 1.0
DEFAULT_MAX_RECONSUME_TIMES = 16
JAVA_INT_MAX = 2**31 - 1
RESET_OFFSET_DRAIN_S = 1.0


class MessageModel(StrEnum):
    CLUSTERING = "CLUSTERING"
    BROADCASTING = "BROADCASTING"


class ConsumeConcurrentlyStatus(StrEnum):
    CONSUME_SUCCESS = "CONSUME_SUCCESS"
    RECONSUME_LATER = "RECONSUME_LATER"


class ConsumeOrderlyStatus(StrEnum):
    SUCCESS = "SUCCESS"
    SUSPEND_CURRENT_QUEUE_A_MOMENT = "SUSPEND_CURRENT_QUEUE_A_MOMENT"


# The status type of the consumption mode a listener call is made for.
_Status = TypeVar("_Status", ConsumeConcurrentlyStatus, ConsumeOrderlyStatus)

ConcurrentListener = Callable[[list[MessageExt]], ConsumeConcurrentlyStatus
                              | Awaitable[ConsumeConcurrentlyStatus]]
OrderlyListener = Callable[[list[MessageExt]], ConsumeOrderlyStatus | Awaitable[ConsumeOrderlyStatus]]


class PushConsumer:
    def __init__(self, group: str, instance: MQClientInstance, *,
                 consume_from: ConsumeFromWhere = ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET,
                 consume_timestamp_ms: int | None = None, pull_batch_size: int = 32,
                 consume_batch_max_size: int = 1, consume_concurrency: int = 20,
                 max_reconsume_times: int = -1, message_model: MessageModel = MessageModel.CLUSTERING,
                 offset_store_dir: str | None = None,
                 allocate_strategy: AllocateStrategy = allocate_averagely, enable_msg_trace: bool = False,
                 custom_trace_topic: str | None = None,
                 pull_threshold_for_queue: int = PULL_THRESHOLD_FOR_QUEUE,
                 pull_threshold_size_for_queue: int = PULL_THRESHOLD_SIZE_FOR_QUEUE_MIB,
                 pull_threshold_for_topic: int = -1, pull_threshold_size_for_topic: int = -1,
                 consume_timeout: float = CONSUME_TIMEOUT_MIN) -> None:
        self.group = group
        self.instance = instance
        self.api = ConsumerApi(instance, group)
        self.message_model = message_model
        # CLUSTERING: the broker keeps the group's offsets; BROADCASTING: each consumer keeps its own in a
        # file under offset_store_dir (default ~/.rocketmq_offsets) named by its client id as Java names it,
        # one that is the same after a restart (ip@DEFAULT unless the instance was given a name)
        self.offsets: OffsetStore = (LocalFileOffsetStore(instance.stable_client_id, group, offset_store_dir)
                                     if self.broadcasting else RemoteBrokerOffsetStore(self.api))
        self._consume_from = consume_from
        self.allocate_strategy = allocate_strategy  # Java's setAllocateMessageQueueStrategy
        self._consume_ts = consume_timestamp_ms
        self.pull_batch_size = pull_batch_size
        self.consume_batch_max_size = consume_batch_max_size
        # -1 as in Java: 16 for concurrent consumption, unbounded (Integer.MAX_VALUE) for orderly, where a
        # message leaving the queue breaks the order the user asked for
        self._max_reconsume_times = max_reconsume_times
        self.consume_concurrency = consume_concurrency
        # flow control (Java's pullThreshold*): a queue caching more messages, or more MiB of bodies, than
        # these is not pulled until its listener catches up; a topic-wide limit (not -1) is shared out
        # among the queues this consumer holds, as Java's RebalancePushImpl.messageQueueChanged does
        self.pull_threshold_for_queue = pull_threshold_for_queue
        self.pull_threshold_size_for_queue = pull_threshold_size_for_queue
        self.pull_threshold_for_topic = pull_threshold_for_topic
        self.pull_threshold_size_for_topic = pull_threshold_size_for_topic
        # minutes (a fraction is accepted): how long a concurrent listener call may hold a message before
        # it is sent back and the queue's offset moves past it; also the period of that check
        self.consume_timeout = consume_timeout
        self._flow_control_times = 0
        self._check_config()
        self._sem = asyncio.Semaphore(consume_concurrency)
        # Java's consumeExecutor: blocking listeners run on the consumer's own consume_concurrency threads
        # (consumeThreadMax), not asyncio's default executor, whose min(32, cpus + 4) threads would cap them
        self._consume_executor: ThreadPoolExecutor | None = None
        self.stats = ConsumeStatsRecorder()  # what consumerStatus shows as #Consumer RT&TPS#
        # Java's enableMsgTrace: each consumed batch writes SubBefore/SubAfter trace contexts
        self.trace: TraceDispatcher | None = (TraceDispatcher(instance, group, custom_trace_topic)
                                              if enable_msg_trace else None)
        self._start_ms = 0
        self._subs: dict[str, SubscriptionData] = {}
        self._concurrent: ConcurrentListener | None = None
        self._orderly: OrderlyListener | None = None
        self.rebalancer: Rebalancer | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._rebalance_now = asyncio.Event()
        self._rebalance_lock = asyncio.Lock()
        self._running = False
        self._starting = False
        self._loop: asyncio.AbstractEventLoop | None = None  # the loop start() ran on
        # the teardown of a shutdown() under way, or one that did not complete (it failed or was itself
        # cancelled): the next shutdown() starts it again; None once a teardown has completed
        self._teardown: asyncio.Task[None] | None = None
        # how long a reset from the broker (client mode) waits for requests already sent on dropped queues
        self.reset_offset_drain_s = RESET_OFFSET_DRAIN_S

    # ---------------------------------------------------------------- configuration
    def _check_config(self) -> None:
        """Java's checkConfig ranges, at construction and again at start() (the attributes are public): a
        setting out of range raises ClientConfigError naming it. Before, start() succeeded and the pull
        loops failed: consume_batch_max_size 0 killed every loop, -1 consumed nothing, pull_batch_size 0
        logged a warning every 3 s per queue, and consume_concurrency 0 failed in the thread pool."""
        check_int("pull_batch_size", self.pull_batch_size, 1, 1024, "pullBatchSize")
        check_int("consume_batch_max_size", self.consume_batch_max_size, 1, 1024, "consumeMessageBatchMaxSize")
        check_int("consume_concurrency", self.consume_concurrency, 1, 1000, "consumeThreadMax")
        # -1: Java's default (16 concurrent, unbounded orderly); Java sends a lower value to the broker, which
        # then puts every failed message in the DLQ, where this client took it as the default
        check_int("max_reconsume_times", self._max_reconsume_times, -1, JAVA_INT_MAX, "maxReconsumeTimes")
        if self._consume_ts is not None:
            check_int("consume_timestamp_ms", self._consume_ts, 0, None, "consumeTimestamp")
        check_int("pull_threshold_for_queue", self.pull_threshold_for_queue, 1, 65535, "pullThresholdForQueue")
        check_int("pull_threshold_size_for_queue", self.pull_threshold_size_for_queue, 1, 1024,
                  "pullThresholdSizeForQueue")
        if self.pull_threshold_for_topic != -1:  # -1: no topic-wide limit
            check_int("pull_threshold_for_topic", self.pull_threshold_for_topic, 1, 6553500, "pullThresholdForTopic")
        if self.pull_threshold_size_for_topic != -1:
            check_int("pull_threshold_size_for_topic", self.pull_threshold_size_for_topic, 1, 102400,
                      "pullThresholdSizeForTopic")
        timeout = self.consume_timeout
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout > 0:
            # Java takes any long; 0 or less would send back every message as soon as its listener began
            raise ClientConfigError(f"consume_timeout must be a number of minutes above 0 (Java's consumeTimeout), "
                                    f"got {timeout!r}")

    def subscribe(self, topic: str, expression: str | None = "*", expression_type: str = "TAG") -> None:
        """``expression_type="SQL92"`` subscribes with a SQL92 selector (Java's ``MessageSelector.bySql``).
        A tag expression naming no tag (``||``) or an empty SQL92 one raises InvalidSubscriptionError now;
        a SQL92 expression the brokers do not accept makes ``start()`` raise BrokerError.

        On a running consumer the new expression applies from the next pull of each queue (a pull under
        way with the old one is made again), and a heartbeat tells the brokers at once, as Java's
        subscribe() does (sendHeartbeatToAllBrokerWithLock); a new topic is taken at the next rebalance."""
        self._subs[topic] = build_subscription(topic, expression, expression_type)
        self._heartbeat_soon()

    def unsubscribe(self, topic: str) -> None:
        """Java's unsubscribe: the topic leaves the subscriptions; the next rebalance gives up its queues
        (their offsets persisted) and a heartbeat tells the brokers at once."""
        if self._subs.pop(topic, None) is not None:
            self._heartbeat_soon()

    def _heartbeat_soon(self) -> None:
        """A heartbeat now, as a task of the consumer, when running: subscribe() is plain code, called on
        the consumer's loop or from another thread (a blocking listener's)."""
        loop = self._loop
        if not self._running or loop is None or loop.is_closed():
            return
        try:
            on_loop = asyncio.get_running_loop() is loop
        except RuntimeError:
            on_loop = False
        if on_loop:
            self._spawn(self._send_heartbeat())
        else:
            loop.call_soon_threadsafe(lambda: self._spawn(self._send_heartbeat()) if self._running else None)

    async def _send_heartbeat(self) -> None:
        with contextlib.suppress(RemotingError, BrokerError):
            await self.instance.send_heartbeat_to_all()

    def register_concurrently(self, listener: ConcurrentListener) -> None:
        self._concurrent = listener

    def register_orderly(self, listener: OrderlyListener) -> None:
        self._orderly = listener

    @property
    def orderly(self) -> bool:
        return self._orderly is not None

    @property
    def max_reconsume_times(self) -> int:
        if self._max_reconsume_times >= 0:
            return self._max_reconsume_times
        return JAVA_INT_MAX if self.orderly else DEFAULT_MAX_RECONSUME_TIMES

    @property
    def broadcasting(self) -> bool:
        return self.message_model == MessageModel.BROADCASTING

    # ---------------------------------------------------------------- lifecycle
    async def start(self) -> None:
        # a second start would run a second rebalancer: every queue pulled twice, each message consumed twice
        if self._running or self._starting:
            raise ClientStateError(f"push consumer {self.group} is already started")
        if self._teardown is not None and not self._teardown.done():
            raise ClientStateError(f"push consumer {self.group} is shutting down")
        self._starting = True
        try:
            await self._start()
        finally:
            self._starting = False

    async def _start(self) -> None:
        self._check_config()
        if self._concurrent is None and self._orderly is None:
            raise ValueError("register a listener before start()")
        if isinstance(self.offsets, LocalFileOffsetStore):
            self.offsets.load()  # an unreadable offsets file stops the start, naming the file
        if not self.orderly and not self.broadcasting:
            # failed messages come back through the group's retry topic
            retry = RETRY_GROUP_TOPIC_PREFIX + self.group
            self._subs.setdefault(retry, build_subscription(retry, "*"))
        # Java's checkClientInBroker: a SQL92 expression the brokers refuse stops the start (BrokerError),
        # before the group is registered or any heartbeat carries it
        await check_client_in_broker(self.instance, self.group, list(self._subs.values()))
        self.rebalancer = Rebalancer(self.group, self.instance.client_id, self.api, self.offsets,
                                     orderly=self.orderly, broadcasting=self.broadcasting,
                                     consume_from=self._consume_from,
                                     consume_timestamp_ms=self._consume_ts,
                                     allocate=self.allocate_strategy)
        self._consume_executor = ThreadPoolExecutor(max_workers=self.consume_concurrency,
                                                    thread_name_prefix=f"ConsumeMessageThread_{self.group}")
        self.instance.register_consumer(self.group, self)
        self._start_ms = int(time.time() * 1000)
        self._loop = asyncio.get_running_loop()
        await self.instance.start()
        for topic in self._subs:
            with contextlib.suppress(RemotingError, BrokerError):
                await self.instance.get_route(topic)
        await self.instance.send_heartbeat_to_all()
        if self.trace is not None:
            await self.trace.start()
        self._running = True
        self._spawn(self._rebalance_loop())
        self._spawn(self._persist_loop())
        if self.orderly:
            self._spawn(self._lock_loop())
        elif not self.broadcasting:
            self._spawn(self._clean_expired_loop())

    async def shutdown(self) -> None:
        """Stop consuming, commit the consumed offsets, unregister; as Java's shutdown, idempotent once
        completed. The teardown runs as a task of its own that a cancel of this call (a timeout around
        it that fires) does not cut short: the offsets are committed before the cancel is raised, or
        what was consumed would be consumed again after a restart. A teardown that did not complete
        (it failed, or its task was cancelled) is done again by the next shutdown()."""
        if not self._running and self._teardown is None:
            return  # never started, or shut down to the end: nothing left to do
        self._running = False  # no loop goes round again
        if self._teardown is None or self._teardown.done():
            self._teardown = asyncio.ensure_future(self._tear_down())
        teardown = self._teardown
        if asyncio.current_task() in self._tasks:
            # called from one of the consumer's own tasks (an async listener): the teardown stops that
            # task and waits for it, so it cannot wait for the teardown; its cancel ends it here
            await asyncio.shield(teardown)
            return
        await finish_and_wait(teardown)
        teardown.result()  # the teardown's own failure, or its cancel by another

    async def _tear_down(self) -> None:
        """Java's shutdown order: the loops and the listener threads stop, the offsets are committed
        (and orderly queue locks released), the trace data flushed, the group unregistered."""
        try:
            await cancel_and_wait(*self._tasks)
        finally:  # even when a cancel ends the wait above: no listener call starts after it
            self._tasks.clear()
            if self._consume_executor is not None:
                # as Java's consumeExecutor.shutdown(): no new listener calls, none waited for (a listener
                # that never returns must not hang the shutdown); its threads end when their call returns
                self._consume_executor.shutdown(wait=False, cancel_futures=True)
                self._consume_executor = None
        if self.rebalancer is not None:
            with contextlib.suppress(RemotingError, BrokerError):
                await self.rebalancer.shutdown()
        if self.trace is not None:
            await self.trace.shutdown()
        await self.instance.unregister(consumer_group=self.group)
        self._teardown = None

    def _spawn(self, coro: Awaitable[None]) -> asyncio.Task[None]:
        task: asyncio.Task[None] = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    def heartbeat_data(self) -> ConsumerData:
        return ConsumerData(group_name=self.group, consume_type="CONSUME_PASSIVELY",
                            message_model=self.message_model.value,
                            consume_from_where=self._consume_from.value,
                            subscription_data_set=list(self._subs.values()))

    def rebalance_immediately(self) -> None:
        """A rebalance round now rather than at the next 20 s tick (the group changed, or a broker that
        restarted has just learnt of this client again)."""
        self._rebalance_now.set()

    async def handle_request(self, conn: RemotingConnection, req: RemotingCommand) -> RemotingCommand | None:
        if req.code == RequestCode.NOTIFY_CONSUMER_IDS_CHANGED:
            self.rebalance_immediately()
            return None
        if req.code == RequestCode.GET_CONSUMER_RUNNING_INFO:
            h = GetConsumerRunningInfoRequestHeader.from_ext_fields(req.ext_fields)
            return req.response(body=self.running_info(h.jstack_enable).to_json())
        if req.code == RequestCode.GET_CONSUMER_STATUS_FROM_CLIENT:
            topic = GetConsumerStatusRequestHeader.from_ext_fields(req.ext_fields).topic
            return req.response(body=GetConsumerStatusBody(message_queue_table=self.queue_offsets(topic)).to_json())
        if req.code == RequestCode.RESET_CONSUMER_CLIENT_OFFSET:
            self._on_reset_offset_request(req)
            return None  # oneway: the broker expects no answer
        if req.code == RequestCode.CONSUME_MESSAGE_DIRECTLY:
            h = ConsumeMessageDirectlyResultRequestHeader.from_ext_fields(req.ext_fields)
            try:
                msgs = decode_records(req.body)
            except RecordError as e:
                return req.response(ResponseCode.SYSTEM_ERROR, f"undecodable message: {e}")
            if len(msgs) != 1:
                return req.response(ResponseCode.SYSTEM_ERROR, f"expected one message, got {len(msgs)}")
            result = await self.consume_message_directly(msgs[0], h.broker_name or "")
            return req.response(body=result.to_json())
        return req.response(ResponseCode.REQUEST_CODE_NOT_SUPPORTED, f" request type {req.code} not supported")

    # ---------------------------------------------------------------- client-mode offset reset
    def _on_reset_offset_request(self, req: RemotingCommand) -> None:
        """RESET_CONSUMER_CLIENT_OFFSET (ClientRemotingProcessor.resetOffset): a broker in client mode
        (useServerSideResetOffset=false) tells this consumer where its queues of the topic now start.
        Run as a task: the reset waits for in-flight work, and the connection must go on meanwhile."""
        topic = req.ext_fields.get("topic", "")
        try:
            table = ResetOffsetBody.from_json(req.body).offset_table if req.body else {}
        except ValueError as e:
            log.warning("undecodable offset reset of %s/%s ignored: %s", self.group, topic, e)
            return
        log.info("offset reset of %s/%s from the broker: %s", self.group, topic, table)
        self._spawn(self.reset_offset(topic, table))

    async def reset_offset(self, topic: str, offsets: dict[MessageQueue, int]) -> None:
        """MQClientInstance.resetOffset: every owned queue of ``topic`` in ``offsets`` restarts there.

        Why in this order: rebalancing is suspended (the rebalance lock) so no round takes a queue in
        between; the queues are dropped first, so what they buffered is neither consumed nor committed
        any more; after a short wait for requests already on the wire, each new offset is set (even
        backwards), persisted to the broker and the queue given up; resuming rebalances at once, which
        takes the queues again at those stored offsets. Java waits 10 s; here every pull and consume
        step checks ``dropped``, so only requests already sent need the wait."""
        if self.rebalancer is None:
            return
        async with self._rebalance_lock:
            owned = {mq: pq for mq, pq in self.rebalancer.process_queues.items()
                     if mq.topic == topic and mq in offsets}
            for pq in owned.values():
                pq.dropped = True
            await asyncio.sleep(self.reset_offset_drain_s)
            for mq, pq in owned.items():
                # forgotten first: the store sends only offsets that differ from its last send, and the
                # broker's copy may have moved since (pulls commit there), so the reset must go out anyway
                self.offsets.remove(mq)
                self.offsets.update(mq, offsets[mq], increase_only=False)
                try:
                    await self.rebalancer.remove_process_queue(mq, pq)
                except (RemotingError, BrokerError, OSError) as e:
                    log.warning("resetting the offset of %s to %d failed: %s", mq, offsets[mq], e)
        self._rebalance_now.set()

    # ---------------------------------------------------------------- message trace
    def _trace_before(self, msgs: Sequence[MessageExt]) -> TraceContext | None:
        """ConsumeMessageTraceHookImpl.consumeMessageBefore: one SubBefore context for the batch."""
        if self.trace is None:
            return None
        beans = [TraceBean(topic=m.topic, msg_id=m.get_property(PROPERTY_UNIQ_KEY) or m.msg_id,
                           tags=m.get_property("TAGS"), keys=m.get_property("KEYS"), retry_times=m.reconsume_times,
                           body_length=len(m.body), store_host=f"{m.store_host[0]}:{m.store_host[1]}")
                 for m in msgs]
        ctx = TraceContext(TraceType.SubBefore, int(time.time() * 1000), DEFAULT_REGION, self.group,
                           request_id=new_uniq_key(), beans=beans)
        self.trace.append(ctx)
        return ctx

    def _trace_after(self, before: TraceContext | None, msgs: Sequence[MessageExt], ok: bool, code: int) -> None:
        """consumeMessageAfter: SubAfter with the cost per message and how the listener answered."""
        if self.trace is None or before is None:
            return
        now = int(time.time() * 1000)
        self.trace.append(TraceContext(TraceType.SubAfter, now, before.region_id, self.group,
                                       cost_time=(now - before.time_stamp) // max(len(msgs), 1), success=ok,
                                       request_id=before.request_id, context_code=code, beans=before.beans))

    # ---------------------------------------------------------------- diagnostics (mqadmin)
    def running_info(self, jstack: bool = False) -> ConsumerRunningInfo:
        """GET_CONSUMER_RUNNING_INFO: properties, subscriptions, owned queues, per-topic figures."""
        props = {PROP_NAMESERVER_ADDR: ";".join(self.instance.namesrv_addrs),
                 PROP_THREADPOOL_CORE_SIZE: str(self.consume_concurrency),
                 PROP_CONSUME_ORDERLY: "true" if self.orderly else "false",
                 PROP_CONSUME_TYPE: "CONSUME_PASSIVELY", PROP_CLIENT_VERSION: str(CURRENT_VERSION),
                 PROP_CONSUMER_START_TIMESTAMP: str(self._start_ms),
                 "consumerGroup": self.group, "messageModel": self.message_model.value,
                 "consumeFromWhere": self._consume_from.value, "pullBatchSize": str(self.pull_batch_size),
                 "consumeMessageBatchMaxSize": str(self.consume_batch_max_size),
                 "maxReconsumeTimes": str(self.max_reconsume_times), "clientId": self.instance.client_id,
                 "pullThresholdForQueue": str(self.pull_threshold_for_queue),
                 "pullThresholdSizeForQueue": str(self.pull_threshold_size_for_queue),
                 "pullThresholdForTopic": str(self.pull_threshold_for_topic),
                 "pullThresholdSizeForTopic": str(self.pull_threshold_size_for_topic),
                 "consumeTimeout": str(self.consume_timeout)}
        queues = {}
        if self.rebalancer is not None:
            for mq, pq in list(self.rebalancer.process_queues.items()):
                queues[mq] = process_queue_info(pq, self.offsets.read_memory(mq) or 0)
        return build_running_info(props, self._subs.values(), queues, self.stats, jstack)

    def queue_offsets(self, topic: str) -> dict[MessageQueue, int]:
        """GET_CONSUMER_STATUS_FROM_CLIENT: this consumer's offset (in memory) of each owned queue of ``topic``."""
        if self.rebalancer is None:
            return {}
        return {mq: off for mq in sorted(self.rebalancer.process_queues) if mq.topic == topic
                and (off := self.offsets.read_memory(mq)) is not None}

    async def consume_message_directly(self, msg: MessageExt, broker_name: str) -> ConsumeMessageDirectlyResult:
        """CONSUME_MESSAGE_DIRECTLY: hand one message to the listener now, outside any queue (mqadmin
        queryMsgById -g -d); nothing is committed or sent back, whatever the listener answers."""
        msgs = [self._reset_retry_topic(msg)]
        started = time.monotonic()
        remark = None
        try:
            if self.orderly:
                assert self._orderly is not None
                status: object = await self._call(self._orderly, msgs)
            else:
                assert self._concurrent is not None
                status = await self._call(self._concurrent, msgs)
        except Exception as e:  # noqa: BLE001 - the operator sees what the listener raised
            status, remark = None, f"{type(e).__name__}: {e}"
        spent = int((time.monotonic() - started) * 1000)
        if remark is not None:
            result = "CR_THROW_EXCEPTION"
        elif status is None:
            result = "CR_RETURN_NULL"
        elif status in (ConsumeConcurrentlyStatus.CONSUME_SUCCESS, ConsumeOrderlyStatus.SUCCESS):
            result = "CR_SUCCESS"
        else:
            result = "CR_LATER"
        return ConsumeMessageDirectlyResult(order=self.orderly, auto_commit=True, consume_result=result,
                                            remark=remark, spent_time_mills=spent)

    # ---------------------------------------------------------------- rebalance
    async def rebalance_once(self) -> None:
        assert self.rebalancer is not None
        async with self._rebalance_lock:
            for pr in await self.rebalancer.rebalance(sorted(self._subs)):
                self._spawn(self._pull_loop(pr))

    async def _rebalance_loop(self) -> None:
        while self._running:
            self._rebalance_now.clear()  # before the round: a notify arriving during it triggers another
            try:
                await self.rebalance_once()
            except (RemotingError, BrokerError) as e:
                log.warning("rebalance of %s failed: %s", self.group, e)
            assert self.rebalancer is not None
            wait = REBALANCE_RETRY_S if self.rebalancer.topics_without_route else REBALANCE_INTERVAL_S
            with contextlib.suppress(TimeoutError):  # asyncio.timeout, not wait_for: see TraceDispatcher._loop
                async with asyncio.timeout(wait):
                    await self._rebalance_now.wait()

    async def _persist_loop(self) -> None:
        while self._running:
            await asyncio.sleep(PERSIST_INTERVAL_S)
            try:
                await self.offsets.persist_all()
            except (RemotingError, BrokerError, OSError) as e:
                log.warning("persisting offsets of %s failed: %s", self.group, e)

    async def _clean_expired_loop(self) -> None:
        """Java's cleanExpireMsg, every consume_timeout minutes (the first after one period)."""
        while self._running:
            await asyncio.sleep(self.consume_timeout * 60)
            if self.rebalancer is None:
                continue
            for mq, pq in list(self.rebalancer.process_queues.items()):
                await self._clean_expired(mq, pq)

    async def _clean_expired(self, mq: MessageQueue, pq: ProcessQueue) -> None:
        """ProcessQueue.cleanExpiredMsg: the queue's lowest message, while its listener call began more
        than consume_timeout ago, is sent back (delay level 3) and leaves the queue, so the committed offset
        moves past a listener that hangs; the call itself runs on (its result is ignored for that message).
        Concurrent clustering only: an orderly queue must not lose a message (Java skips it)."""
        for _ in range(CLEAN_EXPIRED_PER_QUEUE):
            if pq.dropped:
                return
            msg = pq.first_expired(self.consume_timeout * 60_000)
            if msg is None:
                return
            try:
                await self.api.send_back(msg, mq.broker_name, CONSUME_TIMEOUT_DELAY_LEVEL, self.max_reconsume_times)
            except (RemotingError, BrokerError) as e:
                log.warning("sending back the expired message %s of %s failed: %s", msg.msg_id, mq, e)
                return
            log.info("consumeTimeout: sent back %s of %s at offset %d, consuming since over %s min",
                     msg.msg_id, mq, msg.queue_offset, self.consume_timeout)
            if pq.first_expired(self.consume_timeout * 60_000) is msg:  # still the first (not consumed meanwhile)
                offset = pq.remove([msg])
                if offset >= 0 and not pq.dropped:
                    self.offsets.update(mq, offset)

    async def _lock_loop(self) -> None:
        assert self.rebalancer is not None
        while self._running:
            await asyncio.sleep(LOCK_RENEW_INTERVAL_S)
            try:
                await self.rebalancer.lock_all()
            except (RemotingError, BrokerError) as e:
                log.warning("renewing queue locks of %s failed: %s", self.group, e)

    # ---------------------------------------------------------------- pulling
    def _queue_thresholds(self) -> tuple[int, int]:
        """The count and MiB a queue may cache: the per-queue settings, or a topic-wide limit (not -1)
        shared out among the queues held (at least 1 each), as Java's messageQueueChanged sets them."""
        count, size = self.pull_threshold_for_queue, self.pull_threshold_size_for_queue
        held = len(self.rebalancer.process_queues) if self.rebalancer is not None else 0
        if held:
            if self.pull_threshold_for_topic != -1:
                count = max(1, self.pull_threshold_for_topic // held)
            if self.pull_threshold_size_for_topic != -1:
                size = max(1, self.pull_threshold_size_for_topic // held)
        return count, size

    def _flow_controlled(self, pr: PullRequest) -> bool:
        """Java's pullMessage checks: too many messages, or too many MiB, cached for the queue."""
        pq = pr.process_queue
        count, size_mib = self._queue_thresholds()
        cached, cached_mib = pq.count, pq.cached_bytes() // MIB
        if cached <= count and cached_mib <= size_mib:
            return False
        if self._flow_control_times % 1000 == 0:
            log.warning("the cached messages of %s exceed the threshold (%d messages, %d MiB): count=%d, "
                        "size=%d MiB; pulling later, flowControlTimes=%d", pr.mq, count, size_mib, cached,
                        cached_mib, self._flow_control_times)
        self._flow_control_times += 1
        return True

    async def _pull_loop(self, pr: PullRequest) -> None:
        pq = pr.process_queue
        while self._running and not pq.dropped:
            if self._flow_controlled(pr):
                await asyncio.sleep(PULL_DELAY_WHEN_FLOW_CONTROL_S)
                continue
            # looked up at every pull, as Java's pullMessage: a subscribe() while running changes the
            # expression the next pull (and the client-side tag check) uses
            sub = self._subs.get(pr.mq.topic)
            if sub is None:
                # unsubscribed: the next rebalance drops the queue (Java: "find the consumer's subscription failed")
                await asyncio.sleep(PULL_DELAY_ON_ERROR_S)
                continue
            # broadcasting offsets are this consumer's own: never committed to the broker with a pull
            commit = 0 if self.broadcasting else (self.offsets.read_memory(pr.mq) or 0)
            started = time.monotonic()
            try:
                result = await self.api.pull(pr.mq, pr.next_offset, self.pull_batch_size, sub,
                                             commit_offset=commit, suspend_ms=PULL_SUSPEND_MS)
            except (RemotingError, BrokerError) as e:
                if pq.dropped or not self._running:
                    return
                log.warning("pull %s at %d failed: %s", pr.mq, pr.next_offset, e)
                await asyncio.sleep(PULL_DELAY_ON_ERROR_S)
                continue
            if pq.dropped:
                return
            if self._subs.get(pr.mq.topic) is not sub:
                # the subscription changed while the pull was under way (a long poll holds it up to 15 s):
                # what it found or skipped was chosen by the old expression, so the same offset is pulled
                # again with the new one; used, it would commit past the new expression's messages
                continue
            pq.last_pull_ms = int(time.time() * 1000)
            self.stats.pulled(pr.mq.topic, (time.monotonic() - started) * 1000, len(result.messages)
                              if result.status == PullStatus.FOUND else 0)
            if result.status == PullStatus.FOUND:
                pr.next_offset = result.next_begin_offset
                msgs = [self._reset_retry_topic(m) for m in result.messages]
                if not msgs:
                    self._correct_tags_offset(pr)
                    continue
                pq.put(msgs)
                if self.orderly:
                    self._spawn(self._consume_orderly(pr))
                else:
                    for i in range(0, len(msgs), self.consume_batch_max_size):
                        self._spawn(self._consume_concurrently(pr, msgs[i:i + self.consume_batch_max_size]))
            elif result.status in (PullStatus.NO_NEW_MSG, PullStatus.NO_MATCHED_MSG):
                pr.next_offset = result.next_begin_offset
                self._correct_tags_offset(pr)
            else:  # OFFSET_ILLEGAL (an admin reset or skip, or an offset out of range)
                log.warning("pull %s: offset %d illegal, moving to %d", pr.mq, pr.next_offset,
                            result.next_begin_offset)
                # as Java's PullCallback: the queue is dropped at once, so what it buffered before the
                # move is neither consumed nor committed any more; a fresh one starts at the new offset
                pq.dropped = True
                pr.next_offset = result.next_begin_offset
                await self._fix_offset_illegal(pr)
                return

    async def _fix_offset_illegal(self, pr: PullRequest) -> None:
        """The rest of Java's OFFSET_ILLEGAL handling for the dropped ``pr``: the offset is set to where the
        broker said (even backwards) and persisted, the queue leaves the rebalance table (in orderly mode
        once its batch in the listener has finished, so the fresh queue never runs beside it) and a
        rebalance runs at once, which takes the queue again at that stored offset."""
        assert self.rebalancer is not None
        self.offsets.update(pr.mq, pr.next_offset, increase_only=False)
        try:
            await self.offsets.persist(pr.mq)
        except (RemotingError, BrokerError, OSError) as e:
            log.warning("persisting the moved offset %d of %s failed: %s", pr.next_offset, pr.mq, e)
        try:
            # under the rebalance lock: no round takes the queue again before it is given up
            async with self._rebalance_lock:
                await self.rebalancer.remove_process_queue(pr.mq, pr.process_queue)
            log.warning("fixed the pull offset of %s: resuming at %d", pr.mq, pr.next_offset)
        except (RemotingError, BrokerError, OSError) as e:
            log.warning("giving up %s after its offset moved failed: %s", pr.mq, e)
        self._rebalance_now.set()

    def _correct_tags_offset(self, pr: PullRequest) -> None:
        """Nothing in flight: commit past messages the broker filtered out, or they pin the offset."""
        if pr.process_queue.count == 0:
            self.offsets.update(pr.mq, pr.next_offset)

    @staticmethod
    def _reset_retry_topic(msg: MessageExt) -> MessageExt:
        """Messages from %RETRY%group are shown under their original topic, as Java shows them."""
        original = msg.get_property(PROPERTY_RETRY_TOPIC)
        if original and msg.topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
            msg.topic = original
        return msg

    async def _call(self, listener: Callable[[list[MessageExt]], object], msgs: list[MessageExt]) -> object:
        """An async listener runs on the loop; a blocking one on the consumer's consume threads."""
        if inspect.iscoroutinefunction(listener):
            return await listener(msgs)
        executor = self._consume_executor
        if executor is None:
            raise ClientStateError(f"push consumer {self.group} is not running")
        call = functools.partial(contextvars.copy_context().run, listener, msgs)
        result = await asyncio.get_running_loop().run_in_executor(executor, call)
        if inspect.isawaitable(result):
            return await result
        return result

    async def _run_listener(self, listener: Callable[[list[MessageExt]], object], pr: PullRequest,
                            msgs: list[MessageExt], success: _Status, on_raise: _Status, raised: str) -> object:
        """One listener call as both consumption modes make it: a listener that raises counts as
        ``on_raise`` (logged with ``raised``), and the call is traced and counted in the stats."""
        started = time.monotonic()
        before = self._trace_before(msgs)
        code = ConsumeReturnType.SUCCESS
        try:
            status = await self._call(listener, msgs)
        except Exception:
            log.exception(raised, self.group)
            status = on_raise
            code = ConsumeReturnType.EXCEPTION
        ok = status == success
        if not ok and code == ConsumeReturnType.SUCCESS:
            code = ConsumeReturnType.FAILED
        self._trace_after(before, msgs, ok, code)
        pr.process_queue.last_consume_ms = int(time.time() * 1000)
        self.stats.consumed(pr.mq.topic, (time.monotonic() - started) * 1000, len(msgs) if ok else 0,
                            0 if ok else len(msgs))
        return status

    # ---------------------------------------------------------------- concurrent consumption
    async def _consume_concurrently(self, pr: PullRequest, msgs: Sequence[MessageExt]) -> None:
        assert self._concurrent is not None
        batch = list(msgs)
        async with self._sem:
            if pr.process_queue.dropped:
                return
            pr.process_queue.consume_started(batch)  # what consume_timeout is measured from
            status = await self._run_listener(
                self._concurrent, pr, batch, ConsumeConcurrentlyStatus.CONSUME_SUCCESS,
                ConsumeConcurrentlyStatus.RECONSUME_LATER, "listener of %s raised; the messages will be consumed again")
        if pr.process_queue.dropped:
            return
        if status != ConsumeConcurrentlyStatus.CONSUME_SUCCESS and self.broadcasting:
            # as Java: a broadcast message has no group retry topic to go back to; it is dropped (logged)
            log.warning("BROADCASTING: consuming %d message(s) of %s failed; dropped", len(batch), pr.mq)
        elif status != ConsumeConcurrentlyStatus.CONSUME_SUCCESS:
            failed: list[MessageExt] = []
            for m in batch:
                try:
                    await self.api.send_back(m, pr.mq.broker_name, 0, self.max_reconsume_times)
                except (RemotingError, BrokerError) as e:
                    log.warning("send back of %s failed (%s); consuming it again locally", m.msg_id, e)
                    failed.append(m)
            if failed:
                await asyncio.sleep(5.0)
                self._spawn(self._consume_concurrently(pr, failed))
                batch = [m for m in batch if m not in failed]
        # remove() answers -1 for a queue dropped meanwhile (during a send back): nothing of it is committed
        offset = pr.process_queue.remove(batch)
        if offset >= 0 and not pr.process_queue.dropped:
            self.offsets.update(pr.mq, offset)

    # ---------------------------------------------------------------- orderly consumption
    async def _consume_orderly(self, pr: PullRequest) -> None:
        assert self._orderly is not None and self.rebalancer is not None
        pq = pr.process_queue
        if pq.consume_lock.locked():
            return  # a consume loop is already running for this queue
        async with pq.consume_lock:
            while self._running and not pq.dropped:
                if not pq.locked or pq.lock_expired():
                    if not await self.rebalancer.lock(pr.mq):
                        await asyncio.sleep(SUSPEND_ORDERLY_S)
                        continue
                msgs = pq.take(self.consume_batch_max_size)
                if not msgs:
                    return
                status = await self._run_listener(
                    self._orderly, pr, msgs, ConsumeOrderlyStatus.SUCCESS,
                    ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT,
                    "orderly listener of %s raised; suspending the queue")
                if pq.dropped:
                    # dropped while the batch was in the listener (a rebalance, or the broker moved the
                    # offset): nothing is committed nor retried; the queue's next owner starts at the stored offset
                    log.info("orderly: %s was dropped while consuming; the batch is not committed", pr.mq)
                    pq.rollback()
                    return
                if status == ConsumeOrderlyStatus.SUCCESS:
                    offset = pq.commit()
                    if offset >= 0:
                        self.offsets.update(pr.mq, offset)
                elif await self._dead_letter_exhausted(pr, msgs):
                    offset = pq.commit()  # every message is in the DLQ now: the queue goes on
                    if offset >= 0:
                        self.offsets.update(pr.mq, offset)
                else:
                    pq.rollback()
                    await asyncio.sleep(SUSPEND_ORDERLY_S)

    async def _dead_letter_exhausted(self, pr: PullRequest, msgs: list[MessageExt]) -> bool:
        """Java's checkReconsumeTimes: a message failed ``max_reconsume_times`` times goes to the
        group's DLQ; the batch stops suspending the queue only when every message of it went there."""
        suspend = False
        for m in msgs:
            if m.reconsume_times >= self.max_reconsume_times:
                try:
                    await self._send_to_dlq_orderly(m, pr.mq.broker_name)
                    log.warning("orderly: %s failed %d times; sent to the DLQ of %s",
                                m.msg_id, m.reconsume_times + 1, self.group)
                    continue
                except (RemotingError, BrokerError) as e:
                    log.warning("orderly: sending %s to the DLQ failed (%s); suspending the queue", m.msg_id, e)
            suspend = True
            m.reconsume_times += 1
        return not suspend

    async def _send_to_dlq_orderly(self, m: MessageExt, broker_name: str) -> None:
        """ConsumeMessageOrderlyService#sendMessageBack: the message itself, sent to %RETRY%group with
        RECONSUME_TIME = its count + 1 and MAX_RECONSUME_TIMES in the header; the broker stores it in
        %DLQ%group (handleRetryAndDLQ: over the maximum, and the group holds orderly locks). Why not
        CONSUMER_SEND_MSG_BACK: that re-puts the stored record with ITS reconsume times + 1 (1 for an
        orderly message, whose count only this client keeps), so the DLQ copy lost the real count."""
        from broker_core.remoting.headers import SendMessageRequestHeader
        from broker_core.store.codec.properties import (
            PROPERTY_DELAY_TIME_LEVEL,
            PROPERTY_MAX_RECONSUME_TIMES,
            PROPERTY_ORIGIN_MESSAGE_ID,
            PROPERTY_RECONSUME_TIME,
            PROPERTY_TRANSACTION_PREPARED,
            encode_properties,
        )

        addr = self.instance.master_addr(broker_name)  # a write: the master only (findBrokerAddressInPublish)
        if addr is None:
            raise BrokerError(ResponseCode.SYSTEM_ERROR, f"The broker[{broker_name}] not exist")
        props = dict(m.properties)
        props[PROPERTY_ORIGIN_MESSAGE_ID] = props.get(PROPERTY_ORIGIN_MESSAGE_ID) or m.uniq_key or m.msg_id
        props[PROPERTY_RETRY_TOPIC] = m.topic
        props[PROPERTY_DELAY_TIME_LEVEL] = str(3 + m.reconsume_times)
        for key in (PROPERTY_TRANSACTION_PREPARED, PROPERTY_RECONSUME_TIME, PROPERTY_MAX_RECONSUME_TIMES):
            props.pop(key, None)  # the producer moves the two counts into the header for a %RETRY% topic
        header = SendMessageRequestHeader(
            producer_group="CLIENT_INNER_PRODUCER", topic=RETRY_GROUP_TOPIC_PREFIX + self.group,
            default_topic="TBW102", default_topic_queue_nums=4, queue_id=-1, sys_flag=0,
            born_timestamp=int(time.time() * 1000), flag=m.flag, properties=encode_properties(props),
            reconsume_times=m.reconsume_times + 1, unit_mode=False, max_reconsume_times=self.max_reconsume_times)
        self.instance.check(await self.instance.invoke(addr, RequestCode.SEND_MESSAGE, header, m.body), addr=addr)
