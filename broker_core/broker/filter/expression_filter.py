"""ExpressionMessageFilter: a SQL92 subscription's filter that also reads the dispatch-time bitmap.

Why: the consume-queue step of a SQL92 filter can only say "maybe" on its own; with the consumer's
registered filter data (its bloom bits and birth time) and the unit's ConsumeQueueExt bitmap it can say
"certainly not" and spare the commitlog read. A bloom filter never says "not" for a message that
matches, so results are the same as without the bitmap; a "maybe" is read and evaluated as before.
"""

from __future__ import annotations

from collections.abc import Mapping

from broker_core.store.codec.cq_ext import CqExtUnit

from .consumer_filter_manager import ConsumerFilterData, ConsumerFilterManager
from .factory import MessageFilter, is_tag_type


class ExpressionMessageFilter:
    __slots__ = ("inner", "filter_data", "manager", "bloom_data_valid", "_bits")

    def __init__(self, inner: MessageFilter, filter_data: ConsumerFilterData, manager: ConsumerFilterManager) -> None:
        self.inner = inner
        self.filter_data = filter_data
        self.manager = manager
        bloom = manager.bloom_filter
        self.bloom_data_valid = bloom.is_valid(filter_data.bloom_filter_data)
        # (byte, mask) of each of the consumer's bits: BloomFilter.is_hit once validated, per unit
        self._bits = bloom.byte_masks(filter_data.bloom_filter_data) if self.bloom_data_valid else ()

    @property
    def expression_type(self) -> str:
        return self.inner.expression_type

    @property
    def expression(self) -> str:
        return self.inner.expression

    def is_matched_by_consume_queue(self, tags_code: int | None, cq_ext_unit: CqExtUnit | None = None) -> bool:
        stats = self.manager.stats
        data = self.filter_data
        # the message is older than the consumer's filter (its bits were not computed for it) or has no bitmap
        bit_map = cq_ext_unit.filter_bit_map if cq_ext_unit is not None else None
        if bit_map is None or not data.is_msg_in_live(cq_ext_unit.msg_store_time) or not self.bloom_data_valid \
                or len(bit_map) * 8 != self.manager.bloom_filter.m:
            stats.count(not_usable=1)
            return True
        if all(bit_map[i] & mask for i, mask in self._bits):
            stats.count(maybe=1)
            return True
        stats.count(skipped=1)
        return False

    def is_matched_by_commit_log(self, properties: Mapping[str, str] | None) -> bool:
        return self.inner.is_matched_by_commit_log(properties)

    def __repr__(self) -> str:
        return f"ExpressionMessageFilter({self.inner!r}, born={self.filter_data.born_time})"


def with_bitmap(message_filter: MessageFilter, group: str, topic: str,
                manager: ConsumerFilterManager | None) -> MessageFilter:
    """``message_filter`` able to use the bitmap when ``group`` registered this very SQL92 expression for
    ``topic`` (its bits were computed with it since its birth); otherwise unchanged."""
    if manager is None or is_tag_type(message_filter.expression_type):
        return message_filter
    data = manager.get(topic, group)
    if data is None or data.compiled is None or data.expression != message_filter.expression \
            or data.expression_type != message_filter.expression_type:
        return message_filter
    return ExpressionMessageFilter(message_filter, data, manager)
