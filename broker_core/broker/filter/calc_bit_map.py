"""CommitLogDispatcherCalcBitMap: a message's SQL92 filter bitmap, computed once at dispatch.

Why: evaluating every SQL92 consumer's expression when the message is dispatched (once) lets each
later pull or pop of those consumers skip non-matching messages from the consume queue ext alone,
instead of reading and evaluating every message on every pull. Installed as the store's
``filter_bit_map_hook``; it does nothing unless ``enableCalcFilterBitMap`` is on (and the store only
asks when ``enableConsumeQueueExt`` is on).
"""

from __future__ import annotations

import logging
import time

from broker_core.store.codec.properties import decode_properties

from .consumer_filter_manager import ConsumerFilterManager

log = logging.getLogger("rmqops.broker.filter")


class CommitLogDispatcherCalcBitMap:
    def __init__(self, manager: ConsumerFilterManager, enabled: bool) -> None:
        self.manager = manager
        self.enabled = enabled

    def calc_filter_bit_map(self, topic: str, properties_string: str) -> bytes | None:
        """The bitmap with the bits of every filter of ``topic`` whose expression is TRUE for the message;
        None when calculation is off or the topic has no SQL92 consumer (no bitmap is stored then)."""
        if not self.enabled:
            return None
        filters = self.manager.get_topic(topic)
        if not filters:
            return None
        bloom = self.manager.bloom_filter
        bit_map = bloom.new_bitmap()
        props = decode_properties(properties_string) if properties_string else {}
        started = time.monotonic()
        for data in filters:
            if data.compiled is None or data.bloom_filter_data is None:
                continue
            # an evaluation error is a non-match, as the pull's own evaluation decides
            if data.compiled.is_matched_by_commit_log(props):
                bloom.hash_to(data.bloom_filter_data, bit_map)
        elapsed_ms = (time.monotonic() - started) * 1000
        if elapsed_ms >= 1:
            log.debug("spent %.1f ms to calc the filter bit map of a %s message for %d consumer(s)", elapsed_ms,
                        topic, len(filters))
        return bytes(bit_map)
