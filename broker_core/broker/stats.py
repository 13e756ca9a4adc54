"""Operator statistics: put/get TPS and totals, per-queue offsets, per-group progress.

Why: ``brokerStatus``, ``topicStatus``, ``consumerProgress`` and the dashboard read the same
numbers; TPS comes from per-second buckets driven by the injected clock so tests never sleep, and
the day totals roll at local midnight as BrokerStats does (TodayMorning / YesterdayMorning).
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime


@dataclass(frozen=True, slots=True)
class StatsWindow:
    """BrokerStatsItem: what was counted in one window (sum), per second (tps), per event (avgpt)."""

    sum: int
    tps: float
    avgpt: float


DAY_MINUTES = 24 * 60


STORE_TPS_WINDOWS = (10, 60, 600)
"""StoreStatsService's putTps / getTransferredTps windows, in seconds (clusterList shows the first)."""


class TpsCounter:
    """Counts per second; answers the rate over the last ``n`` full seconds (``n`` up to
    ``window_seconds``), and (from per-minute buckets kept for a day) the minute/hour/day windows of
    VIEW_BROKER_STATS_DATA."""

    def __init__(self, clock: Callable[[], int], window_seconds: int = 60) -> None:
        self.clock = clock
        self.window = window_seconds
        self.born_sec = clock() // 1000
        self._buckets: deque[list[int]] = deque()  # [second, count, events]
        self._minutes: deque[list[int]] = deque()  # [minute, count, events]
        self._lock = threading.Lock()

    def add(self, n: int = 1) -> None:
        now = self.clock()
        sec = now // 1000
        minute = now // 60_000
        with self._lock:
            if self._buckets and self._buckets[-1][0] == sec:
                self._buckets[-1][1] += n
                self._buckets[-1][2] += 1
            else:
                self._buckets.append([sec, n, 1])
            while self._buckets and self._buckets[0][0] < sec - self.window - 1:
                self._buckets.popleft()
            if self._minutes and self._minutes[-1][0] == minute:
                self._minutes[-1][1] += n
                self._minutes[-1][2] += 1
            else:
                self._minutes.append([minute, n, 1])
            while self._minutes and self._minutes[0][0] <= minute - DAY_MINUTES:
                self._minutes.popleft()

    def window_stats(self, minutes: int) -> StatsWindow:
        """The last ``minutes`` minutes (1, 60 or 1440): the minute from the per-second buckets (the
        last 60 seconds, this one included), longer windows from the per-minute buckets."""
        if minutes == 1:
            sec = self.clock() // 1000
            with self._lock:
                rows = [(c, e) for s, c, e in self._buckets if s > sec - 60]
            total = sum(c for c, _ in rows)
            events = sum(e for _, e in rows)
            return StatsWindow(total, total / 60, total / events if events else 0.0)
        current = self.clock() // 60_000
        with self._lock:
            rows = [(c, e) for m, c, e in self._minutes if m > current - minutes]
        total = sum(c for c, _ in rows)
        events = sum(e for _, e in rows)
        return StatsWindow(total, total / (minutes * 60), total / events if events else 0.0)

    def _sum(self, first_sec: int, last_sec: int) -> int:
        with self._lock:
            return sum(c for s, c, _ in self._buckets if first_sec <= s <= last_sec)

    def tps_over(self, seconds: int) -> float | None:
        """Per second over the last ``seconds`` full seconds; None while the counter is younger than
        that, as StoreStatsService leaves a window blank until it holds ``seconds + 1`` samples (a rate
        over a minute the broker was not up for would understate it)."""
        now = self.clock() // 1000
        if seconds > self.window or now - self.born_sec < seconds:
            return None
        return self._sum(now - seconds, now - 1) / seconds

    def tps_last_minute(self) -> float:
        now = self.clock() // 1000
        return self._sum(now - 60, now - 1) / 60


def store_tps_text(counter: TpsCounter) -> str:
    """StoreStatsService#getPutTps's text: the 10 s, 60 s and 600 s rates joined by one space, each
    as Java's Double.toString and blank while the broker is younger than its window ("30.0 5.0 0.5",
    "30.0  " in the first minute). clusterList reads the first field, brokerStatus prints all three."""
    return " ".join("" if tps is None else repr(tps) for tps in map(counter.tps_over, STORE_TPS_WINDOWS))


class DayTotals:
    """Running total plus its value at the last two local midnights (msgPutTotalTodayMorning...)."""

    def __init__(self, clock: Callable[[], int]) -> None:
        self.clock = clock
        self.total = 0
        self.today_morning = 0
        self.yesterday_morning = 0
        self._day = self._day_of(clock())
        self._lock = threading.Lock()

    @staticmethod
    def _day_of(ms: int) -> int:
        return datetime.fromtimestamp(ms / 1000).toordinal()

    def _roll(self) -> None:
        day = self._day_of(self.clock())
        if day != self._day:
            self.yesterday_morning = self.today_morning if day == self._day + 1 else self.total
            self.today_morning = self.total
            self._day = day

    def add(self, n: int) -> None:
        with self._lock:
            self._roll()
            self.total += n

    def snapshot(self) -> tuple[int, int, int]:
        with self._lock:
            self._roll()
            return self.yesterday_morning, self.today_morning, self.total


