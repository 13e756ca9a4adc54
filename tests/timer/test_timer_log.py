"""TimerLog files: unit placement, end-of-file blanks, reopen, recovery, retention, read-only."""

from __future__ import annotations

from pathlib import Path

import pytest

from broker_core.store.codec.hashing import java_string_hash
from broker_core.store.codec.timer_format import (
    BLANK_MAGIC_CODE,
    MAGIC_DEFAULT,
    MAGIC_DELETE,
    MAGIC_ROLL,
    encode_blank,
    encode_unit,
)
from broker_core.store.timer.timer_log import TimerLog, TimerLogError

SMALL = 200  # units at 0, 52, 104 (a unit needs 52 + 16 free bytes); blank at 156 with 44 free


def _fill(log: TimerLog, n: int, base_offset_py: int = 1000) -> list[int]:
    return [log.append_unit(-1, MAGIC_DEFAULT, 1_000_000, 1000 * i, base_offset_py + i, 100 + i, 7)
            for i in range(n)]


def test_vector_unit_in_first_file(tmp_path: Path) -> None:
    with TimerLog(tmp_path / "timerlog") as log:
        pos = log.append_unit(-1, MAGIC_DEFAULT, 1700000000000, 10_000, 0, 211, java_string_hash("TopicTest"))
        assert pos == 0 and log.max_offset == 52
    f = tmp_path / "timerlog" / "00000000000000000000"
    data = f.read_bytes()
    assert len(data) == 104_857_600  # pre-sized to mappedFileSizeTimerLog
    assert data[:52] == bytes.fromhex(
        "00000034ffffffffffffffff000000010000018bcfe5680000002710"
        "0000000000000000000000d38e9876410000000000000000")
    assert data[52:4096] == bytes(4044)


def test_blank_and_roll_to_next_file(tmp_path: Path) -> None:
    d = tmp_path / "timerlog"
    with TimerLog(d, file_size=SMALL) as log:
        positions = _fill(log, 5)
        # 0, 52, 104 fit (free 200, 148, 96); at 156 only 44 bytes are free -> blank, next file
        assert positions == [0, 52, 104, 200, 252]
        assert log.file_offsets == [0, 200]
        assert log.max_offset == 304
    first = (d / "00000000000000000000").read_bytes()
    assert first[156:172] == encode_blank(44) == bytes.fromhex("0000002c0000000000000000cbd43194")
    assert (d / "00000000000000000200").stat().st_size == SMALL
    with TimerLog(d, file_size=SMALL) as log:
        assert log.max_offset == 304 and log.min_offset == 0
        walked = list(log.iterate())
        assert [p for p, _ in walked] == positions
        assert [u.offset_py for _, u in walked] == [1000, 1001, 1002, 1003, 1004]
        assert [u.delivery_ms for _, u in walked] == [1_000_000 + 1000 * i for i in range(5)]
        assert [p for p, _ in log.iterate(start=104, end=253)] == [104, 200, 252]
        assert log.read_unit(200).size_py == 103
        assert log.read_offset_py(252) == (1004, 104)
        with pytest.raises(IndexError):
            log.read_unit(304)
        with pytest.raises(IndexError):
            log.read_unit(10_000)
        assert log.append_unit(-1, MAGIC_DEFAULT, 0, 0, 0, 0, 0) == 304


def test_reopen_with_file_closed_but_no_blank_yet(tmp_path: Path) -> None:
    # fill file 0 up to its last unit: the blank is only written by the next append
    d2 = tmp_path / "timerlog2"
    with TimerLog(d2, file_size=SMALL) as log:
        _fill(log, 3)
        assert log.max_offset == 156 and log.file_offsets == [0]
    with TimerLog(d2, file_size=SMALL) as log:
        assert log.max_offset == 156
        assert log.append_unit(-1, MAGIC_DEFAULT, 0, 0, 0, 0, 0) == 200
        head = (d2 / "00000000000000000000").read_bytes()[156:172]
        assert int.from_bytes(head[12:16], "big", signed=True) == BLANK_MAGIC_CODE


def test_append_raw_bytes(tmp_path: Path) -> None:
    with TimerLog(tmp_path / "tl", file_size=SMALL) as log:
        unit = encode_unit(-1, MAGIC_DEFAULT | MAGIC_ROLL, 5, 6, 7, 8, 9)
        assert log.append(unit) == 0
        assert log.append(unit + unit) == 52
        assert log.append(unit) == 200  # 44 bytes free at 156 -> blank, next file
        got = log.read_unit(0)
        assert got.is_roll and not got.is_delete and got.delivery_ms == 11
        with pytest.raises(ValueError):
            log.append(bytes(SMALL))


