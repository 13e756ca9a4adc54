"""Client batch encoding (MessageDecoder.encodeMessages, spec §1.10) and inner-batch bodies (§1.11.3).

A batch item is ``TOTALSIZE MAGIC(0) BODYCRC(0) FLAG BODYLEN BODY PROPLEN PROPS``. The same bytes are
the body of an inner-batch commitlog record on BatchCQ topics, so the decoder here serves both.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

from .message import RecordError
from .properties import MAX_PROPERTIES_SIZE, decode_properties, encode_properties

_ITEM_HEAD = struct.Struct(">iiiii")  # TOTALSIZE MAGIC BODYCRC FLAG BODYLEN
_I16 = struct.Struct(">h")


@dataclass(slots=True)
class BatchItem:
    body: bytes
    properties: dict[str, str] = field(default_factory=dict)
    flag: int = 0


def encode_batch_item(item: BatchItem) -> bytes:
    """One item's bytes; RecordError (naming the size and the limit) for what the format cannot hold."""
    try:
        props = encode_properties(item.properties).encode("utf-8")
    except UnicodeEncodeError as e:
        raise RecordError(f"batch item properties are not valid Unicode ({e.reason} at position {e.start})") from None
    if len(props) > MAX_PROPERTIES_SIZE:
        raise RecordError(f"batch item properties size {len(props)} bytes exceeds the limit of "
                          f"{MAX_PROPERTIES_SIZE} bytes")
    body = item.body
    total = 20 + len(body) + 2 + len(props)
    return b"".join((_ITEM_HEAD.pack(total, 0, 0, item.flag, len(body)), body, _I16.pack(len(props)), props))


def encode_batch(items: list[BatchItem]) -> bytes:
    return b"".join(encode_batch_item(i) for i in items)


def iter_batch_raw(body: bytes | memoryview):
    """Yield (flag, body, properties_string) for every item of a packed batch body."""
    mv = memoryview(body)
    pos = 0
    end = len(mv)
    while pos < end:
        if end - pos < 22:
            raise RecordError(f"truncated batch item at {pos}")
        total, _magic, _crc, flag, body_len = _ITEM_HEAD.unpack_from(mv, pos)
        if total < 22 or pos + total > end or body_len < 0 or 20 + body_len + 2 > total:
            raise RecordError(f"bad batch item size {total} at {pos}")
        b = bytes(mv[pos + 20:pos + 20 + body_len])
        p = pos + 20 + body_len
        props_len = _I16.unpack_from(mv, p)[0]
        if props_len < 0 or 22 + body_len + props_len != total:
            raise RecordError(f"batch item at {pos}: lengths do not add up to {total}")
        props = bytes(mv[p + 2:p + 2 + props_len]).decode("utf-8", errors="replace")
        yield flag, b, props
        pos += total


def decode_batch(body: bytes | memoryview) -> list[BatchItem]:
    return [BatchItem(b, decode_properties(p), f) for f, b, p in iter_batch_raw(body)]


def count_batch_items(body: bytes | memoryview) -> int:
    return sum(1 for _ in iter_batch_raw(body))
