"""The codec's error type, in its own module so the compiled hot path and its Python twin share it."""

from __future__ import annotations


class RecordError(ValueError):
    """A record cannot be encoded (too large, bad field) or decoded (truncated, bad magic or CRC)."""
