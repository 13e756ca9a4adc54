"""5.x pop consumption: pop, ack, change invisible time, revive, FIFO order and dead letters.

Why one service: a pop hands out messages and records them (a revive-log checkpoint, or an order
info for orderly groups), an ack or a changed invisible time must find that record from nothing
but the receipt handle, and what nobody acked must come back (normal groups: re-put into the pop
retry topic with reconsume times + 1, as PopReviveService; orderly groups: the same batch again
with its consumed count + 1). Consumers pop the retry topic too, and a message consumed more than
the group's retryMaxTimes goes to ``%DLQ%{group}`` instead of being returned.

The service has no sockets: protocol adapters call ``pop`` / ``ack`` / ``change_invisible_time``
and map the typed results; ``tick()`` revives with the injected clock (a background thread calls
it in ``start()``).
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

from broker_core.broker.errors import (
    BrokerError,
    InvalidParameterError,
    NoPermissionError,
    SubscriptionGroupNotExistError,
    SubscriptionParseFailedError,
    TopicNotExistError,
)
from broker_core.broker.filter import (
    FilterSyntaxError,
    MessageFilter,
    UnsupportedExpressionTypeError,
    build_filter,
)
from broker_core.broker.filter.consumer_filter_manager import ConsumerFilterManager
from broker_core.broker.filter.expression_filter import with_bitmap
from broker_core.broker.retry import (
    PERM_READ_WRITE,
    GroupLookup,
    RetryService,
    TopicsLike,
    TopicTableTopics,
    resolve_max_reconsume_times,
)
from broker_core.common.response_code import ResponseCode
from broker_core.common.round_failures import RoundFailures
from broker_core.store.codec.message import MessageExt, MessageInner
from broker_core.store.codec.properties import (
    PROPERTY_DELAY_TIME_LEVEL,
    PROPERTY_FIRST_POP_TIME,
    PROPERTY_POP_CK,
    PROPERTY_TIMER_DELAY_MS,
    PROPERTY_TIMER_DELAY_SEC,
    PROPERTY_TIMER_DELIVER_MS,
    encode_properties,
)
from broker_core.store.codec.sys_flag import INNER_BATCH_FLAG, NEED_UNWRAP_FLAG
from broker_core.store.commit_log import PutMessageResult, PutMessageStatus
from broker_core.store.config_file import ConfigWriteError
from broker_core.store.message_store import GetMessageStatus, MessageStore
from broker_core.store.subscription_group_config import SubscriptionGroupConfig
from broker_core.store.topic_config import TopicConfig

from ..wait_steps import WaitSteps, drive_async, drive_blocking
from .order_info import ConsumerOrderInfoManager
from .pop_ck import AckMsg, PopCheckPoint, build_cluster_revive_topic
from .pop_ck_log import CheckpointMatch, PopCheckpointLog, PopOffsetStore
from .pop_config import CONSUME_INIT_MODE_MAX, CONSUME_INIT_MODE_MIN, MAX_POP_MSG_NUMS, PopConfig
from .pop_long_polling import PopLongPollingService
from .receipt_handle import (
    POP_ORDER_REVIVE_QUEUE,
    RETRY_GROUP_TOPIC_PREFIX,
    InvalidReceiptHandleError,
    ReceiptHandle,
    build_pop_retry_topic,
    parse_normal_topic,
    topic_type_of,
)

log = logging.getLogger("rmqops.broker.pop")

POP_RETRY_QUEUE_NUM = 1  # PopAckConstants.retryQueueNum
_REREAD = (GetMessageStatus.OFFSET_TOO_SMALL, GetMessageStatus.OFFSET_OVERFLOW_BADLY, GetMessageStatus.OFFSET_FOUND_NULL)
_SKIP = (GetMessageStatus.NO_MATCHED_MESSAGE, GetMessageStatus.OFFSET_FOUND_NULL, GetMessageStatus.MESSAGE_WAS_REMOVING,
         GetMessageStatus.NO_MATCHED_LOGIC_QUEUE)
_SCHEDULE_KEYS = (PROPERTY_DELAY_TIME_LEVEL, PROPERTY_TIMER_DELIVER_MS, PROPERTY_TIMER_DELAY_SEC, PROPERTY_TIMER_DELAY_MS)


class PopNoMessageError(BrokerError):
    """The handle's message is no longer in flight (acked, revived or redelivered): NO_MESSAGE."""

    code = ResponseCode.NO_MESSAGE


class PopStatus(StrEnum):
    FOUND = "FOUND"
    NO_NEW_MSG = "NO_NEW_MSG"
    POLLING_FULL = "POLLING_FULL"
    POLLING_NOT_FOUND = "POLLING_NOT_FOUND"


@dataclass(slots=True)
class PopResult:
    status: PopStatus
    messages: list[MessageExt] = field(default_factory=list)
    pop_time: int = 0
    invisible_time: int = 0
    revive_qid: int = 0
    rest_num: int = 0
    # The PopMessageResponseHeader info strings (ExtraInfoUtil formats) for the remoting adapter.
    start_offset_info: str = ""
    msg_offset_info: str = ""
    order_count_info: str = ""

    @property
    def response_code(self) -> int:
        if self.status is PopStatus.FOUND:
            return ResponseCode.SUCCESS
        if self.status is PopStatus.POLLING_FULL:
            return ResponseCode.POLLING_FULL
        return ResponseCode.POLLING_TIMEOUT


