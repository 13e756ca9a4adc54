"""The Java (fastjson 1.x) JSON dialect of remoting bodies (spec A.6).

Why our own reader and writer: fastjson writes maps with non-string keys *unquoted*
(``{0:"10.0.0.1:10911"}``) and MessageQueue-keyed maps with a whole object as the key
(``{{"brokerName":"b","queueId":0,"topic":"T"}:{...}}``). Neither is JSON, so ``json.loads`` fails on
them. ``loads`` takes the fast standard path when it can and falls back to a small recursive-descent
reader that accepts any JSON value as an object key; an object with a non-string key comes back as a
``JavaMap`` (a list of (key, value) pairs). ``dumps`` writes keys sorted, integer keys unquoted
unless ``browser_compatible`` (what the name server uses for route data, A.6.3), object keys in the
object form.
"""

from __future__ import annotations

import base64
import json
import math
from collections.abc import Callable
from typing import Any

from .errors import RequestDecodeError

JsonValue = Any  # the recursive JSON value: None | bool | int | float | str | list | dict | JavaMap


class JavaMap(list[tuple[JsonValue, JsonValue]]):
    """An object whose keys are not all strings, as (key, value) pairs in document order."""


class JsonDialectError(RequestDecodeError):
    """The body is not JSON in the fastjson dialect; the text names the byte offset."""


MAX_DEPTH = 200
"""Deepest nesting the fallback reader follows (no RocketMQ body nests more than a few levels)."""
_WS = " \t\n\r"
_CONST = {"true": True, "false": False, "null": None}


class _Reader:
    def __init__(self, text: str) -> None:
        self.s = text
        self.i = 0
        self._std = json.JSONDecoder()

    def fail(self, what: str) -> JsonDialectError:
        return JsonDialectError(f"body JSON: {what} at offset {self.i}")

    def ws(self) -> None:
        s, i, n = self.s, self.i, len(self.s)
        while i < n and s[i] in _WS:
            i += 1
        self.i = i

    def value(self, depth: int = 0) -> JsonValue:
        if depth > MAX_DEPTH:
            raise self.fail(f"nesting deeper than {MAX_DEPTH}")
        self.ws()
        if self.i >= len(self.s):
            raise self.fail("unexpected end")
        c = self.s[self.i]
        if c == "{":
            return self.obj(depth)
        if c == "[":
            return self.arr(depth)
        if c == '"' or c in "-0123456789":
            try:
                v, end = self._std.raw_decode(self.s, self.i)
            except ValueError:
                raise self.fail("bad string or number") from None
            self.i = end
            return v
        for word, v in _CONST.items():
            if self.s.startswith(word, self.i):
                self.i += len(word)
                return v
        if c == "'":
            end = self.s.find("'", self.i + 1)
            if end < 0:
                raise self.fail("unterminated single-quoted string")
            v = self.s[self.i + 1:end]
            self.i = end + 1
            return v
        # fastjson also accepts bare identifiers as keys
        j = self.i
        while j < len(self.s) and (self.s[j].isalnum() or self.s[j] in "_$%"):
            j += 1
        if j == self.i:
            raise self.fail(f"unexpected character {c!r}")
        v = self.s[self.i:j]
        self.i = j
        return v

    def obj(self, depth: int) -> dict[str, JsonValue] | JavaMap:
        self.i += 1
        pairs: list[tuple[JsonValue, JsonValue]] = []
        self.ws()
        if self.s.startswith("}", self.i):
            self.i += 1
            return {}
        while True:
            key = self.value(depth + 1)
            self.ws()
            if not self.s.startswith(":", self.i):
                raise self.fail("expected ':'")
            self.i += 1
            pairs.append((key, self.value(depth + 1)))
            self.ws()
            if self.s.startswith(",", self.i):
                self.i += 1
                continue
            if self.s.startswith("}", self.i):
                self.i += 1
                break
            raise self.fail("expected ',' or '}'")
        if all(isinstance(k, str) for k, _ in pairs):
            return dict(pairs)
        return JavaMap(pairs)

    def arr(self, depth: int) -> list[JsonValue]:
        self.i += 1
        out: list[JsonValue] = []
        self.ws()
        if self.s.startswith("]", self.i):
            self.i += 1
            return out
        while True:
            out.append(self.value(depth + 1))
            self.ws()
            if self.s.startswith(",", self.i):
                self.i += 1
                continue
            if self.s.startswith("]", self.i):
                self.i += 1
                return out
            raise self.fail("expected ',' or ']'")


