"""What a consumer tells an operator about itself: ConsumerRunningInfo (307), its queue offsets (221).

Why here: mqadmin consumerStatus / getConsumerStatus / queryMsgById -g -d ask the broker, which relays
the request to the client that owns the group; a Java client answers from its ProcessQueues, offset
store and ConsumerStatsManager. This module keeps the per-topic figures (pull and consume round trips,
rates over the last minute, failures over the last hour) and builds the answer bodies, so the push
consumer only records events and hands over its state.
"""

from __future__ import annotations

import sys
import threading
import time
import traceback
from collections import deque
from collections.abc import Iterable, Mapping

from broker_core.remoting.bodies import (
    ConsumerRunningInfo,
    ConsumeStatus,
    MessageQueue,
    ProcessQueueInfo,
    SubscriptionData,
)

from .process_queue import ProcessQueue

# Java's ConsumerRunningInfo property keys (PROP_CONSUME_ORDERLY is spelled without the underscore)
PROP_NAMESERVER_ADDR = "PROP_NAMESERVER_ADDR"
PROP_THREADPOOL_CORE_SIZE = "PROP_THREADPOOL_CORE_SIZE"
PROP_CONSUME_ORDERLY = "PROP_CONSUMEORDERLY"
PROP_CONSUME_TYPE = "PROP_CONSUME_TYPE"
PROP_CLIENT_VERSION = "PROP_CLIENT_VERSION"
PROP_CONSUMER_START_TIMESTAMP = "PROP_CONSUMER_START_TIMESTAMP"

RATE_WINDOW_S = 60.0
FAILED_WINDOW_S = 3600.0


def _now() -> float:
    return time.monotonic()


class _Window:
    """(time, value) events of the last ``span`` seconds: their count, sum and mean."""

    def __init__(self, span: float) -> None:
        self.span = span
        self.events: deque[tuple[float, float]] = deque()

    def add(self, value: float, now: float) -> None:
        self.events.append((now, value))
        self._trim(now)

    def _trim(self, now: float) -> None:
        while self.events and now - self.events[0][0] > self.span:
            self.events.popleft()

    def total(self, now: float) -> float:
        self._trim(now)
        return sum(v for _, v in self.events)

    def mean(self, now: float) -> float:
        self._trim(now)
        return sum(v for _, v in self.events) / len(self.events) if self.events else 0.0


class ConsumeStatsRecorder:
    """ConsumerStatsManager's figures per topic: pull RT/TPS, consume RT, OK/failed TPS, failed in 1 h."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._topics: dict[str, dict[str, _Window]] = {}

    def _of(self, topic: str) -> dict[str, _Window]:
        w = self._topics.get(topic)
        if w is None:
            w = self._topics[topic] = {"pull_rt": _Window(RATE_WINDOW_S), "pulled": _Window(RATE_WINDOW_S),
                                       "consume_rt": _Window(RATE_WINDOW_S), "ok": _Window(RATE_WINDOW_S),
                                       "failed": _Window(RATE_WINDOW_S), "failed_hour": _Window(FAILED_WINDOW_S)}
        return w

    def pulled(self, topic: str, rt_ms: float, count: int) -> None:
        now = _now()
        with self._lock:
            w = self._of(topic)
            w["pull_rt"].add(rt_ms, now)
            w["pulled"].add(count, now)

    def consumed(self, topic: str, rt_ms: float, ok: int, failed: int) -> None:
        now = _now()
        with self._lock:
            w = self._of(topic)
            w["consume_rt"].add(rt_ms, now)
            w["ok"].add(ok, now)
            w["failed"].add(failed, now)
            w["failed_hour"].add(failed, now)

    def status(self, topic: str) -> ConsumeStatus:
        now = _now()
        with self._lock:
            w = self._of(topic)
            return ConsumeStatus(pull_rt=w["pull_rt"].mean(now), pull_tps=w["pulled"].total(now) / RATE_WINDOW_S,
                                 consume_rt=w["consume_rt"].mean(now),
                                 consume_ok_tps=w["ok"].total(now) / RATE_WINDOW_S,
                                 consume_failed_tps=w["failed"].total(now) / RATE_WINDOW_S,
                                 consume_failed_msgs=int(w["failed_hour"].total(now)))


def process_queue_info(pq: ProcessQueue, commit_offset: int) -> ProcessQueueInfo:
    """A ProcessQueue as ProcessQueueInfo (cached offsets, counts, size in MiB, lock and times)."""
    cached = pq.cached_offsets()
    return ProcessQueueInfo(
        commit_offset=commit_offset, cached_msg_min_offset=cached[0] if cached else 0,
        cached_msg_max_offset=cached[-1] if cached else 0, cached_msg_count=pq.count,
        cached_msg_size_in_mi_b=pq.cached_bytes() // (1024 * 1024), locked=pq.locked,
        try_unlock_times=pq.try_unlock_times, last_lock_timestamp=pq.last_lock_ms, droped=pq.dropped,
        last_pull_timestamp=pq.last_pull_ms, last_consume_timestamp=pq.last_consume_ms)


def thread_dump() -> str:
    """The ``jstack`` of a Python client: every thread's stack, as jstack prints the JVM's."""
    names = {t.ident: t.name for t in threading.enumerate()}
    parts = []
    for ident, frame in sys._current_frames().items():
        parts.append(f'"{names.get(ident, "thread")}" id={ident}\n' + "".join(traceback.format_stack(frame)))
    return "\n".join(parts)


def build_running_info(properties: Mapping[str, str], subscriptions: Iterable[SubscriptionData],
                       queues: Mapping[MessageQueue, ProcessQueueInfo], stats: ConsumeStatsRecorder,
                       jstack: bool) -> ConsumerRunningInfo:
    subs = sorted(subscriptions, key=lambda s: (s.topic, s.sub_string))
    return ConsumerRunningInfo(
        properties=dict(sorted(properties.items())), subscription_set=subs, mq_table=dict(sorted(queues.items())),
        status_table={s.topic: stats.status(s.topic) for s in subs},
        jstack=thread_dump() if jstack else None)
