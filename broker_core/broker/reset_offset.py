"""Consumer offset resets: by time (now / epoch ms / ``yyyy-MM-dd#HH:mm:ss:SSS``) or to an offset.

Why plan-then-apply: operators (and playbooks) want to see old -> new offsets per queue before
anything changes. Applying stores the new offsets as a server-side reset (RIP-48), so pull, pop and
FIFO-pop groups all pick them up, and tells the offset-reset listeners (pop/FIFO state) about it.
Time lookups take the first message stored at or after the time, so a batch whose messages share
one store time is reset to its first message (RocketMQ #5445), and an explicit offset inside a
BatchCQ batch stays on that exact message.

With useServerSideResetOffset=false (client mode) the live consumers move their own offsets
(RESET_CONSUMER_CLIENT_OFFSET); ``plan_client`` computes the table Broker2Client.resetOffset sends them,
and ``apply`` commits stored offsets instead of server-side resets, which a broker in client mode
never reads: an entry left there would rewind the group the day the setting is turned back on.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from .consumer_offset_manager import topic_at_group
from .errors import (
    BrokerSystemError,
    InvalidParameterError,
    SubscriptionGroupNotExistError,
    TopicNotExistError,
    config_written,
)

if TYPE_CHECKING:
    from broker_core.store.message_store import MessageStore
    from broker_core.store.topic_config import TopicConfig

    from .consumer_offset_manager import ConsumerOffsetManager
    from .subscription_group_manager import SubscriptionGroupManager
    from .topic_manager import TopicManager

_DATE = re.compile(r"^(\d{4})-(\d{2})-(\d{2})#(\d{2}):(\d{2}):(\d{2}):(\d{3})$")
TIMESTAMP_FORMAT_HELP = "now, milliseconds since the epoch, or yyyy-MM-dd#HH:mm:ss:SSS (local time)"


@dataclass(frozen=True, slots=True)
class ResetOffsetPlanEntry:
    topic: str
    queue_id: int
    old_offset: int  # -1: the group had no offset for this queue
    new_offset: int


def parse_reset_timestamp(value: str | int, clock: Callable[[], int]) -> int:
    """mqadmin's ``-s`` argument as epoch milliseconds (-1 means "the max offset", i.e. skip all)."""
    if isinstance(value, bool):
        raise InvalidParameterError(f"bad timestamp {value!r}; expected {TIMESTAMP_FORMAT_HELP}")
    if isinstance(value, int):
        return value
    text = str(value).strip()
    if text.lower() == "now":
        return clock()
    if re.fullmatch(r"-?\d+", text):
        return int(text)
    m = _DATE.match(text)
    if m:
        y, mo, d, h, mi, s, ms = (int(g) for g in m.groups())
        try:
            dt = datetime(y, mo, d, h, mi, s, ms * 1000)
        except ValueError as e:
            raise InvalidParameterError(f"bad timestamp {text!r}: {e}") from None
        return int(dt.timestamp() * 1000)
    raise InvalidParameterError(f"bad timestamp {text!r}; expected {TIMESTAMP_FORMAT_HELP}")


def format_reset_timestamp(ms: int) -> str:
    """The inverse of the date form (what mqadmin prints as ``timestamp(string)``)."""
    dt = datetime.fromtimestamp(ms / 1000)
    return dt.strftime("%Y-%m-%d#%H:%M:%S:") + f"{ms % 1000:03d}"


OffsetResetListener = Callable[[str, str, int, int], None]


