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

from .config_file import read_config_json, write_config_json

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
    def from_json(cls, obj: dict[str, Any]) -> MessageRequestMode:
        mode = str(obj.get("mode") or "PULL")
        if mode not in MODES:
            raise ValueError(f"mode {mode!r} is not PULL or POP")
        return cls(str(obj["topic"]), str(obj["consumerGroup"]), mode, int(obj.get("popShareQueueNum") or 0))


def _decode(value: Any) -> dict[str, dict[str, MessageRequestMode]]:
    table = value.get("messageRequestModeMap") or {}
    return {str(t): {str(g): MessageRequestMode.from_json(b) for g, b in groups.items()} for t, groups in table.items()}


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
