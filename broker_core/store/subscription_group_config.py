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

from broker_core.common.java_numbers import JAVA_INT, JAVA_LONG, JavaInteger

from .config_file import read_config_json, write_config_json
from .fastjson_fields import FieldValueError, java_boolean, java_integer, java_string, shown
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
        """Read a config as Java's fastjson reads the bean (from subscriptionGroup.json or an
        UPDATE_AND_CREATE_SUBSCRIPTIONGROUP body). A value fastjson would refuse raises
        SubscriptionGroupConfigError naming the field, so nothing half-read is ever stored."""
        group_name = obj.get("groupName")
        defaults = cls(group_name=group_name if isinstance(group_name, str) and group_name else name)
        kwargs: dict[str, Any] = {}
        for key, attr, kind in _FIELDS:
            raw = obj.get(key)
            if raw is None:
                continue  # fastjson leaves a primitive field at its default for null
            value = _field(raw, key, kind)
            if value is not None:
                kwargs[attr] = value
        policy = obj.get("groupRetryPolicy")
        if policy is not None and not isinstance(policy, dict):
            raise SubscriptionGroupConfigError(f"groupRetryPolicy: expected an object, got {shown(policy)}")
        for key, want in (("type", str), ("exponentialRetryPolicy", dict), ("customizedRetryPolicy", dict)):
            value = (policy or {}).get(key)
            if value is not None and not isinstance(value, want):  # the retry code reads these as such
                raise SubscriptionGroupConfigError(f"groupRetryPolicy.{key}: expected "
                                                   f"{'a string' if want is str else 'an object'}, got {shown(value)}")
        data_set = obj.get("subscriptionDataSet")
        if data_set is not None and not (isinstance(data_set, list) and all(isinstance(d, dict) for d in data_set)):
            raise SubscriptionGroupConfigError(f"subscriptionDataSet: expected an array of objects, got "
                                               f"{shown(data_set)}")
        attributes = obj.get("attributes")
        if attributes is not None and not isinstance(attributes, dict):
            raise SubscriptionGroupConfigError(f"attributes: expected an object, got {shown(attributes)}")
        return replace(
            defaults, **kwargs,
            group_retry_policy=dict(policy) if policy is not None else defaults.group_retry_policy,
            subscription_data_set=data_set,
            attributes={str(k): java_string(v) for k, v in (attributes or {}).items() if v is not None},
            extra={k: v for k, v in obj.items() if k not in _KNOWN},
        )


class SubscriptionGroupConfigError(ValueError):
    """A subscription group config value of the wrong type or range; the text names the field."""


_FIELDS: tuple[tuple[str, str, JavaInteger | None], ...] = (
    ("consumeEnable", "consume_enable", None), ("consumeFromMinEnable", "consume_from_min_enable", None),
    ("consumeBroadcastEnable", "consume_broadcast_enable", None),
    ("consumeMessageOrderly", "consume_message_orderly", None),
    ("retryQueueNums", "retry_queue_nums", JAVA_INT), ("retryMaxTimes", "retry_max_times", JAVA_INT),
    ("brokerId", "broker_id", JAVA_LONG), ("whichBrokerWhenConsumeSlowly", "which_broker_when_consume_slowly", JAVA_LONG),
    ("notifyConsumerIdsChangedEnable", "notify_consumer_ids_changed_enable", None),
    ("groupSysFlag", "group_sys_flag", JAVA_INT), ("consumeTimeoutMinute", "consume_timeout_minute", JAVA_INT))
"""(JSON key, attribute, Java integral type) of the bean's primitive fields; None: a boolean."""



def _field(raw: object, key: str, kind: JavaInteger | None) -> int | bool | None:
    """One primitive field as fastjson reads it (None: a boolean), refused with the field's name."""
    try:
        return java_boolean(raw) if kind is None else java_integer(raw, kind)
    except FieldValueError as e:
        raise SubscriptionGroupConfigError(f"{key}: {e}") from None


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



def _decode_group(name: str, obj: dict[str, Any]) -> SubscriptionGroupConfig:
    """One group of the file; a refused field names the group too (the file holds hundreds)."""
    try:
        return SubscriptionGroupConfig.from_json(name, obj)
    except SubscriptionGroupConfigError as e:
        raise SubscriptionGroupConfigError(f"group {name!r}: {e}") from None


def _decode_forbidden(group: str, perms: dict[str, Any]) -> dict[str, int]:
    """One group's forbiddenTable entry (topic -> Integer perm bits) as fastjson reads it: a value of the
    wrong type names the group and topic (``int()`` said only "invalid literal"); a null is no entry,
    as Java's getForbidden reads a missing one."""
    table: dict[str, int] = {}
    for topic, raw in perms.items():
        try:
            perm = java_integer(raw, JAVA_INT)
        except FieldValueError as e:
            raise SubscriptionGroupConfigError(f"forbiddenTable: group {group!r}: topic {str(topic)!r}: {e}") from None
        if perm is not None:
            table[str(topic)] = perm
    return table


def _decode_groups(obj: object) -> tuple[DataVersion, dict[str, SubscriptionGroupConfig], dict[str, dict[str, int]]]:
    """subscriptionGroup.json's object; raises (TypeError/ValueError...) for any value of the wrong shape."""
    if not isinstance(obj, dict):
        raise TypeError(f"expected a JSON object, found {type(obj).__name__}")
    for field_name in ("subscriptionGroupTable", "forbiddenTable"):
        table = obj.get(field_name)
        table = {} if table is None else table
        if not isinstance(table, dict) or not all(isinstance(v, dict) or v is None for v in table.values()):
            raise TypeError(f"{field_name} must be an object of objects")
    groups = {str(name): _decode_group(str(name), g) for name, g in (obj.get("subscriptionGroupTable") or {}).items()}
    forbidden = {str(g): _decode_forbidden(str(g), m or {}) for g, m in (obj.get("forbiddenTable") or {}).items()}
    return DataVersion.from_json(obj.get("dataVersion")), groups, forbidden
