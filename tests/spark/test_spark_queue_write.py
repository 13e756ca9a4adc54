"""The rebuild's bulk consume-queue write (``spark.queues._put_cq_units``) against the store's own appends.

Why: the rebuild copies a queue's units into each file in one write; the files must be exactly what
``ConsumeQueue.put_message_position_info`` unit by unit leaves: file names, pre-blank fillers of a
queue starting past 0, file roll-over and already-dispatched units. No Spark needed.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from broker_core.store.codec.cq_unit import CQ_UNIT
from broker_core.store.consume_queue import ConsumeQueue
from spark.queues import _put_cq_units


def _tree(d: Path) -> dict[str, bytes]:
    return {p.relative_to(d).as_posix(): p.read_bytes() for p in sorted(d.rglob("*")) if p.is_file()}


@pytest.mark.parametrize(("first", "count"), [(0, 5), (0, 40), (3, 40), (16, 17), (7, 60), (0, 0), (15, 1)])
def test_bulk_units_are_what_unit_by_unit_appends_write(tmp_path, first, count):
    file_size = 16 * 20  # 16 units per file: 40 units cross two file boundaries
    units = [(1000 + 100 * i, 90 + i % 3, i * 7 - 3) for i in range(count)]
    packed = b"".join(CQ_UNIT.pack(*u) for u in units)
    outs = []
    for name in ("bulk", "one-by-one"):
        q = ConsumeQueue("T", 1, tmp_path / name, file_size)
        if name == "bulk":
            _put_cq_units(q, first, packed, True)
        else:
            for i, u in enumerate(units):
                q.put_message_position_info(*u, first + i)
        q.flush()
        outs.append((_tree(tmp_path / name), q.max_physic_offset, q.get_max_offset_in_queue()))
        q.close()
    assert outs[0] == outs[1]
    files = 0 if count == 0 else (first + count - 1) * 20 // file_size - first * 20 // file_size + 1
    assert len(outs[0][0]) == files


def test_bulk_write_skips_units_already_there(tmp_path):
    q = ConsumeQueue("T", 0, tmp_path / "q", 16 * 20)
    for i in range(5):
        q.put_message_position_info(1000 + 100 * i, 90, 0, i)
    units = b"".join(CQ_UNIT.pack(1000 + 100 * i, 90, 0) for i in range(30))
    _put_cq_units(q, 0, units, True)
    q.flush()
    ref = ConsumeQueue("T", 0, tmp_path / "ref", 16 * 20)
    for i in range(30):
        ref.put_message_position_info(1000 + 100 * i, 90, 0, i)
    ref.flush()
    assert _tree(tmp_path / "q") == _tree(tmp_path / "ref")
    q.close()
    ref.close()
