"""RocketMQ-style configuration files (``key=value`` properties, or YAML) into typed dataclasses.

Why: operators bring their broker.conf; keys keep RocketMQ's camelCase names there, and the
dataclasses hold the same names in snake_case with RocketMQ's defaults.
"""

from __future__ import annotations

import dataclasses
import re
import typing
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")
_CAMEL = re.compile(r"(?<=[a-z0-9])([A-Z])|(?<=[A-Z])([A-Z])(?=[a-z])")


class ConfigError(ValueError):
    """A config file or value that cannot be used (with the key and the reason)."""


def camel_to_snake(name: str) -> str:
    # storePathRootDir -> store_path_root_dir; checkCRCOnRecover -> check_crc_on_recover; brokerIP1 -> broker_ip1
    out = re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1_\2", name)
    out = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", out)
    return out.lower()


def snake_to_camel(name: str, known: dict[str, str] | None = None) -> str:
    if known and name in known:
        return known[name]
    head, *rest = name.split("_")
    return head + "".join(p[:1].upper() + p[1:] for p in rest)


def read_properties_file(path: str | Path) -> dict[str, str]:
    """Parse a Java-style properties file or a YAML mapping into ``{key: str(value)}``."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as e:
        raise ConfigError(f"cannot read config file {path}: {e.strerror}") from e
    if path.suffix in (".yaml", ".yml"):
        import yaml

        try:
            data = yaml.safe_load(text) or {}
        except yaml.YAMLError as e:
            raise ConfigError(f"{path}: invalid YAML: {e}") from e
        if not isinstance(data, dict):
            raise ConfigError(f"{path}: expected a mapping of config keys")
        return {str(k): ("true" if v is True else "false" if v is False else str(v)) for k, v in data.items()}
    result: dict[str, str] = {}
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line[0] in "#!":
            continue
        m = re.match(r"([^=:\s]+)\s*[=:]\s*(.*)$", line)
        if not m:
            raise ConfigError(f"{path}:{lineno}: expected key=value, got {raw!r}")
        result[m.group(1)] = m.group(2).strip()
    return result


def _coerce(key: str, raw: str, typ: Any) -> Any:
    if typ is bool or typ == "bool":
        low = raw.strip().lower()
        if low in ("true", "1", "yes", "on"):
            return True
        if low in ("false", "0", "no", "off"):
            return False
        raise ConfigError(f"{key}: expected true/false, got {raw!r}")
    if typ is int or typ == "int":
        try:
            return int(raw.strip())
        except ValueError as e:
            raise ConfigError(f"{key}: expected an integer, got {raw!r}") from e
    if typ is float or typ == "float":
        try:
            return float(raw.strip())
        except ValueError as e:
            raise ConfigError(f"{key}: expected a number, got {raw!r}") from e
    return raw


def apply_properties(cls: type[T], props: dict[str, str], base: T | None = None) -> T:
    """Build ``cls`` from RocketMQ keys; keys the dataclass does not know are ignored.

    The field types are resolved only once a key names a field: resolving them compiles every
    annotation, and an mqadmin command on a store without a broker.conf has no key to coerce."""
    hints: dict[str, Any] | None = None
    values: dict[str, Any] = {}
    field_names = {f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    for key, raw in props.items():
        name = camel_to_snake(key)
        if name not in field_names:
            continue
        if hints is None:
            hints = typing.get_type_hints(cls)
        values[name] = _coerce(key, raw, hints.get(name, str))
    if base is not None:
        return dataclasses.replace(base, **values)  # type: ignore[type-var]
    return cls(**values)


def to_properties(obj: Any) -> dict[str, str]:
    """The dataclass as RocketMQ ``key -> value`` strings (what getBrokerConfig prints)."""
    out: dict[str, str] = {}
    for f in dataclasses.fields(obj):
        if f.name.startswith("_"):
            continue
        v = getattr(obj, f.name)
        if dataclasses.is_dataclass(v):
            continue
        key = f.metadata.get("key") or snake_to_camel(f.name)
        out[key] = ("true" if v else "false") if isinstance(v, bool) else str(v)
    return out
