"""Long polling for 4.x pulls (PullRequestHoldService, spec B.2.2).

Each parked pull is a ``PullWaiter`` whose ``event`` is a ``waiter.Waiter``: a worker thread
blocks on it, an asyncio server awaits it; dispatch wakes both the same way.

Why: a consumer that has caught up parks its pull for up to ``suspendTimeoutMillis`` instead of
spinning; the pull must return as soon as a message *that its filter accepts* arrives, and a
message it would filter out must not wake it (the pull's own round every ``HOLD_CHECK_INTERVAL_S``
answers those). The store's arrival listeners deliver every new
consume-queue unit with its tags code and properties, which is exactly what the filter needs.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from broker_core.store.codec.properties import decode_properties

from .filter import MessageFilter
from .waiter import Waiter


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


class PullRequestHoldService:
    def __init__(self) -> None:
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
        for w in waiters:
            if w.event.is_set() or max_offset_after <= w.offset:
                continue
            f = w.message_filter
            if f is not None:
                if not f.is_matched_by_consume_queue(tags_code):
                    continue
                if props is None:
                    props = decode_properties(properties_string) if properties_string else {}
                if not f.is_matched_by_commit_log(props):
                    continue
            w.event.wake()

    def shutdown(self) -> None:
        """Wake everything so no pull outlives the broker."""
        with self._lock:
            self._stopped = True
            for lst in self._waiters.values():
                for w in lst:
                    w.event.wake()
