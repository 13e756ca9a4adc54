"""``config/subscriptionGroup.json`` (spec §10.3): consumer group configs as RocketMQ persists them.

Why here: the file is part of the store directory's format; the broker's group manager and offline
tools (mqadmin on a stopped store, Spark jobs) read and write it the same way. Unknown fields from a
newer Java broker are kept and written back so a round trip loses nothing.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from .config_file import read_config_json, write_config_json
from .topic_config import DataVersion

_KNOWN = ("attributes", "brokerId", "consumeBroadcastEnable", "consumeEnable", "consumeFromMinEnable",
          "consumeMessageOrderly", "consumeTimeoutMinute", "groupName", "groupRetryPolicy", "groupSysFlag",
          "notifyConsumerIdsChangedEnable", "retryMaxTimes", "retryQueueNums", "subscriptionDataSet",
          "whichBrokerWhenConsumeSlowly")


@dataclass
class SubscriptionGroupConfig:
    group_name: str
    consume_enable: bool = True
    consume_from_min_enable: bool = True
    consume_broadcast_enable: bool = True
    consume_message_orderly: bool = False
    retry_queue_nums: int = 1
    retry_max_times: int = 16
    group_retry_policy: dict[str, Any] = field(default_factory=lambda: {"type": "CUSTOMIZED"})
    broker_id: int = 0
    which_broker_when_consume_slowly: int = 1
    notify_consumer_ids_changed_enable: bool = True
    group_sys_flag: int = 0
    consume_timeout_minute: int = 15
    subscription_data_set: list[dict[str, Any]] | None = None
    attributes: dict[str, str] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        obj: dict[str, Any] = {
            "attributes": dict(self.attributes), "brokerId": self.broker_id,
            "consumeBroadcastEnable": self.consume_broadcast_enable, "consumeEnable": self.consume_enable,
            "consumeFromMinEnable": self.consume_from_min_enable,
            "consumeMessageOrderly": self.consume_message_orderly,
            "consumeTimeoutMinute": self.consume_timeout_minute, "groupName": self.group_name,
            "groupRetryPolicy": self.group_retry_policy, "groupSysFlag": self.group_sys_flag,
            "notifyConsumerIdsChangedEnable": self.notify_consumer_ids_changed_enable,
            "retryMaxTimes": self.retry_max_times, "retryQueueNums": self.retry_queue_nums,
            "subscriptionDataSet": self.subscription_data_set,
            "whichBrokerWhenConsumeSlowly": self.which_broker_when_consume_slowly,
        }
        obj.update(self.extra)
        return dict(sorted(obj.items()))  # fastjson: bean fields alphabetically

    @classmethod
    def from_json(cls, name: str, obj: dict[str, Any]) -> SubscriptionGroupConfig:
        policy = obj.get("groupRetryPolicy")
        return cls(
            group_name=obj.get("groupName") or name,
            consume_enable=bool(obj.get("consumeEnable", True)),
            consume_from_min_enable=bool(obj.get("consumeFromMinEnable", True)),
            consume_broadcast_enable=bool(obj.get("consumeBroadcastEnable", True)),
            consume_message_orderly=bool(obj.get("consumeMessageOrderly", False)),
            retry_queue_nums=int(obj.get("retryQueueNums", 1)),
            retry_max_times=int(obj.get("retryMaxTimes", 16)),
            group_retry_policy=dict(policy) if isinstance(policy, dict) else {"type": "CUSTOMIZED"},
            broker_id=int(obj.get("brokerId", 0)),
            which_broker_when_consume_slowly=int(obj.get("whichBrokerWhenConsumeSlowly", 1)),
            notify_consumer_ids_changed_enable=bool(obj.get("notifyConsumerIdsChangedEnable", True)),
            group_sys_flag=int(obj.get("groupSysFlag", 0)),
            consume_timeout_minute=int(obj.get("consumeTimeoutMinute", 15)),
            subscription_data_set=obj.get("subscriptionDataSet"),
            attributes={str(k): str(v) for k, v in (obj.get("attributes") or {}).items()},
            extra={k: v for k, v in obj.items() if k not in _KNOWN},
        )


class SubscriptionGroupTable:
    """The group table with atomic persistence; loading never writes (safe read-only)."""

    FILE_NAME = "subscriptionGroup.json"

    def __init__(self, config_dir: Path) -> None:
        self.path = Path(config_dir) / self.FILE_NAME
        self.groups: dict[str, SubscriptionGroupConfig] = {}
        self.forbidden_table: dict[str, dict[str, int]] = {}
        self.data_version = DataVersion()
        self.lock = threading.RLock()
        self.loaded_from_file = False

    def load(self) -> None:
        loaded = read_config_json(self.path, _decode_groups)
        if loaded is None:
            return
        self.loaded_from_file = True
        self.data_version, self.groups, self.forbidden_table = loaded

    def to_json(self) -> dict[str, Any]:
        return {"dataVersion": self.data_version.to_json(),
                "forbiddenTable": {g: dict(m) for g, m in self.forbidden_table.items()},
                "subscriptionGroupTable": {n: g.to_json() for n, g in self.groups.items()}}

    def persist(self) -> None:
        with self.lock:
            write_config_json(self.path, self.to_json())

    @contextmanager
    def change(self) -> Iterator[None]:
        """One change that counts only once subscriptionGroup.json holds it (``TopicConfigTable.change``)."""
        with self.lock:
            groups, forbidden = dict(self.groups), {g: dict(m) for g, m in self.forbidden_table.items()}
            version = replace(self.data_version)
            try:
                yield
                self.persist()
            except BaseException:  # rebound, not refilled: a reader never sees the table half put back
                self.groups, self.forbidden_table, self.data_version = groups, forbidden, version
                raise



def _decode_groups(obj: object) -> tuple[DataVersion, dict[str, SubscriptionGroupConfig], dict[str, dict[str, int]]]:
    """subscriptionGroup.json's object; raises (TypeError/ValueError...) for any value of the wrong shape."""
    if not isinstance(obj, dict):
        raise TypeError(f"expected a JSON object, found {type(obj).__name__}")
    for field_name in ("subscriptionGroupTable", "forbiddenTable"):
        table = obj.get(field_name)
        table = {} if table is None else table
        if not isinstance(table, dict) or not all(isinstance(v, dict) or v is None for v in table.values()):
            raise TypeError(f"{field_name} must be an object of objects")
    groups = {str(name): SubscriptionGroupConfig.from_json(str(name), g)
              for name, g in (obj.get("subscriptionGroupTable") or {}).items()}
    forbidden = {str(g): {str(t): int(p) for t, p in (m or {}).items()}
                 for g, m in (obj.get("forbiddenTable") or {}).items()}
    return DataVersion.from_json(obj.get("dataVersion")), groups, forbidden
