"""Java-compatible hashes and RocketMQ's CRC: tagsCode, index key hashes and BODYCRC depend on them."""

from __future__ import annotations

import array
import sys
import zlib
from functools import lru_cache
from operator import mul

_MASK32 = 0xFFFFFFFF

# Every put computes the CRC of its body. ISA-L's CRC-32 (carry-less multiply) is ~9x faster than the
# zlib 1.2 that CPython links on Debian (64 KiB: 1.2 us against 10.6 us), the same polynomial and
# result; zlib stays the fallback where no isal wheel exists.
try:
    from isal.isal_zlib import crc32 as _crc32
except ImportError:  # pragma: no cover - depends on the platform's wheels
    _crc32 = zlib.crc32


# Java's hash is the polynomial sum(c_i * 31**(n-1-i)) mod 2**32 over the UTF-16 units c_i. For ASCII
# text (every index key and tag in practice) it is evaluated in C: write c_i = 31*q_i + r_i, so the
# sum is the base-31 numeral of the r_i plus the base-31 numeral of the q_i shifted one place, and
# ``int(digits, 31)`` parses each numeral. The digit strings come from one ``bytes.translate``
# each. The index (two keys per message) and tagsCode hash on every dispatch: this is ~4x faster
# than a Python-level multiply-add over the units.
_DIGITS31 = b"0123456789abcdefghijklmnopqrstu"
_MOD31 = bytes(_DIGITS31[c % 31] for c in range(128)) + bytes(128)
_DIV31 = bytes(_DIGITS31[c // 31] for c in range(128)) + bytes(128)

# ``int()`` refuses numerals longer than sys.get_int_max_str_digits() (4300 by default, 640 at the
# least) and is quadratic in their length: longer ASCII strings (a user's KEYS can be thousands of
# characters) are hashed in chunks of this many characters, combined as h * 31**len(chunk) + chunk.
_ASCII_CHUNK = 512

# _POW31[k] = 31**k mod 2**32, for the non-ASCII path.
_POW31: list[int] = [1]


def _powers(n: int) -> list[int]:
    p = _POW31
    while len(p) < n:
        p.append((p[-1] * 31) & _MASK32)
    return p


def java_string_hash(s: str) -> int:
    """Java ``String.hashCode()``: 31*h + c over UTF-16 code units, as a signed 32-bit int."""
    if not s:
        return 0
    if s.isascii():
        raw = s.encode("ascii")
        if len(raw) <= _ASCII_CHUNK:
            h = (int(raw.translate(_MOD31), 31) + int(raw.translate(_DIV31) + b"0", 31)) & _MASK32
        else:
            h = 0
            for i in range(0, len(raw), _ASCII_CHUNK):
                part = raw[i:i + _ASCII_CHUNK]
                h = (h * pow(31, len(part), 1 << 32) + int(part.translate(_MOD31), 31)
                     + int(part.translate(_DIV31) + b"0", 31)) & _MASK32
    else:
        units = array.array("H", s.encode("utf-16-be", "surrogatepass"))  # lone surrogates too, as Java
        if sys.byteorder == "little":
            units.byteswap()
        n = len(units)
        h = sum(map(mul, units, _powers(n)[n - 1::-1])) & _MASK32
    return h - 0x100000000 if h & 0x80000000 else h


def rmq_crc32(data: bytes | bytearray | memoryview) -> int:
    """CRC-32 (zlib polynomial) with the top bit cleared, as BODYCRC stores it."""
    return _crc32(data) & 0x7FFFFFFF


def index_key_hash(key: str) -> int:
    """Non-negative hash of an index key (``topic#key``); ``abs(MIN_INT)`` overflows to 0 as in Java."""
    h = abs(java_string_hash(key))
    return 0 if h == 0x80000000 else h


def tags_code(tags: str | None) -> int:
    """CQ tagsCode of a plain record: Java hash of the whole TAGS string, 0 when absent or empty."""
    if not tags:
        return 0
    return _cached_tags_hash(tags)


@lru_cache(maxsize=4096)
def _cached_tags_hash(tags: str) -> int:
    """Tags repeat across messages (a topic has a handful), so their hashes are worth caching."""
    return java_string_hash(tags)
