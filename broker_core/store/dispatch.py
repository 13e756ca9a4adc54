"""From a commitlog record to what consume queues and the index need (DispatchRequest).

The one place that decides tagsCode (spec §5.2, incl. delay-level due times) and the BatchCQ
msgBaseOffset / batchSize rule (spec §6.1); used by the reput service, recovery and the Spark jobs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from .codec.hashing import tags_code
from .codec.message import MessageExt
from .codec.properties import get_property
from .codec.sys_flag import INNER_BATCH_FLAG, TRANSACTION_TYPE_MASK, is_dispatched_to_queue

if TYPE_CHECKING:
    from .commit_log import AppendedRecord

SCHEDULE_TOPIC = "SCHEDULE_TOPIC_XXXX"
# A delayed record's due time is an 8-byte signed tagsCode. messageDelayLevel is bounded so the sum fits
# for a real clock, but a record whose store time is far ahead (a clock set wrong, an old config) must not
# stop dispatch of every later record: its due time is clamped to Long.MAX ("as late as can be stored",
# which is what the delay asked) rather than wrapped as Java's long would, which would make it a due time
# in the past, or an ext address, and deliver it at once. The schedule service still delivers a clamped
# unit as soon as its due time lies further ahead than the level's delay (its clock-went-back rule).
LONG_MAX = 2**63 - 1


@dataclass(slots=True)
class DispatchRequest:
    topic: str
    queue_id: int
    commit_log_offset: int
    msg_size: int
    tags_code: int
    store_timestamp: int
    consume_queue_offset: int
    keys: str | None
    uniq_key: str | None
    sys_flag: int
    prepared_transaction_offset: int
    batch_size: int = 1
    msg_base_offset: int = 0
    properties_string: str = ""

    @property
    def tran_type(self) -> int:
        return self.sys_flag & TRANSACTION_TYPE_MASK

    @property
    def enters_queue(self) -> bool:
        return is_dispatched_to_queue(self.sys_flag)

    @property
    def is_inner_batch(self) -> bool:
        return bool(self.sys_flag & INNER_BATCH_FLAG)


def compute_tags_code(topic: str, props: str, store_timestamp: int, delay_levels_ms: list[int]) -> int:
    if topic == SCHEDULE_TOPIC:
        delay = get_property(props, "DELAY")
        if delay is not None:
            try:
                level = int(delay)
            except ValueError:
                level = 0
            max_level = len(delay_levels_ms)
            if level > max_level:
                level = max_level
            if level > 0:
                due = store_timestamp + (delay_levels_ms[level - 1] if level <= max_level else 1000)
                return min(due, LONG_MAX)
    return tags_code(get_property(props, "TAGS"))


def inner_batch_position(props: str, queue_offset: int) -> tuple[int, int]:
    """(batchSize, msgBaseOffset) of a record for a BatchCQ unit: INNER_NUM and INNER_BASE when the
    record is an inner batch (spec §6.1), else 1 and its own queue offset."""
    # ``in`` first: INNER_NUM is rare outside BatchCQ and a substring test is much cheaper than a lookup.
    if "INNER_NUM\x01" in props:
        inner_num = get_property(props, "INNER_NUM")
        if inner_num is not None:
            inner_base = get_property(props, "INNER_BASE")
            try:
                return int(inner_num), queue_offset if inner_base is None else int(inner_base)
            except ValueError:
                return 1, queue_offset
    return 1, queue_offset


def build_dispatch_request(msg: MessageExt, delay_levels_ms: list[int]) -> DispatchRequest:
    return dispatch_request_of(msg.topic, msg.queue_id, msg.commit_log_offset, msg.store_size, msg.sys_flag,
                               msg.store_timestamp, msg.queue_offset, msg.prepared_transaction_offset,
                               msg.properties_string, delay_levels_ms)


def dispatch_request_of(topic: str, queue_id: int, commit_log_offset: int, msg_size: int, sys_flag: int,
                        store_timestamp: int, queue_offset: int, prepared_transaction_offset: int, props: str,
                        delay_levels_ms: list[int]) -> DispatchRequest:
    """The request for a record given by its fields (the reput path decodes only these)."""
    batch_size, base = inner_batch_position(props, queue_offset)
    return DispatchRequest(
        topic, queue_id, commit_log_offset, msg_size,
        compute_tags_code(topic, props, store_timestamp, delay_levels_ms),
        store_timestamp, queue_offset, get_property(props, "KEYS"), get_property(props, "UNIQ_KEY"),
        sys_flag, prepared_transaction_offset, batch_size, base, props)



# TAGS, KEYS and UNIQ_KEY of a record as the append path looked them up (``prepare_record``'s last
# field, see ``codec.hot_py.known_properties``), or None when dispatch must read the string.
KnownProperties = tuple[str | None, str | None, str | None]


def dispatch_request_of_appended(rec: AppendedRecord, delay_levels_ms: list[int]) -> DispatchRequest:
    """The request for a record this process just appended, from what the append path knew."""
    phy, size, topic, queue_id, queue_offset, sys_flag, store_ts, prepared, props, known = rec
    if known is None:
        return dispatch_request_of(topic, queue_id, phy, size, sys_flag, store_ts, queue_offset, prepared, props,
                                   delay_levels_ms)
    tags, keys, uniq_key = known
    return DispatchRequest(topic, queue_id, phy, size, tags_code(tags), store_ts, queue_offset, keys, uniq_key,
                           sys_flag, prepared, 1, queue_offset, props)