TOPIC_PUT_NUMS = "TOPIC_PUT_NUMS"  # BrokerStatsManager's stats names
GROUP_GET_NUMS = "GROUP_GET_NUMS"


class BrokerStats:
    def __init__(self, clock: Callable[[], int]) -> None:
        self.clock = clock
        self.start_ms = clock()
        self.put_tps = TpsCounter(clock, window_seconds=STORE_TPS_WINDOWS[-1])
        self.get_tps = TpsCounter(clock, window_seconds=STORE_TPS_WINDOWS[-1])
        self.put_totals = DayTotals(clock)
        self.get_totals = DayTotals(clock)
        self.topic_put: dict[str, TpsCounter] = {}
        self.group_get: dict[tuple[str, str], TpsCounter] = {}
        self.topic_put_total: dict[str, int] = {}
        self.group_get_total: dict[tuple[str, str], int] = {}
        self._lock = threading.Lock()

    def record_put(self, topic: str, n: int) -> None:
        self.put_tps.add(n)
        self.put_totals.add(n)
        with self._lock:
            counter = self.topic_put.get(topic)
            if counter is None:
                counter = self.topic_put[topic] = TpsCounter(self.clock)
            self.topic_put_total[topic] = self.topic_put_total.get(topic, 0) + n
        counter.add(n)

    def record_get(self, group: str, topic: str, n: int) -> None:
        self.get_tps.add(n)
        self.get_totals.add(n)
        key = (group, topic)
        with self._lock:
            counter = self.group_get.get(key)
            if counter is None:
                counter = self.group_get[key] = TpsCounter(self.clock)
            self.group_get_total[key] = self.group_get_total.get(key, 0) + n
        counter.add(n)

    def stats_data(self, stats_name: str, stats_key: str) -> tuple[StatsWindow, StatsWindow, StatsWindow] | None:
        """VIEW_BROKER_STATS_DATA: minute, hour and day windows of TOPIC_PUT_NUMS (key: topic) or
        GROUP_GET_NUMS (key: topic@group); None when nothing was ever counted under that key."""
        counter: TpsCounter | None = None
        if stats_name == TOPIC_PUT_NUMS:
            counter = self.topic_put.get(stats_key)
        elif stats_name == GROUP_GET_NUMS:
            topic, sep, group = stats_key.rpartition("@")
            counter = self.group_get.get((group, topic)) if sep else None
        if counter is None:
            return None
        return counter.window_stats(1), counter.window_stats(60), counter.window_stats(DAY_MINUTES)

    def topic_put_tps(self, topic: str) -> float:
        """BrokerStatsManager.tpsTopicPutNums: messages put to ``topic`` a second over the last minute."""
        c = self.topic_put.get(topic)
        return c.tps_last_minute() if c else 0.0

    def group_get_tps(self, group: str, topic: str | None = None) -> float:
        return sum(c.tps_last_minute() for (g, t), c in list(self.group_get.items())
                   if g == group and (topic is None or t == topic))

    def runtime(self) -> str:
        """BrokerController's ``runtime`` text: `[ d days, h hours, m minutes, s seconds ]`."""
        secs = max(0, (self.clock() - self.start_ms) // 1000)
        d, rem = divmod(secs, 86400)
        h, rem = divmod(rem, 3600)
        m, s = divmod(rem, 60)
        return f"[ {d} days, {h} hours, {m} minutes, {s} seconds ]"


@dataclass(frozen=True, slots=True)
class QueueStats:
    """topicStatus row: offsets of one queue and the store time of its newest message (0 if none)."""

    topic: str
    queue_id: int
    min_offset: int
    max_offset: int
    last_update_timestamp: int


@dataclass(frozen=True, slots=True)
class TopicStats:
    """GET_TOPIC_STATS_INFO's answer: the queues and the topic's put TPS, as RocketMQ's TopicStatsTable
    carries both in one body (topicStatus prints the TPS under the queues)."""

    rows: list[QueueStats]
    put_tps: float


@dataclass(frozen=True, slots=True)
class GroupQueueStats:
    """consumerProgress row for one queue of one topic."""

    topic: str
    queue_id: int
    broker_offset: int
    consumer_offset: int  # -1 never committed (shown as 0 lag base by mqadmin)
    pull_offset: int
    diff: int
    inflight: int
    blocked: bool
    last_timestamp: int  # store time of the last consumed message (consumerOffset - 1), 0 if none
    last_consume_timestamp: int  # when the group last committed this queue, 0 if never


@dataclass(frozen=True, slots=True)
class GroupConsumeStats:
    """GET_CONSUME_STATS' answer: the group's queues and its consume TPS come from one authorized read
    of one topic list, as RocketMQ's ConsumeStats carries both in one body."""

    rows: list[GroupQueueStats]
    consume_tps: float


@dataclass(frozen=True, slots=True)
class BrokerConsumeStats:
    """GET_BROKER_CONSUME_STATS' answer (ConsumeStatsList): each subscription group with one
    GroupConsumeStats per topic it consumes, and the lag (max - committed) and in-flight lag
    (pulled - committed) summed over every queue of them."""

    groups: list[tuple[str, list[GroupConsumeStats]]]
    total_diff: int
    total_inflight_diff: int
