"""ConsumerFilterManager: which SQL92 consumers each topic has, their bloom bits, and since when.

Why: the bitmap computed at dispatch (``CommitLogDispatcherCalcBitMap``) has one set of bloom bits per
``group#topic`` with a SQL92 subscription; a pull or pop of that group then skips messages whose bits
are not all set. A bit only means something for messages stored after the consumer's filter data was
born (``is_msg_in_live``): older ones, and anything after the expression changed, are read and
evaluated. Filled from heartbeats as Java's DefaultConsumerIdsChangeListener does (REGISTER on every
heartbeat, UNREGISTER when a group's last client leaves), kept in ``config/consumerFilter.json`` so a
restart keeps the birth times the bitmaps already on disk rely on. A dead filter still gets its bits
computed until it is cleaned (filterDataCleanTimeSpan after death), so a consumer coming back with the
same expression keeps using the bitmaps of the messages sent while it was away.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from broker_core.broker.filter.errors import FilterSyntaxError, UnsupportedExpressionTypeError
from broker_core.broker.filter.factory import MessageFilter, build_filter, is_tag_type
from broker_core.store.codec.bloom_filter import BloomFilter, BloomFilterData
from broker_core.store.config_file import read_config_json, write_config_json

log = logging.getLogger("rmqops.broker.filter")

CONSUMER_FILTER_FILE = "consumerFilter.json"  # BrokerPathConfigHelper.getConsumerFilterPath
FILTER_DATA_CLEAN_TIME_SPAN = 24 * 3600 * 1000
DEAD_ON_LOAD_MS = 30_000  # decode(): every loaded consumer is taken as dead since 30 s ago


class SubscriptionLike(Protocol):
    """What registration reads of a subscription (the registry's SubscriptionData has these fields)."""

    @property
    def topic(self) -> str: ...

    @property
    def sub_string(self) -> str: ...

    @property
    def expression_type(self) -> str: ...

    @property
    def sub_version(self) -> int: ...


@dataclass(slots=True)
class ConsumerFilterData:
    consumer_group: str
    topic: str
    expression: str
    expression_type: str
    born_time: int
    dead_time: int = 0
    bloom_filter_data: BloomFilterData | None = None
    client_version: int = 0
    compiled: MessageFilter | None = field(default=None, compare=False, repr=False)

    def is_dead(self) -> bool:
        return self.dead_time >= self.born_time

    def is_msg_in_live(self, msg_store_time: int) -> bool:
        """Stored after the filter was born: its bitmap was computed with this filter's bits."""
        return msg_store_time > self.born_time

    def to_json(self) -> dict[str, Any]:
        bloom = self.bloom_filter_data
        return {"bloomFilterData": {"bitNum": bloom.bit_num, "bitPos": list(bloom.bit_pos)} if bloom else None,
                "bornTime": self.born_time, "clientVersion": self.client_version,
                "consumerGroup": self.consumer_group, "dead": self.is_dead(), "deadTime": self.dead_time,
                "expression": self.expression, "expressionType": self.expression_type, "topic": self.topic}


@dataclass(slots=True)
class BitmapFilterStats:
    """How the consume-queue step decided for SQL92 subscriptions with bloom data (since start)."""

    skipped: int = 0  # the bitmap said "not for this consumer": the commitlog was not read
    maybe: int = 0  # all the consumer's bits set: read and evaluated
    not_usable: int = 0  # no ext unit, no bitmap, or stored before the filter was born: read and evaluated
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def count(self, skipped: int = 0, maybe: int = 0, not_usable: int = 0) -> None:
        with self._lock:
            self.skipped += skipped
            self.maybe += maybe
            self.not_usable += not_usable


def _compile(expression: str, expression_type: str) -> MessageFilter | None:
    try:
        return build_filter(expression_type, expression)
    except (FilterSyntaxError, UnsupportedExpressionTypeError) as e:
        log.error("consumer filter expression %r (%s) does not compile: %s", expression, expression_type, e)
        return None


class ConsumerFilterManager:
    def __init__(self, config_dir: Path, clock: Callable[[], int], max_error_rate: int = 20,
                 expect_consumer_num: int = 32, clean_time_span_ms: int = FILTER_DATA_CLEAN_TIME_SPAN,
                 read_only: bool = False) -> None:
        self.path = Path(config_dir) / CONSUMER_FILTER_FILE
        self.clock = clock
        self.bloom_filter = BloomFilter(max_error_rate, expect_consumer_num)
        self.clean_time_span_ms = clean_time_span_ms
        self.read_only = read_only
        self._by_topic: dict[str, dict[str, ConsumerFilterData]] = {}
        # Registration and the dispatch's snapshot of a topic's filters are ordered by this lock: a
        # message stored after a filter's birth (same clock, strictly later ms) is dispatched with it.
        self._lock = threading.Lock()
        self._persist_lock = threading.Lock()
        self._changed = False
        self.stats = BitmapFilterStats()

    # -- registration (heartbeats) -------------------------------------------------------------------
    def build(self, topic: str, group: str, expression: str, expression_type: str,
              client_version: int) -> ConsumerFilterData | None:
        """A new filter data born now, or None for a TAG subscription or one that does not compile."""
        if is_tag_type(expression_type):
            return None
        compiled = _compile(expression, expression_type)
        if compiled is None:
            return None
        return ConsumerFilterData(group, topic, expression, expression_type, self.clock(), 0, None, client_version,
                                  compiled)

    def register_group(self, group: str, subscriptions: Iterable[SubscriptionLike]) -> None:
        """A heartbeat of ``group``: register each subscription; its filters on other topics die."""
        subs = list(subscriptions)
        for sub in subs:
            self.register(sub.topic, group, sub.sub_string, sub.expression_type, sub.sub_version)
        topics = {s.topic for s in subs}
        now = self.clock()
        with self._lock:
            for topic, groups in self._by_topic.items():
                data = groups.get(group)
                if data is not None and topic not in topics and not data.is_dead():
                    data.dead_time = now
                    self._changed = True
                    log.info("consumer filter of %s on %s is dead: the group no longer subscribes", group, topic)

    def register(self, topic: str, group: str, expression: str | None, expression_type: str | None,
                 client_version: int) -> bool:
        """FilterDataMapByTopic.register: new, changed (re-born), refreshed or re-alive. True if kept."""
        if is_tag_type(expression_type) or not expression:
            return False
        assert expression_type is not None
        bloom = self.bloom_filter.generate(f"{group}#{topic}")
        with self._lock:
            groups = self._by_topic.setdefault(topic, {})
            old = groups.get(group)
            if old is not None and client_version <= old.client_version:
                if client_version == old.client_version and old.is_dead():
                    old.dead_time = 0
                    self._changed = True
                    return True
                return False
            if old is not None and old.expression == expression and old.expression_type == expression_type \
                    and old.bloom_filter_data == bloom:
                old.client_version = client_version
                old.dead_time = 0
                self._changed = True
                return True
            data = self.build(topic, group, expression, expression_type, client_version)
            if data is None:
                # a new expression that does not compile: the old one goes too (the client reports it)
                groups.pop(group, None)
                self._changed = True
                return False
            data.bloom_filter_data = bloom
            groups[group] = data
            self._changed = True
            log.info("consumer filter registered: %s on %s, %s %r, born %d", group, topic, expression_type,
                     expression, data.born_time)
            return True

    def unregister(self, group: str) -> None:
        """The group's last client left: its filters die (their bits are still computed until cleaned)."""
        now = self.clock()
        with self._lock:
            for groups in self._by_topic.values():
                data = groups.get(group)
                if data is not None and not data.is_dead():
                    data.dead_time = now
                    self._changed = True

    # -- queries ---------------------------------------------------------------------------------------
    def get(self, topic: str, group: str) -> ConsumerFilterData | None:
        with self._lock:
            return self._by_topic.get(topic, {}).get(group)

    def get_topic(self, topic: str) -> list[ConsumerFilterData]:
        """Every filter of ``topic``, dead ones included (what the bitmap is computed for)."""
        with self._lock:
            groups = self._by_topic.get(topic)
            return list(groups.values()) if groups else []

    # -- persistence -----------------------------------------------------------------------------------
    def clean(self) -> None:
        """Forget filters dead for longer than filterDataCleanTimeSpan, and topics left without any."""
        now = self.clock()
        with self._lock:
            for topic in list(self._by_topic):
                groups = self._by_topic[topic]
                for group in [g for g, d in groups.items() if d.is_dead() and now - d.dead_time >= self.clean_time_span_ms]:
                    log.info("consumer filter of %s on %s removed: dead for too long", group, topic)
                    del groups[group]
                    self._changed = True
                if not groups:
                    del self._by_topic[topic]
                    self._changed = True

    def encode(self) -> dict[str, Any]:
        with self._lock:
            return {"filterDataByTopic": {
                topic: {"groupFilterData": {g: d.to_json() for g, d in sorted(groups.items())}, "topic": topic}
                for topic, groups in sorted(self._by_topic.items())}}

    def persist(self) -> None:
        if self.read_only:
            return
        with self._persist_lock:  # the flush thread's and shutdown's persists take turns, snapshot to write
            self.clean()
            with self._lock:
                if not self._changed:
                    return
                self._changed = False
            try:
                write_config_json(self.path, self.encode())
            except BaseException:
                with self._lock:  # not on disk: the next flush tries again
                    self._changed = True
                raise

    def load(self) -> None:
        """Read consumerFilter.json; every loaded consumer is dead until it heartbeats again. A file from
        a bloom filter of another shape (maxErrorRateOfBloomFilter / expectConsumerNumUseFilter changed)
        is ignored: its bits mean nothing in the new bitmaps."""
        raw = read_config_json(self.path)
        if raw is None:
            return
        loaded: dict[str, dict[str, ConsumerFilterData]] = {}
        now = self.clock()
        for topic, by_topic in (raw.get("filterDataByTopic") or {}).items():
            for group, d in ((by_topic or {}).get("groupFilterData") or {}).items():
                if not d:
                    continue
                bloom_raw = d.get("bloomFilterData")
                bloom = BloomFilterData(tuple(int(p) for p in bloom_raw.get("bitPos") or ()),
                                        int(bloom_raw.get("bitNum", 0))) if bloom_raw else None
                if not self.bloom_filter.is_valid(bloom):
                    log.info("%s: bloom filter changed (now %s); the persisted consumer filters are ignored",
                             self.path, self.bloom_filter)
                    return
                data = ConsumerFilterData(d.get("consumerGroup") or group, d.get("topic") or topic,
                                          d.get("expression") or "", d.get("expressionType") or "",
                                          int(d.get("bornTime", 0)), int(d.get("deadTime", 0)), bloom,
                                          int(d.get("clientVersion", 0)))
                data.compiled = _compile(data.expression, data.expression_type)
                if data.dead_time == 0:
                    data.dead_time = max(now - DEAD_ON_LOAD_MS, data.born_time)
                loaded.setdefault(topic, {})[group] = data
        with self._lock:
            self._by_topic = loaded
