"""``config/deletedTopics.json``: the tombstones of deleted topics (topic -> commitlog offset at deletion).

Why the store layer owns the file: a deleted topic's records stay in the commitlog until retention
removes them, and a topic made again under the same name starts its queues at 0. Everything that
dispatches from the commitlog — recovery, ``verifyStore`` and the Spark rebuild — must leave out the
records below the cut, or the old messages come back into the new topic's queues; so all of them read
the tombstones through this one reader. The broker's topic manager writes them. The services that
re-put a wrapped message into its REAL_TOPIC when it is due (timer wheel, delay levels, transaction
commits) ask ``deleted_since_stored`` too: their re-put is a new record, past the cut.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from broker_core.common.java_numbers import JAVA_LONG

from .config_file import read_config_json
from .fastjson_fields import FieldValueError, java_integer, shown

DELETED_TOPICS_FILE = "deletedTopics.json"


def _decode(obj: Any) -> dict[str, int]:
    if not isinstance(obj, dict):
        raise FieldValueError(f"expected a JSON object, found {shown(obj)}")
    table = obj.get("deletedTopicTable") or {}
    if not isinstance(table, dict):
        raise FieldValueError(f"deletedTopicTable: expected a JSON object, found {shown(table)}")
    out: dict[str, int] = {}
    for topic, raw in table.items():
        try:
            cut = java_integer(raw, JAVA_LONG)
        except FieldValueError as e:
            raise FieldValueError(f"deletedTopicTable.{topic}: {e}") from None
        if cut is None or cut < 0:
            raise FieldValueError(f"deletedTopicTable.{topic}: expected a commitlog offset, found {shown(raw)}")
        out[str(topic)] = cut
    return out


def read_deleted_topics(config_dir: Path) -> dict[str, int]:
    """Topic -> commitlog offset at its deletion; empty when no topic was ever deleted."""
    return read_config_json(config_dir / DELETED_TOPICS_FILE, _decode) or {}


def deleted_before_cut(deleted_topics: dict[str, int], topic: str, commit_log_offset: int) -> bool:
    """True for a record of a deleted topic written before the deletion: never dispatched again."""
    cut = deleted_topics.get(topic)
    return cut is not None and commit_log_offset < cut


def deleted_since_stored(record_filter: Callable[[str, int], bool] | None, real_topic: str | None,
                         commit_log_offset: int) -> bool:
    """True when ``real_topic`` was deleted after the record at ``commit_log_offset`` was stored.

    For the services that re-put a wrapped message into its REAL_TOPIC (timer wheel, delay levels,
    transaction commits): the re-put is a new record past the cut, so the dispatch check alone lets it
    through, and a topic made again under the name would get the deleted topic's message. Asked with
    the wrapped record's own offset, the store's record filter (``MessageStore.dispatch_filter``, the
    broker's tombstones) says whether that record is older than the deletion. A topic that never
    existed, or was never deleted, has no tombstone: False."""
    return bool(real_topic) and record_filter is not None and not record_filter(str(real_topic), commit_log_offset)
