"""Consumer groups: system groups, create/update/delete, auto-creation on first use.

Why: pull, pop, offset commits and resets all need the group's settings (consumeEnable, retry
queue count, retry policy...) and must agree on whether an unknown group is created or refused.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import fields, replace
from typing import Any

from broker_core.store.config_file import ConfigWriteError
from broker_core.store.subscription_group_config import SubscriptionGroupConfig, SubscriptionGroupTable

from .attribute_changes import apply_changes, signed_changes
from .broker_config import BrokerConfig
from .errors import (
    InvalidParameterError,
    ServiceNotAvailableError,
    SubscriptionGroupNotExistError,
    config_written,
)
from .limits import JAVA_INT_MAX, JAVA_INT_MIN, JAVA_LONG_MAX, MAX_RETRY_TIMES, MAX_TOPIC_QUEUE_NUMS
from .topic_validator import SYSTEM_GROUPS, validate_group

log = logging.getLogger("rmqops.broker")

RETRY_POLICY_TYPES = ("CUSTOMIZED", "EXPONENTIAL")
_FIELD_NAMES = {f.name for f in fields(SubscriptionGroupConfig)} - {"group_name", "extra"}


def alter_group_attributes(create: bool, current: Mapping[str, str], changes: Mapping[str, str]) -> dict[str, str]:
    """The group's attributes after the signed ``changes`` (AttributeUtil.alterCurrentAttributes' rules:
    a new group takes only ``+k``; ``-k`` removes a key it has). Any key is taken: SubscriptionGroupAttributes
    has none in RocketMQ 5.x, and mqadmin refuses them before sending (see mqadmin.commands.group)."""
    return apply_changes(current, signed_changes(create, current, changes, "a group", InvalidParameterError))


class SubscriptionGroupManager:
    def __init__(self, table: SubscriptionGroupTable, config: BrokerConfig, clock: Callable[[], int],
                 read_only: bool = False) -> None:
        self.table = table
        self.config = config
        self.clock = clock
        self.read_only = read_only
        self.system_groups = {name for name, _ in SYSTEM_GROUPS}
        self._lock = threading.RLock()
        # a group auto-created while subscriptionGroup.json could not be written (a full disk)
        self.unpersisted = False

    def init(self) -> None:
        self.table.load()
        changed = False
        for name, broadcast in SYSTEM_GROUPS:
            if name not in self.table.groups:
                self.table.groups[name] = SubscriptionGroupConfig(name, consume_broadcast_enable=broadcast)
                changed = True
        if changed and not self.read_only:
            self.table.data_version.next_version(self.clock())
            self.table.persist()

    # -- queries ---------------------------------------------------------------------------------
    def get(self, group: str) -> SubscriptionGroupConfig | None:
        return self.table.groups.get(group)

    def contains(self, group: str) -> bool:
        return group in self.table.groups

    def list(self) -> list[SubscriptionGroupConfig]:
        return [self.table.groups[n] for n in sorted(self.table.groups)]

    def find(self, group: str, auto_create: bool = True) -> SubscriptionGroupConfig:
        """findSubscriptionGroupConfig: the group, created with defaults when allowed, else an error."""
        sgc = self.table.groups.get(group)
        if sgc is not None:
            return sgc
        if auto_create and (self.config.auto_create_subscription_group or group in self.system_groups) \
                and not self.read_only:
            bad = validate_group(group)
            if bad:
                raise InvalidParameterError(bad)
            return self._auto_create(group)
        raise SubscriptionGroupNotExistError(
            f"subscription group [{group}] does not exist, apply first please!")

    # -- changes ---------------------------------------------------------------------------------
    def _auto_create(self, group: str) -> SubscriptionGroupConfig:
        """A group first seen by a pull, pop or offset commit, with defaults. Why it survives a failed
        write, unlike an explicit create: RocketMQ's findSubscriptionGroupConfig keeps the group in
        memory and its ConfigManager.persist only logs a write failure, so consumers keep reading on a
        full disk (a restarted or scaled-out consumer under a new group too). The file gets the group
        at the next write that succeeds (``persist_pending``, the broker's flush loop and shutdown)."""
        with self._lock, self.table.lock:
            cfg = self.table.groups.get(group)
            if cfg is not None:
                return cfg
            cfg = self.table.groups[group] = SubscriptionGroupConfig(group)
            self.table.data_version.next_version(self.clock())
            try:
                self.table.persist()
            except ConfigWriteError as e:
                self.unpersisted = True
                log.warning("%s; subscription group %s is kept in memory and written once the file can be", e, group)
        return cfg

    def persist_pending(self) -> None:
        """Write the groups an auto-creation could not; raises ConfigWriteError while that still fails."""
        with self._lock:
            if self.unpersisted:
                self.table.persist()
                self.unpersisted = False
                log.info("%s written again: auto-created subscription groups are saved", self.table.path)

    def create_or_update(self, group: str | SubscriptionGroupConfig, **settings: Any) -> SubscriptionGroupConfig:
        """UPDATE_AND_CREATE_SUBSCRIPTIONGROUP; ``settings`` are SubscriptionGroupConfig field names.

        A whole config (``group`` a SubscriptionGroupConfig: the request's body) replaces the stored one
        except its attributes, which are signed changes (``+k``: v, ``-k``) applied to the stored ones
        (Java's updateSubscriptionGroupConfig, AttributeUtil.alterCurrentAttributes): the caller need
        not read the group first, which ACL 2.0 would make it need Group [Get] for. A name with
        ``settings`` changes just those fields, ``attributes`` given outright."""
        if self.read_only:
            raise ServiceNotAvailableError("the broker is open read-only; groups cannot change")
        name = group.group_name if isinstance(group, SubscriptionGroupConfig) else group
        bad = validate_group(name)
        if bad:
            raise InvalidParameterError(bad)
        unknown = set(settings) - _FIELD_NAMES
        if unknown:
            raise InvalidParameterError(f"unknown subscription group setting(s): {', '.join(sorted(unknown))}")
        with self._lock:  # the stored attributes read and the new ones written as one change
            current = self.table.groups.get(name)
            if isinstance(group, SubscriptionGroupConfig):
                cfg = replace(group, **settings)
                cfg.attributes = alter_group_attributes(current is None, current.attributes if current else {},
                                                        cfg.attributes)
            else:
                cfg = replace(current or SubscriptionGroupConfig(name), **settings)
            return self._put(cfg)

    def create_or_update_list(self, configs: Sequence[SubscriptionGroupConfig]) -> list[SubscriptionGroupConfig]:
        """UPDATE_AND_CREATE_SUBSCRIPTIONGROUP_LIST: every whole config (as ``create_or_update`` takes one,
        attributes signed changes), or none.

        Why all or nothing: Apache's AdminBrokerProcessor checks every group name before it changes any;
        here every check ``create_or_update`` makes (name, ranges, retry policy, attribute changes) is
        made for every entry first, and subscriptionGroup.json takes them in one write, so a refused
        entry or a failed write changes no group. A name given twice: the later entry, its attribute
        changes applied over the earlier one's. Returns the configs as stored, in the list's order."""
        if self.read_only:
            raise ServiceNotAvailableError("the broker is open read-only; groups cannot change")
        for group in configs:
            bad = validate_group(group.group_name)
            if bad:
                raise InvalidParameterError(bad)
        with self._lock:
            planned: dict[str, SubscriptionGroupConfig] = {}
            stored = []
            for group in configs:
                name = group.group_name
                current = planned.get(name) or self.table.groups.get(name)
                cfg = replace(group)
                cfg.attributes = alter_group_attributes(current is None, current.attributes if current else {},
                                                        cfg.attributes)
                self._check_ranges(cfg)
                planned[name] = cfg
                stored.append(cfg)
            if planned:
                names = ", ".join(planned)
                with config_written(f"none of the subscription groups {names} was created or updated"), \
                        self.table.change():
                    for name, cfg in planned.items():
                        self.table.groups[name] = cfg
                    self.table.data_version.next_version(self.clock())
        return stored

    def _put(self, cfg: SubscriptionGroupConfig) -> SubscriptionGroupConfig:
        """Store ``cfg`` once its values are in the broker's ranges (nothing changes otherwise)."""
        name = cfg.group_name
        self._check_ranges(cfg)
        outcome = f"subscription group {name} was not {'updated' if name in self.table.groups else 'created'}"
        with self._lock, config_written(outcome), self.table.change():
            self.table.groups[name] = cfg
            self.table.data_version.next_version(self.clock())
        return cfg

    @staticmethod
    def _check_ranges(cfg: SubscriptionGroupConfig) -> None:
        """InvalidParameterError naming the first value of ``cfg`` outside the broker's ranges."""
        if not 0 <= cfg.retry_queue_nums <= MAX_TOPIC_QUEUE_NUMS:
            raise InvalidParameterError(f"retryQueueNums must be 0..{MAX_TOPIC_QUEUE_NUMS}, got {cfg.retry_queue_nums}")
        if not -1 <= cfg.retry_max_times <= MAX_RETRY_TIMES:
            raise InvalidParameterError(f"retryMaxTimes must be -1..{MAX_RETRY_TIMES}, got {cfg.retry_max_times}")
        for field_name, lo, hi in (("broker_id", 0, JAVA_LONG_MAX), ("which_broker_when_consume_slowly", 0, JAVA_LONG_MAX),
                                   ("consume_timeout_minute", JAVA_INT_MIN, JAVA_INT_MAX),
                                   ("group_sys_flag", JAVA_INT_MIN, JAVA_INT_MAX)):
            value = getattr(cfg, field_name)
            if not lo <= value <= hi:
                raise InvalidParameterError(f"{field_name} must be {lo}..{hi}, got {value}")
        policy_type = str(cfg.group_retry_policy.get("type", "CUSTOMIZED")).upper()
        if policy_type not in RETRY_POLICY_TYPES:
            raise InvalidParameterError(
                f"groupRetryPolicy.type must be CUSTOMIZED or EXPONENTIAL, got {cfg.group_retry_policy.get('type')!r}")

    def delete(self, group: str) -> bool:
        if self.read_only:
            raise ServiceNotAvailableError("the broker is open read-only; groups cannot change")
        with self._lock:
            if group not in self.table.groups:
                self.table.forbidden_table.pop(group, None)
                return False
            with config_written(f"subscription group {group} was not deleted"), self.table.change():
                del self.table.groups[group]
                self.table.forbidden_table.pop(group, None)
                self.table.data_version.next_version(self.clock())
        return True

    def get_forbidden(self, group: str, topic: str) -> int:
        return max(0, self.table.forbidden_table.get(group, {}).get(topic, 0))