def test_load_checks(tmp_path: Path) -> None:
    d = tmp_path / "timerlog"
    with TimerLog(d, file_size=SMALL) as log:
        _fill(log, 4)
    (d / "00000000000000000400").write_bytes(b"")  # empty trailing file: silently deleted
    with TimerLog(d, file_size=SMALL) as log:
        assert log.file_offsets == [0, 200]
    assert not (d / "00000000000000000400").exists()
    with pytest.raises(TimerLogError):
        TimerLog(d, file_size=400)
    (d / "00000000000000000600").write_bytes(bytes(SMALL))  # gap after 200
    with pytest.raises(TimerLogError):
        TimerLog(d, file_size=SMALL)


def test_recover_visits_units_and_truncates_damage(tmp_path: Path) -> None:
    d = tmp_path / "timerlog"
    with TimerLog(d, file_size=SMALL) as log:
        _fill(log, 7)  # 0 52 104 | 200 252 304 | 400
        assert log.file_offsets == [0, 200, 400]
    # corrupt the unit at 252 (magic with a high bit)
    f1 = d / "00000000000000000200"
    raw = bytearray(f1.read_bytes())
    raw[52 + 12:52 + 16] = (0x10).to_bytes(4, "big")
    f1.write_bytes(bytes(raw))
    with TimerLog(d, file_size=SMALL) as log:
        seen: list[tuple[int, int, int]] = []
        end = log.recover(0, lambda pos, magic, t: seen.append((pos, magic, t)))
        assert end == 252
        assert [p for p, _, _ in seen] == [0, 52, 104, 200]
        assert seen[3] == (200, MAGIC_DEFAULT, 1_000_000 + 3000)
        assert log.max_offset == 252 and log.file_offsets == [0, 200]
        assert not (d / "00000000000000000400").exists()
        assert log.append_unit(-1, MAGIC_DELETE | MAGIC_DEFAULT, 0, 0, 0, 0, 0) == 252


def test_recover_from_later_file_and_without_check(tmp_path: Path) -> None:
    d = tmp_path / "timerlog"
    with TimerLog(d, file_size=SMALL) as log:
        _fill(log, 5)
        seen: list[int] = []
        assert log.recover(250, lambda pos, magic, t: seen.append(pos)) == 304
        assert seen == [200, 252]
        seen.clear()
        assert log.recover(0, lambda pos, magic, t: seen.append(pos), check=False) == 304
        assert seen == [0, 52, 104, 200, 252]
        assert log.max_offset == 304


def test_delete_expired_files(tmp_path: Path) -> None:
    d = tmp_path / "timerlog"
    with TimerLog(d, file_size=SMALL) as log:
        _fill(log, 7, base_offset_py=0)  # file 0 last unit -> offsetPy 2, file 200 -> 5, file 400 -> 6
        assert log.delete_expired_files(2) == 0  # last unit of file 0 points at 2: still needed
        assert log.delete_expired_files(3) == 1
        assert log.file_offsets == [200, 400] and log.min_offset == 200
        assert not (d / "00000000000000000000").exists()
        assert log.delete_expired_files(1_000_000) == 1  # never the last file
        assert log.file_offsets == [400]
        assert [p for p, _ in log.iterate()] == [400]
    with TimerLog(d, file_size=SMALL) as log:
        assert log.min_offset == 400 and log.max_offset == 452


def test_flush_and_read_only(tmp_path: Path) -> None:
    d = tmp_path / "timerlog"
    with TimerLog(d, file_size=SMALL) as log:
        _fill(log, 2)
        assert log.flushed_where == 0
        assert log.flush() == 104 == log.flushed_where
    before = (d / "00000000000000000000").read_bytes()
    with TimerLog(d, file_size=SMALL, read_only=True) as ro:
        assert ro.max_offset == 104
        assert [u.offset_py for _, u in ro.iterate()] == [1000, 1001]
        with pytest.raises(PermissionError):
            ro.append_unit(-1, 1, 0, 0, 0, 0, 0)
        with pytest.raises(PermissionError):
            ro.truncate_dirty(0)
    assert (d / "00000000000000000000").read_bytes() == before


def test_empty_log(tmp_path: Path) -> None:
    with TimerLog(tmp_path / "none", read_only=True) as ro:
        assert ro.min_offset == ro.max_offset == 0
        assert list(ro.iterate()) == []
    with TimerLog(tmp_path / "tl") as log:
        assert log.recover(0) == 0 and log.max_offset == 0
