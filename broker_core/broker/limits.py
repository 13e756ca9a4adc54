"""Numeric limits shared by the Broker (which enforces them) and the CLI (which refuses early).

Why a module of its own: the values must be identical on both sides, and the CLI imports it at start-up,
so it imports nothing. Java stores these fields as ``int``/``long``; a value outside those ranges is
unreadable by a Java broker, and a queue count far above any real deployment only builds a huge
queue table (the broker refuses it instead of spending minutes and memory on it).
"""

JAVA_INT_MIN = -(2**31)
JAVA_INT_MAX = 2**31 - 1
JAVA_LONG_MIN = -(2**63)
JAVA_LONG_MAX = 2**63 - 1

MAX_TOPIC_QUEUE_NUMS = 1024
"""Upper bound of a topic's readQueueNums / writeQueueNums (and a group's retryQueueNums)."""

MAX_RETRY_TIMES = 1000
"""Upper bound of a group's retryMaxTimes (Java: int; the delay ladder tops out long before)."""
