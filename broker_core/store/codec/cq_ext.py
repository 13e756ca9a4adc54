"""ConsumeQueueExt units (store/ConsumeQueueExt.CqExtUnit) and the ext address kept in a CQ unit's tagsCode.

Why: with ``enableConsumeQueueExt`` a SimpleCQ unit's tagsCode field holds an *address* into the
queue's ``consumequeue_ext/<topic>/<queueId>/`` files instead of the tags hash; the ext unit there keeps
the tags hash, the store time and the SQL92 filter bitmap. Addresses are file offsets shifted by
``Long.MIN_VALUE``, so every address is <= ``MAX_ADDR`` (Integer.MIN_VALUE - 1) and can never be mistaken
for a tags hash (a Java int) or a delay-level due time.

Unit layout (big-endian, as ``CqExtUnit.write``):

    size           short   20 + bitMapSize (the whole unit)
    tagsCode       long
    msgStoreTime   long
    bitMapSize     short   0 when the message got no bitmap
    filterBitMap   bitMapSize bytes

A file ends with the short -1 where the next unit did not fit (``fullFillToEnd``); ``END_BLANK_DATA_LENGTH``
bytes are always left for that marker. A size <= 0 ends the units of a file.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

CQ_EXT_HEADER = struct.Struct(">hqqh")  # size, tagsCode, msgStoreTime, bitMapSize
MIN_EXT_UNIT_SIZE = CQ_EXT_HEADER.size  # 20
MAX_EXT_UNIT_SIZE = 0x7FFF  # Short.MAX_VALUE
END_BLANK_DATA_LENGTH = 4
END_MARKER = struct.pack(">h", -1)
_SHORT = struct.Struct(">h")

LONG_MIN = -(1 << 63)
MAX_ADDR = -(1 << 31) - 1  # Integer.MIN_VALUE - 1L
MAX_REAL_OFFSET = MAX_ADDR - LONG_MIN


def is_ext_addr(address: int) -> bool:
    """Whether a CQ unit's tagsCode is an ext address (``ConsumeQueueExt.isExtAddr``)."""
    return address <= MAX_ADDR


def decorate(offset: int) -> int:
    """File offset -> ext address (``decorate``); an address stays as it is."""
    return offset if is_ext_addr(offset) else offset + LONG_MIN


def undecorate(address: int) -> int:
    """Ext address -> file offset (``unDecorate``); a non-address stays as it is."""
    return address - LONG_MIN if is_ext_addr(address) else address


@dataclass(frozen=True, slots=True)
class CqExtUnit:
    """One ext unit: the message's real tagsCode, its store time and its filter bitmap (None: no bitmap)."""

    tags_code: int
    msg_store_time: int
    filter_bit_map: bytes | None = None

    @property
    def size(self) -> int:
        return MIN_EXT_UNIT_SIZE + (len(self.filter_bit_map) if self.filter_bit_map else 0)


def pack_cq_ext_unit(unit: CqExtUnit) -> bytes:
    bit_map = unit.filter_bit_map or b""
    size = MIN_EXT_UNIT_SIZE + len(bit_map)
    if size > MAX_EXT_UNIT_SIZE:
        raise ValueError(f"consume queue ext unit of {size} bytes: more than {MAX_EXT_UNIT_SIZE} (a bitmap of "
                         f"{len(bit_map)} bytes)")
    return CQ_EXT_HEADER.pack(size, unit.tags_code, unit.msg_store_time, len(bit_map)) + bit_map


def unit_size_at(buf: memoryview | bytes, pos: int) -> int:
    """The size field of the unit at ``pos`` (<= 0: no unit there, the file's units end)."""
    if pos + 2 > len(buf):
        return 0
    return _SHORT.unpack_from(buf, pos)[0]


def read_cq_ext_unit(buf: memoryview | bytes, pos: int, limit: int | None = None) -> CqExtUnit | None:
    """The unit at ``pos`` (ending by ``limit``, default the buffer's end), or None where no whole,
    self-consistent unit is (size field and bitmap agree)."""
    end = len(buf) if limit is None else limit
    if pos < 0 or pos + MIN_EXT_UNIT_SIZE > end:
        return None
    size, tags_code, store_time, bit_map_size = CQ_EXT_HEADER.unpack_from(buf, pos)
    if size < MIN_EXT_UNIT_SIZE or bit_map_size < 0 or size != MIN_EXT_UNIT_SIZE + bit_map_size \
            or pos + size > end:
        return None
    bit_map = bytes(buf[pos + MIN_EXT_UNIT_SIZE:pos + size]) if bit_map_size else None
    return CqExtUnit(tags_code, store_time, bit_map)
