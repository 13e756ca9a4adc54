"""4.x pull (PullMessageProcessor, spec B.2.2): status mapping, offsets, filters and long polling.

Why: a pull is where group and topic permissions, the subscription filter, an admin's pending
offset reset and the store's GetMessageStatus meet; the result carries both the client-side
PullStatus and the remoting response code so every adapter answers the same way. The pull is
written once as wait steps (``wait_steps``): a thread drives it blocking, an asyncio server awaits.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum

from broker_core.common.response_code import ResponseCode
from broker_core.store.codec.message import MessageExt
from broker_core.store.message_store import GetMessageResult, GetMessageStatus, MessageStore
from broker_core.store.subscription_group_config import SubscriptionGroupConfig
from broker_core.store.topic_config import TopicConfig

from .broker_config import MASTER_ID, BrokerConfig
from .client_registry import MESSAGE_MODEL_BROADCASTING, ConsumerGroupInfo
from .consumer_offset_manager import ConsumerOffsetManager
from .errors import (
    BrokerSystemError,
    InvalidParameterError,
    NoPermissionError,
    SubscriptionNotExistError,
    SubscriptionNotLatestError,
    SubscriptionParseFailedError,
    TopicNotExistError,
)
from .filter import (
    FilterSyntaxError,
    MessageFilter,
    UnsupportedExpressionTypeError,
    build_filter,
    is_tag_type,
)
from .filter.consumer_filter_manager import ConsumerFilterManager
from .filter.expression_filter import with_bitmap
from .filter.factory import property_filter_disabled
from .long_polling import HOLD_CHECK_INTERVAL_S, PullRequestHoldService
from .subscription_group_manager import SubscriptionGroupManager
from .topic_manager import TopicManager, is_readable
from .wait_steps import WaitSteps, drive_async, drive_blocking

OFFSET_RESET = "OFFSET_RESET"


class PullStatus(StrEnum):
    FOUND = "FOUND"
    NO_NEW_MSG = "NO_NEW_MSG"
    NO_MATCHED_MSG = "NO_MATCHED_MSG"
    OFFSET_ILLEGAL = "OFFSET_ILLEGAL"


@dataclass(slots=True)
class PullResult:
    status: PullStatus
    next_begin_offset: int
    min_offset: int
    max_offset: int
    messages: list[MessageExt] = field(default_factory=list)
    detail: str | None = None  # store status name behind a non-FOUND result (e.g. OFFSET_OVERFLOW_BADLY)
    suggest_which_broker_id: int = MASTER_ID
    response_code: int = ResponseCode.SUCCESS
    topic_sys_flag: int = 0
    group_sys_flag: int = 0

    @property
    def remark(self) -> str:
        return self.detail or PullStatus.FOUND.value


_STATUS_MAP = {
    GetMessageStatus.FOUND: (PullStatus.FOUND, ResponseCode.SUCCESS),
    GetMessageStatus.NO_MATCHED_MESSAGE: (PullStatus.NO_MATCHED_MSG, ResponseCode.PULL_RETRY_IMMEDIATELY),
    GetMessageStatus.MESSAGE_WAS_REMOVING: (PullStatus.NO_MATCHED_MSG, ResponseCode.PULL_RETRY_IMMEDIATELY),
    GetMessageStatus.OFFSET_OVERFLOW_ONE: (PullStatus.NO_NEW_MSG, ResponseCode.PULL_NOT_FOUND),
    GetMessageStatus.OFFSET_FOUND_NULL: (PullStatus.NO_NEW_MSG, ResponseCode.PULL_NOT_FOUND),
    GetMessageStatus.OFFSET_TOO_SMALL: (PullStatus.OFFSET_ILLEGAL, ResponseCode.PULL_OFFSET_MOVED),
    GetMessageStatus.OFFSET_OVERFLOW_BADLY: (PullStatus.OFFSET_ILLEGAL, ResponseCode.PULL_OFFSET_MOVED),
}


def map_get_result(result: GetMessageResult, requested_offset: int) -> tuple[PullStatus, int, int]:
    """(PullStatus, response code, nextBeginOffset) for a store result, as PullMessageProcessor maps it."""
    st = result.status
    if st in (GetMessageStatus.NO_MESSAGE_IN_QUEUE, GetMessageStatus.NO_MATCHED_LOGIC_QUEUE):
        if requested_offset == 0:
            return PullStatus.NO_NEW_MSG, ResponseCode.PULL_NOT_FOUND, 0
        return PullStatus.OFFSET_ILLEGAL, ResponseCode.PULL_OFFSET_MOVED, 0
    status, code = _STATUS_MAP[st]
    return status, code, result.next_begin_offset


# The subscriptions a group's online consumers declared in their heartbeats (ClientRegistry.consumer_group).
ConsumerGroupLookup = Callable[[str], ConsumerGroupInfo | None]


class PullService:
    def __init__(self, store: MessageStore, topics: TopicManager, groups: SubscriptionGroupManager,
                 offsets: ConsumerOffsetManager, config: BrokerConfig, hold: PullRequestHoldService,
                 on_get: Callable[[str, str, int], None] | None = None,
                 consumer_filters: ConsumerFilterManager | None = None,
                 online_consumers: ConsumerGroupLookup | None = None) -> None:
        self.store = store
        self.online_consumers = online_consumers
        self.consumer_filters = consumer_filters
        self.topics = topics
        self.groups = groups
        self.offsets = offsets
        self.config = config
        self.hold = hold
        self._on_get = on_get

    def pull_message(self, group: str, topic: str, queue_id: int, offset: int, max_msgs: int = 32,
                     expression_type: str | None = "TAG", subscription: str | None = "*",
                     suspend_timeout_ms: int = 0, commit_offset: int | None = None,
                     registered_sub_version: int | None = None) -> PullResult:
        """PULL_MESSAGE; with ``suspend_timeout_ms`` this thread blocks until a match or the timeout."""
        return drive_blocking(self.pull_steps(group, topic, queue_id, offset, max_msgs, expression_type,
                                              subscription, suspend_timeout_ms, commit_offset, registered_sub_version))

    async def pull_message_async(self, group: str, topic: str, queue_id: int, offset: int, max_msgs: int = 32,
                                 expression_type: str | None = "TAG", subscription: str | None = "*",
                                 suspend_timeout_ms: int = 0, commit_offset: int | None = None,
                                 registered_sub_version: int | None = None) -> PullResult:
        """The same pull for an asyncio server: a suspended pull awaits its waiter, holding no thread."""
        return await drive_async(self.pull_steps(group, topic, queue_id, offset, max_msgs, expression_type,
                                                 subscription, suspend_timeout_ms, commit_offset,
                                                 registered_sub_version))

    def pull_steps(self, group: str, topic: str, queue_id: int, offset: int, max_msgs: int,
                   expression_type: str | None, subscription: str | None, suspend_timeout_ms: int,
                   commit_offset: int | None, registered_sub_version: int | None = None) -> WaitSteps[PullResult]:
        """The pull as a generator that yields ``(waiter, seconds)`` whenever it must wait; the caller
        waits (blocking or awaiting) and sends back whether the waiter was woken. One logic, two drivers.

        ``registered_sub_version`` (a request without the SUBSCRIPTION flag, as Java push consumers send
        by default): filter with what the group's online consumers declared for the topic in their
        heartbeats, at least that version, instead of ``expression_type``/``subscription``."""
        sgc, tc = self._check_access(group, topic, queue_id, registered_sub_version is not None)
        if max_msgs <= 0:
            raise InvalidParameterError(f"maxMsgNums must be positive, got {max_msgs}")
        if offset < 0:
            raise InvalidParameterError(f"queueOffset must be >= 0, got {offset}")
        if registered_sub_version is not None:
            expression_type, subscription = self._registered_subscription(group, topic, registered_sub_version)
        try:
            message_filter = build_filter(expression_type, subscription)
        except (FilterSyntaxError, UnsupportedExpressionTypeError) as e:
            raise SubscriptionParseFailedError(f"parse the consumer's subscription failed: {e}") from e
        if not is_tag_type(message_filter.expression_type) and not self.config.enable_property_filter:
            # PullMessageProcessor: after the subscription parsed, a SQL92 one needs enablePropertyFilter
            raise BrokerSystemError(property_filter_disabled(message_filter.expression_type))
        message_filter = with_bitmap(message_filter, group, topic, self.consumer_filters)

        reset_pending = self.config.use_server_side_reset_offset and \
            self.offsets.has_offset_reset(group, topic, queue_id)
        if commit_offset is not None and commit_offset >= 0 and not reset_pending:
            self.offsets.commit_offset(group, topic, queue_id, commit_offset)

        result = self._pull_once(group, topic, queue_id, offset, max_msgs, message_filter)
        if result.status is PullStatus.NO_NEW_MSG and suspend_timeout_ms > 0 and result.detail != OFFSET_RESET:
            result = yield from self._suspend(group, topic, queue_id, offset, max_msgs, message_filter,
                                              suspend_timeout_ms, result.max_offset,
                                              registered_sub_version is not None)
            # what the wake-up checked: a flag changed while parked is the one answered with
            sgc, tc = self.groups.find(group), self.topics.get(topic) or tc
        result.topic_sys_flag = tc.topic_sys_flag
        result.group_sys_flag = sgc.group_sys_flag
        return result

    def _check_access(self, group: str, topic: str, queue_id: int,
                      registered: bool) -> tuple[SubscriptionGroupConfig, TopicConfig]:
        """PullMessageProcessor's permission checks, in its order, with the configs as they are now.

        Run before the first read and again each time a parked pull wakes (Apache re-runs
        processRequest on wake-up, executeRequestWhenWakeup): an admin's ``updateSubGroup -s false``,
        a read-only topic or broker stops a pull already parked, which otherwise answered with the
        next message seconds after the group was disabled. ``registered``: the pull uses the group's
        heartbeat subscription (no SUBSCRIPTION flag), where a broadcasting group needs
        consumeBroadcastEnable."""
        if not is_readable(self.config.broker_permission):
            raise NoPermissionError(f"the broker[{self.config.broker_ip1}] pulling message is forbidden")
        sgc = self.groups.find(group)
        if not sgc.consume_enable:
            raise NoPermissionError(f"subscription group no permission, {group}")
        tc = self.topics.get(topic)
        if tc is None:
            raise TopicNotExistError(f"topic[{topic}] not exist, apply first please!")
        if not is_readable(tc.perm):
            raise NoPermissionError(f"the topic[{topic}] pulling message is forbidden")
        if queue_id < 0 or queue_id >= tc.read_queue_nums:
            raise InvalidParameterError(f"queueId[{queue_id}] is illegal, topic:[{topic}] "
                                        f"topicConfig.readQueueNums:[{tc.read_queue_nums}]")
        if registered and not sgc.consume_broadcast_enable:
            info = self.online_consumers(group) if self.online_consumers is not None else None
            if info is not None and info.message_model == MESSAGE_MODEL_BROADCASTING:
                # PullMessageProcessor (no SUBSCRIPTION flag): ForbiddenType.BROADCASTING_DISABLE_FORBIDDEN
                raise NoPermissionError(f"the consumer group[{group}] can not consume by broadcast way")
        return sgc, tc

    def _registered_subscription(self, group: str, topic: str, sub_version: int) -> tuple[str, str]:
        """PullMessageProcessor's checks of a pull without its own subscription: refused (the client
        retries after its next heartbeat) rather than answered with every message, which a consumer
        filtering by SQL92 would take as matching (only tags are filtered again on the client)."""
        info = self.online_consumers(group) if self.online_consumers is not None else None
        if info is None:
            raise SubscriptionNotExistError(f"the consumer's group info not exist, group: {group}")
        sub = info.subscriptions.get(topic)
        if sub is None:
            raise SubscriptionNotExistError(f"the consumer's subscription not exist, group: {group}, topic: {topic}")
        if sub.sub_version < sub_version:
            raise SubscriptionNotLatestError(f"the consumer's subscription not latest, group: {group}, "
                                             f"topic: {topic}, version {sub.sub_version} < {sub_version}")
        return sub.expression_type or "TAG", sub.sub_string or "*"

    def _pull_once(self, group: str, topic: str, queue_id: int, offset: int, max_msgs: int,
                   message_filter: MessageFilter) -> PullResult:
        """One read. suggestWhichBrokerId stays MASTER_ID (0): Apache answers the group's brokerId /
        whichBrokerWhenConsumeSlowly only with slaveReadEnable, and this broker has no slaves to read
        from; a Java client told 1 (``updateSubGroup -i 1``) sent its next pulls to a slave id that no
        route holds."""
        if self.config.use_server_side_reset_offset:
            reset = self.offsets.query_then_erase_reset_offset(group, topic, queue_id)
            if reset is not None:
                return PullResult(PullStatus.OFFSET_ILLEGAL, reset, self.store.get_min_offset_in_queue(topic, queue_id),
                                  self.store.get_max_offset_in_queue(topic, queue_id), detail=OFFSET_RESET,
                                  response_code=ResponseCode.PULL_OFFSET_MOVED)
        got = self.store.get_messages(topic, queue_id, offset, max_msgs, message_filter, transfer_limits=True)
        status, code, next_begin = map_get_result(got, offset)
        self.offsets.commit_pull_offset(group, topic, queue_id, next_begin)
        if status is PullStatus.FOUND and self._on_get is not None:
            self._on_get(group, topic, len(got.messages))
        return PullResult(status, next_begin, got.min_offset, got.max_offset, got.messages,
                          None if status is PullStatus.FOUND else got.status.value, MASTER_ID, code)

    def _suspend(self, group: str, topic: str, queue_id: int, offset: int, max_msgs: int,
                 message_filter: MessageFilter, timeout_ms: int, seen_max: int,
                 registered: bool) -> WaitSteps[PullResult]:
        """Park until a matching message arrives or the time is up, then answer without suspending.

        Every ``HOLD_CHECK_INTERVAL_S`` a pull whose queue grew only by messages its filter refuses is
        answered too (NO_MATCHED_MSG, nextBeginOffset past them), as PullRequestHoldService's round
        does: parked until its timeout (15 s for Java clients), a consumer kept the lag of a queue it
        filters out entirely for that long, and its group showed it in consumerProgress.

        Every read after parking first runs the permission checks again (``_check_access``): they
        raise, and the parked pull is answered as a new one would be."""
        if not self.config.long_polling_enable:
            timeout_ms = min(timeout_ms, self.config.short_polling_time_mills)
        deadline = time.monotonic() + timeout_ms / 1000
        next_check = time.monotonic() + HOLD_CHECK_INTERVAL_S
        waiter = self.hold.hold(topic, queue_id, offset, message_filter)
        try:
            while True:
                # A message may have arrived between the first read and hold(): look once more.
                now_max = self.store.get_max_offset_in_queue(topic, queue_id)
                if now_max > seen_max:
                    self._check_access(group, topic, queue_id, registered)
                    result = self._pull_once(group, topic, queue_id, offset, max_msgs, message_filter)
                    if result.status is not PullStatus.NO_MATCHED_MSG and result.status is not PullStatus.NO_NEW_MSG:
                        return result
                    seen_max = result.max_offset
                now = time.monotonic()
                if now >= next_check:
                    if seen_max > offset:  # grown since the pull parked, by nothing it matches
                        break
                    next_check = now + HOLD_CHECK_INTERVAL_S
                left = deadline - now
                if left <= 0:
                    break
                woken = yield waiter.event, min(left, next_check - now)
                if woken:
                    break
        finally:
            self.hold.release(waiter)
        self._check_access(group, topic, queue_id, registered)
        return self._pull_once(group, topic, queue_id, offset, max_msgs, message_filter)
