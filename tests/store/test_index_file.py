"""IndexFile: spec §13.3/§13.6 vectors, Java putKey/selectPhyOffset rules, read-only, truncation."""

from __future__ import annotations

import os
import struct
from pathlib import Path

import pytest

from broker_core.store.codec.hashing import index_key_hash, java_string_hash
from broker_core.store.codec.index_format import (
    INDEX_ENTRY,
    INDEX_HEADER,
    IndexHeaderValues,
    entry_pos,
    index_file_name,
    index_file_name_to_ms,
    index_file_size,
    slot_pos,
    time_diff_seconds,
)
from broker_core.store.index_file import IndexFile, IndexFileError

SLOTS = 5_000_000
INDEXES = 20_000_000
TS = 1700000000123
UNIQ = "TopicTest#C0A8000A12341B6D3586000000640000"


def read_at(path: Path, pos: int, n: int) -> bytes:
    with open(path, "rb") as f:
        f.seek(pos)
        return f.read(n)


# ---------------------------------------------------------------- §13.3


@pytest.mark.parametrize(
    ("key", "java_hash", "key_hash", "slot", "slot_offset"),
    [
        ("TopicTest#KEY1", -1656969516, 1656969516, 1969516, 7_878_104),
        ("TopicTest#KEY0", -1656969517, 1656969517, 1969517, 7_878_108),
        (UNIQ, -356105514, 356105514, 1105514, 4_422_096),
    ],
)
def test_spec_13_3_hashes_and_slots(key: str, java_hash: int, key_hash: int, slot: int, slot_offset: int) -> None:
    assert java_string_hash(key) == java_hash
    assert index_key_hash(key) == key_hash
    assert key_hash % SLOTS == slot
    assert slot_pos(SLOTS, key_hash) == slot_offset


def test_layout_helpers() -> None:
    assert index_file_size(SLOTS, INDEXES) == 420_000_040
    assert index_file_size(64, 200) == 4296
    assert entry_pos(SLOTS, 1) == 20_000_060
    assert time_diff_seconds(TS + 1999, TS) == 1
    assert time_diff_seconds(TS - 5000, TS) == 0
    assert time_diff_seconds(TS, 0) == 0
    assert time_diff_seconds(TS + 10**13, 1) == 0x7FFFFFFF
    name = index_file_name(TS)
    assert len(name) == 17 and name.isdigit() and name.endswith("123")
    assert index_file_name_to_ms(name) == TS


# ---------------------------------------------------------------- §13.6


def test_spec_13_6_two_entries_default_geometry(tmp_path: Path) -> None:
    path = tmp_path / "20231114222000123"
    f = IndexFile(path, SLOTS, INDEXES)
    assert f.created
    assert os.path.getsize(path) == 420_000_040
    assert f.put_key(UNIQ, 0, TS)
    assert f.put_key("TopicTest#KEY0", 0, TS)
    f.close()

    assert read_at(path, 20_000_060, 20).hex() == "1539bd2a" "0000000000000000" "00000000" "00000000"
    assert read_at(path, 20_000_080, 20).hex() == "62c3592d" "0000000000000000" "00000000" "00000000"
    assert read_at(path, 4_422_096, 4).hex() == "00000001"
    assert read_at(path, 7_878_108, 4).hex() == "00000002"
    assert read_at(path, 0, 40).hex() == (
        "0000018bcfe5687b" "0000018bcfe5687b" "0000000000000000" "0000000000000000" "00000002" "00000003")
    # Nothing else was written: the other bytes are zero. The whole file has its disk blocks from
    # creation (posix_fallocate), so no later page can fault on a full disk (issue 11 item 3).
    assert read_at(path, 20_000_040, 20) == bytes(20)
    assert read_at(path, 20_000_100, 20) == bytes(20)
    st = os.stat(path)
    assert st.st_blocks * 512 >= 420_000_040 and f.reserved, "index file must be fully reserved when created"

    g = IndexFile(path, SLOTS, INDEXES, read_only=True)
    assert (g.begin_timestamp, g.end_timestamp, g.hash_slot_count, g.index_count) == (TS, TS, 2, 3)
    assert g.select_phy_offsets(UNIQ, 64, 0, 2**63 - 1) == [0]
    assert g.select_phy_offsets("TopicTest#KEY0", 64, 0, 2**63 - 1) == [0]
    assert g.select_phy_offsets("TopicTest#KEY1", 64, 0, 2**63 - 1) == []
    g.close()


# ---------------------------------------------------------------- header behaviour


def test_fresh_file_header_untouched_until_first_put(tmp_path: Path) -> None:
    f = IndexFile(tmp_path / "a", 8, 10)
    assert f.index_count == 1 and f.entry_count == 0 and not f.is_full()
    f.close(flush=False)
    assert (tmp_path / "a").read_bytes() == bytes(index_file_size(8, 10))
    # flush writes the live header, as Java's updateByteBuffer: indexCount 1 appears.
    f = IndexFile(tmp_path / "a", 8, 10)
    f.close()
    assert INDEX_HEADER.unpack_from((tmp_path / "a").read_bytes()) == (0, 0, 0, 0, 0, 1)


