"""Local wall times as RocketMQ's Java tools read them: ``yyyy-MM-dd#HH:mm:ss:SSS`` and the instant a wall
time names in the JVM's default time zone.

Why one module: mqadmin's time options (resetOffsetByTime -s, printMsg -b/-e, consumeMessage -s/-e) and
the Spark jobs' --begin/--end read the same form, and a wall time the daylight-saving change repeats or
skips must name the same instant in both, the one Apache's mqadmin names. ``broker_core.common`` is below
both layers, so each imports it.
"""

from __future__ import annotations

from datetime import datetime

INPUT_PATTERN = "%Y-%m-%d#%H:%M:%S"
"""UtilAll.YYYY_MM_DD_HH_MM_SS_SSS without its ``:SSS`` (Python's %f is not three digits exactly)."""


class DateOutOfRange(ValueError):
    """A date of the right form whose local time the platform cannot convert (year 1, year 9999...)."""


def local_wall_ms(dt: datetime) -> int:
    """A naive local wall time as epoch millis, as Java's lenient Calendar (SimpleDateFormat.parse) reads it.

    Why not ``dt.timestamp()``: it takes the first occurrence of a time the fall change repeats (01:30 EDT
    in New York on 2023-11-05); Java takes the second (01:30 EST), an hour later. For a time the spring
    change skips both shift it forward by the gap (02:30 -> 03:30 EDT). Python's two folds give, for a
    repeated time, its two instants (fold=1 the later) and, for a skipped one, the offsets before and
    after the change (fold=0 the later): Java's reading is the later of the two in every case (checked
    with Java 17 in New York, Lord Howe's 30-minute shift, Sao Paulo's midnight change and Moscow's 2014
    change of its standard offset). Raises OverflowError/OSError/ValueError as ``timestamp()`` does."""
    naive = dt.replace(tzinfo=None)
    return max(int(naive.replace(fold=0).timestamp() * 1000), int(naive.replace(fold=1).timestamp() * 1000))


def parse_input_date(value: str) -> int | None:
    """``yyyy-MM-dd#HH:mm:ss:SSS`` (SSS: three ASCII digits) in local time as epoch millis, read as Java
    reads it; None when ``value`` is not of that form; DateOutOfRange when its local time cannot be
    converted. A negative result (before 1970) is the caller's to refuse or keep."""
    head, sep, millis = value.rpartition(":")
    if not (sep and len(millis) == 3 and millis.isascii() and millis.isdigit()):
        return None
    try:
        dt = datetime.strptime(head, INPUT_PATTERN)
    except ValueError:
        return None
    try:
        return local_wall_ms(dt) + int(millis)
    except (OverflowError, OSError, ValueError):
        raise DateOutOfRange(value) from None
