"""Read-only inspection costs what the unconfirmed tail costs (issue 11 item 11).

Why: a read-only open used to decode and CRC every record of the last commitlog file and check
every consume queue unit in Python, so ``mqadmin`` read commands cost the store size. Records the
consume queues already point at were dispatched in commitlog order and need no second look; only
the records after the newest one (clean or crashed) are validated. These tests count the records
the recovery scan checks and make sure what a read-only open returns is still exactly what is
stored.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from store_util import FakeClock, make_msg, small_config

import broker_core.store.message_store as message_store_module
from broker_core.store.codec.cq_unit import BCQ_UNIT, CQ_UNIT, is_valid_bcq_unit, is_valid_cq_unit
from broker_core.store.codec.hotpath import valid_units_end
from broker_core.store.message_store import MessageStore

FS = 1 << 20  # one commitlog file holds every record: the old scan checked all of them
N = 600


def write_store(root: Path) -> list[int]:
    store = MessageStore(root, small_config(mapped_file_size_commit_log=FS), clock=FakeClock(step=1)).open()
    offsets = []
    for i in range(N):
        r = store.put_message(make_msg("Inspect", i % 4, b"body-%d" % i, key=f"k{i}", uniq=f"U{i}"))
        assert r.ok
        offsets.append(r.wrote_offset)
    store.shutdown()
    return offsets


def count_checks(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    calls = [0]
    real = message_store_module.check_record

    def counting(*a, **kw):
        calls[0] += 1
        return real(*a, **kw)

    monkeypatch.setattr(message_store_module, "check_record", counting)
    return calls


def read_all(store: MessageStore) -> list[int]:
    out = []
    for q in range(4):
        res = store.get_messages("Inspect", q, 0, 10 * N)
        out += [m.commit_log_offset for m in res.messages]
    return sorted(out)


def test_clean_read_only_open_checks_only_the_tail(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    offsets = write_store(tmp_path)
    calls = count_checks(monkeypatch)
    store = MessageStore(tmp_path, small_config(mapped_file_size_commit_log=FS), read_only=True).open()
    try:
        assert calls[0] <= 4, f"{calls[0]} records checked for a clean store of {N}"
        assert store.get_max_phy_offset() == store.recovery_report.process_offset > offsets[-1]
        assert read_all(store) == offsets
        assert [m.commit_log_offset for m in store.query_message("Inspect", "k599")] == [offsets[-1]]
    finally:
        store.shutdown()


def _cut_queues(root: Path, keep: int) -> None:
    """Zero every unit after the first ``keep`` of each queue: a crash before they were dispatched."""
    for q in range(4):
        for path in sorted((root / "consumequeue" / "Inspect" / str(q)).iterdir()):
            data = bytearray(path.read_bytes())
            cut = min(len(data), max(0, keep * 20 - int(path.name)))
            data[cut:] = bytes(len(data) - cut)
            path.write_bytes(bytes(data))


def test_crashed_read_only_open_checks_the_undispatched_tail(tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    offsets = write_store(tmp_path)
    keep = 140  # of 150 units per queue: the last 40 records were never dispatched
    _cut_queues(tmp_path, keep)
    (tmp_path / "abort").write_text("4242")
    before = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    calls = count_checks(monkeypatch)
    store = MessageStore(tmp_path, small_config(mapped_file_size_commit_log=FS), read_only=True).open()
    try:
        tail = N - 4 * keep
        assert calls[0] <= tail + 8, f"{calls[0]} records checked for an undispatched tail of {tail}"
        assert store.recovery_report.dispatched >= tail
        assert read_all(store) == offsets  # exactly what is stored: confirmed units + the recovered tail
        for q in range(4):
            assert store.get_max_offset_in_queue("Inspect", q) == N // 4
    finally:
        store.shutdown()
    assert {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()} == before  # wrote nothing


def test_unconfirmed_newest_record_falls_back_to_the_full_scan(tmp_path: Path) -> None:
    """The newest unit's record is damaged: it is not trusted; the scan starts at the file and stops there."""
    offsets = write_store(tmp_path)
    with open(tmp_path / "commitlog" / f"{0:020d}", "r+b") as f:
        f.seek(offsets[-1] + 88 + 2)  # inside the body of the last record
        f.write(b"\xff")
    store = MessageStore(tmp_path, small_config(mapped_file_size_commit_log=FS), read_only=True).open()
    try:
        assert store.recovery_report.start_offset == 0
        assert store.get_max_phy_offset() == offsets[-1]
    finally:
        store.shutdown()


def _slow_units_end(buf: bytes, limit: int, batch: bool) -> int:
    unit = BCQ_UNIT.size if batch else CQ_UNIT.size
    pos = 0
    while pos + unit <= limit:
        if batch:
            phy, size, _t, _s, base, num, _c, _r = BCQ_UNIT.unpack_from(buf, pos)
            ok = is_valid_bcq_unit(phy, size, base, num)
        else:
            phy, size, _t = CQ_UNIT.unpack_from(buf, pos)
            ok = is_valid_cq_unit(phy, size)
        if not ok:
            return pos
        pos += unit
    return pos


_I64 = st.sampled_from([0, 1, 255, 256, 2 ** 40, 2 ** 63 - 1, -1, -(2 ** 63)])
_I32 = st.sampled_from([0, 1, 255, 256, 2 ** 24, 2 ** 31 - 1, -1, -(2 ** 31)])
_I16 = st.sampled_from([0, 1, 255, 256, 2 ** 15 - 1, -1, -(2 ** 15)])


@settings(max_examples=300, deadline=None)
@given(batch=st.booleans(), units=st.lists(st.tuples(_I64, _I32, _I64, _I64, _I16), max_size=30),
       pad=st.integers(0, 80), seed=st.integers(0, 2 ** 16))
def test_valid_units_end_matches_the_unit_by_unit_rules(batch: bool, units: list, pad: int, seed: int) -> None:
    rng = random.Random(seed)
    if batch:
        raw = b"".join(BCQ_UNIT.pack(p, s, t, 5, b, n, -1, 0) for p, s, t, b, n in units)
    else:
        raw = b"".join(CQ_UNIT.pack(p, s, t) for p, s, t, _b, _n in units)
    buf = raw + bytes(pad)
    limit = rng.randrange(0, len(buf) + 1)
    assert valid_units_end(buf, 0, limit, batch) == _slow_units_end(buf, limit, batch)
