"""RocketMQ-style configuration files (``key=value`` properties, or YAML) into typed dataclasses.

Why: operators bring their broker.conf; keys keep RocketMQ's camelCase names there, and the
dataclasses hold the same names in snake_case with RocketMQ's defaults.
"""

from __future__ import annotations

import dataclasses
import functools
import re
import typing
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any, TypeVar

from broker_core.common.java_numbers import JAVA_INT, JAVA_INTEGER_SYNTAX, JAVA_LONG, JavaInteger
from broker_core.common.java_text import java_trim

T = TypeVar("T")
_CAMEL = re.compile(r"(?<=[a-z0-9])([A-Z])|(?<=[A-Z])([A-Z])(?=[a-z])")


class ConfigError(ValueError):
    """A config file or value that cannot be used (with the key and the reason)."""


JavaLong = Annotated[int, JAVA_LONG]
"""A config key that is a Java ``long``; a plain ``int`` field is a Java ``int`` (as header_base's ``Long``).

Why: RocketMQ's config beans hold ints and longs, and a value past the key's type is one Java's
Integer.parseInt/Long.parseLong refuses. Taken here, 10^22 reached struct.pack (every send failed) and
time.sleep (the flush thread died)."""


def java_integer(hint: Any) -> JavaInteger | None:
    """The Java integral type a config field's type hint stands for (None: not an integer field).

    The one place a key's range comes from: ``int`` is a Java ``int``, ``JavaLong`` a Java ``long``."""
    if typing.get_origin(hint) is Annotated:
        return next((m for m in hint.__metadata__ if isinstance(m, JavaInteger)), None)
    return JAVA_INT if hint is int or hint == "int" else None


@functools.cache
def java_integer_fields(cls: type) -> dict[str, JavaInteger]:
    """The integer fields of the dataclass ``cls`` and their Java types (resolved once per class)."""
    hints = typing.get_type_hints(cls, include_extras=True)
    out = {}
    for f in dataclasses.fields(cls):  # type: ignore[arg-type]
        java = java_integer(hints.get(f.name))
        if java is not None:
            out[f.name] = java
    return out


def check_java_range(key: str, value: int, java: JavaInteger, lo: int | None = None, hi: int | None = None,
                     shown: str | None = None) -> None:
    """ConfigError naming ``key`` and its range unless ``value`` is in [lo, hi] within the Java type's
    range (``lo``/``hi``: a key's own tighter bounds, else the type's; ``shown``: the value as written)."""
    low = java.min if lo is None else max(lo, java.min)
    high = java.max if hi is None else min(hi, java.max)
    if not low <= value <= high:
        raise ConfigError(f"{key}={_shown(str(value) if shown is None else shown)}: must be an integer in "
                          f"[{low}, {high}]")


def _shown(raw: str) -> str:
    """A value as quoted in an error: cut short, so the message stays one short line."""
    return raw if len(raw) <= 40 else raw[:40] + "..."


@contextmanager
def values_of(config_file: str | Path | None) -> Iterator[None]:
    """Read settings out of ``config_file``: a ConfigError raised inside names the file as well.

    Why: a bad value's message names its key ("mappedFileSizeCommitLog: expected an integer"), and
    the operator also needs to know which file holds it; errors that name the file already (reading
    it) are left as they are.
    """
    try:
        yield
    except ConfigError as e:
        if not config_file or str(config_file) in str(e):
            raise
        raise ConfigError(f"config file {config_file}: {e}") from None


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


def decode_config_bytes(data: bytes) -> tuple[str, str]:
    """A properties file's text and the encoding it was read with (to write it back the same way).

    Java's ``Properties.load(InputStream)`` reads ISO-8859-1, so a Java broker sees the UTF-8 bytes of
    "é" as two Latin-1 characters. Operators of this tool write their broker.conf in UTF-8 editors and
    expect its values back as written, so: the bytes as UTF-8 when they are valid UTF-8 (a leading BOM
    dropped), else as ISO-8859-1 as Java reads them (every byte is a character there: a Latin-1 byte
    in a comment or value never fails the load). Pure ASCII, the usual case, reads the same either way.
    """
    if data.startswith(b"\xef\xbb\xbf"):
        try:
            return data.decode("utf-8-sig"), "utf-8-sig"
        except UnicodeDecodeError:
            pass
    else:
        try:
            return data.decode("utf-8"), "utf-8"
        except UnicodeDecodeError:
            pass
    return data.decode("iso-8859-1"), "iso-8859-1"


_LINE_BREAK = re.compile(r"\r\n|\r|\n")  # Java's line terminators only (str.splitlines also splits at \f, \v, ...)
_JAVA_WS = " \t\f"  # Properties' whitespace: around keys and separators, and leading on each line
_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}
_HEX = frozenset("0123456789abcdefABCDEF")


@dataclasses.dataclass(frozen=True, slots=True)
class PropertyLine:
    """One logical line of a properties file: its key and value (unescaped), and the physical lines
    ``[start, end)`` it spans (0-based; more than one with backslash continuations)."""

    key: str
    value: str
    start: int
    end: int


