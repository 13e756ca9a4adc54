"""Typed command headers <-> extFields (spec A.3 "extFields rules").

Why a declarative base: RocketMQ has dozens of header classes whose fields travel as a flat string
map. A header here is a kw-only dataclass; each field's wire name is its camelCase name unless the
field says otherwise (``wire("a")`` for SEND_MESSAGE_V2's one-letter names), a field without a
default is required (Java's @CFNotNull: missing -> "the custom field <x> is null"), and ``None``
means "not set" (boxed Java fields), so it is not sent. Values are str, int or bool.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from typing import Any, ClassVar, Self

_TRUE = {"true": True, "false": False}


class HeaderError(ValueError):
    """A request header is missing a required field or carries a value of the wrong type."""


def wire(name: str, default: object = dataclasses.MISSING) -> Any:
    """A field whose extFields key is ``name`` (not its camelCase Python name)."""
    return dataclasses.field(default=default, metadata={"wire": name})


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(p[:1].upper() + p[1:] for p in rest)


def _base_type(hint: object) -> type:
    if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union:
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        return args[0]
    assert isinstance(hint, type)
    return hint


class CommandHeader:
    """Base of every typed header; subclasses are ``@dataclass(kw_only=True, slots=True)``."""

    _spec: ClassVar[tuple[tuple[str, str, type, bool], ...]]

    @classmethod
    def _fields(cls) -> tuple[tuple[str, str, type, bool], ...]:
        spec = cls.__dict__.get("_spec_cache")
        if spec is None:
            hints = typing.get_type_hints(cls)
            spec = tuple((f.name, f.metadata.get("wire", _camel(f.name)), _base_type(hints[f.name]),
                          f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING)
                         for f in dataclasses.fields(cls))  # type: ignore[arg-type]
            type.__setattr__(cls, "_spec_cache", spec)
        return spec

    def to_ext_fields(self) -> dict[str, str]:
        out: dict[str, str] = {}
        for name, key, typ, _required in self._fields():
            value = getattr(self, name)
            if value is None:
                continue
            if typ is bool:
                out[key] = "true" if value else "false"
            else:
                out[key] = str(value)
        return out

    @classmethod
    def from_ext_fields(cls, ext: typing.Mapping[str, str]) -> Self:
        kwargs: dict[str, object] = {}
        for name, key, typ, required in cls._fields():
            raw = ext.get(key)
            if raw is None:
                if required:
                    raise HeaderError(f"the custom field <{key}> is null")
                continue
            if typ is bool:
                kwargs[name] = _TRUE.get(raw.strip().lower(), False)  # Boolean.parseBoolean
            elif typ is int:
                try:
                    kwargs[name] = int(raw.strip())
                except ValueError:
                    raise HeaderError(f"the custom field <{key}> is not a number: {raw!r}") from None
            else:
                kwargs[name] = raw
        return cls(**kwargs)
