"""searchMessages / exportMessages / statsMessages over a BatchCQ inner batch whose packed body is broken.

The outer record is valid (its body CRC matches, so recovery keeps it) but its body does not unwrap
into inner messages. It is shown as stored, one row; its inner messages cannot be listed, so the
summary counts it and names the first (file and commitlog offset), as for a body that does not
decompress, and the exit status follows that precedent (0: the scan itself completed).
"""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest
from golden_helpers import copy_golden_store

from broker_core.store.codec import hot_py
from broker_core.store.codec.hashing import rmq_crc32
from spark.search import IN_PROCESS, build_query, run_export, run_search, run_stats
from spark.search_cli import SEARCH, main

BROKEN_AT = 3641  # GoldenBatchTopic/0 inner batch of 5 messages (queue offsets 11-15), first commitlog file
INTACT_MESSAGES = 102
BROKEN_MESSAGES = INTACT_MESSAGES - 5 + 1  # its five inner messages become the one record as stored


def _break_inner_batch(store: Path) -> Path:
    """Overwrite the first batch item's TOTALSIZE and fix the outer body CRC: a valid record, no batch."""
    path = store / "commitlog" / "00000000000000000000"
    data = bytearray(path.read_bytes())
    body_len = struct.unpack_from(">i", data, BROKEN_AT + 84)[0]
    struct.pack_into(">i", data, BROKEN_AT + 88, 0x7FFF0000)
    struct.pack_into(">i", data, BROKEN_AT + 8, rmq_crc32(bytes(data[BROKEN_AT + 88:BROKEN_AT + 88 + body_len])))
    path.write_bytes(bytes(data))
    return path


@pytest.fixture
def broken_store(tmp_path) -> tuple[Path, Path]:
    store = copy_golden_store("store-batchcq", tmp_path / "store-batchcq")
    return store, _break_inner_batch(store)


def _assert_reported(summary, commitlog: Path) -> None:
    assert summary.batches_not_unwrapped == 1
    line = next((w for w in summary.warnings if "could not be unwrapped" in w), None)
    assert line is not None, summary.warnings
    assert line.startswith(f"1 inner batch records could not be unwrapped (first at {commitlog.resolve()} "
                           f"offset {BROKEN_AT}: "), line


def test_search_and_stats_report_an_inner_batch_that_does_not_unwrap(broken_store):
    store, commitlog = broken_store
    found = run_search([str(store)], build_query(), limit=0, master=IN_PROCESS)
    assert len(found.messages) == found.summary.messages_matched == BROKEN_MESSAGES
    as_stored = [m for m in found.messages if m["commitLogOffset"] == BROKEN_AT]
    assert len(as_stored) == 1 and as_stored[0]["sysFlag"] & 0x80  # the record as stored
    _assert_reported(found.summary, commitlog)
    stats = run_stats([str(store)], build_query(stats_by="topic"), master=IN_PROCESS)
    assert sum(b["messages"] for b in stats.buckets) == BROKEN_MESSAGES
    _assert_reported(stats.summary, commitlog)


def test_intact_store_reports_no_broken_batch(tmp_path):
    store = copy_golden_store("store-batchcq", tmp_path / "store-batchcq")
    found = run_search([str(store)], build_query(), limit=0, master=IN_PROCESS)
    assert len(found.messages) == INTACT_MESSAGES
    assert found.summary.batches_not_unwrapped == 0
    assert not [w for w in found.summary.warnings if "unwrapped" in w]


def test_compiled_walk_and_twin_both_hand_the_broken_batch_to_python(broken_store):
    """Both select_records implementations defer an inner batch record: one Python path judges it."""
    from broker_core.store.codec import _hotpath  # type: ignore[attr-defined]

    data = broken_store[1].read_bytes()
    got = []
    for impl in (hot_py, _hotpath):
        _pos, _n, hits, deferred, _stopped = impl.select_records(data, 0, len(data), len(data), True, None, None,
                                                                 None, (), {}, None, None)
        assert BROKEN_AT in deferred and BROKEN_AT not in hits, impl
        got.append((hits, deferred))
    assert got[0] == got[1]


def test_search_cli_prints_the_warning_and_exits_0(broken_store, capsys):
    store, commitlog = broken_store
    status = main(SEARCH, ["--store", str(store), "--master", IN_PROCESS, "--limit", "0", "--output", "json"])
    assert status == 0
    summary = json.loads(capsys.readouterr().out)["summary"]
    assert summary["batches_not_unwrapped"] == 1
    assert any(w.startswith(f"1 inner batch records could not be unwrapped (first at {commitlog.resolve()} "
                            f"offset {BROKEN_AT}: ") for w in summary["warnings"])


def test_export_reports_an_inner_batch_that_does_not_unwrap(broken_store, spark, tmp_path):
    store, commitlog = broken_store
    out = tmp_path / "out"
    result = run_export([str(store)], build_query(), out, fmt="jsonl", spark=spark)
    assert result.rows_written == BROKEN_MESSAGES
    rows = [json.loads(line) for p in sorted(out.glob("*.json")) for line in p.read_text().splitlines()]
    assert len(rows) == BROKEN_MESSAGES
    _assert_reported(result.summary, commitlog)
