"""Progress of the check service in the half and op queues (group CID_RMQ_SYS_TRANS).

Why a protocol: RocketMQ keeps these offsets in the ConsumerOffsetManager (consumerOffset.json), so
the Broker passes its offset manager; anything with ``query_offset``/``commit_offset`` works.
``TransactionCheckOffsetTable`` is the stand-alone fallback (its own file, same JSON shape as
consumerOffset.json) for when the service runs without a Broker.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Protocol

from broker_core.store.config_file import ConfigFileError, read_config_json, write_config_json

TRANSACTION_CHECK_OFFSET_FILE = "transactionCheckOffset.json"


class OffsetStore(Protocol):
    def query_offset(self, group: str, topic: str, queue_id: int) -> int:
        """The committed offset, or -1 when none (ConsumerOffsetManager.queryOffset)."""
        ...

    def commit_offset(self, group: str, topic: str, queue_id: int, offset: int) -> None: ...


class TransactionCheckOffsetTable:
    """``{"offsetTable":{"topic@group":{queueId:offset}}}`` persisted atomically under config/."""

    def __init__(self, config_dir: str | Path) -> None:
        self.path = Path(config_dir) / TRANSACTION_CHECK_OFFSET_FILE
        self.offset_table: dict[str, dict[int, int]] = {}
        self._lock = threading.Lock()
        self._dirty = False

    def load(self) -> None:
        obj = read_config_json(self.path)
        if obj is None:
            return
        table = obj.get("offsetTable") if isinstance(obj, dict) else None
        if not isinstance(table, dict):
            raise ConfigFileError(f"{self.path}: offsetTable missing or not an object")
        parsed: dict[str, dict[int, int]] = {}
        try:
            for key, queues in table.items():
                parsed[str(key)] = {int(q): int(o) for q, o in queues.items()}
        except (AttributeError, TypeError, ValueError) as e:
            raise ConfigFileError(f"{self.path}: bad offsetTable entry: {e}") from e
        with self._lock:
            self.offset_table = parsed

    def query_offset(self, group: str, topic: str, queue_id: int) -> int:
        return self.offset_table.get(f"{topic}@{group}", {}).get(queue_id, -1)

    def commit_offset(self, group: str, topic: str, queue_id: int, offset: int) -> None:
        with self._lock:
            queues = self.offset_table.setdefault(f"{topic}@{group}", {})
            if queues.get(queue_id) != offset:
                queues[queue_id] = offset
                self._dirty = True

    def persist(self, force: bool = False) -> bool:
        with self._lock:
            if not self._dirty and not force:
                return False
            snapshot = {"offsetTable": {k: dict(sorted(v.items())) for k, v in self.offset_table.items()}}
            self._dirty = False
            try:
                write_config_json(self.path, snapshot)
            except BaseException:  # not on disk: the next round writes it again
                self._dirty = True
                raise
        return True
