"""Compressed message bodies: SYSFLAG's COMPRESSED_FLAG and its compression type bits.

Why readers need it: a Java producer compresses every body over ``compressMsgBodyOverHowmuch``
(4 KiB) and the store keeps the compressed bytes, so whatever hands a body to a user (a gRPC
receive, mqadmin's queries, the Python client, the Spark jobs) must undo it, as Java's
``MessageDecoder.decode(..., deCompressBody=true)`` does. The type sits in SYSFLAG bits 8-10
(``MessageSysFlag.COMPRESSION_TYPE_COMPARATOR``): 1 LZ4, 2 ZSTD, 3 ZLIB, and 0, what clients before
4.9.x wrote, ZLIB (Apache's ``CompressionType.findByValue``). A 5.x producer picks the type with
``rocketmq.message.compressType`` (ZLIB by default).

The formats are Apache's compressors' streams: ZLIB a zlib stream (``InflaterInputStream``), LZ4 the
LZ4 frame format (lz4-java's ``LZ4FrameOutputStream``), ZSTD zstd frames (zstd-jni's
``ZstdOutputStream``). Like those input streams, LZ4 and ZSTD read frame after frame to the end of
the body; a truncated frame, or bytes that are not a frame, is an error. ``lz4`` and ``zstandard``
(PyPI) are imported on the first LZ4 / ZSTD body only, so a reader of plain and ZLIB bodies never
needs them.
"""

from __future__ import annotations

import zlib
from typing import Any

from .sys_flag import COMPRESSED_FLAG, COMPRESSION_TYPE_MASK

# what one body may inflate to: a compressed record is at most maxMessageSize (4 MiB) of mostly
# small ratios; a bomb stops here with an error instead of filling memory
MAX_DECOMPRESSED_BODY = 256 * 1024 * 1024

_TYPE_NAMES = {0: "ZLIB", 1: "LZ4", 2: "ZSTD", 3: "ZLIB"}

# compressed input handed to a zstd decompressor at a time: one zstd block header (3 bytes) plus a
# byte may stand for 128 KiB of output, so 1 KiB of input makes at most ~32 MiB before the size check
_ZSTD_INPUT_STEP = 1024
# output asked of the LZ4 decompressor at a time (it honours a maximum, so no input stepping)
_LZ4_OUTPUT_STEP = 4 * 1024 * 1024


class BodyDecompressError(ValueError):
    """A body flagged compressed that cannot be inflated (names the compression type and the cause)."""


def compression_type(sys_flag: int) -> str | None:
    """"ZLIB", "LZ4", "ZSTD" or "type N" for a compressed record's SYSFLAG; None when not compressed."""
    if not sys_flag & COMPRESSED_FLAG:
        return None
    bits = (sys_flag & COMPRESSION_TYPE_MASK) >> 8
    return _TYPE_NAMES.get(bits, f"type {bits}")


def decompressed_body(body: bytes | bytearray | memoryview, sys_flag: int) -> bytes:
    """The message's body as the producer gave it: ``body`` itself unless SYSFLAG says compressed.

    Raises BodyDecompressError (naming the type and the cause) for a body that does not decompress,
    or whose type is none of Apache's (SYSFLAG bits 8-10 of 4..7: Java's findByValue throws)."""
    kind = compression_type(sys_flag)
    if kind is None:
        return bytes(body)
    if kind == "ZLIB":
        return _inflate_zlib(body)
    if kind == "LZ4":
        return _decompress_lz4(bytes(body))
    if kind == "ZSTD":
        return _decompress_zstd(bytes(body))
    raise BodyDecompressError(f"unknown compression {kind} (SYSFLAG {sys_flag:#x})")


def _inflate_zlib(body: bytes | bytearray | memoryview) -> bytes:
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


def _library(kind: str, module: str, package: str) -> Any:
    try:
        return __import__(module, fromlist=["_"])
    except ImportError:
        raise BodyDecompressError(f"{kind} body: the {package} package is not installed "
                                  f"(pip install {package})") from None


def _too_big(kind: str) -> BodyDecompressError:
    return BodyDecompressError(f"{kind} body decompresses beyond {MAX_DECOMPRESSED_BODY} bytes")


def _decompress_lz4(body: bytes) -> bytes:
    """LZ4 frames, one after another to the end (lz4-java's LZ4FrameInputStream)."""
    lz4_frame = _library("LZ4", "lz4.frame", "lz4")
    out = bytearray()
    rest = body
    while True:
        d = lz4_frame.LZ4FrameDecompressor()
        try:
            chunk = d.decompress(rest, max_length=_LZ4_OUTPUT_STEP)
            while True:
                out += chunk
                if len(out) > MAX_DECOMPRESSED_BODY:
                    raise _too_big("LZ4")
                if d.eof or d.needs_input:
                    break
                chunk = d.decompress(b"", max_length=_LZ4_OUTPUT_STEP)
        except RuntimeError as e:  # lz4.frame's error for a bad header, block or checksum
            raise BodyDecompressError(f"LZ4 body does not decompress: {e}") from None
        if not d.eof:
            raise BodyDecompressError("LZ4 body is truncated")
        rest = d.unused_data
        if not rest:
            return bytes(out)


def _decompress_zstd(body: bytes) -> bytes:
    """zstd frames, one after another to the end (zstd-jni's ZstdInputStream)."""
    zstandard = _library("ZSTD", "zstandard", "zstandard")
    out = bytearray()
    pos = 0
    while True:
        d = zstandard.ZstdDecompressor().decompressobj()
        try:
            while not d.eof and pos < len(body):
                step = body[pos:pos + _ZSTD_INPUT_STEP]
                out += d.decompress(step)
                pos += len(step)
                if len(out) > MAX_DECOMPRESSED_BODY:
                    raise _too_big("ZSTD")
        except zstandard.ZstdError as e:
            raise BodyDecompressError(f"ZSTD body does not decompress: {e}") from None
        if not d.eof:
            raise BodyDecompressError("ZSTD body is truncated")
        # what the last step held past this frame is the next frame's start
        pos -= len(d.unused_data)
        if pos >= len(body):
            return bytes(out)
