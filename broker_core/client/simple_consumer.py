"""Simple (POP) consumer: receive messages, then ack each one or change how long it stays invisible.

Why beside the push and pull consumers: with RocketMQ 5.x pop the broker, not the client, tracks what
is in flight. A receive (POP_MESSAGE) hides the messages it hands out for an invisible time; an ack
(ACK_MESSAGE) settles one, CHANGE_MESSAGE_INVISIBLETIME extends it, and one left alone comes back
after its invisible time with reconsume times + 1. No rebalance and no offsets on the client, so any
number of consumers of a group share every queue. As Apache's SimpleConsumer (through the proxy) it
pops every broker of the topic with queueId -1 (the broker picks the queues, its retry topic
included), one broker after another.

An orderly group (consumeMessageOrderly, FIFO) is popped with order=true, as Apache's proxy does
from the group's subscription config: the broker then hands out a queue's next message only once the
one before it is acked, and the one not acked comes back first. The flag is read from each broker
(GET_SUBSCRIPTIONGROUP_CONFIG) and kept for 20 s, as the proxy caches it.

Each received message is a MessageExt whose ``POP_CK`` property holds its receipt handle (the
ExtraInfoUtil extraInfo plus the message's queue offset), as Apache's remoting client sets it; ack
and change_invisible_duration read it from there, and the latter writes the new handle back.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time

from broker_core.remoting import RemotingCommand, RequestCode, ResponseCode, fastjson
from broker_core.remoting.bodies import ConsumerData, MessageQueue, SubscriptionData
from broker_core.remoting.headers import (
    AckMessageRequestHeader,
    ChangeInvisibleTimeRequestHeader,
    ChangeInvisibleTimeResponseHeader,
    GetSubscriptionGroupConfigRequestHeader,
    PopMessageRequestHeader,
    PopMessageResponseHeader,
)
from broker_core.store.codec.message import MessageExt

from .config_check import ClientConfigError, check_int
from .connection import RemotingConnection, RemotingError
from .instance import BrokerError, ClientStateError, MQClientInstance
from .message import decode_records, message_id
from .subscription import build_subscription, matches

log = logging.getLogger(__name__)

PROPERTY_POP_CK = "POP_CK"
MAX_POP_MSG_NUMS = 32  # the most messages one POP_MESSAGE may ask for (the broker refuses more)
CONSUME_INIT_MODE_MIN = 0  # ConsumeInitMode.MIN: a new group starts at each queue's first message
CONSUME_INIT_MODE_MAX = 1  # ConsumeInitMode.MAX: at each queue's end (a never-trimmed queue: its start)
RETRY_GROUP_TOPIC_PREFIX = "%RETRY%"
_EXTRA_INFO_FIELDS = 8  # ckQueueOffset popTime invisibleTime reviveQid retryFlag brokerName queueId offset
# POLLING_TIMEOUT / PULL_NOT_FOUND: nothing to hand out; POLLING_FULL: too many pops parked on the broker
_NOTHING = (ResponseCode.POLLING_TIMEOUT, ResponseCode.PULL_NOT_FOUND, ResponseCode.POLLING_FULL)
GROUP_CONFIG_TTL = 20.0  # seconds a broker's consumeMessageOrderly is kept (the proxy's group config cache)
JAVA_LONG_MAX = 2**63 - 1


class InvalidReceiptHandleError(ClientConfigError):
    """A message without a usable POP_CK: not received by a simple consumer, or its handle was altered."""


def receipt_handle(msg: MessageExt) -> str:
    """The message's receipt handle (its POP_CK extraInfo); one line naming what is wrong otherwise."""
    handle = msg.get_property(PROPERTY_POP_CK)
    if not handle:
        raise InvalidReceiptHandleError(f"message {message_id(msg)} of {msg.topic} has no receipt handle "
                                        f"(POP_CK): only messages a SimpleConsumer received can be acked")
    parts = handle.split(" ")
    if len(parts) < _EXTRA_INFO_FIELDS or not all(p.lstrip("-").isdigit() for p in parts[:5] + parts[6:8]):
        raise InvalidReceiptHandleError(f"message {message_id(msg)} of {msg.topic}: receipt handle {handle!r} is "
                                        f"not ckQueueOffset popTime invisibleTime reviveQid retryFlag brokerName "
                                        f"queueId offset")
    return handle


