"""Java's integral types as RocketMQ's Java code reads them: their ranges and the syntax of
``Integer.parseInt`` / ``Long.parseLong``.

Why one module: the remoting header codec, the subscription group bean reader (fastjson's view) and
the limits the Broker and the CLI enforce all need the same facts; a value outside them is one a Java
broker or tool would refuse or cannot read back.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

JAVA_INT_MIN = -(2**31)
JAVA_INT_MAX = 2**31 - 1
JAVA_LONG_MIN = -(2**63)
JAVA_LONG_MAX = 2**63 - 1


@dataclass(frozen=True, slots=True)
class JavaInteger:
    """A Java integral type: its name (for errors) and its range."""

    name: str
    min: int
    max: int


JAVA_INT = JavaInteger("int", JAVA_INT_MIN, JAVA_INT_MAX)
JAVA_LONG = JavaInteger("long", JAVA_LONG_MIN, JAVA_LONG_MAX)

JAVA_INTEGER_SYNTAX = re.compile(r"[+-]?\d+")
"""Integer.parseInt's syntax: one optional ASCII sign, then decimal digits. Java's Character.digit takes
any Unicode decimal digit (Nd), as ``\\d`` and ``int()`` do; no blanks, no "_", no "0x"."""

ASCII_INTEGER_SYNTAX = re.compile(r"[+-]?[0-9]+")
"""The same with ASCII digits only: what mqadmin's and the Spark jobs' time options take as epoch millis
(``--5`` or a full-width digit is not a time anyone meant)."""
