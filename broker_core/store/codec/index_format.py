"""IndexFile byte layout (spec §7.1): the only module that knows where header, slots and entries sit.

The store's ``IndexFile``, the Spark index-rebuild job and the tests all read and write index files
through these structs and offset helpers, so the layout exists exactly once.

Layout: ``[header 40 B][slotNum x 4 B slots][indexNum x 20 B entries]``, all big-endian.
Entry number 0 is never written; entry ``n`` starts at ``entry_pos(slot_num, n)``.
"""

from __future__ import annotations

import struct
import time
from dataclasses import dataclass

INDEX_HEADER_SIZE = 40
HASH_SLOT_SIZE = 4
INDEX_ENTRY_SIZE = 20
# Value of an empty slot and of the chain terminator in an entry's prevIndex.
INVALID_INDEX = 0

# beginTimestamp, endTimestamp, beginPhyOffset, endPhyOffset, hashSlotCount, indexCount
INDEX_HEADER = struct.Struct(">qqqqii")
# keyHash, phyOffset, timeDiff (seconds), prevIndex
INDEX_ENTRY = struct.Struct(">iqii")
HASH_SLOT = struct.Struct(">i")
I64 = struct.Struct(">q")

# Header field offsets (Java writes header fields one by one as they change; a fresh file whose
# header was pre-set from the previous file has only these begin/end fields written).
BEGIN_TIMESTAMP_POS = 0
END_TIMESTAMP_POS = 8
BEGIN_PHY_OFFSET_POS = 16
END_PHY_OFFSET_POS = 24
HASH_SLOT_COUNT_POS = 32
INDEX_COUNT_POS = 36

INT32_MAX = 0x7FFFFFFF

DEFAULT_MAX_HASH_SLOT_NUM = 5_000_000
DEFAULT_MAX_INDEX_NUM = 20_000_000
# MessageStoreConfig.maxMsgsNumBatch: queryOffset never returns more than this.
DEFAULT_MAX_MSGS_NUM_BATCH = 64


def index_file_size(hash_slot_num: int, index_num: int) -> int:
    """Full pre-allocated size; every index file of a store has exactly this length."""
    return INDEX_HEADER_SIZE + hash_slot_num * HASH_SLOT_SIZE + index_num * INDEX_ENTRY_SIZE


def slot_pos(hash_slot_num: int, key_hash: int) -> int:
    """Byte offset of the slot for a (non-negative) key hash."""
    return INDEX_HEADER_SIZE + (key_hash % hash_slot_num) * HASH_SLOT_SIZE


def entries_base(hash_slot_num: int) -> int:
    """Byte offset of entry number 0 (never used, but entry n is at base + 20*n)."""
    return INDEX_HEADER_SIZE + hash_slot_num * HASH_SLOT_SIZE


def entry_pos(hash_slot_num: int, n: int) -> int:
    return INDEX_HEADER_SIZE + hash_slot_num * HASH_SLOT_SIZE + n * INDEX_ENTRY_SIZE


def time_diff_seconds(store_timestamp: int, begin_timestamp: int) -> int:
    """Entry timeDiff as Java computes it: whole seconds since the header's beginTimestamp.

    0 when the file has no begin time yet, clamped to [0, 2^31-1]. Java's long division truncates
    toward zero; negative results clamp to 0 either way, so Python's floor division is equivalent.
    """
    if begin_timestamp <= 0:
        return 0
    diff = (store_timestamp - begin_timestamp) // 1000
    if diff > INT32_MAX:
        return INT32_MAX
    if diff < 0:
        return 0
    return diff


def index_file_name(ms: int) -> str:
    """Index file name: creation time as ``yyyyMMddHHmmssSSS`` in the local time zone (spec §4.1)."""
    t = time.localtime(ms // 1000)
    return (f"{t.tm_year:04d}{t.tm_mon:02d}{t.tm_mday:02d}"
            f"{t.tm_hour:02d}{t.tm_min:02d}{t.tm_sec:02d}{ms % 1000:03d}")


def index_file_name_to_ms(name: str) -> int:
    """Inverse of ``index_file_name`` (local time zone), for keeping new names after existing ones."""
    t = time.strptime(name[:14], "%Y%m%d%H%M%S")
    return int(time.mktime(t)) * 1000 + int(name[14:17])


def is_index_file_name(name: str) -> bool:
    return len(name) == 17 and name.isdigit()


@dataclass(frozen=True, slots=True)
class IndexHeaderValues:
    """Decoded header, for tools and tests (the IndexFile keeps its own live copy)."""

    begin_timestamp: int
    end_timestamp: int
    begin_phy_offset: int
    end_phy_offset: int
    hash_slot_count: int
    index_count: int

    @classmethod
    def decode(cls, buf: bytes | bytearray | memoryview, offset: int = 0) -> IndexHeaderValues:
        """Decode a header; a stored indexCount <= 0 reads as 1, as IndexHeader.load does."""
        bt, et, bp, ep, hsc, ic = INDEX_HEADER.unpack_from(buf, offset)
        return cls(bt, et, bp, ep, hsc, ic if ic > 0 else 1)

    def encode(self) -> bytes:
        return INDEX_HEADER.pack(self.begin_timestamp, self.end_timestamp, self.begin_phy_offset,
                                 self.end_phy_offset, self.hash_slot_count, self.index_count)
