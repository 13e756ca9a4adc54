"""``config/delayOffset.json`` (spec §10.6): per delay level, the next SCHEDULE_TOPIC_XXXX queue offset.

Why a class of its own: the file is shared with Java brokers, so it must keep fastjson's shape
(``dataVersion`` then ``offsetTable`` with bare integer keys) and be written atomically; a reader must
accept both bare and quoted keys and fall back to ``delayOffset.json.bak``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

from broker_core.store.config_file import read_config_json, write_config_json
from broker_core.store.topic_config import DataVersion

DELAY_OFFSET_FILE = "delayOffset.json"


def _decode(obj: object) -> tuple[dict[int, int], DataVersion]:
    """The file's object; raises ValueError/TypeError (read_config_json names the file) for a wrong shape.
    dataVersion is decoded here too: decoded after the reader, its error escaped without the file's name."""
    if not isinstance(obj, dict):
        raise TypeError(f"expected a JSON object, got {type(obj).__name__}")
    table = obj.get("offsetTable") or {}
    if not isinstance(table, dict):
        raise TypeError("offsetTable must be an object")
    parsed: dict[int, int] = {}
    for key, value in table.items():
        try:
            parsed[int(key)] = int(value)
        except (TypeError, ValueError):
            raise ValueError(f"bad offsetTable entry {key!r}: {value!r}") from None
    return parsed, DataVersion.from_json(obj.get("dataVersion"))


class DelayOffsetTable:
    def __init__(self, config_dir: str | Path) -> None:
        self.path = Path(config_dir) / DELAY_OFFSET_FILE
        self.offset_table: dict[int, int] = {}
        self.data_version = DataVersion()
        self._dirty = False
        self._lock = threading.Lock()
        self._write_lock = threading.Lock()  # two persists never write an older snapshot last

    def load(self) -> None:
        """Read the file (or its .bak). A bad entry, or a bad dataVersion, is a ConfigFileError naming the
        file (after the .bak was tried, as for topics.json), never ignored."""
        loaded = read_config_json(self.path, _decode)
        if loaded is None:
            return
        parsed, version = loaded
        with self._lock:
            self.offset_table = parsed
            self.data_version = version
            self._dirty = False

    def get(self, level: int) -> int | None:
        return self.offset_table.get(level)

    def update(self, level: int, offset: int) -> None:
        with self._lock:
            if self.offset_table.get(level) != offset:
                self.offset_table[level] = offset
                self._dirty = True

    @property
    def dirty(self) -> bool:
        return self._dirty

    def to_json(self) -> dict:
        # fastjson bean order is alphabetical: dataVersion, offsetTable; levels as bare int keys.
        return {"dataVersion": self.data_version.to_json(),
                "offsetTable": {int(k): int(v) for k, v in sorted(self.offset_table.items())}}

    def persist(self, now_ms: int, force: bool = False, before_write: Callable[[], None] | None = None) -> bool:
        """Write the file when something changed (or ``force``); True when written. ``before_write``
        runs between the snapshot and the write (the schedule service's: flush the commitlog)."""
        with self._write_lock:
            with self._lock:
                if not self._dirty and not force:
                    return False
                if self._dirty:
                    self.data_version.next_version(now_ms)
                snapshot = self.to_json()
                self._dirty = False
            try:
                if before_write is not None:
                    before_write()
                write_config_json(self.path, snapshot)
            except BaseException:
                with self._lock:  # not on disk: the next round writes it again
                    self._dirty = True
                raise
        return True
