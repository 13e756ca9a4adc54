"""``config/topics.json`` (spec §10.2): topic configs as the store and the broker persist them."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TypeVar

from broker_core.common.java_numbers import JAVA_LONG

from .config_file import read_config_json, write_config_json
from .fastjson_fields import FieldValueError, java_boolean, java_integer, java_string, shown

PERM_PRIORITY = 8
PERM_READ = 4
PERM_WRITE = 2
PERM_INHERIT = 1
QUEUE_TYPE_KEY = "queue.type"
T = TypeVar("T")
SIMPLE_CQ = "SimpleCQ"
BATCH_CQ = "BatchCQ"


@dataclass
class TopicConfig:
    topic_name: str
    read_queue_nums: int = 16
    write_queue_nums: int = 16
    perm: int = PERM_READ | PERM_WRITE
    topic_filter_type: str = "SINGLE_TAG"
    topic_sys_flag: int = 0
    order: bool = False
    attributes: dict[str, str] = field(default_factory=dict)

    @property
    def queue_type(self) -> str:
        return self.attributes.get(QUEUE_TYPE_KEY) or SIMPLE_CQ

    def to_json(self) -> dict:
        # fastjson writes bean fields in alphabetical order
        return {"attributes": dict(self.attributes), "order": self.order, "perm": self.perm,
                "readQueueNums": self.read_queue_nums, "topicFilterType": self.topic_filter_type,
                "topicName": self.topic_name, "topicSysFlag": self.topic_sys_flag,
                "writeQueueNums": self.write_queue_nums}

    @classmethod
    def from_json(cls, name: str, obj: dict) -> TopicConfig:
        """One entry of topics.json as fastjson reads the bean: a field of the wrong type raises
        TopicConfigError naming the topic and the field (it was "invalid literal for int()")."""
        topic = obj.get("topicName")
        topic = topic if isinstance(topic, str) and topic else name

        def integer(key: str, default: int) -> int:
            value = _field(topic, key, obj.get(key), java_integer)
            return default if value is None else value

        filter_type = obj.get("topicFilterType")
        if filter_type is not None and filter_type not in ("SINGLE_TAG", "MULTI_TAG"):
            raise TopicConfigError(f"topic {topic!r}: topicFilterType: expected SINGLE_TAG or MULTI_TAG, got "
                                   f"{shown(filter_type)}")
        attributes = obj.get("attributes")
        if attributes is not None and not isinstance(attributes, dict):
            raise TopicConfigError(f"topic {topic!r}: attributes: expected an object, got {shown(attributes)}")
        order = _field(topic, "order", obj.get("order"), java_boolean)
        return cls(topic_name=topic,
                   read_queue_nums=integer("readQueueNums", 16),
                   write_queue_nums=integer("writeQueueNums", 16),
                   perm=integer("perm", 6),
                   topic_filter_type=filter_type or "SINGLE_TAG",
                   topic_sys_flag=integer("topicSysFlag", 0),
                   order=False if order is None else order,
                   attributes={str(k): java_string(v) for k, v in (attributes or {}).items() if v is not None})


class TopicConfigError(ValueError):
    """A topics.json value of the wrong type or range; the text names the topic and the field."""


def _field(topic: str, key: str, raw: object, read: Callable[[object], T]) -> T:
    """One primitive field as fastjson reads it, refused with the topic's and the field's name."""
    try:
        return read(raw)
    except FieldValueError as e:
        raise TopicConfigError(f"topic {topic!r}: {key}: {e}") from None


def _now_ms() -> int:
    return int(time.time() * 1000)


@dataclass
class DataVersion:
    """A config table's version (topics.json, subscriptionGroup.json, delayOffset.json...). A new one
    carries the time it was made, as Apache's DataVersion (``timestamp = System.currentTimeMillis()``):
    a file written before any change (delayOffset.json at a first shutdown) said 0, 1970."""

    counter: int = 0
    state_version: int = 0
    timestamp: int = field(default_factory=_now_ms)

    def next_version(self, now_ms: int) -> None:
        self.counter += 1
        self.timestamp = now_ms

    def to_json(self) -> dict:
        return {"counter": self.counter, "stateVersion": self.state_version, "timestamp": self.timestamp}

    @classmethod
    def from_json(cls, obj: object) -> DataVersion:
        """fastjson's DataVersion (three longs); a wrong shape is a ValueError naming the field, which
        the config file reader reports with the file's name (it was a bare int() error)."""
        if obj is None:
            return cls()
        if not isinstance(obj, dict):
            raise FieldValueError(f"dataVersion: expected a JSON object, found {shown(obj)}")
        values = []
        for key in ("counter", "stateVersion", "timestamp"):
            try:
                values.append(java_integer(obj.get(key), JAVA_LONG) or 0)
            except FieldValueError as e:
                raise FieldValueError(f"dataVersion.{key}: {e}") from None
        return cls(*values)


class TopicConfigTable:
    """The topic table with atomic persistence; reading never writes (safe read-only)."""

    def __init__(self, config_dir: Path) -> None:
        self.path = config_dir / "topics.json"
        self.topics: dict[str, TopicConfig] = {}
        self.data_version = DataVersion()
        self.lock = threading.RLock()
        # Whether load() found topics.json (or its .bak): only a store without one has its topics
        # inferred from its queues (a store written by something that keeps no topic configs).
        self.on_disk = False

    def load(self) -> None:
        loaded = read_config_json(self.path, _decode_topics)
        self.on_disk = loaded is not None
        if loaded is not None:
            self.data_version, self.topics = loaded

    def persist(self) -> None:
        with self.lock:
            write_config_json(self.path, {"dataVersion": self.data_version.to_json(),
                                          "topicConfigTable": {n: t.to_json() for n, t in self.topics.items()}})

    @contextmanager
    def change(self) -> Iterator[None]:
        """One change that counts only once topics.json holds it: when the body fails or the file
        cannot be written (a full disk: ``ConfigWriteError``), the table is put back as it was before
        the error goes on, so memory never holds a topic the disk does not (a restart would lose it)."""
        with self.lock:
            topics, version = dict(self.topics), replace(self.data_version)
            try:
                yield
                self.persist()
            except BaseException:  # rebound, not refilled: a reader never sees the table half put back
                self.topics, self.data_version = topics, version
                raise

    def get(self, topic: str) -> TopicConfig | None:
        return self.topics.get(topic)

    def put(self, config: TopicConfig, now_ms: int) -> None:
        with self.lock:
            self.topics[config.topic_name] = config
            self.data_version.next_version(now_ms)

    def remove(self, topic: str, now_ms: int) -> TopicConfig | None:
        with self.lock:
            old = self.topics.pop(topic, None)
            if old is not None:
                self.data_version.next_version(now_ms)
            return old


def _decode_topics(obj: object) -> tuple[DataVersion, dict[str, TopicConfig]]:
    """topics.json's object; raises (TypeError/ValueError...) for any value of the wrong shape."""
    if not isinstance(obj, dict):
        raise TypeError(f"expected a JSON object, found {type(obj).__name__}")
    table = obj.get("topicConfigTable")
    table = {} if table is None else table
    if not isinstance(table, dict):
        raise TypeError(f"topicConfigTable must be an object, found {type(table).__name__}")
    for name, tc in table.items():
        if not isinstance(tc, dict):
            raise TypeError(f"topicConfigTable[{name!r}] must be an object, found {type(tc).__name__}")
    return DataVersion.from_json(obj.get("dataVersion")), {str(n): TopicConfig.from_json(str(n), tc)
                                                           for n, tc in table.items()}
