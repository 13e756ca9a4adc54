"""The rebuild's exchange files (``spark.exchange``) and the index-file plan read from them.

Why: the write tasks get their input only as slices of the decode tasks' exchange files, so a slice
off by one key would put an entry in the wrong index file or a unit in the wrong queue. The
index-file cut must follow RocketMQ's rule: file f holds keys f * (maxIndexNum - 1) onwards, in
commitlog order, and a new file's header is pre-set from the previous file's last key. No Spark.
"""

from __future__ import annotations

import pytest

from spark.exchange import read_slices, read_slices_into, write_range
from spark.index_build import plan_index_files
from spark.scan import CQ_REC, IDX_REC, STOP_NONE, DecodedRange


def _keys(first: int, n: int) -> bytes:
    return b"".join(IDX_REC.pack(k, 1000 + k, 5000 + k) for k in range(first, first + n))


def _range(ri: int, first_key: int, n_keys: int, queues: dict[tuple[str, int], int]) -> DecodedRange:
    cq = {q: b"".join(CQ_REC.pack(ri * 100 + i, 0, ri * 100 + i, 10, 0, 0, 0) for i in range(n))
          for q, n in queues.items()}
    return DecodedRange(ri, 0, 0, 0, 0, 0, STOP_NONE, "", cq, _keys(first_key, n_keys))


def test_range_file_round_trip(tmp_path):
    r = _range(3, 0, 7, {("A", 0): 2, ("B", 1): 0, ("A", 1): 5})
    meta = write_range(r, str(tmp_path), want_queues=True)
    path, index_at, cq_at = meta[11], meta[12], meta[13]
    assert meta[0] == 3 and meta[8] == 7 and sorted(meta[10]) == sorted(r.cq)
    assert read_slices([(path, *index_at)]) == [r.index]
    for q, blob in r.cq.items():
        assert read_slices([(path, *cq_at[q])]) == [blob]
    whole = read_slices_into([(path, *cq_at[("A", 1)]), (path, *index_at)])
    assert bytes(whole) == r.cq[("A", 1)] + r.index


def test_read_past_the_file_end_names_the_file(tmp_path):
    meta = write_range(_range(0, 0, 2, {}), str(tmp_path), want_queues=False)
    with pytest.raises(OSError, match="range-0000000"):
        read_slices([(meta[11], 0, 3 * IDX_REC.size)])
    with pytest.raises(OSError, match="range-0000000"):
        read_slices_into([(meta[11], 0, 3 * IDX_REC.size)])


@pytest.mark.parametrize("counts", [[5, 0, 4, 6], [3, 3, 3], [10], [1, 1, 1, 1, 1, 1, 1], [2, 7]])
@pytest.mark.parametrize("per_file", [1, 3, 4, 100])
def test_index_files_take_keys_in_commitlog_order(tmp_path, counts, per_file):
    ranges, first = [], 0
    for ri, n in enumerate(counts):
        meta = write_range(_range(ri, first, n, {}), str(tmp_path), want_queues=False)
        ranges.append((meta[11], meta[12][0], n))
        first += n
    plans = plan_index_files([r for r in ranges if r[2]], per_file)
    total = sum(counts)
    assert len(plans) == -(-total // per_file)
    for f, plan in enumerate(plans):
        got = bytes(read_slices_into(plan.slices))
        lo, hi = f * per_file, min(total, (f + 1) * per_file)
        assert got == _keys(lo, hi - lo)
        if f == 0:
            assert plan.prev_key is None
        else:
            assert plan.prev_key is not None and read_slices([plan.prev_key]) == [_keys(lo - 1, 1)]
