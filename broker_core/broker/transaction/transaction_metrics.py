"""Transaction figures: half messages pending per real topic (``config/transactionMetrics``) and counters.

Why persisted: the per-topic half count is RocketMQ's TransactionMetrics, kept across restarts in
``config/transactionMetrics`` (``{"dataVersion":…,"transactionCount":{topic:{"count":n,"timeStamp":ms}}}``);
the counters (checks sent, commits, rollbacks, discarded) are per-process figures for dashboards.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path

from broker_core.store.config_file import ConfigFileError, read_config_json, write_config_json
from broker_core.store.topic_config import DataVersion

TRANSACTION_METRICS_FILE = "transactionMetrics"


@dataclass
class TopicMetric:
    count: int = 0
    time_stamp: int = 0


@dataclass
class TransactionCounters:
    prepared: int = 0
    commits: int = 0
    rollbacks: int = 0
    checks_sent: int = 0
    discarded: int = 0
    deleted_topic: int = 0  # halves not delivered: their topic was deleted after they were stored
    unknown_answers: int = 0
    op_messages_written: int = 0


class TransactionMetrics:
    def __init__(self, config_dir: str | Path) -> None:
        self.path = Path(config_dir) / TRANSACTION_METRICS_FILE
        self.transaction_count: dict[str, TopicMetric] = {}
        self.data_version = DataVersion()
        self.counters = TransactionCounters()
        self._lock = threading.Lock()
        self._dirty = False

    def load(self) -> None:
        obj = read_config_json(self.path)
        if obj is None:
            return
        if not isinstance(obj, dict):
            raise ConfigFileError(f"{self.path}: expected a JSON object, got {type(obj).__name__}")
        table = obj.get("transactionCount")
        if table is None:
            table = {}
        if not isinstance(table, dict):
            raise ConfigFileError(f"{self.path}: transactionCount must be an object")
        parsed: dict[str, TopicMetric] = {}
        try:
            for topic, metric in table.items():
                # a negative count saved by an earlier version (see add_and_get) reads as none pending
                parsed[str(topic)] = TopicMetric(max(0, int(metric.get("count", 0))), int(metric.get("timeStamp", 0)))
        except (AttributeError, TypeError, ValueError) as e:
            raise ConfigFileError(f"{self.path}: bad transactionCount entry: {e}") from e
        try:
            version = DataVersion.from_json(obj.get("dataVersion"))
        except ValueError as e:  # named here: it escaped as a bare int() error without the file
            raise ConfigFileError(f"{self.path}: {e}") from e
        with self._lock:
            self.transaction_count = parsed
            self.data_version = version

    def add_and_get(self, topic: str | None, delta: int, now_ms: int) -> int:
        if not topic:
            return 0
        with self._lock:
            metric = self.transaction_count.setdefault(topic, TopicMetric())
            # never below zero: a kill -9 before the periodic save loses the increments of the halves put
            # since, and their commits or rollbacks after the restart took the count negative for good
            metric.count = max(0, metric.count + delta)
            metric.time_stamp = now_ms
            self.data_version.next_version(now_ms)
            self._dirty = True
            return metric.count

    def get_transaction_count(self, topic: str) -> int:
        metric = self.transaction_count.get(topic)
        return metric.count if metric else 0

    def half_messages_pending(self) -> int:
        return sum(m.count for m in self.transaction_count.values())

    def persist(self, force: bool = False) -> bool:
        with self._lock:
            if not self._dirty and not force:
                return False
            snapshot = {"dataVersion": self.data_version.to_json(),
                        "transactionCount": {t: {"count": m.count, "timeStamp": m.time_stamp}
                                             for t, m in self.transaction_count.items()}}
            self._dirty = False
            try:
                write_config_json(self.path, snapshot)
            except BaseException:  # not on disk: the next round writes it again
                self._dirty = True
                raise
        return True
