"""A bean's primitive fields as Java's fastjson reads them from the config JSON files.

Why one module: ``topics.json`` and ``subscriptionGroup.json`` (and the group bodies of
UPDATE_AND_CREATE_SUBSCRIPTIONGROUP) are fastjson beans in RocketMQ. fastjson is lenient in its own
way: "null" and "" are null, "0"/"F" are false, 3.9 is 3. Python's ``int()`` and ``bool()`` are
lenient in other ways (``bool("false")`` is True), and a wrong guess turns a disabled group on or a
typo into a traceback. Each reader here raises FieldValueError saying what was expected; the caller
names the file, the bean and the field.
"""

from __future__ import annotations

import json
import math

from broker_core.common.java_numbers import JAVA_INT, JAVA_INTEGER_SYNTAX, JavaInteger

NULL_STRINGS = ("", "null", "NULL")  # fastjson reads these strings as null: the field keeps its default
_TRUE_STRINGS = {"1", "Y", "y", "T"}  # TypeUtils.castToBoolean: "true" in any case, and these exactly
_FALSE_STRINGS = {"0", "F", "f", "N"}


class FieldValueError(ValueError):
    """A JSON value fastjson would refuse for the field's Java type (the text says what was expected)."""


def shown(raw: object) -> str:
    """A JSON value as an error quotes it: at most 40 characters."""
    text = json.dumps(raw, ensure_ascii=False, default=str)
    return text if len(text) <= 40 else text[:40] + "..."


def java_integer(raw: object, kind: JavaInteger = JAVA_INT) -> int | None:
    """An int/long field: a JSON integer, a number (truncated, as BigDecimal.intValue), true/false (1/0)
    or a string in Java's integer syntax; None for null. Out of the type's range is refused, not wrapped."""
    if raw is None or (isinstance(raw, str) and raw in NULL_STRINGS):
        return None
    if isinstance(raw, bool):
        value = int(raw)
    elif isinstance(raw, int):
        value = raw
    elif isinstance(raw, float) and math.isfinite(raw):
        value = int(raw)
    elif isinstance(raw, str) and len(raw) <= 40 and JAVA_INTEGER_SYNTAX.fullmatch(raw):
        value = int(raw)
    else:
        raise FieldValueError(f"expected a Java {kind.name}, got {shown(raw)}")
    if not kind.min <= value <= kind.max:
        raise FieldValueError(f"out of the Java {kind.name} range: {shown(raw)}")
    return value


def java_boolean(raw: object) -> bool | None:
    """A boolean field: true/false; a number is true only when it is 1 (BooleanCodec); a string as
    TypeUtils.castToBoolean reads it ("false", "FALSE" and "0" are false); None for null."""
    if raw is None or (isinstance(raw, str) and raw in NULL_STRINGS):
        return None
    if isinstance(raw, bool):
        return raw
    if isinstance(raw, int | float) and math.isfinite(raw):
        return int(raw) == 1
    if isinstance(raw, str):
        if raw.lower() == "true" or raw in _TRUE_STRINGS:
            return True
        if raw.lower() == "false" or raw in _FALSE_STRINGS:
            return False
    raise FieldValueError(f"expected a Java boolean, got {shown(raw)}")


def java_string(value: object) -> str:
    """A Map<String, String> value as fastjson casts it: JSON text for anything not a string."""
    return value if isinstance(value, str) else json.dumps(value, separators=(",", ":"), ensure_ascii=False)
