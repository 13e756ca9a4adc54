"""``config/topics.json`` (spec §10.2): topic configs as the store and the broker persist them."""

from __future__ import annotations

import json
import math
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path

from broker_core.common.java_numbers import JAVA_INT, JAVA_INTEGER_SYNTAX

from .config_file import read_config_json, write_config_json

PERM_PRIORITY = 8
PERM_READ = 4
PERM_WRITE = 2
PERM_INHERIT = 1
QUEUE_TYPE_KEY = "queue.type"
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
            value = _java_int(obj.get(key), topic, key)
            return default if value is None else value

        filter_type = obj.get("topicFilterType")
        if filter_type is not None and filter_type not in ("SINGLE_TAG", "MULTI_TAG"):
            raise TopicConfigError(f"topic {topic!r}: topicFilterType: expected SINGLE_TAG or MULTI_TAG, got "
                                   f"{_shown(filter_type)}")
        attributes = obj.get("attributes")
        if attributes is not None and not isinstance(attributes, dict):
            raise TopicConfigError(f"topic {topic!r}: attributes: expected an object, got {_shown(attributes)}")
        order = _java_bool(obj.get("order"), topic, "order")
        return cls(topic_name=topic,
                   read_queue_nums=integer("readQueueNums", 16),
                   write_queue_nums=integer("writeQueueNums", 16),
                   perm=integer("perm", 6),
                   topic_filter_type=filter_type or "SINGLE_TAG",
                   topic_sys_flag=integer("topicSysFlag", 0),
                   order=False if order is None else order,
                   attributes={str(k): v if isinstance(v, str) else json.dumps(v, separators=(",", ":"))
                               for k, v in (attributes or {}).items() if v is not None})


class TopicConfigError(ValueError):
    """A topics.json value of the wrong type or range; the text names the topic and the field."""


_NULL_STRINGS = ("", "null", "NULL")  # fastjson reads these strings as null: the field keeps its default


def _shown(raw: object) -> str:
    text = json.dumps(raw, ensure_ascii=False, default=str)
    return text if len(text) <= 40 else text[:40] + "..."


def _java_int(raw: object, topic: str, key: str) -> int | None:
    """fastjson's int field: a JSON integer, a number (truncated), true/false or a string in Java's
    integer syntax; None for null. Out of the Java int range is refused, not wrapped."""
    if raw is None or (isinstance(raw, str) and raw in _NULL_STRINGS):
        return None
    if isinstance(raw, bool):
        value = int(raw)
    elif isinstance(raw, int):
        value = raw
    elif isinstance(raw, float) and math.isfinite(raw):
        value = int(raw)
    elif isinstance(raw, str) and len(raw) <= 40 and JAVA_INTEGER_SYNTAX.fullmatch(raw):
        value = int(raw)
    else:
        raise TopicConfigError(f"topic {topic!r}: {key}: expected a Java int, got {_shown(raw)}")
    if not JAVA_INT.min <= value <= JAVA_INT.max:
        raise TopicConfigError(f"topic {topic!r}: {key}: out of the Java int range: {_shown(raw)}")
    return value


def _java_bool(raw: object, topic: str, key: str) -> bool | None:
    """fastjson's boolean field: true/false, a number (1 is true), or "true"/"false"/"1"/"0"... as a
    string; Python's ``bool("false")`` is True."""
    if raw is None or (isinstance(raw, str) and raw in _NULL_STRINGS):
        return None
    if isinstance(raw, bool):
        return raw
    if isinstance(raw, int | float) and math.isfinite(raw):
        return int(raw) == 1
    if isinstance(raw, str):
        if raw.lower() == "true" or raw in ("1", "Y", "y", "T"):
            return True
        if raw.lower() == "false" or raw in ("0", "F", "f", "N"):
            return False
    raise TopicConfigError(f"topic {topic!r}: {key}: expected a Java boolean, got {_shown(raw)}")


@dataclass
class DataVersion:
    counter: int = 0
    state_version: int = 0
    timestamp: int = 0

    def next_version(self, now_ms: int) -> None:
        self.counter += 1
        self.timestamp = now_ms

    def to_json(self) -> dict:
        return {"counter": self.counter, "stateVersion": self.state_version, "timestamp": self.timestamp}

    @classmethod
    def from_json(cls, obj: dict | None) -> DataVersion:
        obj = obj or {}
        return cls(int(obj.get("counter", 0)), int(obj.get("stateVersion", 0)), int(obj.get("timestamp", 0)))


class TopicConfigTable:
    """The topic table with atomic persistence; reading never writes (safe read-only)."""

    def __init__(self, config_dir: Path) -> None:
        self.path = config_dir / "topics.json"
        self.topics: dict[str, TopicConfig] = {}
        self.data_version = DataVersion()
        self.lock = threading.RLock()

    def load(self) -> None:
        loaded = read_config_json(self.path, _decode_topics)
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
