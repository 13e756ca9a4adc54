"""Java's ``String.trim()``: RocketMQ's Java code trims option values, config values and numbers this way.

Why one function: Python's ``str.strip()`` removes Unicode whitespace (NBSP, U+2003, ...) and keeps
control characters below the space; ``trim()`` removes exactly the chars <= U+0020 at both ends. The
config loader, mqadmin's options and the SQL92 number parser each need Java's rule, not Python's.
"""

from __future__ import annotations

_TRIMMED = "".join(map(chr, range(0x21)))


def java_trim(text: str) -> str:
    """``text.trim()`` as Java does it: every char <= U+0020 dropped at both ends."""
    return text.strip(_TRIMMED)
