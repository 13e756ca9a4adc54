"""``config/messageRequestMode.json``: how each group consumes each topic (PULL or POP), as Java's
MessageRequestModeManager persists it for mqadmin setConsumeMode.

Why here: the file is part of the store directory (next to subscriptionGroup.json); the broker writes
it on SET_MESSAGE_REQUEST_MODE and reads it back at start, and a stopped store can be changed the
same way. Layout: ``{"messageRequestModeMap": {topic: {group: SetMessageRequestModeRequestBody}}}``.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from broker_core.common.java_numbers import JAVA_INT

from .config_file import read_config_json, write_config_json
from .fastjson_fields import FieldValueError, java_integer, shown

FILE_NAME = "messageRequestMode.json"
MODES = ("PULL", "POP")


@dataclass(frozen=True)
class MessageRequestMode:
    """SetMessageRequestModeRequestBody: one group's mode on one topic."""

    topic: str
    consumer_group: str
    mode: str = "PULL"
    pop_share_queue_num: int = 0

    def to_json(self) -> dict[str, Any]:
        return {"consumerGroup": self.consumer_group, "mode": self.mode, "popShareQueueNum": self.pop_share_queue_num,
                "topic": self.topic}

    @classmethod
    def from_json(cls, obj: object) -> MessageRequestMode:
        """One body as fastjson reads it; a value of the wrong type raises FieldValueError naming the field.
        Why topic/consumerGroup must be strings: fastjson keeps a null, and ``str()`` made it the text
        "None", written back as a topic of that name on the next change."""
        if not isinstance(obj, dict):
            raise FieldValueError(f"expected an object, got {shown(obj)}")
        for key in ("topic", "consumerGroup"):
            if not isinstance(obj.get(key), str):
                raise FieldValueError(f"{key}: expected a string, got {shown(obj.get(key))}")
        mode = obj.get("mode") or "PULL"
        if mode not in MODES:
            raise FieldValueError(f"mode: expected PULL or POP, got {shown(mode)}")
        try:
            share = java_integer(obj.get("popShareQueueNum"), JAVA_INT) or 0
        except FieldValueError as e:
            raise FieldValueError(f"popShareQueueNum: {e}") from None
        return cls(obj["topic"], obj["consumerGroup"], mode, share)


def _decode_entry(topic: str, group: str, obj: object) -> MessageRequestMode:
    """One body of the file; a refused field names its topic and group too (as topics.json's names its topic)."""
    try:
        return MessageRequestMode.from_json(obj)
    except FieldValueError as e:
        raise FieldValueError(f"topic {topic!r}, group {group!r}: {e}") from None


def _decode(value: Any) -> dict[str, dict[str, MessageRequestMode]]:
    """messageRequestMode.json's object; raises (TypeError/ValueError) for any value of the wrong shape,
    which read_config_json reports with the file's name (or answers from the .bak)."""
    if not isinstance(value, dict):
        raise TypeError(f"expected a JSON object, found {type(value).__name__}")
    table = value.get("messageRequestModeMap") or {}
    if not isinstance(table, dict) or not all(isinstance(groups, dict) for groups in table.values()):
        raise TypeError("messageRequestModeMap must be an object of objects")
    return {str(t): {str(g): _decode_entry(str(t), str(g), b) for g, b in groups.items()}
            for t, groups in table.items()}


class MessageRequestModeTable:
    """The table with atomic persistence; a read-only broker never writes it."""

    def __init__(self, config_dir: Path) -> None:
        self.path = config_dir / FILE_NAME
        self.table: dict[str, dict[str, MessageRequestMode]] = {}
        self.lock = threading.Lock()

    def load(self) -> None:
        loaded = read_config_json(self.path, _decode)
        self.table = loaded or {}

    def get(self, topic: str, group: str) -> MessageRequestMode | None:
        return self.table.get(topic, {}).get(group)

    def put(self, entry: MessageRequestMode) -> None:
        """Counts once the file holds it (``ConfigWriteError`` otherwise, and nothing changed)."""
        with self.lock:
            table = {t: dict(groups) for t, groups in self.table.items()}
            table.setdefault(entry.topic, {})[entry.consumer_group] = entry
            write_config_json(self.path, {"messageRequestModeMap": {
                t: {g: e.to_json() for g, e in sorted(groups.items())} for t, groups in sorted(table.items())}})
            self.table = table
