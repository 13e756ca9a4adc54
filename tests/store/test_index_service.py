"""IndexService: golden store-basic (read every keyQuery, rebuild byte-identical), rules, lifecycle."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from broker_core.store.codec.hashing import index_key_hash
from broker_core.store.codec.index_format import index_file_name
from broker_core.store.index_file import IndexFileError
from broker_core.store.index_service import IndexService

MAX = 2**63 - 1
TS = 1_795_318_662_000


def step_clock(start: int = TS, step: int = 1) -> Callable[[], int]:
    state = [start - step]

    def clock() -> int:
        state[0] += step
        return state[0]

    return clock


def geometry(manifest: dict) -> tuple[int, int]:
    s = manifest["settings"]
    return int(s["maxHashSlotNum"]), int(s["maxIndexNum"])


def build_from_manifest(svc: IndexService, manifest: dict) -> None:
    for m in manifest["messages"]:
        svc.build_index(m["topic"], m["physicalOffset"], m["storeTimestamp"], m["uniqKey"], m["keys"],
                        m["sysFlag"] & 0xC)


def snapshot(d: Path) -> dict[str, tuple[bytes, int]]:
    return {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in sorted(d.iterdir())}


@pytest.fixture
def svc(tmp_path: Path) -> Iterator[IndexService]:
    s = IndexService(tmp_path / "index", 4, 6, clock=step_clock())
    yield s
    s.shutdown()


# ---------------------------------------------------------------- golden


def test_golden_read_every_key_query(golden_copy, manifests) -> None:
    man = manifests["store-basic"]
    index_dir = golden_copy("store-basic") / "index"
    for p in index_dir.iterdir():
        os.utime(p, ns=(1_000_000_000, 1_000_000_000))
    before = snapshot(index_dir)
    slots, num = geometry(man)
    svc = IndexService(index_dir, slots, num, read_only=True)
    assert svc.stats().file_count == 3
    assert svc.stats().entry_count == 199 + 199 + 41
    assert svc.last_index_file_end_phy_offset == 194253
    assert len(man["keyQueries"]) > 300
    for q in man["keyQueries"]:
        got = svc.query_offset(q["topic"], q["key"], 64, 0, MAX)
        assert sorted(got) == q["indexServicePhysicalOffsets"], (q["topic"], q["key"])
    with pytest.raises(IndexFileError):
        svc.build_index("GoldenTopicA", 10**9, TS, "u", "k", 0)
    with pytest.raises(IndexFileError):
        svc.delete_expired_file(10**9)
    with pytest.raises(IndexFileError):
        svc.truncate_beyond(0)
    svc.flush()
    svc.shutdown()
    assert snapshot(index_dir) == before


def test_golden_rebuild_is_byte_identical(tmp_path: Path, golden_root: Path, manifests) -> None:
    man = manifests["store-basic"]
    slots, num = geometry(man)
    first_ts = man["messages"][0]["storeTimestamp"]
    out = tmp_path / "index"
    flushed: list[int] = []
    svc = IndexService(out, slots, num, clock=step_clock(first_ts, 150), on_full_file_flushed=flushed.append)
    build_from_manifest(svc, man)
    assert svc.stats().file_count == 3
    # Both rolled-over files were full when flushed; the checkpoint may advance to the second's end.
    assert len(flushed) == 2 and svc.last_full_file_end_timestamp == flushed[-1]
    svc.shutdown()

    mine = sorted(out.iterdir())
    gold = sorted((golden_root / "store-basic" / "index").iterdir())
    assert [p.name for p in mine] == [index_file_name(first_ts + 150 * i) for i in range(3)]
    assert len(mine) == len(gold) == 3
    for a, b in zip(mine, gold, strict=True):
        assert a.read_bytes() == b.read_bytes(), (a.name, b.name)
    assert flushed[-1] == int.from_bytes(gold[1].read_bytes()[8:16], "big")

    # Re-dispatch of already indexed records (recovery) adds nothing: offsets < endPhyOffset are skipped.
    svc = IndexService(out, slots, num, clock=step_clock())
    redispatch = dict(man, messages=man["messages"][:-1])
    build_from_manifest(svc, redispatch)
    assert svc.stats().file_count == 3
    # ...but, as in Java (`<`), the record exactly at endPhyOffset is indexed again: the store must
    # resume dispatch after the last indexed record, never at it.
    last = man["messages"][-1]
    assert svc.build_index(last["topic"], last["physicalOffset"], last["storeTimestamp"], last["uniqKey"],
                           last["keys"], 0) >= 1
    svc.shutdown()
    for a, b in zip(sorted(out.iterdir())[:2], gold[:2], strict=True):
        assert a.read_bytes() == b.read_bytes()


# ---------------------------------------------------------------- build rules


def test_keys_order_tokens_and_rollback(tmp_path: Path) -> None:
    s = IndexService(tmp_path / "i", 64, 100, clock=step_clock())
    assert s.build_index("T", 0, TS, "UNIQ1", "  a  b ", 0) == 3
    f = s.files[0]
    assert [e[1] for e in f.iter_entries()] == [index_key_hash(k) for k in ("T#UNIQ1", "T#a", "T#b")]
    assert s.build_index("T", 100, TS, None, "", 0) == 0
    assert s.build_index("T", 200, TS, None, None, 0) == 0
    assert s.build_index("T", 300, TS, "U2", "a", 0xC) == 0  # ROLLBACK
    assert s.build_index("T", 400, TS, "U3", "a", 0x4) == 2  # PREPARED is indexed
    assert s.build_index("T", 500, TS, "U4", None, 0x8 | 0x10) == 1  # COMMIT, extra flag bits ignored
    assert s.build_index("T", 450, TS, "U5", "a", 0) == 0  # below endPhyOffset: already indexed
    assert s.build_index("T", 500, TS, None, "again", 0) == 1  # equal offset is not skipped (Java uses <)
    assert sorted(s.query_offset("T", "a", 64, 0, MAX)) == [0, 400]
    assert s.query_offset("T", "U2", 64, 0, MAX) == []
    assert s.query_offset("T", "U5", 64, 0, MAX) == []
    assert s.query_offset("Other", "a", 64, 0, MAX) == []
    assert s.stats().entry_count == 7
    s.shutdown()


def test_roll_to_new_file_when_full(svc: IndexService, tmp_path: Path) -> None:
    flushed: list[int] = []
    svc.on_full_file_flushed = flushed.append
    # index_num 6 -> 5 entries per file; one record with 3 keys spans files.
    svc.build_index("T", 0, TS, "u0", "a b", 0)
    svc.build_index("T", 100, TS + 4000, "u1", "a b", 0)
    files = svc.files
    assert len(files) == 2
    assert files[0].is_full() and files[0].end_phy_offset == 100 and files[0].end_timestamp == TS + 4000
    assert (files[1].begin_phy_offset, files[1].entry_count) == (100, 1)
    assert flushed == [TS + 4000] and svc.last_full_file_end_timestamp == TS + 4000
    assert [f.file_name for f in files] == [index_file_name(TS), index_file_name(TS + 1)]
    assert sorted(svc.query_offset("T", "b", 64, 0, MAX)) == [0, 100]
    assert svc.build_index("T", 200, TS + 5000, None, "c d e f", 0) == 4
    assert len(svc.files) == 2 and svc.files[-1].is_full()
    # A full last file rolls even for a record that is then skipped (Java fetches the file first).
    assert svc.build_index("T", 300, TS + 6000, "u3", "x", 0xC) == 0
    assert len(svc.files) == 3 and svc.files[-1].entry_count == 0
    assert (svc.files[-1].begin_phy_offset, svc.files[-1].begin_timestamp) == (200, TS + 5000)
    assert svc.last_index_file_end_phy_offset == 200 and flushed == [TS + 4000, TS + 5000]
    assert svc.build_index("T", 150, TS + 7000, None, "y", 0) == 0
    assert svc.files[-1].entry_count == 0


def test_reload_continues_last_file_and_clock_behind(tmp_path: Path) -> None:
    d = tmp_path / "i"
    s = IndexService(d, 4, 6, clock=step_clock())
    s.build_index("T", 0, TS, "u0", "a b c", 0)
    s.shutdown()
    s = IndexService(d, 4, 6, clock=lambda: 0)  # clock far behind the existing name
    assert s.last_index_file_end_phy_offset == 0 and s.stats().entry_count == 4
    s.build_index("T", 100, TS + 1000, "u1", "a", 0)
    s.build_index("T", 200, TS + 2000, "u2", None, 0)
    names = [f.file_name for f in s.files]
    assert names == sorted(names) and len(set(names)) == 2
    s.shutdown()
    s = IndexService(d, 4, 6, read_only=True)
    assert sorted(s.query_offset("T", "a", 64, 0, MAX)) == [0, 100]
    assert s.query_offset("T", "u2", 64, 0, MAX) == [200]
    s.shutdown()


def test_same_millisecond_names_do_not_collide(tmp_path: Path) -> None:
    s = IndexService(tmp_path / "i", 4, 3, clock=lambda: TS)
    for i in range(6):
        s.build_index("T", i * 10, TS, None, "k", 0)
    assert len(s.files) == 3
    assert [f.file_name for f in s.files] == [index_file_name(TS + i) for i in range(3)]
    s.shutdown()


# ---------------------------------------------------------------- queries


def test_query_cap_and_newest_first(tmp_path: Path) -> None:
    s = IndexService(tmp_path / "i", 16, 30, clock=step_clock())
    for i in range(100):
        s.build_index("T", i * 10, TS + i * 1000, None, "hot", 0)
    assert len(s.files) == 4
    got = s.query_offset("T", "hot", 1000, 0, MAX)
    assert got == [i * 10 for i in range(99, 35, -1)]
    assert s.query_offset("T", "hot", 5, 0, MAX) == [990, 980, 970, 960, 950]
    assert s.query_offset("T", "hot", 0, 0, MAX) == []
    s.shutdown()


def test_query_time_range_across_files(tmp_path: Path) -> None:
    s = IndexService(tmp_path / "i", 16, 11, clock=step_clock())
    for i in range(40):  # 10 per file; file k covers TS + [10k, 10k+9] s
        s.build_index("T", i, TS + i * 1000, None, "k", 0)
    assert len(s.files) == 4
    assert s.query_offset("T", "k", 64, TS + 12_000, TS + 27_000) == list(range(27, 11, -1))
    assert s.query_offset("T", "k", 64, TS + 35_000, MAX) == [39, 38, 37, 36, 35]
    assert s.query_offset("T", "k", 64, 0, TS + 2_000) == [2, 1, 0]
    assert s.query_offset("T", "k", 64, TS + 100_000, MAX) == []
    s.shutdown()


# ---------------------------------------------------------------- lifecycle


def test_delete_expired_never_last(tmp_path: Path) -> None:
    s = IndexService(tmp_path / "i", 8, 3, clock=step_clock())
    for i in range(8):  # 2 entries per file -> 4 files ending at phy 10, 30, 50, 70
        s.build_index("T", i * 10, TS + i, None, "k", 0)
    assert [f.end_phy_offset for f in s.files] == [10, 30, 50, 70]
    assert s.delete_expired_file(10) == 0
    assert s.delete_expired_file(31) == 2
    assert [f.end_phy_offset for f in s.files] == [50, 70]
    assert s.delete_expired_file(10**9) == 1
    assert len(s.files) == 1 and len(list((tmp_path / "i").iterdir())) == 1
    s.shutdown()


def test_destroy_files_newer_than_checkpoint(tmp_path: Path) -> None:
    s = IndexService(tmp_path / "i", 8, 3, clock=step_clock())
    for i in range(5):
        s.build_index("T", i * 10, TS + i * 1000, None, "k", 0)
    assert [f.end_timestamp for f in s.files] == [TS + 1000, TS + 3000, TS + 4000]
    assert s.last_full_file_end_timestamp == TS + 3000
    assert s.destroy_files_newer_than(s.last_full_file_end_timestamp) == 1
    assert len(list((tmp_path / "i").iterdir())) == 2
    # Re-dispatch rebuilds the dropped range.
    s.build_index("T", 40, TS + 4000, None, "k", 0)
    assert s.query_offset("T", "k", 64, 0, MAX) == [40, 30, 20, 10, 0]
    s.shutdown()


def test_truncate_beyond(tmp_path: Path) -> None:
    s = IndexService(tmp_path / "i", 8, 5, clock=step_clock())
    for i in range(10):  # 4 entries per file: files hold phy 0-30, 40-70, 80-90
        s.build_index("T", i * 10, TS + i * 1000, None, "k", 0)
    assert len(s.files) == 3
    assert s.truncate_beyond(55) == 4  # 80, 90 (file deleted) + 60, 70
    assert len(s.files) == 2 and len(list((tmp_path / "i").iterdir())) == 2
    assert s.last_index_file_end_phy_offset == 50
    assert s.files[-1].end_timestamp == TS + 5000 and not s.files[-1].is_full()
    assert max(s.query_offset("T", "k", 64, 0, MAX)) < 55
    # The log is rewritten from the cut: those records must be indexed, not skipped.
    s.build_index("T", 55, TS + 9000, None, "k", 0)
    assert s.query_offset("T", "k", 3, 0, MAX) == [55, 50, 40]
    assert s.truncate_beyond(0) == 7
    assert s.files == [] and s.last_index_file_end_phy_offset == 0
    s.shutdown()


def test_flush_stats_and_shutdown(tmp_path: Path) -> None:
    s = IndexService(tmp_path / "i", 8, 10, clock=step_clock())
    s.build_index("T", 0, TS, "u", "a b", 0)
    s.flush()
    st = s.stats()
    assert (st.file_count, st.entry_count, st.total_size, st.last_end_phy_offset, st.last_end_timestamp) == (
        1, 3, 40 + 8 * 4 + 10 * 20, 0, TS)
    assert s.last_full_file_end_timestamp == 0
    s.shutdown()
    assert s.files == []
    s.shutdown()
    s2 = IndexService(tmp_path / "i", 8, 10)
    s2.destroy()
    assert list((tmp_path / "i").iterdir()) == []
    s2.shutdown()


def test_read_only_missing_dir(tmp_path: Path) -> None:
    s = IndexService(tmp_path / "absent", read_only=True)
    assert s.query_offset("T", "k", 64, 0, MAX) == [] and s.last_index_file_end_phy_offset == 0
    assert not (tmp_path / "absent").exists()


def test_next_file_reserved_ahead_is_used_by_the_roll_and_never_damage(tmp_path: Path) -> None:
    """``make_room`` reserves the file the next roll needs before a put is accepted (issue 11 item 3).
    The roll uses it with Java's header preset, so the bytes are those of a file made at the roll; a
    process that stops before the roll leaves a blank file that is not damage (read-only: ignored,
    writable: used by the next roll) and a clean shutdown gives it back."""
    d = tmp_path / "index"
    plain = IndexService(tmp_path / "plain", 4, 40, clock=step_clock())
    svc = IndexService(d, 4, 40, clock=step_clock())
    try:
        assert not svc.has_room(2)  # no file yet
        svc.make_room(2)
        assert svc.has_room(2) and len(svc.files) == 0 and len(list(d.iterdir())) == 1
        for i in range(25):  # 39 entries per file: rolls once
            for s in (plain, svc):
                s.build_index("T", 100 * i, TS + i, f"u{i}", f"k{i}", 0)
            if not svc.has_room(2):
                svc.make_room(2)
        assert len(svc.files) == 2 and all(f.reserved for f in svc.files)
        assert [f.path.read_bytes() for f in svc.files] == [f.path.read_bytes() for f in plain.files]
        assert not svc.has_room(30)
        svc.make_room(30)  # a put with many keys: the next file is reserved before it is accepted
        spare = [p for p in d.iterdir() if p.name not in {f.file_name for f in svc.files}]
        assert len(spare) == 1  # reserved ahead for the next roll, not used yet
        names = sorted(p.name for p in d.iterdir())
    finally:
        plain.shutdown()
    # a crash now: the blank file is not damage
    ro = IndexService(d, 4, 40, read_only=True)
    try:
        assert ro.damaged_files == [] and len(ro.files) == 2
    finally:
        ro.shutdown()
    again = IndexService(d, 4, 40, clock=step_clock(TS + 10_000))
    try:
        assert again.damaged_files == [] and len(again.files) == 2
        for i in range(25, 50):
            again.build_index("T", 100 * i, TS + i, f"u{i}", f"k{i}", 0)
        assert [f.file_name for f in again.files] == names  # the roll used the reserved file
        assert again.query_offset("T", "k49", 64, 0, MAX) == [4900]
        again.make_room(30)
        assert len(list(d.iterdir())) == 4
    finally:
        again.shutdown()
    assert sorted(p.name for p in d.iterdir()) == names  # nothing blank left once shut down cleanly
    del svc  # the "crashed" process's service: never shut down
