"""Long polling for 4.x pulls (PullRequestHoldService, spec B.2.2).

Each parked pull is a ``PullWaiter`` whose ``event`` is a ``waiter.Waiter``: a worker thread
blocks on it, an asyncio server awaits it; dispatch wakes both the same way.

Why: a consumer that has caught up parks its pull for up to ``suspendTimeoutMillis`` instead of
spinning; the pull must return as soon as a message *that its filter accepts* arrives, and a
message it would filter out must not wake it (the pull's own round every ``HOLD_CHECK_INTERVAL_S``
answers those). The store's arrival listeners deliver every new
consume-queue unit with its tags code and properties, which is exactly what the filter needs -- except
for a BatchCQ inner batch: the pull judges each of its messages, whose TAGS and properties are in the
record's body, not in the record's own tags code and properties, so a wake-up for one asks the store
with the pull's own read.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Protocol

from broker_core.store.codec.properties import PROPERTY_INNER_NUM, decode_properties, get_property
from broker_core.store.message_store import GetMessageResult, GetMessageStatus

from .filter import MessageFilter
from .waiter import Waiter

_INNER_NUM_MARK = PROPERTY_INNER_NUM + "\x01"


class QueueReader(Protocol):
    """The store's read a pull makes (``MessageStore.get_messages``)."""

    def get_messages(self, topic: str, queue_id: int, offset: int, max_num: int,
                     message_filter: MessageFilter | None = None, max_units_scan: int = ...) -> GetMessageResult: ...


@dataclass(eq=False)
class PullWaiter:
    topic: str
    queue_id: int
    offset: int
    message_filter: MessageFilter | None
    event: Waiter = field(default_factory=Waiter)


# How often a parked pull looks at its queue again whatever woke it (PullRequestHoldService's 5 s round in
# long polling mode): a queue that grew only by messages the filter refuses is then answered
# (NO_MATCHED_MSG, nextBeginOffset past them), so the consumer commits past them within seconds.
HOLD_CHECK_INTERVAL_S = 5.0


def inner_batch_size(properties_string: str) -> int:
    """INNER_NUM of an inner-batch record (a BatchCQ unit holding several messages), 0 for any other."""
    if _INNER_NUM_MARK not in properties_string:  # the common case, without parsing
        return 0
    try:
        return max(int(get_property(properties_string, PROPERTY_INNER_NUM) or 0), 0)
    except ValueError:
        return 0


class PullRequestHoldService:
    def __init__(self, store: QueueReader | None = None) -> None:
        """``store``: read an arriving inner batch to judge its messages; without it the record's own
        properties are judged (its messages' are not there, so a selector on them waits for the round)."""
        self._store = store
        self._waiters: dict[tuple[str, int], list[PullWaiter]] = {}
        self._lock = threading.Lock()
        self._stopped = False

    def hold(self, topic: str, queue_id: int, offset: int, message_filter: MessageFilter | None) -> PullWaiter:
        """Register a parked pull; dispatch wakes ``waiter.event`` (thread ``wait`` or ``await wait_async``)."""
        waiter = PullWaiter(topic, queue_id, offset, message_filter)
        with self._lock:
            if self._stopped:
                waiter.event.wake()
            self._waiters.setdefault((topic, queue_id), []).append(waiter)
        return waiter

    def release(self, waiter: PullWaiter) -> None:
        with self._lock:
            lst = self._waiters.get((waiter.topic, waiter.queue_id))
            if lst is not None:
                try:
                    lst.remove(waiter)
                except ValueError:
                    pass
                if not lst:
                    del self._waiters[(waiter.topic, waiter.queue_id)]

    def waiting(self, topic: str | None = None) -> int:
        with self._lock:
            return sum(len(v) for (t, _), v in self._waiters.items() if topic is None or t == topic)

    def notify_message_arriving(self, topic: str, queue_id: int, max_offset_after: int, tags_code: int,
                                store_timestamp: int, properties_string: str) -> None:
        """Store arrival listener: wake the parked pulls this message is for."""
        with self._lock:
            waiters = list(self._waiters.get((topic, queue_id), ()))
        if not waiters:
            return
        props: dict[str, str] | None = None
        inner_num = inner_batch_size(properties_string) if self._store is not None else 0
        for w in waiters:
            if w.event.is_set() or max_offset_after <= w.offset:
                continue
            f = w.message_filter
            if f is not None:
                if inner_num:
                    # not by tags_code: it is the outer record's (none for a producer's batch), each inner
                    # message is matched by its own TAGS, as the pull matches them
                    if not self._inner_batch_matches(topic, queue_id, max(w.offset, max_offset_after - inner_num),
                                                     max_offset_after, f):
                        continue
                else:
                    if not f.is_matched_by_consume_queue(tags_code):
                        continue
                    if props is None:
                        props = decode_properties(properties_string) if properties_string else {}
                    if not f.is_matched_by_commit_log(props):
                        continue
            w.event.wake()

    def _inner_batch_matches(self, topic: str, queue_id: int, begin: int, end: int, f: MessageFilter) -> bool:
        """Whether the pull would find a message in [begin, end) of the arrived inner batch: the pull's own
        read, limited to that one unit (its messages are judged one by one, as the pull judges them)."""
        assert self._store is not None
        got = self._store.get_messages(topic, queue_id, begin, end - begin, f, max_units_scan=1)
        return got.status is GetMessageStatus.FOUND

    def shutdown(self) -> None:
        """Wake everything so no pull outlives the broker."""
        with self._lock:
            self._stopped = True
            for lst in self._waiters.values():
                for w in lst:
                    w.event.wake()
