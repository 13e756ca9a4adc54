"""Java-compatible hashes and RocketMQ's CRC: tagsCode, index key hashes and BODYCRC depend on them."""

from __future__ import annotations

import array
import sys
import zlib
from operator import mul

_MASK32 = 0xFFFFFFFF


# _POW31[k] = 31**k mod 2**32. ``h = sum(c_i * 31**(n-1-i)) mod 2**32`` is the same value as Java's
# loop, and ``sum(map(mul, ...))`` runs in C: the index (two keys per message) and tagsCode hash on
# every dispatch, so this is on the hot path.
_POW31: list[int] = [1]


def _powers(n: int) -> list[int]:
    p = _POW31
    while len(p) < n:
        p.append((p[-1] * 31) & _MASK32)
    return p


def java_string_hash(s: str) -> int:
    """Java ``String.hashCode()``: 31*h + c over UTF-16 code units, as a signed 32-bit int."""
    if s.isascii():
        units: bytes | array.array = s.encode("ascii")
    else:
        units = array.array("H", s.encode("utf-16-be"))
        if sys.byteorder == "little":
            units.byteswap()
    n = len(units)
    if n == 0:
        return 0
    h = sum(map(mul, units, _powers(n)[n - 1::-1])) & _MASK32
    return h - 0x100000000 if h & 0x80000000 else h


def rmq_crc32(data: bytes | bytearray | memoryview) -> int:
    """CRC-32 (zlib polynomial) with the top bit cleared, as BODYCRC stores it."""
    return zlib.crc32(data) & 0x7FFFFFFF


def index_key_hash(key: str) -> int:
    """Non-negative hash of an index key (``topic#key``); ``abs(MIN_INT)`` overflows to 0 as in Java."""
    h = abs(java_string_hash(key))
    return 0 if h == 0x80000000 else h


def tags_code(tags: str | None) -> int:
    """CQ tagsCode of a plain record: Java hash of the whole TAGS string, 0 when absent or empty."""
    if not tags:
        return 0
    return java_string_hash(tags)
