"""The rebuild's queue writer never puts a unit at an offset its record does not have.

Why: units were written one after the other from the queue's first offset (unit k at first + k), so a
record missing from the middle of a queue (a commitlog file lost from the middle of the log) made
every later unit answer for the offset before its own: queue offset N read the record stored as
N + k. A queue whose records' offsets skip (or go back) is refused instead, and nothing of it is
written at a wrong place. No Spark needed.
"""

from __future__ import annotations

import pytest

from spark.queues import (
    CQ_REC,
    QueueJobConf,
    QueueOrderError,
    _put_cq_units,
    process_queue,
    read_existing_units,
)
from spark.rebuild import QUEUES_ITEM, _write_task


def _recs(offsets: list[int], batch: int = 1) -> bytes:
    """Packed CQ_REC records of one queue, one per queue offset, 100 commitlog bytes apart."""
    return b"".join(CQ_REC.pack(off, off, 1000 + 100 * i, 90, 7, 1_700_000_000_000 + i, batch)
                    for i, off in enumerate(offsets))


def _conf(tmp_path, mode: str = "write", batch: bool = False) -> QueueJobConf:
    return QueueJobConf(mode, str(tmp_path / "staging"), str(tmp_path / "store"), 16 * 20, 16 * 46,
                        {"T": "BatchCQ"} if batch else {}, 60_000)


def test_contiguous_queue_is_written_at_its_own_offsets(tmp_path):
    result = process_queue(_conf(tmp_path), "T", 0, [(0, _recs(list(range(3, 40))))])
    assert not result.refused and (result.min_offset, result.max_offset) == (3, 40)
    units = read_existing_units(tmp_path / "staging", "T", 0, False, 16 * 20)
    assert [(u[0], u[1]) for u in units] == [(3 + i, 1000 + 100 * i) for i in range(37)]


@pytest.mark.parametrize("offsets", [[0, 1, 2, 5, 6, 7], [0, 1, 2, 2, 3], [4, 5, 6, 1, 2]])
def test_offsets_that_skip_or_go_back_are_refused_not_shifted(tmp_path, offsets):
    """[0, 1, 2, 5, ...]: offsets 3 and 4 are missing; writing on wrote the record of offset 5 at 3."""
    result = process_queue(_conf(tmp_path), "T", 0, [(0, _recs(offsets))])
    k = next(i for i in range(1, len(offsets)) if offsets[i] != offsets[i - 1] + 1)
    assert result.refused.startswith(f"queue T/0: the record at commitlog offset {1000 + 100 * k} has queue "
                                     f"offset {offsets[k]} but the queue is at {offsets[k - 1] + 1}")
    # Whatever was written stays at the records' own offsets (the staging is dropped anyway).
    units = read_existing_units(tmp_path / "staging", "T", 0, False, 16 * 20)
    assert all(u[1] == 1000 + 100 * offsets.index(u[0]) for u in units)


def test_batch_queue_with_a_hole_is_refused(tmp_path):
    # Two messages per unit: bases 0, 2, 4, then 10 (6..9 missing).
    recs = b"".join(CQ_REC.pack(base, base, 1000 + 100 * i, 90, 7, 1_700_000_000_000, 2)
                    for i, base in enumerate([0, 2, 4, 10, 12]))
    result = process_queue(_conf(tmp_path, batch=True), "T", 1, [(0, recs)])
    assert "has queue offset 10 but the queue is at 6" in result.refused
    ok = process_queue(_conf(tmp_path / "ok", batch=True), "T", 1, [(0, recs[:3 * CQ_REC.size])])
    assert not ok.refused and ok.max_offset == 6


def test_verify_and_stats_modes_report_offsets_as_they_are(tmp_path):
    for mode in ("verify", "stats"):
        result = process_queue(_conf(tmp_path, mode), "T", 0, [(0, _recs([0, 1, 5]))])
        assert not result.refused and (result.min_offset, result.max_offset, result.units) == (0, 6, 3)


def test_bulk_writer_refuses_units_that_are_not_contiguous(tmp_path):
    from broker_core.store.consume_queue import ConsumeQueue

    q = ConsumeQueue("T", 0, tmp_path / "q", 16 * 20)
    try:
        with pytest.raises(QueueOrderError, match="not contiguous"):
            _put_cq_units(q, 0, bytes(40), False)
        assert q.file_count() == 0
    finally:
        q.close()


def test_write_task_hands_the_refusal_to_the_driver(tmp_path):
    """The queue task returns the reason (no Spark task failure with a traceback); the driver refuses."""
    blob = tmp_path / "x.bin"
    blob.write_bytes(_recs([0, 1, 3]))
    out = list(_write_task([(QUEUES_ITEM, [("T", 0, [(str(blob), 0, blob.stat().st_size)])])], _conf(tmp_path),
                           str(tmp_path / "idx"), 64, 200))
    assert len(out) == 1 and "has queue offset 3 but the queue is at 2" in out[0].refused
