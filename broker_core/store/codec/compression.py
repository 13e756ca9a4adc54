"""Compressed message bodies: SYSFLAG's COMPRESSED_FLAG and its compression type bits.

Why readers need it: a Java producer compresses every body over ``compressMsgBodyOverHowmuch``
(4 KiB) and the store keeps the compressed bytes, so a tool that shows or searches bodies must undo
it, as Java's ``MessageDecoder.decode(..., deCompressBody=true)`` does. The type sits in SYSFLAG bits
8-10 (``MessageSysFlag.COMPRESSION_TYPE_COMPARATOR``): 1 LZ4, 2 ZSTD, 3 ZLIB, and 0, what clients
before 4.9.x wrote, ZLIB. ZLIB is the Java client's default and the one decompressed here; an LZ4
or ZSTD body is reported as undecodable, never shown as if it were the message.
"""

from __future__ import annotations

import zlib

from .sys_flag import COMPRESSED_FLAG, COMPRESSION_TYPE_MASK

# what one body may inflate to: a compressed record is at most maxMessageSize (4 MiB) of mostly
# small ratios; a bomb stops here with an error instead of filling memory
MAX_DECOMPRESSED_BODY = 256 * 1024 * 1024

_TYPE_NAMES = {0: "ZLIB", 1: "LZ4", 2: "ZSTD", 3: "ZLIB"}


class BodyDecompressError(ValueError):
    """A body flagged compressed that cannot be inflated (names the compression type and the cause)."""


def compression_type(sys_flag: int) -> str | None:
    """"ZLIB", "LZ4", "ZSTD" or "type N" for a compressed record's SYSFLAG; None when not compressed."""
    if not sys_flag & COMPRESSED_FLAG:
        return None
    bits = (sys_flag & COMPRESSION_TYPE_MASK) >> 8
    return _TYPE_NAMES.get(bits, f"type {bits}")


def decompressed_body(body: bytes | bytearray | memoryview, sys_flag: int) -> bytes:
    """The message's body as the producer gave it: ``body`` itself unless SYSFLAG says compressed."""
    kind = compression_type(sys_flag)
    if kind is None:
        return bytes(body)
    if kind != "ZLIB":  # Java producers compress with ZLIB unless told otherwise (rocketmq.message.compressType)
        raise BodyDecompressError(f"{kind} compressed body: only ZLIB bodies are decompressed here")
    inflater = zlib.decompressobj()
    try:
        out = inflater.decompress(body, MAX_DECOMPRESSED_BODY)
    except zlib.error as e:
        raise BodyDecompressError(f"ZLIB body does not inflate: {e}") from None
    if inflater.unconsumed_tail:
        raise BodyDecompressError(f"ZLIB body inflates beyond {MAX_DECOMPRESSED_BODY} bytes")
    if not inflater.eof:
        raise BodyDecompressError("ZLIB body is truncated")
    return out
