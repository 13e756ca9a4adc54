"""updateBrokerConfig: change broker config keys on a live Broker and persist them to its config file.

Why a module: RocketMQ's UPDATE_BROKER_CONFIG sets the given keys on the running broker's config
objects (BrokerConfig, MessageStoreConfig, AuthConfig: by name, as ``MixAll.properties2Object``) and
writes them to the file the broker was started with, so the change survives a restart. Values that do
not parse are refused before anything changes; the file is rewritten atomically (temp file, fsync,
rename; the old one kept as ``.bak``), keeping its other lines.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Mapping
from pathlib import Path

from broker_core.auth.config import AUTH_CONFIG_KEYS
from broker_core.config_loader import ConfigError, read_properties_file, snake_to_camel
from broker_core.store.config_file import atomic_write_bytes

from .broker_config import BrokerConfig
from .errors import InvalidParameterError

# Keys an update may never change (BrokerController's configBlackList default).
BLACK_LIST = frozenset({"brokerConfigPath", "rocketmqHome", "configBlackList"})
# ACL 2.0's keys (AuthConfig, but brokerClusterName): only ever written to the config file, read at start.
AUTH_KEYS = frozenset(k for k in AUTH_CONFIG_KEYS if k != "brokerClusterName")


def updated_config(current: BrokerConfig, changes: Mapping[str, str], store_root: Path) -> BrokerConfig:
    """The config ``current`` would become; raises InvalidParameterError for a value that does not parse."""
    merged = {**current.properties, **{k: str(v) for k, v in changes.items()}}
    try:
        return BrokerConfig.from_properties(merged, store_root)
    except (ConfigError, ValueError) as e:
        raise InvalidParameterError(f"invalid broker config: {e}") from None


def apply_in_place(target: BrokerConfig, new: BrokerConfig, keys: Iterable[str]) -> None:
    """Set only ``keys`` on the live objects, from ``new`` (services keep their references to them);
    everything else stays as the running broker has it (ports chosen at start, the store root, ...).
    AuthConfig is not among them: ACL keys take effect at the next start (see AUTH_KEYS)."""
    wanted = set(keys)
    for part in (None, "store"):
        live = target if part is None else getattr(target, part)
        fresh = new if part is None else getattr(new, part)
        fields = {f.metadata.get("key") or snake_to_camel(f.name): f.name for f in dataclasses.fields(live)
                  if not f.name.startswith("_") and not dataclasses.is_dataclass(getattr(live, f.name))}
        hits = {fields[k]: getattr(fresh, fields[k]) for k in wanted & fields.keys()}
        if not hits:
            continue
        for name, value in hits.items():
            setattr(live, name, value)
    target.properties.update({k: v for k, v in new.properties.items() if k in wanted})


def persist_changes(path: Path, changes: Mapping[str, str]) -> None:
    """Write ``changes`` into the config file at ``path``: a properties file keeps its other lines and
    comments (a changed key is rewritten where it stands, a new one appended); YAML is re-dumped."""
    values = {k: str(v) for k, v in changes.items()}
    if path.suffix in (".yaml", ".yml"):
        import yaml

        props = read_properties_file(path) if path.exists() else {}
        props.update(values)
        text = yaml.safe_dump(props, sort_keys=True)
    else:
        lines = path.read_text(encoding="utf-8").splitlines() if path.exists() else []
        pending = dict(values)
        for i, raw in enumerate(lines):
            m = re.match(r"\s*([^=:\s#!]+)\s*[=:]", raw)
            if m and m.group(1) in pending:
                lines[i] = f"{m.group(1)}={pending.pop(m.group(1))}"
        lines.extend(f"{k}={v}" for k, v in pending.items())
        text = "\n".join(lines) + "\n"
    atomic_write_bytes(path, text.encode("utf-8"))