def _real_topic(topic: str, group: str, retry_flag: str) -> str:
    """ExtraInfoUtil.getRealTopic: the topic the handle's queue belongs to (the pop retry topic for a
    redelivered message; the broker hands those out under the subscribed topic's name)."""
    if retry_flag == "1":
        return f"{RETRY_GROUP_TOPIC_PREFIX}{group}_{topic}"
    if retry_flag == "2":
        return f"{RETRY_GROUP_TOPIC_PREFIX}{group}+{topic}"
    return topic


def _retry_flag(topic: str) -> str:
    """ExtraInfoUtil.getRetry: 0 a normal topic, 1 a pop retry topic, 2 a v2 (``+``) pop retry topic."""
    if topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
        return "2" if "+" in topic else "1"
    return "0"


def _millis(name: str, seconds: object, java_name: str, *, zero: bool = False) -> int:
    """``seconds`` as the milliseconds a request header carries: a finite number (an infinite one made
    int() raise OverflowError), and a positive one that rounds to 0 ms is refused rather than sent as 0
    (an invisible time of 0 hands the message straight back; a poll of 0 does not wait). ``zero``: an
    explicit 0 is allowed (change_invisible_duration: make it visible again at once)."""
    low = "0" if zero else "above 0"
    if (isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or math.isnan(seconds)
            or seconds < 0 or (seconds == 0 and not zero)):
        raise ClientConfigError(f"{name} must be a number of seconds {low} (Java's {java_name}), got {seconds!r}")
    if math.isinf(seconds) or seconds * 1000 > JAVA_LONG_MAX:
        raise ClientConfigError(f"{name} must be a finite number of seconds of at most {JAVA_LONG_MAX // 1000} "
                                f"(Java's {java_name} in ms is a long), got {seconds!r}")
    ms = round(seconds * 1000)
    if seconds > 0 and ms < 1:
        raise ClientConfigError(f"{name} {seconds!r} s rounds to 0 ms (Java's {java_name} is in milliseconds): "
                                f"give at least 0.001")
    return ms


def _start_offsets(info: str | None) -> dict[str, int]:
    """PopMessageResponseHeader.startOffsetInfo ("retryFlag queueId startOffset;...") keyed retryFlag@queueId."""
    out: dict[str, int] = {}
    for item in (info or "").split(";"):
        parts = item.split(" ")
        if len(parts) == 3:
            out[f"{parts[0]}@{parts[1]}"] = int(parts[2])
    return out


