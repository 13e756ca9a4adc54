"""Java value semantics the SQL92 filter depends on, so results match a RocketMQ broker bit for bit.

RocketMQ evaluates selectors on Java objects: literals are Integer, Long, Double, Boolean or String;
message properties are always String and get converted with ``Integer.valueOf``, ``Long.valueOf``,
``Double.valueOf`` or ``Boolean.valueOf`` depending on the *other* operand. Python values stand in as
``int`` (Integer), :class:`JavaLong` (Long), ``float`` (Double), ``bool`` and ``str``. A failed
conversion is an exception in Java that aborts the whole evaluation, which the broker then reports as
"no match"; :class:`SqlEvaluationError` plays that role here.
"""

from __future__ import annotations

import math
import re
import unicodedata

from broker_core.common.java_numbers import JAVA_INT_MAX as INT_MAX
from broker_core.common.java_numbers import JAVA_INT_MIN as INT_MIN
from broker_core.common.java_numbers import JAVA_LONG_MAX as LONG_MAX
from broker_core.common.java_numbers import JAVA_LONG_MIN as LONG_MIN
from broker_core.common.java_text import java_trim

DOUBLE_MAX = 1.7976931348623157e308
DOUBLE_MIN_POSITIVE = 5e-324


class JavaLong(int):
    """An integer literal that did not fit an Integer; it converts strings with ``Long.valueOf``."""

    __slots__ = ()

    def __neg__(self) -> JavaLong:
        return JavaLong(-int(self))

    def __repr__(self) -> str:
        return f"{int(self)}L"


class SqlEvaluationError(Exception):
    """Java threw while evaluating (bad number format, class cast): the message does not match."""


JavaValue = str | bool | int | float | None

# Integer.parseInt takes any decimal digit Character.digit(char, 10) knows: a Unicode digit in the BMP
# (full-width "１", Arabic-Indic "٣"; the BMP sets of OpenJDK 17 and Python 3.11 are the same 370 chars).
# It reads UTF-16 chars, so a digit outside the BMP ("𝟏", U+1D7CF) is a surrogate pair, neither half a
# digit: NumberFormatException. Python's \d and int() take those digits too, hence the explicit range.
_INTEGRAL = re.compile(r"[+-]?[^\D\U00010000-\U0010FFFF]+")
# FloatingDecimal.readJavaFormatString takes ASCII digits only: Double.valueOf("１") is a
# NumberFormatException, hence [0-9] rather than \d.
_DOUBLE = re.compile(
    r"""[+-]?(?:
        (?P<special>NaN|Infinity)
      | (?P<dec>(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?)[fFdD]?
      | (?P<hex>0[xX](?:[0-9a-fA-F]+\.?|[0-9a-fA-F]*\.[0-9a-fA-F]+)[pP][+-]?[0-9]+)[fFdD]?
    )""",
    re.VERBOSE,
)


def _integral_value(text: str) -> int | None:
    """``int()`` of a signed digit string, also past Python's digit limit when the excess is leading zeros."""
    try:
        return int(text)
    except ValueError:
        signed = text[0] in "+-"
        body = text[1:] if signed else text
        significant = body.lstrip("".join(c for c in set(body) if unicodedata.digit(c) == 0))
        if len(significant) > 20:
            return None  # far outside any Java integral range
        return int((text[0] if signed else "") + (significant or "0"))


def parse_int(text: str, lo: int, hi: int, java_name: str) -> int:
    """``Integer.valueOf`` / ``Long.valueOf``: optional sign, digits, no blanks, in range."""
    if _INTEGRAL.fullmatch(text) is not None:
        value = _integral_value(text)
        if value is not None and lo <= value <= hi:
            return value
    shown = text if len(text) <= 40 else text[:40] + "..."
    raise SqlEvaluationError(f'NumberFormatException: {java_name}.valueOf("{shown}")')


def parse_java_int(text: str) -> int:
    return parse_int(text, INT_MIN, INT_MAX, "Integer")


def parse_java_long(text: str) -> int:
    return parse_int(text, LONG_MIN, LONG_MAX, "Long")