def test_preset_from_previous_file_and_first_entry_time_diff(tmp_path: Path) -> None:
    prev_end_ts = TS - 7_500
    f = IndexFile(tmp_path / "b", 8, 10, end_phy_offset=4242, end_timestamp=prev_end_ts)
    data = f._buf  # noqa: SLF001 - inspect the mapping directly
    # Only begin/end timestamp and phy offset are written at construction.
    assert INDEX_HEADER.unpack_from(data) == (prev_end_ts, prev_end_ts, 4242, 4242, 0, 0)
    assert (f.begin_timestamp, f.end_phy_offset) == (prev_end_ts, 4242)
    assert f.put_key("T#k", 5000, TS)
    # Java computes timeDiff against the pre-set begin (7.5 s -> 7) and only then resets begin.
    assert list(f.iter_entries()) == [(1, index_key_hash("T#k"), 5000, 7, 0)]
    assert INDEX_HEADER.unpack_from(data) == (TS, TS, 5000, 5000, 1, 2)
    f.close()


def test_preset_ignored_when_zero(tmp_path: Path) -> None:
    f = IndexFile(tmp_path / "c", 8, 10, end_phy_offset=0, end_timestamp=0)
    assert bytes(f._buf[:40]) == bytes(40)  # noqa: SLF001
    f.close(flush=False)


def test_full_after_index_num_minus_one_entries(tmp_path: Path) -> None:
    f = IndexFile(tmp_path / "d", 4, 4)
    for i in range(3):
        assert f.put_key(f"T#k{i}", i * 100, TS + i * 1000)
    assert f.is_full()
    before = bytes(f._buf)  # noqa: SLF001
    assert f.put_key("T#k3", 300, TS + 3000) is False
    assert bytes(f._buf) == before  # noqa: SLF001
    assert (f.index_count, f.entry_count, f.end_phy_offset, f.end_timestamp) == (4, 3, 200, TS + 2000)
    f.close()


def test_hash_slot_count_counts_new_slots_only(tmp_path: Path) -> None:
    f = IndexFile(tmp_path / "e", 1, 10)  # every key collides into slot 0
    for i in range(4):
        f.put_key(f"T#k{i % 2}", i, TS)
    assert f.hash_slot_count == 1
    assert [e[4] for e in f.iter_entries()] == [0, 1, 2, 3]  # chain through every entry
    f.close()


def test_reopen_continues_and_zero_count_reads_as_one(tmp_path: Path) -> None:
    p = tmp_path / "f"
    f = IndexFile(p, 16, 50)
    f.put_key("T#a", 10, TS)
    f.close()
    f = IndexFile(p, 16, 50, end_phy_offset=999, end_timestamp=1)  # presets ignored for existing files
    assert not f.created
    assert (f.begin_phy_offset, f.end_phy_offset, f.index_count) == (10, 10, 2)
    f.put_key("T#a", 20, TS + 3000)
    assert f.select_phy_offsets("T#a", 10, 0, 2**63 - 1) == [20, 10]
    f.close()

    raw = bytearray(index_file_size(4, 5))
    struct.pack_into(">i", raw, 36, -7)
    (tmp_path / "g").write_bytes(raw)
    g = IndexFile(tmp_path / "g", 4, 5, read_only=True)
    assert g.index_count == 1
    assert IndexHeaderValues.decode(raw).index_count == 1
    g.close()


def test_wrong_size_rejected_and_empty_file_extended(tmp_path: Path) -> None:
    (tmp_path / "x").write_bytes(b"\0" * 100)
    with pytest.raises(IndexFileError):
        IndexFile(tmp_path / "x", 8, 10)
    (tmp_path / "y").write_bytes(b"")
    f = IndexFile(tmp_path / "y", 8, 10)
    assert f.created and os.path.getsize(tmp_path / "y") == index_file_size(8, 10)
    f.close()
    with pytest.raises(FileNotFoundError):
        IndexFile(tmp_path / "nope", 8, 10, read_only=True)


# ---------------------------------------------------------------- select


def test_select_newest_first_filters_collisions_and_max(tmp_path: Path) -> None:
    f = IndexFile(tmp_path / "s", 1, 100)
    for i in range(10):
        f.put_key("T#a" if i % 2 == 0 else "T#b", i * 10, TS + i * 1000)
    assert f.select_phy_offsets("T#a", 64, 0, 2**63 - 1) == [80, 60, 40, 20, 0]
    assert f.select_phy_offsets("T#b", 3, 0, 2**63 - 1) == [90, 70, 50]
    out = [1, 2]
    f.select_phy_offsets("T#a", 3, 0, 2**63 - 1, out)
    assert out == [1, 2, 80]
    assert f.select_phy_offsets("T#zzz", 64, 0, 2**63 - 1) == []
    f.close()


