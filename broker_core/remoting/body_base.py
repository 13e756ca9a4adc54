"""Typed JSON bodies <-> the fastjson dialect.

Why declarative: the name server and broker exchange a dozen Java beans (route data, cluster info,
heartbeats, stats...). A body here is a kw-only dataclass; wire names are camelCase (or ``wire()``),
``None`` fields are omitted, fields come out sorted by wire name as fastjson writes them, and map
keys may be str, int or another body (MessageQueue-keyed maps use fastjson's object-key form).
Unknown fields are ignored on read, missing ones take their defaults.
"""

from __future__ import annotations

import base64
import dataclasses
import types
import typing
from typing import Any, ClassVar, Self

from . import fastjson
from .errors import RequestDecodeError
from .fastjson import JavaMap, JsonValue
from .header_base import _camel


class BodyError(RequestDecodeError):
    """A body does not have the shape its type expects; the text names the field."""


def wire(name: str, default: object = dataclasses.MISSING, default_factory: Any = dataclasses.MISSING) -> Any:
    return dataclasses.field(default=default, default_factory=default_factory, metadata={"wire": name})


class JsonBody:
    """Base of every typed body; subclasses are ``@dataclass(kw_only=True)``."""

    _body_spec_cache: ClassVar[tuple[tuple[str, str, object], ...]]

    @classmethod
    def _spec(cls) -> tuple[tuple[str, str, object], ...]:
        spec = cls.__dict__.get("_body_spec_cache")
        if spec is None:
            hints = typing.get_type_hints(cls)
            fields = [(f.name, f.metadata.get("wire", _camel(f.name)), hints[f.name])
                      for f in dataclasses.fields(cls)]  # type: ignore[arg-type]
            spec = tuple(sorted(fields, key=lambda t: t[1]))
            type.__setattr__(cls, "_body_spec_cache", spec)
        return spec

    def to_jsonable(self) -> dict[str, JsonValue]:
        out: dict[str, JsonValue] = {}
        for name, key, hint in self._spec():
            value = getattr(self, name)
            if value is not None:
                out[key] = _to_json(value, hint)
        return out

    def to_json(self, *, browser_compatible: bool = False) -> bytes:
        return fastjson.dumps(self.to_jsonable(), browser_compatible=browser_compatible)

    @classmethod
    def from_jsonable(cls, obj: JsonValue, where: str = "") -> Self:
        where = where or cls.__name__
        if not isinstance(obj, dict):
            raise BodyError(f"{where}: expected an object, got {type(obj).__name__}")
        kwargs: dict[str, object] = {}
        for name, key, hint in cls._spec():
            if key in obj and obj[key] is not None:
                kwargs[name] = _from_json(obj[key], hint, f"{where}.{key}")
        try:
            return cls(**kwargs)
        except TypeError as e:
            required = _required(cls)  # only on failure: a decode that succeeds pays nothing for it
            missing = [key for name, key, _ in cls._spec() if name not in kwargs and name in required]
            if missing:  # named by their wire names: the sender knows consumerGroup, not consumer_group
                raise BodyError(f"{where}: missing field {', '.join(missing)}") from None
            raise BodyError(f"{where}: {e}") from None

    @classmethod
    def from_json(cls, data: bytes | str) -> Self:
        try:
            return cls.from_jsonable(fastjson.loads(data))
        except fastjson.JsonDialectError as e:
            raise BodyError(f"{cls.__name__}: {e}") from None


def _required(cls: type) -> frozenset[str]:
    """The fields of a body class that have no default: a body without them cannot be built."""
    return frozenset(f.name for f in dataclasses.fields(cls)  # type: ignore[arg-type]
                     if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING)


def _strip_optional(hint: object) -> object:
    if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union:
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        if len(args) == 1:
            return args[0]
    return hint


def _to_json(value: object, hint: object) -> JsonValue:
    hint = _strip_optional(hint)
    if isinstance(value, JsonBody):
        return value.to_jsonable()
    if isinstance(value, bytes):
        return base64.b64encode(value).decode("ascii")
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if isinstance(value, dict):
        kh, vh = args if len(args) == 2 else (object, object)
        pairs = [(_to_json(k, kh), _to_json(v, vh)) for k, v in value.items()]
        if any(isinstance(k, dict) for k, _ in pairs):
            return JavaMap(pairs)
        return dict(pairs) if all(isinstance(k, str) for k, _ in pairs) else JavaMap(pairs)
    if isinstance(value, (list, tuple, set, frozenset)):
        eh = args[0] if args and origin is not tuple else object
        items = sorted(value, key=_sort_any) if isinstance(value, (set, frozenset)) else value
        return [_to_json(v, eh) for v in items]
    return value  # type: ignore[return-value]


def _sort_any(v: object) -> tuple[object, ...]:
    if isinstance(v, JsonBody):
        return tuple(str(getattr(v, n)) for n, _, _ in v._spec())
    return (str(v),)


def _from_json(raw: JsonValue, hint: object, where: str) -> object:
    hint = _strip_optional(hint)
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if isinstance(hint, type) and issubclass(hint, JsonBody):
        return hint.from_jsonable(raw, where)
    if origin in (list, set, frozenset, tuple):
        if not isinstance(raw, list):
            raise BodyError(f"{where}: expected an array, got {type(raw).__name__}")
        items = [_from_json(v, args[0] if args else object, f"{where}[{i}]") for i, v in enumerate(raw)]
        return set(items) if origin in (set, frozenset) else items
    if origin is dict:
        kh, vh = args if args else (object, object)
        if isinstance(raw, JavaMap):
            pairs = list(raw)
        elif isinstance(raw, dict):
            pairs = list(raw.items())
        else:
            raise BodyError(f"{where}: expected an object, got {type(raw).__name__}")
        return {_from_json(k, kh, f"{where}<key>"): _from_json(v, vh, f"{where}[{k!r}]") for k, v in pairs}
    if hint is bytes:
        if not isinstance(raw, str):
            raise BodyError(f"{where}: expected a base64 string")
        try:
            return base64.b64decode(raw)
        except ValueError:
            raise BodyError(f"{where}: not base64") from None
    if hint is bool:
        if isinstance(raw, str):
            return raw.lower() == "true"
        return bool(raw)
    if hint is int:
        if isinstance(raw, bool) or not isinstance(raw, (int, str, float)):
            raise BodyError(f"{where}: expected an integer, got {raw!r}")
        try:
            return int(raw)
        except (ValueError, OverflowError):  # "x", or a float such as 1e999 (inf) or NaN
            raise BodyError(f"{where}: expected an integer, got {raw!r}") from None
    if hint is float:
        if isinstance(raw, bool) or not isinstance(raw, (int, float, str)):
            raise BodyError(f"{where}: expected a number, got {raw!r}")
        try:
            return float(raw)
        except (ValueError, OverflowError):  # a string that is no number, or an int beyond a double
            raise BodyError(f"{where}: expected a number, got {raw!r}") from None
    if hint is str:
        if isinstance(raw, (dict, list)):
            raise BodyError(f"{where}: expected a string, got {type(raw).__name__}")
        return raw if isinstance(raw, str) else fastjson.dumps(raw).decode() if raw is not None else None
    return raw
