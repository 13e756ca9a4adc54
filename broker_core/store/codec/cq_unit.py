"""Consume queue units: SimpleCQ 20 bytes (spec §5.1) and BatchCQ 46 bytes (spec §6.1)."""

from __future__ import annotations

import struct

CQ_STORE_UNIT_SIZE = 20
BCQ_STORE_UNIT_SIZE = 46

# phyOffset, size, tagsCode
CQ_UNIT = struct.Struct(">qiq")
# phyOffset, size, tagsCode, storeTime, msgBaseOffset, batchSize, compactedOffset, reserved
BCQ_UNIT = struct.Struct(">qiqqqhii")
BCQ_MSG_BASE_OFFSET_POS = 28
BCQ_MAX_BATCH_SIZE = 32767
"""A unit's batchSize is a short: an inner batch of more messages has no unit (the store refuses it)."""
BCQ_STORE_TIME_POS = 20
_I64 = struct.Struct(">q")

# Filler written before the first real unit of a queue created at a non-zero offset (spec §5.3).
CQ_FILLER = CQ_UNIT.pack(0, 0x7FFFFFFF, 0)
COMPACTED_OFFSET_NONE = -1


def pack_cq_unit(phy_offset: int, size: int, tags_code: int) -> bytes:
    return CQ_UNIT.pack(phy_offset, size, tags_code)


def pack_bcq_unit(phy_offset: int, size: int, tags_code: int, store_time: int, msg_base_offset: int,
                  batch_size: int) -> bytes:
    return BCQ_UNIT.pack(phy_offset, size, tags_code, store_time, msg_base_offset, batch_size,
                         COMPACTED_OFFSET_NONE, 0)


def is_valid_cq_unit(phy_offset: int, size: int) -> bool:
    return phy_offset >= 0 and size > 0


def is_valid_bcq_unit(phy_offset: int, size: int, msg_base_offset: int, batch_size: int) -> bool:
    return phy_offset >= 0 and size > 0 and msg_base_offset >= 0 and batch_size > 0