def test_select_time_range(tmp_path: Path) -> None:
    f = IndexFile(tmp_path / "t", 8, 100)
    base = 1_700_000_000_000
    for i in range(10):
        f.put_key("T#k", i, base + i * 10_000 + 500)  # entry i stored at second 10*i (+0.5 s)
    # The stored time is begin + whole seconds: base+500 + 10_000*i.
    assert f.select_phy_offsets("T#k", 64, base + 20_500, base + 50_500) == [5, 4, 3, 2]
    assert f.select_phy_offsets("T#k", 64, base + 20_501, base + 50_499) == [4, 3]
    assert f.select_phy_offsets("T#k", 64, base + 95_000, base + 99_000) == []
    assert f.is_time_matched(base, base + 500)
    assert f.is_time_matched(base + 50_000, base + 60_000)
    assert f.is_time_matched(0, 2**63 - 1)
    assert f.is_time_matched(base + 90_500, 2**63 - 1)
    assert not f.is_time_matched(base + 90_501, 2**63 - 1)
    assert not f.is_time_matched(0, base + 499)
    f.close()


# ---------------------------------------------------------------- read-only


def test_read_only_never_writes(tmp_path: Path) -> None:
    p = tmp_path / "ro"
    f = IndexFile(p, 8, 10)
    f.put_key("T#a", 1, TS)
    f.close()
    before = p.read_bytes()
    os.utime(p, ns=(1_000_000_000, 1_000_000_000))
    g = IndexFile(p, 8, 10, read_only=True)
    with pytest.raises(IndexFileError):
        g.put_key("T#b", 2, TS)
    with pytest.raises(IndexFileError):
        g.truncate_from(0)
    with pytest.raises(TypeError):
        INDEX_ENTRY.pack_into(g._buf, 100, 1, 2, 3, 4)  # noqa: SLF001 - the mapping itself is read-only
    assert g.select_phy_offsets("T#a", 4, 0, 2**63 - 1) == [1]
    g.flush()
    g.close()
    assert p.read_bytes() == before
    assert os.stat(p).st_mtime_ns == 1_000_000_000


# ---------------------------------------------------------------- truncation


def test_truncate_from_restores_exact_bytes(tmp_path: Path) -> None:
    records = [("T#a", 0), ("T#b", 100), ("T#a", 200), ("T#c", 300), ("T#a", 400)]

    def build(name: str, n: int) -> IndexFile:
        f = IndexFile(tmp_path / name, 2, 20)
        for i, (k, phy) in enumerate(records[:n]):
            f.put_key(k, phy, TS + i * 2000)  # whole seconds after begin: the end time is recoverable
        return f

    full = build("full", 5)
    assert full.truncate_from(200) == 3
    assert (full.index_count, full.end_phy_offset, full.end_timestamp) == (3, 100, TS + 2000)
    assert full.select_phy_offsets("T#a", 64, 0, 2**63 - 1) == [0]
    full.close()
    ref = build("ref", 2)
    ref.close()
    assert (tmp_path / "full").read_bytes() == (tmp_path / "ref").read_bytes()


def test_truncate_from_everything_and_nothing(tmp_path: Path) -> None:
    f = IndexFile(tmp_path / "z", 4, 20)
    f.put_key("T#a", 50, TS)
    f.put_key("T#b", 60, TS + 1000)
    assert f.truncate_from(61) == 0
    assert f.truncate_from(50) == 2
    assert (f.index_count, f.hash_slot_count, f.end_phy_offset) == (1, 0, 50)
    assert bytes(f._buf[40:]) == bytes(len(f._buf) - 40)  # noqa: SLF001
    f.close()


def test_reachable_entries_beside_a_live_writer_follows_newer_entries(tmp_path: Path) -> None:
    """A reader's header is a snapshot; the writer keeps linking new entries in front of old chains.

    Why: verifyStore beside a running broker called older entries "index-unreachable" (26 times in 15
    runs) because their slot now named an entry past the reader's count. ``follow_newer`` walks
    through such entries back to the snapshot's ones, and returns only the snapshot's."""
    path = tmp_path / "idx"
    w = IndexFile(path, 4, 40)  # 4 slots: chains are long and shared
    for i in range(8):
        w.put_key(f"T#k{i}", 100 * i, 1_700_000_000_000 + i)
    ro = IndexFile(path, 4, 40, read_only=True)
    snapshot = set(range(1, 9))
    assert ro.reachable_entries() == snapshot
    for i in range(8, 20):  # the writer goes on: every slot's head is now past the reader's count
        w.put_key(f"T#k{i}", 100 * i, 1_700_000_000_000 + i)
    assert ro.reachable_entries() != snapshot  # the stale view: older entries look cut off
    assert ro.reachable_entries(follow_newer=True) == snapshot
    # real damage stays visible: a slot pointing nowhere still leaves its chain unreachable
    ro.close()
    w.close()
    ro = IndexFile(path, 4, 40, read_only=True)
    before = ro.reachable_entries(follow_newer=True)
    ro.close()
    with open(path, "r+b") as f:
        f.seek(slot_pos(4, 0))  # slot 0
        f.write(struct.pack(">i", 0))  # clear slot 0
    ro = IndexFile(path, 4, 40, read_only=True)
    try:
        assert ro.reachable_entries(follow_newer=True) < before
    finally:
        ro.close()
