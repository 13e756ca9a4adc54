"""decompressed_body: every compression type of Apache's CompressionType, in the formats its
compressors write (a zlib stream, LZ4 frames, zstd frames), and one clear error for a body that does
not decompress (truncated, not the format, a bomb, a type Apache has not)."""

from __future__ import annotations

import io
import os
import sys
import zlib

import lz4.frame
import pytest
import zstandard

from broker_core.store.codec import compression
from broker_core.store.codec.compression import BodyDecompressError, compression_type, decompressed_body

ORIGINAL = os.urandom(2000) + b"an order body " * 2000
ZLIB_LEGACY, LZ4, ZSTD, ZLIB = 0x1, 0x101, 0x201, 0x301


def _zstd_streamed(data: bytes) -> bytes:
    """What zstd-jni's ZstdOutputStream writes: a frame without its content size."""
    out = io.BytesIO()
    with zstandard.ZstdCompressor(write_content_size=False).stream_writer(out, closefd=False) as w:
        w.write(data)
    return out.getvalue()


COMPRESS = {ZLIB_LEGACY: zlib.compress, ZLIB: zlib.compress, LZ4: lz4.frame.compress, ZSTD: _zstd_streamed}


@pytest.mark.parametrize("flag", [ZLIB_LEGACY, ZLIB, LZ4, ZSTD])
def test_each_type_decompresses_to_the_body_as_sent(flag: int) -> None:
    assert decompressed_body(COMPRESS[flag](ORIGINAL), flag) == ORIGINAL
    assert decompressed_body(COMPRESS[flag](b""), flag) == b""
    assert compression_type(flag) == {ZLIB_LEGACY: "ZLIB", ZLIB: "ZLIB", LZ4: "LZ4", ZSTD: "ZSTD"}[flag]


@pytest.mark.parametrize("flag", [LZ4, ZSTD])
def test_lz4_and_zstd_read_frame_after_frame_as_the_java_input_streams(flag: int) -> None:
    body = COMPRESS[flag](b"first ") + COMPRESS[flag](b"second")
    assert decompressed_body(body, flag) == b"first second"
    assert decompressed_body(zstandard.ZstdCompressor().compress(ORIGINAL), ZSTD) == ORIGINAL  # sized frame


@pytest.mark.parametrize("flag", [ZLIB_LEGACY, LZ4, ZSTD])
def test_a_body_that_does_not_decompress_is_one_error_naming_its_type(flag: int) -> None:
    kind = compression_type(flag)
    good = COMPRESS[flag](ORIGINAL)
    with pytest.raises(BodyDecompressError, match=f"^{kind} body is truncated"):
        decompressed_body(good[:-7], flag)
    with pytest.raises(BodyDecompressError, match=f"^{kind} body does not (inflate|decompress)"):
        decompressed_body(b"junk" * 9, flag)
    with pytest.raises(BodyDecompressError, match=f"^{kind} body is truncated"):
        decompressed_body(b"", flag)


@pytest.mark.parametrize("flag", [LZ4, ZSTD])
def test_a_bomb_stops_at_the_limit(flag: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(compression, "MAX_DECOMPRESSED_BODY", 10 << 20)
    with pytest.raises(BodyDecompressError, match="decompresses beyond 10485760 bytes"):
        decompressed_body(COMPRESS[flag](bytes(64 << 20)), flag)


def test_a_type_apache_has_not_is_refused() -> None:
    with pytest.raises(BodyDecompressError, match=r"^unknown compression type 5 \(SYSFLAG 0x501\)"):
        decompressed_body(b"x", 0x501)
    assert decompressed_body(b"plain", 0x500) == b"plain"  # not COMPRESSED: the type bits say nothing


def test_a_missing_library_says_which_package(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "lz4.frame", None)  # import lz4.frame raises ImportError
    with pytest.raises(BodyDecompressError, match=r"^LZ4 body: the lz4 package is not installed"):
        decompressed_body(COMPRESS[LZ4](ORIGINAL), LZ4)
