"""Long polling for pops (PopLongPollingService, seed 004 "pop with notify").

Why: an empty pop parks until a message arrives on the topic (or on the group's pop retry topic), a
FIFO queue it waits for is unblocked by an ack, or the poll time ends. The number of parked pops is
bounded (popPollingSize per topic, maxPopPollingSize overall) and a full table answers POLLING_FULL
instead of queueing without limit.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from ..waiter import Waiter
from .receipt_handle import build_pop_retry_topic


@dataclass(eq=False)
class PopWaiter:
    topic: str
    group: str
    queue_id: int  # -1: any queue
    watched: tuple[str, ...]
    event: Waiter = field(default_factory=Waiter)


class PopLongPollingService:
    def __init__(self, pop_polling_size: int = 1024, max_pop_polling_size: int = 100_000) -> None:
        self.pop_polling_size = pop_polling_size
        self.max_pop_polling_size = max_pop_polling_size
        self._by_topic: dict[str, list[PopWaiter]] = {}
        self._count = 0
        self._lock = threading.Lock()
        self._stopped = False

    def polling(self, topic: str, group: str, queue_id: int | None) -> PopWaiter | None:
        """Park a pop; None when the polling table is full (POLLING_FULL)."""
        qid = -1 if queue_id is None or queue_id < 0 else queue_id
        watched = (topic, build_pop_retry_topic(topic, group, False), build_pop_retry_topic(topic, group, True))
        waiter = PopWaiter(topic, group, qid, watched)
        with self._lock:
            if self._count >= self.max_pop_polling_size or \
                    len(self._by_topic.get(topic, ())) >= self.pop_polling_size:
                return None
            if self._stopped:
                waiter.event.wake()
            for t in watched:
                self._by_topic.setdefault(t, []).append(waiter)
            self._count += 1
        return waiter

    def release(self, waiter: PopWaiter) -> None:
        with self._lock:
            removed = False
            for t in waiter.watched:
                lst = self._by_topic.get(t)
                if lst is None:
                    continue
                try:
                    lst.remove(waiter)
                    removed = True
                except ValueError:
                    continue
                if not lst:
                    del self._by_topic[t]
            if removed:
                self._count -= 1

    def waiting(self, topic: str | None = None) -> int:
        with self._lock:
            if topic is None:
                return self._count
            return sum(1 for w in self._by_topic.get(topic, ()) if w.topic == topic)

    def notify_message_arriving(self, topic: str, queue_id: int, max_offset_after: int = 0, tags_code: int = 0,
                                store_timestamp: int = 0, properties_string: str = "") -> None:
        """Store arrival listener: wake the pops of this topic (any queue, or this queue)."""
        with self._lock:
            waiters = list(self._by_topic.get(topic, ()))
        for w in waiters:
            if w.topic != topic or w.queue_id < 0 or w.queue_id == queue_id:
                w.event.wake()

    def notify(self, topic: str, group: str, queue_id: int) -> None:
        """Wake one group's pops of a topic (a FIFO queue was unblocked, an offset was reset)."""
        with self._lock:
            waiters = list(self._by_topic.get(topic, ()))
        for w in waiters:
            if w.group == group and w.topic == topic and (w.queue_id < 0 or w.queue_id == queue_id):
                w.event.wake()

    def shutdown(self) -> None:
        with self._lock:
            self._stopped = True
            for lst in self._by_topic.values():
                for w in lst:
                    w.event.wake()
