"""Index files from packed ``(keyHash, phyOffset, storeTimestamp)`` keys, one Spark task per file.

With the default maxIndexNum (20M keys) a store of several GiB has one index file, built by the
shuffle's index task beside the queue tasks; more files are built in parallel, one task each.

Why this is parallel: RocketMQ fills index files strictly in commitlog order, and a file holds
``maxIndexNum - 1`` entries, so the driver knows from per-range key counts which file and entry
number every key gets. Each file then depends only on its own keys plus the previous file's last
key (Java pre-sets a new file's header from the previous file's end values, and the first entry's
timeDiff is computed against that pre-set beginTimestamp). Key hashes were computed in the parallel
decode pass, so a file task only links slot chains.

The byte layout comes from ``codec/index_format`` (the single definition of the IndexFile layout)
and the putKey rules mirror ``IndexFile.put_key``; tests check the files are byte-identical to what
the store's ``IndexService.build_index`` writes for the same records. Why not the store's class with
``IndexFile.put_key_hash``: one file is the critical path of the write stage, and linking through
the class (header rewrite per key, writes through the mapping) measured 1.6 us/key against 0.8 for
this module's Python loop; the loop is now ``hotpath.link_index_entries`` (compiled, ~0.02 us/key).
"""

from __future__ import annotations

import os
import sys
from array import array
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from broker_core.store.codec.hotpath import link_index_entries
from broker_core.store.codec.index_format import (
    INDEX_ENTRY,
    INDEX_ENTRY_SIZE,
    INDEX_HEADER,
    INDEX_HEADER_SIZE,
    entry_pos,
    index_file_size,
)

from .scan import IDX_REC

PREV_MARKER = -1  # chunk start value that marks "last key of the previous file"


@dataclass(frozen=True, slots=True)
class IndexFileResult:
    file_no: int
    name: str
    entries: int
    begin_timestamp: int
    end_timestamp: int
    begin_phy_offset: int
    end_phy_offset: int
    hash_slot_count: int


def split_range_keys(first_key: int, blob: bytes, per_file: int, n_files: int
                     ) -> Iterator[tuple[int, tuple[int, bytes]]]:
    """Cut one range's packed keys at index-file boundaries.

    Yields ``(file_no, (global_key_index, bytes))`` chunks, plus ``(file_no + 1, (PREV_MARKER, key))``
    when the chunk holds the last key of ``file_no``: the next file's header is pre-set from it.
    """
    n = len(blob) // IDX_REC.size
    g = first_key
    end = first_key + n
    while g < end:
        f = g // per_file
        f_end = min(end, (f + 1) * per_file)
        a = (g - first_key) * IDX_REC.size
        b = (f_end - first_key) * IDX_REC.size
        yield f, (g, blob[a:b])
        if f_end == (f + 1) * per_file and f + 1 < n_files:
            yield f + 1, (PREV_MARKER, blob[b - IDX_REC.size:b])
        g = f_end


def build_index_file(path: str, hash_slot_num: int, index_num: int, prev_phy: int, prev_ts: int,
                     keys: bytes) -> tuple[int, int, int, int, int, int]:
    """Write one complete index file for ``keys`` (packed IDX_REC) in a single sequential write.

    Returns the header values (begin/end timestamp, begin/end phy offset, hashSlotCount, indexCount).
    """
    n_keys = len(keys) // IDX_REC.size
    if n_keys > index_num - 1:
        raise ValueError(f"{n_keys} keys do not fit an index file of maxIndexNum {index_num}")
    # Linking is compiled (hotpath.link_index_entries): one file is the write stage's critical path.
    slots, entries, header = link_index_entries(keys, hash_slot_num, prev_phy, prev_ts)
    with open(path, "wb") as f:
        f.write(INDEX_HEADER.pack(*header))
        f.write(slots)
        f.seek(entry_pos(hash_slot_num, 1))
        f.write(entries)
        f.truncate(index_file_size(hash_slot_num, index_num))
        f.flush()
        os.fsync(f.fileno())
    assert INDEX_HEADER.size == INDEX_HEADER_SIZE
    return header


def index_file_task(staging_index_dir: str, names: list[str], hash_slot_num: int, index_num: int,
                    rows: Iterable[tuple[int, Iterable[tuple[int, bytes]]]]) -> Iterator[IndexFileResult]:
    """mapPartitions body: ``rows`` are ``(file_no, chunks)`` after groupByKey."""
    for file_no, chunks in rows:
        prev_phy = prev_ts = 0
        parts: list[tuple[int, bytes]] = []
        for start, blob in chunks:
            if start == PREV_MARKER:
                _h, prev_phy, prev_ts = IDX_REC.unpack(blob)
            else:
                parts.append((start, blob))
        parts.sort(key=lambda p: p[0])
        keys = b"".join(p[1] for p in parts)
        name = names[file_no]
        bt, et, bp, ep, hsc, ic = build_index_file(os.path.join(staging_index_dir, name), hash_slot_num,
                                                   index_num, prev_phy, prev_ts, keys)
        yield IndexFileResult(file_no, name, ic - 1, bt, et, bp, ep, hsc)


# ---------------------------------------------------------------------------------------------- verify

def reachable_entries(path: str, hash_slot_num: int, index_num: int) -> list[tuple[int, int]]:
    """(keyHash, phyOffset) of every entry a key query can reach in an existing index file.

    An entry counts only if it is on the chain of the slot its hash maps to, walking the chain with
    the query's stop rules (spec §7.4), so a broken chain shows up as missing entries.
    """
    import mmap

    from broker_core.store.codec.index_format import IndexHeaderValues

    size = index_file_size(hash_slot_num, index_num)
    with open(path, "rb") as f:
        if os.fstat(f.fileno()).st_size != size:
            raise ValueError(f"index file {path} is not {size} bytes (maxHashSlotNum/maxIndexNum differ?)")
        mm = mmap.mmap(f.fileno(), size, access=mmap.ACCESS_READ)
    try:
        header = IndexHeaderValues.decode(mm)
        count = header.index_count
        out: list[tuple[int, int]] = []
        if count <= 1:
            return out
        slot_vals = array("i", mm[INDEX_HEADER_SIZE:INDEX_HEADER_SIZE + 4 * hash_slot_num])
        if sys.byteorder == "little":
            slot_vals.byteswap()
        unpack = INDEX_ENTRY.unpack_from
        base = entry_pos(hash_slot_num, 0)
        for s, n in enumerate(slot_vals):
            if n <= 0 or n > count:
                continue
            seen = 0
            while True:
                kh, phy, td, prev = unpack(mm, base + n * INDEX_ENTRY_SIZE)
                if td < 0:
                    break
                if kh % hash_slot_num == s:
                    out.append((kh, phy))
                seen += 1
                if prev <= 0 or prev > count or prev == n or seen > count:
                    break
                n = prev
        return out
    finally:
        mm.close()
