"""The name server's KV config (KVConfigManager): namespaced key/value items that survive a restart.

Why a file: RocketMQ's name server keeps ORDER_TOPIC_CONFIG and operators' items (updateKvConfig) in
``kvConfig.json`` under its home (``~/namesrv/kvConfig.json``), as KVConfigSerializeWrapper
``{"configTable": {namespace: {key: value}}}``. A name server restart must not forget them, so every
change is written at once, atomically (temp, fsync, rename, ``.bak`` kept), and the file is read on
start. ``path=None`` keeps the table in memory only (a name server embedded in a test).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from broker_core.store.config_file import read_config_json, write_config_json

log = logging.getLogger("rmqops.namesrv.kv")

KV_CONFIG_FILE = "kvConfig.json"


def _decode(value: Any) -> dict[str, dict[str, str]]:
    table = value.get("configTable") or {}
    if not isinstance(table, dict):
        raise TypeError("configTable is not an object")
    out: dict[str, dict[str, str]] = {}
    for namespace, items in table.items():
        if not isinstance(items, dict):
            raise TypeError(f"namespace {namespace!r} is not an object")
        out[str(namespace)] = {str(k): str(v) for k, v in items.items()}
    return out


class KVConfigManager:
    """namespace -> key -> value, persisted to ``path`` after each change (when a path is given)."""

    def __init__(self, path: str | Path | None = None) -> None:
        self.path = Path(path) if path is not None else None
        self.table: dict[str, dict[str, str]] = {}

    def load(self) -> None:
        """Read the file (or its ``.bak`` when damaged); a missing file is an empty table.
        Raises ConfigFileError naming the file when neither can be read."""
        if self.path is None:
            return
        loaded = read_config_json(self.path, _decode)
        self.table = loaded or {}
        if loaded:
            log.info("load KV config table: %d namespace(s) from %s", len(loaded), self.path)

    def _commit(self, table: dict[str, dict[str, str]]) -> None:
        """``table`` becomes the table once the file holds it (``ConfigWriteError`` otherwise: nothing
        changed, so the name server never serves a value a restart would lose)."""
        if self.path is not None:
            write_config_json(self.path, {"configTable": table})
        self.table = table

    def put(self, namespace: str, key: str, value: str) -> None:
        if self.table.get(namespace, {}).get(key) == value:
            return
        table = {ns: dict(items) for ns, items in self.table.items()}
        table.setdefault(namespace, {})[key] = value
        self._commit(table)

    def get(self, namespace: str, key: str) -> str | None:
        return self.table.get(namespace, {}).get(key)

    def delete(self, namespace: str, key: str) -> None:
        if key not in self.table.get(namespace, {}):
            return
        table = {ns: dict(items) for ns, items in self.table.items()}
        del table[namespace][key]
        if not table[namespace]:
            del table[namespace]
        self._commit(table)

    def namespace(self, namespace: str) -> dict[str, str]:
        return dict(self.table.get(namespace, {}))