class ResetOffsetService:
    """Plans and applies resets against one broker's queues and offset table."""

    def __init__(self, store: MessageStore, topics: TopicManager, groups: SubscriptionGroupManager,
                 offsets: ConsumerOffsetManager, clock: Callable[[], int],
                 listeners: list[OffsetResetListener]) -> None:
        self.store = store
        self.topics = topics
        self.groups = groups
        self.offsets = offsets
        self.clock = clock
        self.listeners = listeners

    def _check(self, group: str, topic: str) -> TopicConfig:
        tc = self.topics.get(topic)
        if tc is None:
            raise TopicNotExistError(f"Topic {topic} does not exist")
        if not self.groups.contains(group):
            raise SubscriptionGroupNotExistError(f"Group {group} does not exist")
        return tc

    def plan(self, group: str, topic: str, timestamp: str | int | None = None, *, offset: int | None = None,
             queue_id: int | None = None) -> list[ResetOffsetPlanEntry]:
        """What a reset would do, per queue; nothing changes. Exactly one of timestamp/offset."""
        if (timestamp is None) == (offset is None):
            raise InvalidParameterError("give either a timestamp or an offset to reset to")
        tc = self._check(group, topic)
        if queue_id is not None:
            if queue_id < 0 or queue_id >= max(tc.read_queue_nums, tc.write_queue_nums):
                raise InvalidParameterError(f"queueId[{queue_id}] is illegal, topic:[{topic}] has "
                                            f"{tc.read_queue_nums} read queues")
            qids = [queue_id]
        else:
            qids = list(range(tc.read_queue_nums))
        ts = None if timestamp is None else parse_reset_timestamp(timestamp, self.clock)
        plan = []
        for qid in qids:
            lo = self.store.get_min_offset_in_queue(topic, qid)
            hi = self.store.get_max_offset_in_queue(topic, qid)
            if offset is not None:
                if offset < lo or offset > hi:
                    raise InvalidParameterError(
                        f"Target offset {offset} not in consume queue range [{lo}-{hi}] (topic {topic}, queue {qid})")
                new = offset
            elif ts is not None and ts < 0:
                new = hi
            else:
                new = self.store.get_offset_in_queue_by_time(topic, qid, ts)
            plan.append(ResetOffsetPlanEntry(topic, qid, self.offsets.query_offset(group, topic, qid), new))
        return plan

    def plan_client(self, group: str, topic: str, timestamp: str | int, force: bool) -> list[ResetOffsetPlanEntry]:
        """Broker2Client.resetOffset's offset table (client mode), per write queue; nothing changes.

        Why these rules: they are what the Java clients are told to apply. timestamp -1 means the max
        offset; a time before every message is the min offset (and a negative answer 0); without
        ``force`` a queue only moves backwards. A queue the group never committed makes the whole
        reset fail, as in Apache, rather than guessing where that consumer stands."""
        tc = self.topics.get(topic)
        if tc is None:
            raise TopicNotExistError(f"[reset-offset] reset offset failed, no topic in this broker. topic={topic}")
        ts = parse_reset_timestamp(timestamp, self.clock)
        plan = []
        for qid in range(tc.write_queue_nums):
            current = self.offsets.query_offset(group, topic, qid)
            if current == -1:
                raise BrokerSystemError(f"THe consumer group <{group}> not exist")
            target = self._client_target(topic, qid, ts)
            plan.append(ResetOffsetPlanEntry(topic, qid, current, target if force or target < current else current))
        return plan

    def _client_target(self, topic: str, queue_id: int, timestamp: int) -> int:
        """Where a client-mode reset moves one queue (Apache clamps a negative lookup to 0)."""
        if timestamp == -1:
            return self.store.get_max_offset_in_queue(topic, queue_id)
        return max(self.store.get_offset_in_queue_by_time(topic, queue_id, timestamp), 0)

    def apply(self, group: str, plan: list[ResetOffsetPlanEntry], *,
              server_side: bool = True) -> list[ResetOffsetPlanEntry]:
        """Store the plan, persist at once, then notify the listeners.

        ``server_side`` (useServerSideResetOffset): the new offsets become server-side resets that the
        group's next pull, pop or FIFO pop picks up. Off (client mode) they are committed as the group's
        offsets, as Apache's mqadmin does for a client-mode broker with no consumer online
        (UPDATE_CONSUMER_OFFSET): the reset table is not touched, since only server-side mode reads and
        clears it."""
        for e in plan:
            self._check(group, e.topic)
        with config_written(f"the offsets of group {group} were not reset"), \
                self.offsets.change(topic_at_group(e.topic, group) for e in plan):
            for e in plan:
                if server_side:
                    self.offsets.assign_reset_offset(group, e.topic, e.queue_id, e.new_offset)
                else:
                    self.offsets.commit_offset(group, e.topic, e.queue_id, e.new_offset)
        for e in plan:
            for listener in list(self.listeners):
                listener(group, e.topic, e.queue_id, e.new_offset)
        return plan

    def clone(self, src_group: str, dst_group: str, topic: str) -> list[ResetOffsetPlanEntry]:
        """cloneGroupOffset: the destination group takes the source group's committed offsets."""
        self._check(src_group, topic)
        if not self.groups.contains(dst_group) and self.offsets.query_offsets(src_group, topic):
            # Apache copies each offset with UPDATE_CONSUMER_OFFSET, which never creates a group
            # (ConsumerManageProcessor answers SUBSCRIPTION_GROUP_NOT_EXIST): a typo in -d must
            # not become a new group holding offsets. With nothing to copy nothing is refused.
            raise SubscriptionGroupNotExistError(f"Group {dst_group} not exist!")
        old = self.offsets.query_offsets(dst_group, topic)
        with config_written(f"the offsets of group {src_group} were not cloned to {dst_group}"), \
                self.offsets.change([topic_at_group(topic, dst_group)]):
            copied = self.offsets.clone_offset(src_group, dst_group, topic)
        plan = [ResetOffsetPlanEntry(topic, q, old.get(q, -1), o) for q, o in sorted(copied.items())]
        for e in plan:
            for listener in list(self.listeners):
                listener(dst_group, e.topic, e.queue_id, e.new_offset)
        return plan
