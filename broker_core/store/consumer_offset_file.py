"""``config/consumerOffset.json`` (spec §10.4): committed consumer offsets per ``topic@group``.

Why here: the file belongs to the store directory's format and is read by offline tools as well as
the broker. Queue ids are Java ``Integer`` keys, so they are written unquoted (``{0:250,1:251}``) as
fastjson does, and both that dialect and standard quoted keys are accepted on read.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .config_file import ConfigFileError, read_config_json, write_config_json
from .topic_config import DataVersion

TOPIC_GROUP_SEPARATOR = "@"
FILE_NAME = "consumerOffset.json"

OffsetTable = dict[str, dict[int, int]]


def split_topic_at_group(key: str) -> tuple[str, str] | None:
    """``topic@group`` -> (topic, group); None for keys that do not have exactly one ``@``."""
    parts = key.split(TOPIC_GROUP_SEPARATOR)
    if len(parts) != 2:
        return None
    return parts[0], parts[1]


def encode_consumer_offsets(offset_table: OffsetTable, data_version: DataVersion) -> dict[str, Any]:
    group_topics: dict[str, list[str]] = {}
    for key in offset_table:
        tg = split_topic_at_group(key)
        if tg is not None:
            group_topics.setdefault(tg[1], []).append(tg[0])
    return {"dataVersion": data_version.to_json(),
            "groupTopicMap": group_topics,
            "offsetTable": {key: {int(q): int(o) for q, o in sorted(queues.items())}
                            for key, queues in offset_table.items()}}


def decode_consumer_offsets(obj: dict[str, Any] | None, source: str = FILE_NAME) -> tuple[OffsetTable, DataVersion]:
    """Parse the file's object; a malformed entry is a ConfigFileError naming it (nothing guessed)."""
    if not obj:
        return {}, DataVersion()
    if not isinstance(obj, dict):
        raise ConfigFileError(f"{source}: expected a JSON object")
    table: OffsetTable = {}
    raw = obj.get("offsetTable")
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise ConfigFileError(f"{source}: offsetTable must be an object")
    for key, queues in raw.items():
        if not isinstance(queues, dict):
            raise ConfigFileError(f"{source}: offsetTable[{key!r}] must be an object of queueId -> offset")
        try:
            table[str(key)] = {int(q): int(o) for q, o in queues.items()}
        except (TypeError, ValueError) as e:
            raise ConfigFileError(f"{source}: offsetTable[{key!r}] has a non-integer queue id or offset") from e
    return table, DataVersion.from_json(obj.get("dataVersion"))


def read_consumer_offsets(config_dir: Path) -> tuple[OffsetTable, DataVersion]:
    path = Path(config_dir) / FILE_NAME
    loaded = read_config_json(path, lambda obj: decode_consumer_offsets(obj, str(path)))
    return loaded if loaded is not None else ({}, DataVersion())


def write_consumer_offsets(config_dir: Path, offset_table: OffsetTable, data_version: DataVersion) -> None:
    write_config_json(Path(config_dir) / FILE_NAME, encode_consumer_offsets(offset_table, data_version))
