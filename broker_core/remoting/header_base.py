"""Typed command headers <-> extFields (spec A.3 "extFields rules").

Why a declarative base: RocketMQ has dozens of header classes whose fields travel as a flat string
map. A header here is a kw-only dataclass; each field's wire name is its camelCase name unless the
field says otherwise (``wire("a")`` for SEND_MESSAGE_V2's one-letter names), a field without a
default is required (Java's @CFNotNull: missing -> "the custom field <x> is null"), and ``None``
means "not set" (boxed Java fields), so it is not sent. Values are str, int or bool.

Numbers are parsed as Java parses them (``Integer.parseInt`` / ``Long.parseLong``), by the field's
Java type: ``int`` is a Java ``int``, ``Long`` a Java ``long``. Python's ``int()`` alone would take
"1_0", " 7 " and values past 64 bits, which a Java broker refuses; such a value stored (an offset in
consumerOffset.json, a queue id) would later break the Java tools that read it.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from typing import Annotated, Any, ClassVar, Self

from broker_core.common.java_numbers import JAVA_INT, JAVA_INTEGER_SYNTAX, JAVA_LONG, JavaInteger

from .errors import RequestDecodeError

Long = Annotated[int, JAVA_LONG]
"""A header field that is a Java ``long`` (a plain ``int`` field is a Java ``int``)."""


class HeaderError(RequestDecodeError):
    """A request header is missing a required field or carries a value of the wrong type."""


def wire(name: str, default: object = dataclasses.MISSING) -> Any:
    """A field whose extFields key is ``name`` (not its camelCase Python name)."""
    return dataclasses.field(default=default, metadata={"wire": name})


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(p[:1].upper() + p[1:] for p in rest)


def _base_type(hint: object) -> type | JavaInteger:
    """str, bool, or the JavaInteger of an int field (``X | None`` and ``Annotated`` unwrapped)."""
    if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union:
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        hint = args[0]
    if typing.get_origin(hint) is Annotated:
        java = [m for m in getattr(hint, "__metadata__", ()) if isinstance(m, JavaInteger)]
        assert java, f"an Annotated header field needs a JavaInteger: {hint}"
        return java[0]
    if hint is int:
        return JAVA_INT
    assert isinstance(hint, type)
    return hint


def parse_java_integer(raw: str, java: JavaInteger, key: str) -> int:
    """``raw`` as Integer.parseInt / Long.parseLong would read it, else HeaderError naming ``key``."""
    if raw.isascii() and raw.isdigit() and len(raw) <= 20:  # the usual "123": no regex on the hot path
        value = int(raw)
    elif JAVA_INTEGER_SYNTAX.fullmatch(raw) is None:
        raise HeaderError(f"the custom field <{key}> is not a Java {java.name}: {_shown(raw)}")
    else:
        try:
            value = int(raw)
        except ValueError:  # past Python's int-from-str digit limit: far beyond any Java long anyway
            value = java.max + 1
    if not java.min <= value <= java.max:
        raise HeaderError(f"the custom field <{key}> is out of the Java {java.name} range: {_shown(raw)}")
    return value


def _shown(raw: str) -> str:
    """The value as quoted in an error: cut short, so the remark stays one short line."""
    return repr(raw if len(raw) <= 40 else raw[:40] + "...")


class CommandHeader:
    """Base of every typed header; subclasses are ``@dataclass(kw_only=True, slots=True)``."""

    _spec: ClassVar[tuple[tuple[str, str, type | JavaInteger, bool], ...]]

    @classmethod
    def _fields(cls) -> tuple[tuple[str, str, type | JavaInteger, bool], ...]:
        spec = cls.__dict__.get("_spec_cache")
        if spec is None:
            hints = typing.get_type_hints(cls, include_extras=True)
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
                kwargs[name] = raw.lower() == "true"  # Boolean.parseBoolean: anything else is false
            elif isinstance(typ, JavaInteger):
                kwargs[name] = parse_java_integer(raw, typ, key)
            else:
                kwargs[name] = raw
        return cls(**kwargs)