def split_physical_lines(text: str) -> list[str]:
    """The file's lines as Java's LineReader sees them (``\\n``, ``\\r\\n`` or ``\\r`` end one)."""
    return _LINE_BREAK.split(text)


def _continues(line: str) -> bool:
    """An odd number of trailing backslashes: the last one joins the next line (an even number is
    escaped backslashes)."""
    count = len(line) - len(line.rstrip("\\"))
    return count % 2 == 1


def parse_properties(text: str, source: str = "<properties>") -> list[PropertyLine]:
    """``java.util.Properties.load``'s syntax, every entry in file order (a later duplicate wins on load).

    - Blank lines and lines whose first non-blank character is ``#`` or ``!`` are skipped (a comment
      never continues onto the next line).
    - A line ending in an odd number of backslashes continues on the next one, whose leading
      whitespace (space, tab, form feed) is dropped.
    - The key ends at the first unescaped ``=``, ``:`` or whitespace; whitespace, then at most one
      ``=``/``:``, then whitespace separate it from the value. No separator: the value is empty.
    - In keys and values ``\\uXXXX`` is that character, ``\\t \\n \\r \\f`` the control characters, and
      ``\\x`` is ``x`` for any other character (so ``\\=``, ``\\:``, ``\\ `` and ``\\\\``).

    A malformed ``\\uXXXX`` raises ConfigError naming ``source`` and the line.
    """
    lines = split_physical_lines(text)
    out: list[PropertyLine] = []
    i = 0
    while i < len(lines):
        start = i
        logical = lines[i].lstrip(_JAVA_WS)
        i += 1
        if not logical or logical[0] in "#!":
            continue
        while _continues(logical):
            logical = logical[:-1]
            if i >= len(lines):
                break
            logical += lines[i].lstrip(_JAVA_WS)
            i += 1
        where = f"{source}:{start + 1}"
        key, value = _split_key_value(logical)
        out.append(PropertyLine(_unescape(key, where), _unescape(value, where), start, i))
    return out


def _split_key_value(line: str) -> tuple[str, str]:
    """The raw (still escaped) key and value of one logical line, as Properties.load0 splits it."""
    n = len(line)
    key_len = value_start = n
    has_sep = backslash = False
    for k, c in enumerate(line):
        if not backslash and c in "=:":
            key_len, value_start, has_sep = k, k + 1, True
            break
        if not backslash and c in _JAVA_WS:
            key_len, value_start = k, k + 1
            break
        backslash = c == "\\" and not backslash
    while value_start < n:
        c = line[value_start]
        if c not in _JAVA_WS:
            if has_sep or c not in "=:":
                break
            has_sep = True
        value_start += 1
    return line[:key_len], line[value_start:]


def _unescape(raw: str, where: str) -> str:
    if "\\" not in raw:
        return raw
    out: list[str] = []
    i, n = 0, len(raw)
    while i < n:
        c = raw[i]
        i += 1
        if c != "\\":
            out.append(c)
            continue
        if i >= n:  # a lone backslash at the very end of the file: Java drops it
            break
        c = raw[i]
        i += 1
        if c == "u":
            digits = raw[i:i + 4]
            if len(digits) < 4 or not _HEX.issuperset(digits):
                raise ConfigError(f"{where}: malformed \\uxxxx escape: \\u{digits}")
            out.append(chr(int(digits, 16)))
            i += 4
        else:
            out.append(_ESCAPES.get(c, c))
    text = "".join(out)
    if any("\ud800" <= ch <= "\udfff" for ch in text):  # \\uD83D\\uDE00: one character, as in Java's UTF-16
        text = text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")
    return text


def format_property(key: str, value: str, encoding: str = "utf-8") -> str:
    """One ``key=value`` line that ``parse_properties`` reads back as ``key`` and ``value`` (Java's
    Properties.store escaping, where it matters); a character ``encoding`` cannot hold becomes ``\\uXXXX``."""

    def escape(text: str, is_key: bool) -> str:
        out: list[str] = []
        for pos, ch in enumerate(text):
            if ch == "\\":
                out.append("\\\\")
            elif ch in "\t\n\r\f":
                out.append("\\" + {"\t": "t", "\n": "n", "\r": "r", "\f": "f"}[ch])
            elif (ch == " " and (is_key or pos == 0)) or (is_key and ch in "=:") or (pos == 0 and ch in "#!"):
                out.append("\\" + ch)
            else:
                try:
                    ch.encode(encoding)
                    out.append(ch)
                except UnicodeEncodeError:
                    units = ch.encode("utf-16-be", "surrogatepass")
                    out.extend(f"\\u{int.from_bytes(units[j:j + 2], 'big'):04X}" for j in range(0, len(units), 2))
        return "".join(out)

    return f"{escape(key, True)}={escape(value, False)}"