def loads(data: bytes | str) -> JsonValue:
    try:
        text = data.decode("utf-8") if isinstance(data, (bytes, bytearray, memoryview)) else data
    except UnicodeDecodeError as e:
        raise JsonDialectError(f"body JSON: invalid UTF-8 at offset {e.start}") from None
    try:
        return json.loads(text)
    except ValueError:
        pass
    except RecursionError:  # "[[[[..." thousands deep: the C scanner recurses per level
        raise JsonDialectError(f"body JSON: nesting deeper than {MAX_DEPTH}") from None
    reader = _Reader(text)
    value = reader.value()
    reader.ws()
    if reader.i != len(text):
        raise reader.fail("trailing characters")
    return value


def _str(s: str, ascii_only: bool) -> str:
    return json.dumps(s, ensure_ascii=ascii_only)


def dumps(value: JsonValue, *, browser_compatible: bool = False,
          default: Callable[[object], JsonValue] | None = None) -> bytes:
    """Serialize ``value``; ``default`` turns non-JSON objects (typed bodies) into JSON values."""
    out: list[str] = []
    _write(value, out, browser_compatible, default)
    return "".join(out).encode("utf-8")


def _write(v: JsonValue, out: list[str], browser: bool, default: Callable[[object], JsonValue] | None) -> None:
    if v is None:
        out.append("null")
    elif v is True:
        out.append("true")
    elif v is False:
        out.append("false")
    elif isinstance(v, str):
        out.append(_str(v, browser))
    elif isinstance(v, int):
        out.append(str(int(v)))
    elif isinstance(v, float):
        out.append(repr(v) if math.isfinite(v) else "null")
    elif isinstance(v, (bytes, bytearray)):
        out.append('"' + base64.b64encode(bytes(v)).decode("ascii") + '"')
    elif isinstance(v, JavaMap):
        _write_pairs(list(v), out, browser, default)
    elif isinstance(v, dict):
        _write_pairs(list(v.items()), out, browser, default)
    elif isinstance(v, (list, tuple, set, frozenset)):
        items = sorted(v) if isinstance(v, (set, frozenset)) else v
        out.append("[")
        for n, item in enumerate(items):
            if n:
                out.append(",")
            _write(item, out, browser, default)
        out.append("]")
    elif default is not None:
        _write(default(v), out, browser, default)
    else:
        raise TypeError(f"cannot write {type(v).__name__} as fastjson")


def _sort_key(k: JsonValue) -> tuple[int, str]:
    return (0, k) if isinstance(k, str) else (1, json.dumps(k, sort_keys=True, default=str))


def _write_pairs(pairs: list[tuple[JsonValue, JsonValue]], out: list[str], browser: bool,
                 default: Callable[[object], JsonValue] | None) -> None:
    out.append("{")
    for n, (k, val) in enumerate(sorted(pairs, key=lambda p: _sort_key(p[0]) if not _is_obj(p[0]) else (2, ""))):
        if n:
            out.append(",")
        if isinstance(k, str):
            out.append(_str(k, browser))
        elif isinstance(k, (int, float)) and not isinstance(k, bool):
            out.append(_str(str(k), browser) if browser else str(k))
        else:
            _write(k, out, browser, default)
        out.append(":")
        _write(val, out, browser, default)
    out.append("}")


def _is_obj(k: JsonValue) -> bool:
    return not isinstance(k, (str, int, float))
