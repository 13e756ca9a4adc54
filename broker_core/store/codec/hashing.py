"""Java-compatible hashes and RocketMQ's CRC: tagsCode, index key hashes and BODYCRC depend on them."""

from __future__ import annotations

import zlib

_MASK32 = 0xFFFFFFFF


def java_string_hash(s: str) -> int:
    """Java ``String.hashCode()``: 31*h + c over UTF-16 code units, as a signed 32-bit int."""
    h = 0
    if s.isascii():
        for c in s.encode("ascii"):
            h = (31 * h + c) & _MASK32
    else:
        data = s.encode("utf-16-be")
        for i in range(0, len(data), 2):
            h = (31 * h + ((data[i] << 8) | data[i + 1])) & _MASK32
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
