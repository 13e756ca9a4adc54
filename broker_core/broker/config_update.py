"""updateBrokerConfig: change broker config keys on a live Broker and persist them to its config file.

Why a module: RocketMQ's UPDATE_BROKER_CONFIG sets the given keys on the running broker's config
objects (BrokerConfig, MessageStoreConfig, AuthConfig: by name, as ``MixAll.properties2Object``) and
writes them to the file the broker was started with, so the change survives a restart. Unknown keys
and values that do not parse are refused before anything changes; the file is rewritten atomically
(temp file, fsync, rename; the old one kept as ``.bak``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from pathlib import Path

from broker_core.config_loader import ConfigError, read_properties_file
from broker_core.store.config_file import atomic_write_bytes

from .broker_config import BrokerConfig
from .errors import InvalidParameterError


def updated_config(current: BrokerConfig, changes: Mapping[str, str], store_root: Path) -> BrokerConfig:
    """The config ``current`` would become; raises InvalidParameterError for an unknown key or bad value."""
    known = current.to_properties()
    unknown = sorted(k for k in changes if k not in known)
    if unknown:
        raise InvalidParameterError(f"unknown broker config key(s): {', '.join(unknown)}")
    merged = {**current.properties, **{k: str(v) for k, v in changes.items()}}
    try:
        return BrokerConfig.from_properties(merged, store_root)
    except (ConfigError, ValueError) as e:
        raise InvalidParameterError(f"invalid broker config: {e}") from None


def apply_in_place(target: BrokerConfig, new: BrokerConfig) -> None:
    """Copy ``new``'s values onto the live objects (services keep their references to them)."""
    for f in dataclasses.fields(BrokerConfig):
        if f.name in ("store", "auth"):
            sub_target, sub_new = getattr(target, f.name), getattr(new, f.name)
            for sf in dataclasses.fields(sub_new):
                setattr(sub_target, sf.name, getattr(sub_new, sf.name))
        else:
            setattr(target, f.name, getattr(new, f.name))


def persist_changes(path: Path, changes: Mapping[str, str]) -> None:
    """Write ``changes`` into the config file at ``path`` (properties, or YAML for .yml/.yaml)."""
    props = read_properties_file(path) if path.exists() else {}
    props.update({k: str(v) for k, v in changes.items()})
    if path.suffix in (".yaml", ".yml"):
        import yaml

        text = yaml.safe_dump(props, sort_keys=True)
    else:
        text = "".join(f"{k}={v}\n" for k, v in sorted(props.items()))
    atomic_write_bytes(path, text.encode("utf-8"))