def read_properties_file(path: str | Path) -> dict[str, str]:
    """Parse a Java-style properties file or a YAML mapping into ``{key: str(value)}``.

    Properties files follow ``java.util.Properties.load`` (see ``parse_properties``; the last of
    duplicate keys wins), read as UTF-8 when the bytes are valid UTF-8, else as ISO-8859-1 as Java
    reads them (``decode_config_bytes``). Values are trimmed as ``MixAll.properties2Object`` trims a
    String value. In YAML a key with no value (null) is left out: the setting keeps its default.
    """
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as e:
        raise ConfigError(f"cannot read config file {path}: {e.strerror or e}") from e
    if path.suffix in (".yaml", ".yml"):
        import yaml

        try:
            text = data.decode("utf-8-sig")
        except UnicodeDecodeError as e:
            raise ConfigError(f"{path}: not UTF-8 text (byte {e.start}); YAML files must be UTF-8") from None
        try:
            loaded = yaml.safe_load(text)
        except yaml.YAMLError as e:
            raise ConfigError(f"{path}: invalid YAML: {' '.join(str(e).split())}") from None
        data_map = {} if loaded is None else loaded
        if not isinstance(data_map, dict):
            raise ConfigError(f"{path}: expected a mapping of config keys")
        for k, v in data_map.items():
            _check_yaml_scalar(path, k, v)
        return {str(k): yaml_config_value(v) for k, v in data_map.items() if v is not None}
    text, _ = decode_config_bytes(data)
    return {p.key: _trimmed(p.value) for p in parse_properties(text, str(path))}


def _trimmed(value: str) -> str:
    """A properties value trimmed, except "true "/"false\t": Boolean.parseBoolean gets those untrimmed
    (Properties.load keeps trailing whitespace) and reads them false, so the boolean keys are handed
    the whitespace to refuse (``boolean_refusal``); a String key trims it in ``_coerce``, as Apache."""
    trimmed = java_trim(value)
    return value if trimmed != value and trimmed.lower() in ("true", "false") else trimmed


def yaml_config_value(value: object) -> str:
    """The config value a YAML scalar stands for: booleans as ``true``/``false``, numbers and strings as
    their text, trimmed as a properties value. Why one function: updateBrokerConfig writes a YAML line
    only in a form this reads back as the value it was given."""
    return "true" if value is True else "false" if value is False else java_trim(str(value))


def _check_yaml_scalar(path: Path, key: object, value: object) -> None:
    """ConfigError naming the file and key unless ``value`` is one value. Why: every broker key is a single
    string, number or boolean (as in a properties file); a list or mapping became its Python text
    ("brokerName: [1, 2]" named the broker "[1, 2]")."""
    if isinstance(value, (list, tuple, dict, set, bytes)):
        kind = "mapping" if isinstance(value, dict) else "binary value" if isinstance(value, bytes) else "list"
        raise ConfigError(f"{path}: {key}: expected a single value (string, number or true/false), got a {kind}")


def boolean_refusal(key: str, raw: str) -> str:
    """Why ``raw`` is no value for the boolean ``key``: the whitespace around a true/false is named as the
    problem, since Java's Boolean.parseBoolean (after Properties.load, which keeps trailing whitespace)
    reads "true " as false while the file looks right."""
    if raw != raw.strip() and raw.strip().lower() in ("true", "false"):
        return (f"{key}: {raw!r} has whitespace around {raw.strip()!r}; remove it (Apache's broker would "
                f"read it as false)")
    return f"{key}: expected true or false, got {raw!r}"


def _coerce(key: str, raw: str, typ: Any, lo: int | None = None) -> Any:
    if typ is bool or typ == "bool":
        # Java's Boolean.parseBoolean (MixAll.properties2Object) takes "true" in any case and makes every
        # other value false ("yes", "1", "on" too): true/false in any case here, the rest refused by name.
        # Properties.load keeps a value's trailing whitespace and parseBoolean("true ") is false, so
        # "true " (a stray space or tab) is refused too, saying so: it looks true and Apache reads it false
        low = raw.lower()
        if low in ("true", "false"):
            return low == "true"
        raise ConfigError(boolean_refusal(key, raw))
    java = java_integer(typ)
    if java is not None:
        text = raw.strip()
        try:
            value = int(text)
        except ValueError as e:
            if JAVA_INTEGER_SYNTAX.fullmatch(text) is None:
                raise ConfigError(f"{key}: expected an integer, got {raw!r}") from e
            value = java.max + 1  # past Python's int-from-str digit limit: far beyond any Java long too
        check_java_range(key, value, java, lo=lo, shown=text)
        return value
    if typ is float or typ == "float":
        try:
            return float(raw.strip())
        except ValueError as e:
            raise ConfigError(f"{key}: expected a number, got {raw!r}") from e
    return java_trim(raw)  # MixAll.properties2Object trims a String value


def apply_properties(cls: type[T], props: dict[str, str], base: T | None = None,
                     minimum: Mapping[str, int] | None = None) -> T:
    """Build ``cls`` from RocketMQ keys; keys the dataclass does not know are ignored.

    An integer key is held to its Java type's range (``java_integer``), and to ``minimum[field]`` when
    given, so the error names the range the key really has.

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
            hints = typing.get_type_hints(cls, include_extras=True)
        values[name] = _coerce(key, raw, hints.get(name, str), (minimum or {}).get(name))
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