class AckStatus(StrEnum):
    OK = "OK"
    ALREADY_ACKED = "ALREADY_ACKED"
    EXPIRED = "EXPIRED"  # the handle is stale: the message was revived or popped again since
    NOT_FOUND = "NOT_FOUND"


@dataclass(slots=True)
class AckResult:
    status: AckStatus
    remark: str = ""

    @property
    def ok(self) -> bool:
        return self.status in (AckStatus.OK, AckStatus.ALREADY_ACKED)

    @property
    def response_code(self) -> int:
        return ResponseCode.SUCCESS if self.ok else ResponseCode.NO_MESSAGE


@dataclass(slots=True)
class ChangeInvisibleResult:
    receipt_handle: str
    pop_time: int
    invisible_time: int
    revive_qid: int


@dataclass
class _PopContext:
    group: str
    topic: str
    order: bool
    max_msgs: int
    invisible_time: int
    attempt_id: str | None
    init_mode: int
    message_filter: MessageFilter
    pop_time: int
    revive_qid: int
    max_attempts: int | None
    group_config: SubscriptionGroupConfig
    messages: list[MessageExt] = field(default_factory=list)
    rest_num: int = 0
    # The stored bytes taken so far from all queues (GetMessageResult.buffer_total_size summed)
    buffer_total: int = 0
    start_offset_info: list[str] = field(default_factory=list)
    msg_offset_info: list[str] = field(default_factory=list)
    order_count_info: list[str] = field(default_factory=list)

    @property
    def room(self) -> int:
        return self.max_msgs - len(self.messages)


