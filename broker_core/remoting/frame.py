"""Frames (spec A.1): ``length`` (bytes after itself), ``headerMark`` (type << 24 | headerLen),
header, body — and an incremental decoder for a byte stream.

Why incremental and bounded: a server reads whatever the socket gives it; the decoder keeps partial
frames, refuses a declared length above the limit before buffering it (RocketMQ's
``frameMaxLength``, 16 MiB default) and never trusts a length field without checking it.
"""

from __future__ import annotations

import struct

from .command import RemotingCommand
from .header_codec import HeaderDecodeError, decode_header, encode_header

DEFAULT_FRAME_MAX_LENGTH = 16 * 1024 * 1024
_HEAD = struct.Struct(">ii")


class FrameError(ValueError):
    """The stream cannot be decoded further; the connection must be closed. ``offset`` is the
    stream position of the offending frame."""

    def __init__(self, message: str, offset: int = 0) -> None:
        super().__init__(message)
        self.offset = offset


class FrameTooLargeError(FrameError):
    pass


def encode_frame(cmd: RemotingCommand) -> bytes:
    header = encode_header(cmd)
    body = cmd.body or b""
    return b"".join((_HEAD.pack(4 + len(header) + len(body), (int(cmd.serialize_type) << 24) | len(header)),
                     header, body))


def decode_frame(frame: bytes | memoryview, offset: int = 0) -> RemotingCommand:
    """One frame body *without* its 4-byte length prefix (what a length-field decoder hands over)."""
    if len(frame) < 4:
        raise FrameError(f"frame at stream offset {offset} is {len(frame)} bytes, shorter than its header mark",
                         offset)
    (mark,) = struct.unpack_from(">I", frame, 0)
    header_len = mark & 0xFFFFFF
    if 4 + header_len > len(frame):
        raise FrameError(f"frame at stream offset {offset}: headerLen {header_len} exceeds the frame "
                         f"({len(frame) - 4} bytes after the mark)", offset)
    try:
        cmd = decode_header(mark >> 24, bytes(frame[4:4 + header_len]))
    except HeaderDecodeError as e:
        raise FrameError(f"frame at stream offset {offset}: {e}", offset) from None
    cmd.body = bytes(frame[4 + header_len:])
    return cmd


class FrameDecoder:
    """Feed it bytes as they arrive; it returns every complete command and keeps the rest."""

    def __init__(self, max_frame_length: int = DEFAULT_FRAME_MAX_LENGTH) -> None:
        self.max_frame_length = max_frame_length
        self._buf = bytearray()
        self._consumed = 0  # stream offset of _buf[0]

    @property
    def pending(self) -> int:
        """Bytes held: an incomplete frame (a peer that stops mid-frame leaves this > 0), and frames
        not yet taken when ``feed`` was capped by ``max_commands``."""
        return len(self._buf)

    def feed(self, data: bytes = b"", max_commands: int | None = None) -> list[RemotingCommand]:
        """Append ``data``; decode and return the complete frames, at most ``max_commands`` of them
        (the rest stay buffered for a later call: a server takes a few per turn from each connection)."""
        if data:
            self._buf += data
        out: list[RemotingCommand] = []
        buf = self._buf
        pos = 0
        while len(buf) - pos >= 4:
            if max_commands is not None and len(out) >= max_commands:
                break
            (length,) = struct.unpack_from(">i", buf, pos)
            at = self._consumed + pos
            if length < 4:
                raise FrameError(f"frame at stream offset {at}: length {length} is below the 4-byte header mark", at)
            if length + 4 > self.max_frame_length:
                raise FrameTooLargeError(f"frame at stream offset {at}: length {length} exceeds the frame limit "
                                         f"{self.max_frame_length}", at)
            if len(buf) - pos - 4 < length:
                break
            with memoryview(buf) as view:
                out.append(decode_frame(view[pos + 4:pos + 4 + length], at))
            pos += 4 + length
        if pos:
            del buf[:pos]
            self._consumed += pos
        return out