def parse_java_double(text: str) -> float:
    """``Double.valueOf``: trims control/blank chars, knows NaN, Infinity, hex and f/d suffixes."""
    s = java_trim(text)
    m = _DOUBLE.fullmatch(s)
    if m is None:
        raise SqlEvaluationError(f'NumberFormatException: Double.valueOf("{text[:40]}")')
    negative = s.startswith("-")
    if m.group("special") is not None:
        if m.group("special") == "NaN":
            return math.nan
        return -math.inf if negative else math.inf
    if m.group("dec") is not None:
        value = float(m.group("dec"))
    else:
        try:
            value = float.fromhex(m.group("hex"))
        except OverflowError:
            value = math.inf
    return -value if negative else value


def parse_java_boolean(text: str) -> bool:
    """``Boolean.valueOf``: true only for "true" in any case, anything else is false (never an error)."""
    return len(text) == 4 and text.lower() == "true"


def compare_doubles(a: float, b: float) -> int:
    """``Double.compare``: NaN equals itself and sorts above everything, -0.0 sorts below 0.0."""
    if a < b:
        return -1
    if a > b:
        return 1
    a_nan, b_nan = a != a, b != b
    if a_nan or b_nan:
        return int(a_nan) - int(b_nan)
    if a == 0.0:
        return int(math.copysign(1.0, b) < 0) - int(math.copysign(1.0, a) < 0)
    return 0


def _compare_strings(a: str, b: str) -> int:
    """``String.compareTo`` orders by UTF-16 code units, which big-endian bytes preserve."""
    if a == b:
        return 0
    ea, eb = a.encode("utf-16-be", "surrogatepass"), b.encode("utf-16-be", "surrogatepass")
    return -1 if ea < eb else 1


def _sign(a: int | bool, b: int | bool) -> int:
    return (a > b) - (a < b)


def java_compare(lv: JavaValue, rv: JavaValue) -> int:
    """RocketMQ's ``ComparisonExpression.__compare`` with string conversion on (as every parsed selector has).

    Both operands are non-null. When the classes differ, one side is converted towards the other;
    the rules are asymmetric on purpose (they are Java's), e.g. Boolean on the left of a String is a
    ClassCastException while String on the left of a Boolean goes through ``Boolean.valueOf``.
    """
    lt, rt = type(lv), type(rv)
    if lt is rt:
        if lt is str:
            return _compare_strings(lv, rv)  # type: ignore[arg-type]
        if lt is float:
            return compare_doubles(lv, rv)  # type: ignore[arg-type]
        return _sign(lv, rv)  # type: ignore[arg-type]
    if lt is bool:
        if rt is str:
            raise SqlEvaluationError("ClassCastException: Boolean cannot be cast to String")
        return -1
    if rt is bool:
        if lt is str:
            return _sign(parse_java_boolean(lv), rv)  # type: ignore[arg-type]
        return -1
    if lt is str:
        if rt is int:
            return _sign(parse_java_int(lv), rv)  # type: ignore[arg-type]
        if rt is JavaLong:
            return _sign(parse_java_long(lv), rv)  # type: ignore[arg-type]
        return compare_doubles(parse_java_double(lv), rv)  # type: ignore[arg-type]
    if rt is str:
        if lt is int:
            return _sign(lv, parse_java_int(rv))  # type: ignore[arg-type]
        if lt is JavaLong:
            return _sign(lv, parse_java_long(rv))  # type: ignore[arg-type]
        return compare_doubles(lv, parse_java_double(rv))  # type: ignore[arg-type]
    if lt is float or rt is float:
        return compare_doubles(float(lv), float(rv))  # type: ignore[arg-type]
    return _sign(lv, rv)  # type: ignore[arg-type]  # Integer vs Long widen to long


def negate(value: JavaValue) -> JavaValue:
    """``UnaryExpression.createNegate``: numbers flip sign keeping their class, anything else is null."""
    t = type(value)
    if t is int or t is JavaLong or t is float:
        # No overflow case: literals are non-negative, so MIN_VALUE can never be negated.
        return -value  # type: ignore[operator]
    return None
