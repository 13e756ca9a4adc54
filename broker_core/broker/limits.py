"""Numeric limits shared by the Broker (which enforces them) and the CLI (which refuses early).

Why a module of its own: the values must be identical on both sides, and the CLI imports it at start-up,
so it imports nothing but the Java type ranges (``common.java_numbers``). Java stores these fields as
``int``/``long``; a value outside those ranges is unreadable by a Java broker, and a queue count far
above any real deployment only builds a huge queue table (the broker refuses it instead of spending
minutes and memory on it).
"""

from broker_core.common.java_numbers import JAVA_INT_MAX, JAVA_INT_MIN, JAVA_LONG_MAX, JAVA_LONG_MIN

__all__ = ["JAVA_INT_MAX", "JAVA_INT_MIN", "JAVA_LONG_MAX", "JAVA_LONG_MIN", "MAX_RETRY_TIMES", "MAX_TOPIC_PERM",
           "MAX_TOPIC_QUEUE_NUMS"]

MAX_TOPIC_QUEUE_NUMS = 1024
"""Upper bound of a topic's readQueueNums / writeQueueNums (and a group's retryQueueNums)."""

MAX_TOPIC_PERM = 7
"""Upper bound of a topic perm the tools send (PermName.isValid: inherit, write, read; Java's mqadmin
refuses 8 and above, "topicPermission value: 9 is invalid." — a broker masks them out of its routes)."""

MAX_RETRY_TIMES = 1000
"""Upper bound of a group's retryMaxTimes (Java: int; the delay ladder tops out long before)."""