class PopService:
    def __init__(self, store: MessageStore, offsets: PopOffsetStore, groups: GroupLookup,
                 put_message: Callable[[MessageInner], PutMessageResult], broker_name: str, cluster_name: str,
                 clock: Callable[[], int], config_dir: Path, *, topics: TopicsLike | None = None,
                 config: PopConfig | None = None, store_host: tuple[str, int] = ("127.0.0.1", 10911),
                 rng: random.Random | None = None, consumer_filters: ConsumerFilterManager | None = None,
                 on_get: Callable[[str, str, int], None] | None = None) -> None:
        self.store = store
        # (group, topic, n) for each queue read that found messages: the broker's get figures (statsAll
        # OutTPS/OutMsg24Hour, consumerProgress Consume TPS), as PopMessageProcessor#popMsgFromQueue
        # calls incGroupGetNums; the pull path counts its gets the same way
        self.on_get = on_get
        # SQL92 pops of a group that registered the same expression use the dispatch-time bitmap
        self.consumer_filters = consumer_filters
        self.offsets = offsets
        self.groups = groups
        self.put_message = put_message
        self.broker_name = broker_name
        self.cluster_name = cluster_name
        self.clock = clock
        self.config = config or PopConfig()
        self.store_host = store_host
        self.random = rng or random.Random()
        self.topics: TopicsLike = topics or TopicTableTopics(store.topic_table, clock)
        self.revive_topic = build_cluster_revive_topic(cluster_name)
        self.order_info = ConsumerOrderInfoManager(Path(config_dir), clock, self._read_queue_nums,
                                                   before_write=store.flush_commit_log)
        self.ck_log = PopCheckpointLog(store, put_message, offsets, self.revive_topic, self.config.revive_queue_num,
                                       store_host, clock)
        self.retry = RetryService(put_message, groups, self.topics, store_host, self.random)
        self.long_polling = PopLongPollingService(self.config.pop_polling_size, self.config.max_pop_polling_size)
        self.store.arrival_listeners.append(self.long_polling.notify_message_arriving)
        self._rr: dict[tuple[str, str], int] = {}
        self._lock = threading.RLock()
        self._stop = threading.Event()
        self._closed = False
        self._thread: threading.Thread | None = None

    # -- lifecycle -------------------------------------------------------------------------------
    def load(self) -> int:
        """Read consumerOrderInfo.json and replay the revive log; returns the checkpoints in flight."""
        with self._lock:
            self.order_info.load()
            return self.ck_log.load()

    def start(self) -> PopService:
        if self._thread is None:
            self._stop.clear()
            self._thread = threading.Thread(target=self._run, name="PopReviveService", daemon=True)
            self._thread.start()
        return self

    def _run(self) -> None:
        interval = max(self.config.revive_interval, 10) / 1000
        last_flush = time.monotonic()
        failures = RoundFailures(log, "pop revive round")
        while not self._stop.wait(interval):
            try:
                self.tick()
                if time.monotonic() - last_flush >= self.config.flush_consumer_offset_interval / 1000:
                    last_flush = time.monotonic()
                    self.persist()
            except Exception as e:
                failures.failed(e)
            else:
                failures.succeeded()

    def persist(self) -> bool:
        return self.order_info.persist()

    def shutdown(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None
        self.long_polling.shutdown()
        try:
            self.store.arrival_listeners.remove(self.long_polling.notify_message_arriving)
        except ValueError:
            pass
        self.persist()

    # -- helpers ---------------------------------------------------------------------------------
    def _read_queue_nums(self, topic: str) -> int | None:
        tc = self.topics.get(topic)
        return None if tc is None else tc.read_queue_nums

    def _group_config(self, group: str) -> SubscriptionGroupConfig:
        cfg = self.groups(group)
        if cfg is None:
            raise SubscriptionGroupNotExistError(f"subscription group [{group}] does not exist")
        return cfg

    def _check_access(self, group: str, topic: str,
                      queue_id: int | None) -> tuple[TopicConfig, SubscriptionGroupConfig]:
        """PopMessageProcessor's topic and group checks, with the configs as they are now (before the
        first read and after each wake-up of a parked pop)."""
        tc = self.topics.get(topic)
        if tc is None:
            raise TopicNotExistError(f"topic[{topic}] not exist, apply first please!")
        if not tc.perm & 4:
            raise NoPermissionError(f"the topic[{topic}] peeking message is forbidden")
        if queue_id is not None and queue_id >= tc.read_queue_nums:
            raise InvalidParameterError(f"queueId[{queue_id}] is illegal, topic:[{topic}] "
                                        f"topicConfig.readQueueNums:[{tc.read_queue_nums}]")
        cfg = self._group_config(group)
        if not cfg.consume_enable:
            raise NoPermissionError(f"subscription group no permission, {group}")
        return tc, cfg

    def pop_retry_topic(self, topic: str, group: str) -> str:
        return build_pop_retry_topic(topic, group, self.config.enable_retry_topic_v2)

    def _retry_topics(self, topic: str, group: str) -> list[str]:
        names = [self.pop_retry_topic(topic, group)]
        if self.config.enable_retry_topic_v2 and self.config.retrieve_message_from_pop_retry_topic_v1:
            names.append(build_pop_retry_topic(topic, group, False))
        return names

    def _commit(self, group: str, topic: str, queue_id: int, offset: int) -> None:
        self.offsets.commit_offset(group, topic, queue_id, offset)

    def _reset_pending(self, group: str, topic: str, queue_id: int) -> bool:
        return self.offsets.has_offset_reset(group, topic, queue_id)

    def _init_offset(self, group: str, topic: str, queue_id: int, init_mode: int) -> int:
        """getInitOffset: MIN (and retry topics) from the oldest message; MAX from the newest one,
        or from the start when the queue was never trimmed."""
        min_off = self.store.get_min_offset_in_queue(topic, queue_id)
        if init_mode == CONSUME_INIT_MODE_MIN or topic.startswith(RETRY_GROUP_TOPIC_PREFIX) or min_off <= 0:
            offset = min_off
        else:
            offset = max(self.store.get_max_offset_in_queue(topic, queue_id) - 1, 0)
        self._commit(group, topic, queue_id, offset)
        return offset

    def _pop_offset(self, group: str, topic: str, queue_id: int, init_mode: int) -> int:
        reset = self.offsets.query_then_erase_reset_offset(group, topic, queue_id)
        if reset is not None:
            # An admin reset: forget the queue's in-flight state and start from the new offset.
            self.order_info.clear_block(topic, group, queue_id)
            self.ck_log.drop_queue(group, topic, queue_id)
            self._commit(group, topic, queue_id, reset)
            return reset
        offset = self.offsets.query_offset(group, topic, queue_id)
        if offset < 0:
            offset = self._init_offset(group, topic, queue_id, init_mode)
        return offset

    # -- pop -------------------------------------------------------------------------------------
    def pop(self, group: str, topic: str, queue_id: int | None = None, max_msgs: int = MAX_POP_MSG_NUMS,
            invisible_time_ms: int = 60_000, expression_type: str | None = "TAG", expression: str | None = "*",
            attempt_id: str | None = None, order: bool | None = None, poll_time_ms: int = 0,
            init_mode: int = CONSUME_INIT_MODE_MAX) -> PopResult:
        """POP_MESSAGE. With ``poll_time_ms`` this thread blocks until messages arrive or time is up."""
        return drive_blocking(self.pop_steps(group, topic, queue_id, max_msgs, invisible_time_ms, expression_type,
                                             expression, attempt_id, order, poll_time_ms, init_mode))

    async def pop_async(self, group: str, topic: str, queue_id: int | None = None,
                        max_msgs: int = MAX_POP_MSG_NUMS, invisible_time_ms: int = 60_000,
                        expression_type: str | None = "TAG", expression: str | None = "*",
                        attempt_id: str | None = None, order: bool | None = None, poll_time_ms: int = 0,
                        init_mode: int = CONSUME_INIT_MODE_MAX) -> PopResult:
        """The same pop for an asyncio server: a parked pop awaits its waiter, holding no thread."""
        return await drive_async(self.pop_steps(group, topic, queue_id, max_msgs, invisible_time_ms,
                                                expression_type, expression, attempt_id, order, poll_time_ms,
                                                init_mode))

    def pop_steps(self, group: str, topic: str, queue_id: int | None, max_msgs: int, invisible_time_ms: int,
                  expression_type: str | None, expression: str | None, attempt_id: str | None,
                  order: bool | None, poll_time_ms: int, init_mode: int) -> WaitSteps[PopResult]:
        """The pop as wait steps (see ``wait_steps``): yields ``(waiter, seconds)`` while parked."""
        if max_msgs <= 0 or max_msgs > MAX_POP_MSG_NUMS:
            raise InvalidParameterError(f"the broker[{self.broker_name}] pop message's num must be 1..32, "
                                        f"got {max_msgs}")
        if invisible_time_ms <= 0:
            raise InvalidParameterError(f"invisibleTime must be positive, got {invisible_time_ms}")
        if queue_id is not None and queue_id < 0:
            queue_id = None
        tc, cfg = self._check_access(group, topic, queue_id)
        try:
            message_filter = build_filter(expression_type, expression)
        except (FilterSyntaxError, UnsupportedExpressionTypeError) as e:
            raise SubscriptionParseFailedError(f"parse the consumer's subscription failed: {e}") from e
        message_filter = with_bitmap(message_filter, group, topic, self.consumer_filters)

        def args() -> tuple[Any, ...]:  # the configs as the last check read them
            is_order = bool(cfg.consume_message_orderly) if order is None else order
            return (group, tc, queue_id, max_msgs, invisible_time_ms, attempt_id, is_order, init_mode,
                    message_filter, cfg)

        result = self._pop_once(*args())
        if result.messages or poll_time_ms <= 0:
            return result
        waiter = self.long_polling.polling(topic, group, queue_id)
        if waiter is None:
            result.status = PopStatus.POLLING_FULL
            return result
        deadline = time.monotonic() + poll_time_ms / 1000
        slice_s = max(self.config.pop_long_polling_force_notify_interval, 10) / 1000
        try:
            while True:
                # Look again after parking: a message may have arrived in between. As Apache re-runs
                # processRequest on wake-up, the checks run again with the configs as they are now:
                # a group disabled (updateSubGroup -s false) while the pop waited is refused, not
                # served, and retryMaxTimes/consumeMessageOrderly changed meanwhile apply.
                tc, cfg = self._check_access(group, topic, queue_id)
                result = self._pop_once(*args())
                if result.messages:
                    return result
                left = deadline - time.monotonic()
                if left <= 0 or self._closed:
                    break
                yield waiter.event, min(left, slice_s)
                waiter.event.clear()
        finally:
            self.long_polling.release(waiter)
        result.status = PopStatus.POLLING_NOT_FOUND
        return result

    def _pop_once(self, group: str, tc: TopicConfig, queue_id: int | None, max_msgs: int, invisible_time: int,
                  attempt_id: str | None, order: bool, init_mode: int, message_filter: MessageFilter, cfg: SubscriptionGroupConfig) -> PopResult:
        with self._lock:
            pop_time = self.clock()
            revive_qid = POP_ORDER_REVIVE_QUEUE if order else self.ck_log.next_revive_qid()
            max_times = resolve_max_reconsume_times(cfg)
            ctx = _PopContext(group, tc.topic_name, order, max_msgs, invisible_time, attempt_id, init_mode,
                              message_filter, pop_time, revive_qid, None if max_times < 0 else max_times + 1, cfg)
            need_retry = not order and self.random.randrange(100) < self.config.pop_from_retry_probability
            if need_retry:
                self._pop_from_retry_topics(ctx)
            if queue_id is None:
                n = tc.read_queue_nums
                key = (group, tc.topic_name)
                start = self._rr.get(key, 0)
                self._rr[key] = start + 1
                for i in range(n):
                    self._pop_from_queue(ctx, tc.topic_name, (start + i) % n, False)
            else:
                self._pop_from_queue(ctx, tc.topic_name, queue_id, False)
            if not need_retry and not order and ctx.room > 0:
                self._pop_from_retry_topics(ctx)
        return PopResult(PopStatus.FOUND if ctx.messages else PopStatus.NO_NEW_MSG, ctx.messages, pop_time,
                         invisible_time, revive_qid, ctx.rest_num, ";".join(ctx.start_offset_info),
                         ";".join(ctx.msg_offset_info), ";".join(ctx.order_count_info))

    def _pop_from_retry_topics(self, ctx: _PopContext) -> None:
        for retry in self._retry_topics(ctx.topic, ctx.group):
            rtc = self.topics.get(retry)
            if rtc is None:
                continue
            for qid in range(rtc.read_queue_nums):
                self._pop_from_queue(ctx, retry, qid, True)

    def _pop_from_queue(self, ctx: _PopContext, topic: str, queue_id: int, is_retry: bool) -> None:
        group = ctx.group
        offset = self._pop_offset(group, topic, queue_id, ctx.init_mode)
        if ctx.order and self.order_info.check_block(ctx.attempt_id, topic, group, queue_id, ctx.invisible_time):
            return  # the previous batch of this queue is still in flight
        # One answer holds at most maxTransferBytesOnMessageInMemory bytes over all the queues it reads (and
        # one message beyond, the first of a queue, as a read always hands one out): each queue's read is
        # limited by the store, but 32 queues of 512 KiB messages still made a 16 MiB answer, past the
        # frame limit of every client. Apache's PopMessageProcessor limits each queue's read only.
        byte_room = self.store.config.max_transfer_bytes_on_message_in_memory - ctx.buffer_total
        if ctx.room <= 0 or byte_room <= 0:
            ctx.rest_num += max(0, self.store.get_max_offset_in_queue(topic, queue_id) - offset)
            return
        got = self.store.get_messages(topic, queue_id, offset, ctx.room, ctx.message_filter,
                                      transfer_limits=True, max_total_bytes=byte_room)
        if got.status in _REREAD:
            # The stored offset is outside the queue (trimmed, or reset beyond the end): move it.
            offset = got.next_begin_offset
            self._commit(group, topic, queue_id, offset)
            got = self.store.get_messages(topic, queue_id, offset, ctx.room, ctx.message_filter,
                                          transfer_limits=True, max_total_bytes=byte_room)
        ctx.buffer_total += got.buffer_total_size
        if got.messages and self.on_get is not None:
            # as upstream: every message read, under the queue's topic (a retry topic's own), before some
            # are dead-lettered instead of handed out
            self.on_get(group, topic, len(got.messages))
        if got.messages:
            self._take(ctx, topic, queue_id, offset, is_retry, got.messages, got.next_begin_offset)
        elif got.status in _SKIP and got.next_begin_offset > offset:
            self._commit(group, topic, queue_id, got.next_begin_offset)  # nothing matched: skip past it
        ctx.rest_num += max(0, got.max_offset - max(got.next_begin_offset, offset))

    def _take(self, ctx: _PopContext, topic: str, queue_id: int, offset: int, is_retry: bool,
              msgs: list[MessageExt], next_begin: int) -> None:
        group = ctx.group
        queue_offsets = [m.queue_offset for m in msgs]
        normal_topic = parse_normal_topic(topic, group) if is_retry else topic
        if ctx.order:
            info, count_info = self.order_info.update(ctx.attempt_id, is_retry, topic, group, queue_id,
                                                      ctx.pop_time, ctx.invisible_time, queue_offsets)
            self._commit(group, topic, queue_id, offset)
            ctx.order_count_info.append(count_info)
            for m in msgs:
                m.reconsume_times = info.consumed_count(m.queue_offset)
        dead = [m for m in msgs if ctx.max_attempts is not None and m.reconsume_times >= ctx.max_attempts]
        live = [m for m in msgs if not (ctx.max_attempts is not None and m.reconsume_times >= ctx.max_attempts)]
        for m in dead:
            # Consumed too often: dead-letter it instead of handing it out again.
            self.retry.send_to_dlq(group, m, normal_topic)
        if ctx.order:
            for m in dead:
                nxt = self.order_info.commit_and_next(topic, group, queue_id, m.queue_offset, ctx.pop_time)
                if nxt >= 0 and not self._reset_pending(group, topic, queue_id):
                    self._commit(group, topic, queue_id, nxt)
        else:
            if live:
                self.ck_log.add_checkpoint(PopCheckPoint(
                    offset, ctx.pop_time, ctx.invisible_time, queue_id, topic, group, self.broker_name,
                    [m.queue_offset - offset for m in live], revive_queue_id=ctx.revive_qid))
            self._commit(group, topic, queue_id, next_begin)
        tt = topic_type_of(topic)
        ctx.start_offset_info.append(f"{tt} {queue_id} {offset}")
        ctx.msg_offset_info.append(f"{tt} {queue_id} {','.join(str(o) for o in queue_offsets)}")
        for m in live:
            handle = ReceiptHandle.build(offset, ctx.pop_time, ctx.invisible_time, ctx.revive_qid, topic,
                                         self.broker_name, queue_id, m.queue_offset, m.commit_log_offset)
            props = m.properties
            props[PROPERTY_POP_CK] = handle.encode()
            props.setdefault(PROPERTY_FIRST_POP_TIME, str(ctx.pop_time))
            m.properties_string = encode_properties(props)
            if is_retry:
                m.topic = normal_topic  # popResponseReturnActualRetryTopic=false: consumers see their topic
            ctx.messages.append(m)

    # -- ack -------------------------------------------------------------------------------------
    def _decode(self, group: str, topic: str, receipt_handle: str) -> tuple[ReceiptHandle, str]:
        """The handle and the topic its queue id and offsets belong to. A handle this broker cannot have
        issued (another broker's name, a revive queue it does not have) is refused here: acting on it
        would ack a look-alike message of ours, or answer success while nothing is acked."""
        handle = ReceiptHandle.decode(receipt_handle)
        if handle.broker_name != self.broker_name:
            raise InvalidReceiptHandleError(f"the receipt handle belongs to broker {handle.broker_name}, "
                                            f"not to this broker ({self.broker_name})")
        if not handle.is_order and not 0 <= handle.revive_queue_id < self.ck_log.revive_queue_num:
            raise InvalidReceiptHandleError(
                f"receipt handle reviveQueueId {handle.revive_queue_id} is outside [0, "
                f"{self.ck_log.revive_queue_num}) and is not {POP_ORDER_REVIVE_QUEUE} (orderly pop)")
        real = handle.real_topic(topic, group)
        tc = self.topics.get(real)
        if tc is None:
            raise TopicNotExistError(f"topic[{real}] not exist, apply first please!")
        if handle.queue_id >= tc.read_queue_nums:
            raise InvalidParameterError(f"queueId[{handle.queue_id}] is illegal, topic:[{real}] "
                                        f"topicConfig.readQueueNums:[{tc.read_queue_nums}]")
        return handle, real

    def _check_order_marker(self, group: str, topic: str, handle: ReceiptHandle) -> None:
        """A handle marked orderly (reviveQueueId 999) whose pop was not orderly: its message is in flight
        under a checkpoint, which an orderly ack never touches, so the ack would do nothing."""
        if handle.is_order and self.ck_log.find(group, topic, handle.queue_id, handle.retrieve_time,
                                                handle.offset) is not None:
            raise InvalidReceiptHandleError(
                f"receipt handle reviveQueueId {POP_ORDER_REVIVE_QUEUE} marks an orderly pop, but offset "
                f"{handle.offset} of {topic}@{handle.queue_id} was popped without order")

    def _offset_outside_queue(self, topic: str, handle: ReceiptHandle) -> str | None:
        lo = self.store.get_min_offset_in_queue(topic, handle.queue_id)
        hi = self.store.get_max_offset_in_queue(topic, handle.queue_id)
        if handle.offset < lo or handle.offset >= hi:
            return f"offset is illegal, key:{topic}@{handle.queue_id}, commit:{handle.offset}, store:{lo}~{hi}"
        return None

    def ack(self, group: str, topic: str, receipt_handle: str) -> AckResult:
        """ACK_MESSAGE; ``topic`` is the consumer's topic (the handle says whether it was a retry)."""
        handle, real = self._decode(group, topic, receipt_handle)
        bad = self._offset_outside_queue(real, handle)
        if bad:
            return AckResult(AckStatus.NOT_FOUND, bad)
        with self._lock:
            self._check_order_marker(group, real, handle)
            if handle.is_order:
                return self._ack_orderly(group, real, handle)
            return self._ack_normal(group, real, [handle])[0]

    def batch_ack(self, group: str, topic: str, receipt_handles: Iterable[str]) -> list[AckResult]:
        """BATCH_ACK_MESSAGE: one result per handle; acks of one checkpoint share one ``bAck`` record."""
        decoded = [self._decode(group, topic, h) for h in receipt_handles]
        results: list[AckResult | None] = [None] * len(decoded)
        normal: dict[str, list[tuple[int, ReceiptHandle]]] = {}
        with self._lock:
            for handle, real in decoded:
                self._check_order_marker(group, real, handle)
            for i, (handle, real) in enumerate(decoded):
                bad = self._offset_outside_queue(real, handle)
                if bad:
                    results[i] = AckResult(AckStatus.NOT_FOUND, bad)
                elif handle.is_order:
                    results[i] = self._ack_orderly(group, real, handle)
                else:
                    normal.setdefault(real, []).append((i, handle))
            for real, items in normal.items():
                for (i, _), res in zip(items, self._ack_normal(group, real, [h for _, h in items]), strict=True):
                    results[i] = res
        return [r for r in results if r is not None]

    def _ack_normal(self, group: str, topic: str, handles: list[ReceiptHandle]) -> list[AckResult]:
        now = self.clock()
        results: list[AckResult] = []
        by_ck: dict[int, tuple[PopCheckPoint, list[CheckpointMatch]]] = {}
        for h in handles:
            match = self.ck_log.find(group, topic, h.queue_id, h.retrieve_time, h.offset)
            if match is None:
                if h.is_expired(now):
                    results.append(AckResult(AckStatus.EXPIRED, "the handle expired: the message was revived "
                                                                "or its invisible time changed"))
                else:
                    # its checkpoint is settled (every message of the pop acked, or the handle renewed): a
                    # repeated ack, as a client retries one after a timeout. Upstream's broker answers any
                    # in-range ack with SUCCESS; a NOT_FOUND here failed the retry or not depending on
                    # whether the rest of the popped batch had been acked yet.
                    results.append(AckResult(AckStatus.ALREADY_ACKED, "no message in flight for this handle: "
                                                                      "acked already"))
                continue
            if match.ck.is_acked(match.index) or any(m.index == match.index
                                                     for m in by_ck.get(id(match.ck), (None, []))[1]):
                results.append(AckResult(AckStatus.ALREADY_ACKED, "already acked"))
                continue
            by_ck.setdefault(id(match.ck), (match.ck, []))[1].append(match)
            results.append(AckResult(AckStatus.OK))
        for ck, matches in by_ck.values():
            offsets = [ck.ack_offset_by_index(m.index) for m in matches]
            ack = AckMsg(offsets[0] if len(offsets) == 1 else -1, ck.start_offset, group, topic, ck.queue_id,
                         ck.pop_time, ck.broker_name, None if len(offsets) == 1 else offsets)
            self.ck_log.append_ack(ack, ck.revive_queue_id)
            for m in matches:
                self.ck_log.mark_acked(m)
        return results

    def _ack_orderly(self, group: str, topic: str, handle: ReceiptHandle) -> AckResult:
        old = self.offsets.query_offset(group, topic, handle.queue_id)
        if handle.offset < old:
            return AckResult(AckStatus.ALREADY_ACKED, "offset already committed")
        if self.order_info.get(topic, group, handle.queue_id) is None:
            # Java's commitAndNext would commit offset + 1 here, skipping whatever lies before it that
            # was never delivered; with no orderly pop in flight there is nothing this ack can settle.
            return AckResult(AckStatus.NOT_FOUND, f"no orderly pop of {topic}@{group}@{handle.queue_id} is "
                                                  "in flight")
        nxt = self.order_info.commit_and_next(topic, group, handle.queue_id, handle.offset, handle.retrieve_time)
        if nxt == -2:
            return AckResult(AckStatus.EXPIRED, "the batch was popped again since this handle was issued")
        if nxt == -1:
            return AckResult(AckStatus.NOT_FOUND, f"offset {handle.offset} is not in the popped batch of "
                                                  f"{topic}@{group}@{handle.queue_id}")
        if not self._reset_pending(group, topic, handle.queue_id):
            self._commit(group, topic, handle.queue_id, nxt)
        if not self.order_info.check_block(None, topic, group, handle.queue_id, handle.invisible_time):
            self.long_polling.notify(topic, group, handle.queue_id)
        return AckResult(AckStatus.OK)

    # -- change invisible time -----------------------------------------------------------------
    def change_invisible_time(self, group: str, topic: str, receipt_handle: str,
                              invisible_time_ms: int) -> ChangeInvisibleResult:
        """CHANGE_MESSAGE_INVISIBLETIME: the message stays invisible for ``invisible_time_ms`` from now."""
        if invisible_time_ms < 0:
            raise InvalidParameterError(f"invisibleTime must be >= 0, got {invisible_time_ms}")
        handle, real = self._decode(group, topic, receipt_handle)
        bad = self._offset_outside_queue(real, handle)
        if bad:
            raise PopNoMessageError(bad)
        with self._lock:
            now = self.clock()
            self._check_order_marker(group, real, handle)
            if handle.is_order:
                if handle.offset < self.offsets.query_offset(group, real, handle.queue_id):
                    raise PopNoMessageError("the message was already acked")
                next_visible = now + invisible_time_ms
                if not self.order_info.update_next_visible_time(real, group, handle.queue_id, handle.offset,
                                                                handle.retrieve_time, next_visible):
                    raise PopNoMessageError("the batch was popped again since this handle was issued")
                new = handle.with_visibility(handle.retrieve_time, next_visible - handle.retrieve_time,
                                             POP_ORDER_REVIVE_QUEUE)
                return ChangeInvisibleResult(new.encode(), new.retrieve_time, new.invisible_time,
                                             POP_ORDER_REVIVE_QUEUE)
            match = self.ck_log.find(group, real, handle.queue_id, handle.retrieve_time, handle.offset)
            if match is None or match.ck.is_acked(match.index):
                raise PopNoMessageError("the message is no longer in flight (acked, revived or changed already)")
            # A new checkpoint for this one message, then the old one is acked (appendCheckPointThenAckOrigin).
            self.ck_log.add_checkpoint(PopCheckPoint(handle.offset, now, invisible_time_ms, handle.queue_id, real,
                                                     group, match.ck.broker_name, [0],
                                                     revive_queue_id=match.ck.revive_queue_id))
            self.ck_log.append_ack(AckMsg(handle.offset, match.ck.start_offset, group, real, handle.queue_id,
                                          match.ck.pop_time, match.ck.broker_name), match.ck.revive_queue_id)
            self.ck_log.mark_acked(match)
            new = handle.with_visibility(now, invisible_time_ms, match.ck.revive_queue_id)
            return ChangeInvisibleResult(new.encode(), now, invisible_time_ms, match.ck.revive_queue_id)

    def forget_topic(self, topic: str, persist: bool = False) -> None:
        """deleteTopic: the topic's FIFO order info and in-flight checkpoints go with it. Kept, they named
        offsets of the old queues: a topic made again under the name had its orderly queues blocked by
        the old batches, and revive put its messages at the old popped offsets into the retry topic.
        ``persist``: consumerOrderInfo.json is written now (the checkpoints are closed in the revive log
        either way), so that a power cut after the deletion does not bring the batches back."""
        with self._lock:
            dropped = self.order_info.drop_topic(topic)
        if persist and dropped:
            try:
                self.order_info.persist()
            except ConfigWriteError:  # the deletion stops here: nothing of the topic's pop state goes
                self.order_info.restore(dropped)
                raise
        with self._lock:
            self.ck_log.drop_topic(topic)

    # -- revive ----------------------------------------------------------------------------------
    def tick(self) -> int:
        """Revive every checkpoint whose invisible time is over; returns how many messages came back."""
        revived = 0
        with self._lock:
            for ck in self.ck_log.due(self.clock()):
                done: list[int] = []
                failed = False
                for off in ck.unacked_offsets():
                    got = self.store.get_messages(ck.topic, ck.queue_id, off, 1)
                    msg = next((m for m in got.messages if m.queue_offset == off), None)
                    if msg is None:
                        log.info("revive: %s@%d offset %d is gone, skipping it", ck.topic, ck.queue_id, off)
                        done.append(off)
                        continue
                    if self._revive_retry(ck, msg):
                        done.append(off)
                        revived += 1
                    else:
                        failed = True
                if failed:
                    if done:
                        self.ck_log.ack_offsets(ck, done)
                else:
                    self.ck_log.close(ck)
        return revived

    def _revive_retry(self, ck: PopCheckPoint, msg: MessageExt) -> bool:
        """PopReviveService#reviveRetry: back into the pop retry topic, queue 0, reconsume times + 1."""
        target = ck.topic if ck.topic.startswith(RETRY_GROUP_TOPIC_PREFIX) else self.pop_retry_topic(ck.topic,
                                                                                                     ck.group)
        if self.topics.get(target) is None:
            self.topics.create_if_absent(TopicConfig(target, POP_RETRY_QUEUE_NUM, POP_RETRY_QUEUE_NUM,
                                                     PERM_READ_WRITE))
            if self.offsets.query_offset(ck.group, target, 0) < 0:
                self._commit(ck.group, target, 0, 0)
        props = {k: v for k, v in msg.properties.items() if k not in _SCHEDULE_KEYS and k != PROPERTY_POP_CK}
        if msg.reconsume_times == 0 or PROPERTY_FIRST_POP_TIME not in props:
            props[PROPERTY_FIRST_POP_TIME] = str(ck.pop_time)
        inner = MessageInner(target, msg.body, props, 0, msg.flag, msg.sys_flag & ~(INNER_BATCH_FLAG | NEED_UNWRAP_FLAG),
                             msg.born_timestamp, self.store_host, self.store_host, msg.reconsume_times + 1)
        try:
            result = self.put_message(inner)
        except (BrokerError, ValueError) as e:
            log.error("revive of %s@%d offset %d failed: %s", ck.topic, ck.queue_id, msg.queue_offset, e)
            return False
        if result.status not in (PutMessageStatus.PUT_OK, PutMessageStatus.FLUSH_DISK_TIMEOUT):
            log.error("revive of %s@%d offset %d failed: %s", ck.topic, ck.queue_id, msg.queue_offset,
                      result.status.value)
            return False
        return True

    # -- operator views and hooks ----------------------------------------------------------------
    def inflight(self, group: str, topic: str | None = None, queue_id: int | None = None) -> int:
        """Messages popped and neither acked nor back in the queue (a topic includes its retry topics)."""
        now = self.clock()
        n = 0
        with self._lock:
            for ck in self.ck_log.checkpoints():
                if ck.group != group:
                    continue
                if topic is not None:
                    if queue_id is None:
                        if ck.topic != topic and parse_normal_topic(ck.topic, group) != topic:
                            continue
                    elif ck.topic != topic or ck.queue_id != queue_id:
                        continue
                n += len(ck.unacked_offsets())
            for key, qs in self.order_info.table.items():
                t, _, g = key.rpartition("@")
                if g != group or topic is not None and t != topic:
                    continue
                for qid, info in qs.items():
                    if queue_id is not None and qid != queue_id:
                        continue
                    n += sum(1 for i in range(info.size) if info.is_not_ack(i) and now < info.next_visible_time(i))
        return n

    def is_fifo_blocked(self, group: str, topic: str, queue_id: int) -> bool:
        with self._lock:
            info = self.order_info.get(topic, group, queue_id)
            return info is not None and info.invisible_time is not None and \
                info.need_block(None, info.invisible_time, self.clock())

    def blocked_fifo_queues(self, group: str) -> list[tuple[str, int, int]]:
        """(topic, queue id, since ms) of every orderly queue of the group waiting for acks."""
        out = []
        with self._lock:
            for key, qs in self.order_info.table.items():
                topic, _, g = key.rpartition("@")
                if g != group:
                    continue
                for qid, info in qs.items():
                    if self.is_fifo_blocked(group, topic, qid):
                        out.append((topic, qid, info.pop_time))
        return sorted(out)

    def on_offset_reset(self, group: str, topic: str, queue_id: int, new_offset: int) -> None:
        """Offset-reset listener: drop the queue's in-flight pops and order info (RocketMQ #9025, #10230)."""
        with self._lock:
            self.order_info.clear_block(topic, group, queue_id)
            self.ck_log.drop_queue(group, topic, queue_id)
        self.long_polling.notify(topic, group, queue_id)
