"""mqadmin's time formats: parse ``now`` / epoch millis / ``yyyy-MM-dd#HH:mm:ss:SSS``, print Java's styles.

Why a module: several commands accept the same timestamp syntax (resetOffsetByTime, printMsg,
consumeMessage) and print the same human formats, and a bad value must fail with one precise line.
Local time is used, as the Java tools use the JVM default time zone.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import datetime

from broker_core.broker.limits import JAVA_LONG_MAX, JAVA_LONG_MIN
from broker_core.common.java_numbers import ASCII_INTEGER_SYNTAX
from broker_core.common.java_time import INPUT_PATTERN, DateOutOfRange, parse_input_date
from mqadmin.errors import UsageProblem


def now_ms() -> int:
    return int(time.time() * 1000)


def _java_long(value: str) -> int | None:
    """Long.parseLong's syntax within Java's long range; else None."""
    if not ASCII_INTEGER_SYNTAX.fullmatch(value):
        return None
    number = int(value)
    return number if JAVA_LONG_MIN <= number <= JAVA_LONG_MAX else None


def parse_timestamp(text: str, clock: Callable[[], int] = now_ms, option: str = "timestamp",
                    allow_minus_one: bool = False) -> int:
    """``now``, epoch millis, or ``yyyy-MM-dd#HH:mm:ss:SSS`` — the forms Apache's tools accept.

    Negative millis are refused except ``-1`` where the command gives it a meaning
    (``allow_minus_one``: resetOffsetByTime's "to the max offset"); so are values outside Java's long."""
    value = (text or "").strip()
    if value == "now":
        return clock()
    number = _java_long(value)
    if number is not None and (number >= 0 or (allow_minus_one and number == -1)):
        return number
    if number is None and ASCII_INTEGER_SYNTAX.fullmatch(value):
        raise UsageProblem(f"invalid {option} {text!r}: outside Java's long range")
    if number is None:
        dated = _date_form(value, text, option)
        if dated is not None:
            return dated
    minus_one = " or -1 (the max offset)" if allow_minus_one else ""
    raise UsageProblem(
        f"invalid {option} {text!r}: expected 'now', epoch milliseconds >= 0{minus_one} or "
        "yyyy-MM-dd#HH:mm:ss:SSS (e.g. 2024-05-01#13:45:00:000)"
    )


def _date_form(value: str, text: str, option: str) -> int | None:
    """``yyyy-MM-dd#HH:mm:ss:SSS`` in local time as epoch millis; None when ``value`` is not that form.

    Why the checks: a date before 1970 (in local time: 1970-01-01 00:00 east of UTC too) is a negative
    timestamp, which the offset reset reads as "the max offset" and would skip the whole backlog; and a
    date whose local time Python cannot convert (0001-01-01) used to end in an unexpected failure.
    Both are the operator's typo, refused here naming the option, as negative millis are."""
    try:
        stamp = parse_input_date(value)
    except DateOutOfRange:
        raise UsageProblem(f"invalid {option} {text!r}: the date is out of range") from None
    if stamp is None:
        return None
    if stamp < 0:
        raise UsageProblem(f"invalid {option} {text!r}: before 1970-01-01 00:00:00 UTC "
                           f"(a negative timestamp, {stamp})")
    return stamp


def parse_millis(text: str | None, option: str) -> int | None:
    """Plain epoch-millis options (queryMsgByKey -b/-e): None when absent; Java long, not negative."""
    if text is None or text == "":
        return None
    value = text.strip()
    number = _java_long(value)
    if number is not None and number >= 0:
        return number
    raise UsageProblem(f"invalid {option} {text!r}: expected epoch milliseconds (0..{JAVA_LONG_MAX})")


def _local(ms: int) -> datetime:
    return datetime.fromtimestamp(ms / 1000)


def human2(ms: int) -> str:
    """UtilAll.timeMillisToHumanString2: ``yyyy-MM-dd HH:mm:ss,SSS``."""
    return _local(ms).strftime("%Y-%m-%d %H:%M:%S") + f",{ms % 1000:03d}"


def seconds_text(ms: int) -> str:
    """``yyyy-MM-dd HH:mm:ss`` (consumerProgress #LastTime)."""
    return _local(ms).strftime("%Y-%m-%d %H:%M:%S")


def input_style(ms: int) -> str:
    """``yyyy-MM-dd#HH:mm:ss:SSS`` (decodeMessageId, timestamp(string) in resetOffsetByTime)."""
    return _local(ms).strftime(INPUT_PATTERN) + f":{ms % 1000:03d}"


def month_start_ms(ms: int) -> int:
    dt = _local(ms).replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    return int(dt.timestamp() * 1000)


def previous_month_start_ms(month_start: int) -> int:
    dt = _local(month_start)
    year, month = (dt.year - 1, 12) if dt.month == 1 else (dt.year, dt.month - 1)
    return int(dt.replace(year=year, month=month).timestamp() * 1000)


def nearly_time_from_span(span_ms: int, now: int) -> int:
    """MessageClientIDSetter.getNearlyTimeFromID: month start + span, or last month's if in the future."""
    start = month_start_ms(now)
    if start + span_ms >= now:
        start = previous_month_start_ms(start)
    return start + span_ms