class SimpleConsumer:
    """A POP consumer of one group: subscribe, then receive / ack / change_invisible_duration.

    ``await_duration`` (seconds, Java's SimpleConsumer awaitDuration): when no broker has a message at
    once, the receive waits that long on one broker (long polling) for new ones; 0 returns at once.
    ``init_mode``: where a group that never popped a queue starts (CONSUME_INIT_MODE_MAX, the default
    as Apache's, starts at its end unless the queue was never trimmed).
    """

    def __init__(self, group: str, instance: MQClientInstance, *, await_duration: float = 0.0,
                 init_mode: int = CONSUME_INIT_MODE_MAX) -> None:
        if not group:
            raise ClientConfigError("consumerGroup must not be blank")
        if await_duration:
            _millis("await_duration", await_duration, "awaitDuration")
        check_int("init_mode", init_mode, CONSUME_INIT_MODE_MIN, CONSUME_INIT_MODE_MAX, "initMode")
        self.group = group
        self.instance = instance
        self.await_duration = float(await_duration)
        self.init_mode = init_mode
        self._subs: dict[str, SubscriptionData] = {}
        self._turn = 0  # which (topic, broker) the next receive asks first: each gets its turn
        self._state = "created"  # created -> running -> shut down
        self._orderly: dict[str, tuple[bool | None, float]] = {}  # broker addr -> (orderly flag, read at)
        self._parked: set[asyncio.Task[list[MessageExt]]] = set()  # long polls shutdown() ends

    async def start(self) -> None:
        self.instance.register_consumer(self.group, self)
        await self.instance.start()
        self._state = "running"

    async def shutdown(self) -> None:
        """Unregister; what was received and not acked comes back to the group after its invisible time.

        A receive parked in a long poll ends at once with no message (one the broker hands out meanwhile
        comes back after its invisible time): the app cannot ack anything after shutdown."""
        if self._state != "running":
            return
        self._state = "shut down"
        parked, self._parked = set(self._parked), set()
        for task in parked:
            task.cancel()
        if parked:
            await asyncio.gather(*parked, return_exceptions=True)
        await self.instance.unregister(consumer_group=self.group)

    def _check_running(self, what: str) -> None:
        """Java's SimpleConsumer throws IllegalStateException "Simple consumer is not running now": a
        receive before start() would pop with no heartbeat, one after shutdown() hides messages from the
        group that nobody will ack."""
        if self._state != "running":
            why = "call start() first" if self._state == "created" else "it was shut down"
            raise ClientStateError(f"Simple consumer {self.group} is not running now ({why}): cannot {what}")

    def heartbeat_data(self) -> ConsumerData:
        # CONSUME_POP: the broker lists the group's pop consumers apart from push/pull ones
        return ConsumerData(group_name=self.group, consume_type="CONSUME_POP", message_model="CLUSTERING",
                            consume_from_where="CONSUME_FROM_LAST_OFFSET",
                            subscription_data_set=list(self._subs.values()))

    async def handle_request(self, conn: RemotingConnection, req: RemotingCommand) -> RemotingCommand | None:
        return None  # nothing to rebalance, no offsets to reset: the broker tracks what is in flight

    def subscribe(self, topic: str, expression: str | None = "*", expression_type: str = "TAG") -> None:
        """Receive ``topic``'s messages matching a tag expression (``TagA || TagB``, ``*``) or a SQL92 one.

        The expression goes with every POP_MESSAGE (the broker filters); a tag expression naming no tag is
        refused here, as Java's FilterAPI does, and so is a type other than TAG or SQL92 (Java's
        ExpressionType), which every broker would refuse at every receive."""
        self._subs[topic] = build_subscription(topic, expression, expression_type)

    def unsubscribe(self, topic: str) -> None:
        self._subs.pop(topic, None)

    async def _targets(self) -> list[MessageQueue]:
        """One (topic, broker) per readable broker of each subscribed topic, as queueId -1 queues."""
        if not self._subs:
            raise ClientConfigError(f"consumer group {self.group} has no subscription: call subscribe first")
        out: list[MessageQueue] = []
        for topic in sorted(self._subs):
            route = await self.instance.get_route(topic)
            brokers = sorted({mq.broker_name for mq in route.subscribe_queues()}) if route else []
            if not brokers:
                why = "the name server has no route" if route is None else "no broker has a readable queue"
                raise BrokerError(ResponseCode.TOPIC_NOT_EXIST, f"cannot receive {topic} for {self.group}: {why}")
            out.extend(MessageQueue(topic=topic, broker_name=b, queue_id=-1) for b in brokers)
        return out

    async def receive(self, max_messages: int = 16, invisible_duration: float = 30.0, *,
                      await_duration: float | None = None) -> list[MessageExt]:
        """Up to ``max_messages`` messages, each invisible to the group for ``invisible_duration`` seconds.

        The brokers are asked in turn (each receive starts at the next one, so no broker waits behind
        another) until ``max_messages`` are in hand; when none has any, one broker that answered is
        long-polled for ``await_duration`` (default: the consumer's). A broker that fails (does not
        answer, or refuses: e.g. NO_PERMISSION where the group may not consume) is skipped with a warning,
        and what the others handed out is returned: those messages are invisible already, so raising
        would lose them to the app until they come back, again and again, and end in the DLQ. Only when
        every broker failed does the receive fail (one line naming each broker's reason).
        Every message must be acked, or it comes back after ``invisible_duration``."""
        self._check_running("receive")
        check_int("max_messages", max_messages, 1, MAX_POP_MSG_NUMS, "maxMessageNum")
        invisible_ms = _millis("invisible_duration", invisible_duration, "invisibleDuration")
        wait = self.await_duration if await_duration is None else await_duration
        wait_ms = _millis("await_duration", wait, "awaitDuration") if wait else 0
        targets = await self._targets()
        start = self._turn % len(targets)
        self._turn += 1
        order = targets[start:] + targets[:start]
        got: list[MessageExt] = []
        failures: list[tuple[MessageQueue, RemotingError | BrokerError]] = []
        for mq in order:
            if len(got) >= max_messages:
                break
            try:
                got.extend(await self._pop(mq, max_messages - len(got), invisible_ms, 0))
            except (RemotingError, BrokerError) as e:
                log.warning("pop of %s from %s for %s failed: %s", mq.topic, mq.broker_name, self.group, e)
                failures.append((mq, e))
        if len(failures) == len(order):
            self._raise_all_failed(failures)
        if not got and wait_ms > 0 and self._state == "running":
            failed = {(mq.topic, mq.broker_name) for mq, _ in failures}
            answered = next(mq for mq in order if (mq.topic, mq.broker_name) not in failed)
            got = await self._long_poll(answered, max_messages, invisible_ms, wait_ms)
        if self._state != "running" and got:
            log.info("%d message(s) received by %s while it shut down come back after their invisible time",
                     len(got), self.group)
            return []
        return got

    def _raise_all_failed(self, failures: list[tuple[MessageQueue, RemotingError | BrokerError]]) -> None:
        """One line naming every broker and its reason; a BrokerError (with the first refusal's code) when
        a broker refused, a RemotingError when none answered at all."""
        reasons = "; ".join(f"{mq.broker_name}: {e}" for mq, e in failures)
        refusals = [e for _, e in failures if isinstance(e, BrokerError)]
        if refusals:
            raise BrokerError(refusals[0].code, f"receive of {self.group} failed on every broker: {reasons}")
        raise RemotingError(f"receive of {self.group} failed, no broker answered: {reasons}")

    async def _long_poll(self, mq: MessageQueue, max_nums: int, invisible_ms: int,
                         wait_ms: int) -> list[MessageExt]:
        """The pop parked on the broker, in a task shutdown() can end: [] when it did."""
        task = asyncio.ensure_future(self._pop(mq, max_nums, invisible_ms, wait_ms))
        self._parked.add(task)
        try:
            return await task
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if self._state == "running" or (current is not None and current.cancelling()):
                raise  # the caller cancelled this receive: not ours to swallow
            return []
        finally:
            self._parked.discard(task)

    async def _order_flag(self, addr: str) -> bool | None:
        """The group's consumeMessageOrderly on this broker (Apache's proxy pops with order=true for a
        FIFO group: the remoting POP_MESSAGE's order defaults to false on Apache's broker). A group the
        broker does not know is not orderly (it creates it with the defaults). None when the broker
        will not say (no Group Get permission with ACL, an older broker): the field is left out, and
        this project's broker then decides by the group's config itself."""
        now = time.monotonic()
        cached = self._orderly.get(addr)
        if cached is not None and now - cached[1] < GROUP_CONFIG_TTL:
            return cached[0]
        resp = await self.instance.invoke(addr, RequestCode.GET_SUBSCRIPTIONGROUP_CONFIG,
                                          GetSubscriptionGroupConfigRequestHeader(group=self.group))
        flag: bool | None
        if resp.code == ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST:
            flag = False
        elif resp.code == ResponseCode.SUCCESS:
            try:
                obj = fastjson.loads(resp.body)
            except ValueError:
                obj = None
            flag = bool(obj.get("consumeMessageOrderly", False)) if isinstance(obj, dict) else None
        else:
            flag = None
        if flag is None and (cached is None or cached[0] is not None):
            log.warning("cannot read subscription group %s from %s (code %s %s): popping without the order "
                        "flag, so the broker decides whether the group is orderly", self.group, addr, resp.code,
                        resp.remark or "")
        self._orderly[addr] = (flag, now)
        return flag

    async def _pop(self, mq: MessageQueue, max_nums: int, invisible_ms: int, poll_ms: int) -> list[MessageExt]:
        sub = self._subs[mq.topic]
        addr = await self.instance.find_broker_addr(mq)
        header = PopMessageRequestHeader(
            consumer_group=self.group, topic=mq.topic, queue_id=-1, max_msg_nums=max_nums,
            invisible_time=invisible_ms, poll_time=poll_ms, born_time=int(time.time() * 1000),
            init_mode=self.init_mode, exp_type=sub.expression_type or "TAG", exp=sub.sub_string,
            order=await self._order_flag(addr))
        resp = await self.instance.invoke(addr, RequestCode.POP_MESSAGE, header,
                                          timeout=poll_ms / 1000 + self.instance.request_timeout)
        if resp.code in _NOTHING:
            return []
        if resp.code != ResponseCode.SUCCESS:
            raise BrokerError(resp.code, f"pop of {mq.topic} from {mq.broker_name}: {resp.remark or ''}", addr)
        h = PopMessageResponseHeader.from_ext_fields(resp.ext_fields)
        starts = _start_offsets(h.start_offset_info)
        out: list[MessageExt] = []
        unwanted: list[MessageExt] = []
        for m in decode_records(resp.body):
            props = m.properties
            if not props.get(PROPERTY_POP_CK):
                # MQClientAPIImpl.processPopResponse: a broker that sets no POP_CK is answered with the
                # response header's pop time, invisible time, revive queue and start offsets
                flag = _retry_flag(m.topic)
                ck = starts.get(f"{flag}@{m.queue_id}", m.queue_offset)
                props[PROPERTY_POP_CK] = " ".join(str(v) for v in (
                    ck, h.pop_time, h.invisible_time, h.revive_qid, flag, mq.broker_name, m.queue_id, m.queue_offset))
            if m.topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
                m.topic = mq.topic  # popResponseReturnActualRetryTopic=true brokers: show the subscribed topic
            (out if matches(sub, m) else unwanted).append(m)
        for m in unwanted:
            # a tag hash collision let the broker hand it out: it is not ours, so it must not come back
            try:
                await self._ack(m)
            except (RemotingError, BrokerError) as e:
                log.warning("ack of unwanted message %s (tag %s) failed: %s", message_id(m), m.tags, e)
        return out

    def _handle_header(self, msg: MessageExt) -> tuple[str, str, str, int, int]:
        """(extraInfo, real topic, broker name, queue id, queue offset) of a received message."""
        handle = receipt_handle(msg)
        parts = handle.split(" ")
        return handle, _real_topic(msg.topic, self.group, parts[4]), parts[5], int(parts[6]), int(parts[7])

    async def ack(self, msg: MessageExt) -> None:
        """ACK_MESSAGE: the message is consumed and will not come back. A handle that is no longer in
        flight (acked already, or its invisible time ran out and it was redelivered) fails with the
        broker's reason (BrokerError NO_MESSAGE), as Java's SimpleConsumer throws."""
        self._check_running("ack")
        await self._ack(msg)

    async def _ack(self, msg: MessageExt) -> None:
        extra, topic, broker, queue_id, offset = self._handle_header(msg)
        addr = await self._addr(msg, broker)
        header = AckMessageRequestHeader(consumer_group=self.group, topic=topic, queue_id=queue_id,
                                         extra_info=extra, offset=offset)
        try:
            resp = await self.instance.invoke(addr, RequestCode.ACK_MESSAGE, header)
        except RemotingError as e:
            raise RemotingError(f"ack of message {message_id(msg)} on {broker} failed: {e}") from None
        if resp.code != ResponseCode.SUCCESS:
            raise BrokerError(resp.code, f"ack of message {message_id(msg)} on {broker} failed: "
                                         f"{resp.remark or 'not in flight (acked or redelivered already)'}", addr)

    async def change_invisible_duration(self, msg: MessageExt, seconds: float) -> None:
        """CHANGE_MESSAGE_INVISIBLETIME: the message stays invisible ``seconds`` from now (more time to
        process it, or 0-ish to hand it back soon). Its handle changes: the new one is written to the
        message's POP_CK, so ack it (or change it again) with this same message object."""
        self._check_running("change the invisible duration")
        invisible_ms = _millis("invisible_duration", seconds, "invisibleDuration", zero=True)
        extra, topic, broker, queue_id, offset = self._handle_header(msg)
        addr = await self._addr(msg, broker)
        header = ChangeInvisibleTimeRequestHeader(consumer_group=self.group, topic=topic, queue_id=queue_id,
                                                  extra_info=extra, offset=offset, invisible_time=invisible_ms)
        try:
            resp = await self.instance.invoke(addr, RequestCode.CHANGE_MESSAGE_INVISIBLETIME, header)
        except RemotingError as e:
            raise RemotingError(f"changing the invisible time of message {message_id(msg)} on {broker} "
                                f"failed: {e}") from None
        if resp.code != ResponseCode.SUCCESS:
            raise BrokerError(resp.code, f"changing the invisible time of message {message_id(msg)} on {broker} "
                                         f"failed: {resp.remark or 'not in flight'}", addr)
        h = ChangeInvisibleTimeResponseHeader.from_ext_fields(resp.ext_fields)
        # as Java's changeInvisibleTimeAsync: the broker made a checkpoint starting at this message
        msg.properties[PROPERTY_POP_CK] = " ".join(str(v) for v in (
            offset, h.pop_time, h.invisible_time, h.revive_qid, _retry_flag(topic), broker, queue_id, offset))

    async def _addr(self, msg: MessageExt, broker: str) -> str:
        """The address of the broker that handed ``msg`` out: only that one knows its receipt handle."""
        try:
            return await self.instance.find_broker_addr(MessageQueue(topic=msg.topic, broker_name=broker, queue_id=-1))
        except BrokerError:
            raise BrokerError(ResponseCode.SYSTEM_ERROR, f"message {message_id(msg)}: its broker {broker} is in "
                                                         f"no route of {msg.topic} any more") from None
