"""One WARNING when retention deletes messages that a consumer group has not consumed yet.

Why: under disk pressure (or an operator's forced clean) the store deletes the oldest commitlog
files whether or not anyone read them (RocketMQ's CleanCommitLogService does the same, silently).
Losing acknowledged messages that way must at least be visible: one line per retention run naming
each queue's dropped range and the groups whose committed offset was inside or below it. The store
only reports what became unreadable (``DroppedQueueRange``); consumer offsets are the Broker's, so
the line is decided and written here.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from broker_core.store.retention import DroppedQueueRange

log = logging.getLogger("rmqops.broker")


@dataclass(frozen=True, slots=True)
class UnconsumedDrop:
    """Messages ``[from_offset, to_offset)`` of one queue deleted before ``groups`` consumed them."""

    topic: str
    queue_id: int
    from_offset: int
    to_offset: int
    groups: tuple[tuple[str, int], ...]  # (group, its committed offset), by name


class UnconsumedDropWarner:
    """A ``RetentionListener``: compares each dropped range with the committed consumer offsets."""

    def __init__(self, groups_of_topic: Callable[[str], set[str]],
                 committed_offset: Callable[[str, str, int], int]) -> None:
        self.groups_of_topic = groups_of_topic
        self.committed_offset = committed_offset  # (group, topic, queue_id) -> offset, -1 when none
        self.last: list[UnconsumedDrop] = []

    def unconsumed(self, dropped: Sequence[DroppedQueueRange]) -> list[UnconsumedDrop]:
        out = []
        for d in dropped:
            behind = []
            for group in sorted(self.groups_of_topic(d.topic)):
                committed = self.committed_offset(group, d.topic, d.queue_id)
                if 0 <= committed < d.to_offset:
                    behind.append((group, committed))
            if behind:
                # the part no group had consumed starts at the lowest committed offset inside the range
                start = max(d.from_offset, min(c for _g, c in behind))
                out.append(UnconsumedDrop(d.topic, d.queue_id, start, d.to_offset, tuple(behind)))
        return out

    def __call__(self, trigger: str, dropped: Sequence[DroppedQueueRange]) -> None:
        self.last = self.unconsumed(dropped)
        if not self.last:
            return
        ranges = "; ".join(
            f"{u.topic}/{u.queue_id} [{u.from_offset},{u.to_offset}) behind: "
            + ", ".join(f"{g}@{c}" for g, c in u.groups) for u in self.last)
        log.warning("retention (%s) deleted %d message(s) not yet consumed: %s", trigger,
                    sum(u.to_offset - u.from_offset for u in self.last), ranges)
