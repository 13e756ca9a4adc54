"""A commitlog file missing from the middle of the log (a gap between files), for every Spark job.

Why: rebuildStore only warned ("does not follow ... contiguously"), exited 0 and wrote consume queues
whose units were shifted (queue offset N pointed at the record stored as N + k), and the search
jobs exited 0 while the messages of the missing file were not in their answers. A gap is now like a
corrupt record: the rebuild refuses (exit 1) and writes nothing, --verify reports it, --force
rebuilds up to it, and search/export/stats exit 1 naming it. All Spark tests in this module share
one local[2] session (the ``spark`` fixture).
"""

from __future__ import annotations

import struct
from pathlib import Path

import pytest
from spark_helpers import tree_bytes
from typer.testing import CliRunner

from mqadmin.app import app
from spark.queues import read_existing_units
from spark.rebuild import RebuildRefusedError, run_rebuild
from spark.search import build_query, run_export, run_search

FILE_SIZE = 65536
MIDDLE = f"{FILE_SIZE:020d}"
LAST = f"{2 * FILE_SIZE:020d}"
GAP = (f"commitlog file {LAST} (offset {2 * FILE_SIZE}) does not follow {0:020d}, which ends at offset "
       f"{FILE_SIZE}: no file holds offsets {FILE_SIZE}..{2 * FILE_SIZE - 1}")


@pytest.fixture
def gapped(golden_store):
    """store-basic (three 64 KiB commitlog files) without its middle file."""
    store, cfg, manifest = golden_store("store-basic")
    (store / "commitlog" / MIDDLE).unlink()
    return store, cfg, manifest


def _cli(*args: str):
    return CliRunner().invoke(app, list(args), env={"NAMESRV_ADDR": "", "RMQ_STORE": ""})


def test_rebuild_refuses_a_gap_and_writes_nothing(gapped):
    """Refused before Spark starts (so no session here), exit 1, one line naming both files and offsets."""
    store, cfg, _ = gapped
    before = tree_bytes(store)
    with pytest.raises(RebuildRefusedError) as refused:
        run_rebuild(store, cfg, split_bytes=16 * 1024)
    assert str(refused.value).startswith(GAP) and "nothing was written" in str(refused.value)
    assert "--force" in str(refused.value) and "\n" not in str(refused.value)
    r = _cli("rebuildStore", "--store", str(store), "--config", str(cfg))
    assert r.exit_code == 1, (r.stdout, r.stderr)
    assert r.stderr.splitlines() == [f"mqadmin rebuildStore: {refused.value}"]
    assert tree_bytes(store) == before and not list(store.glob(".rmqops-*"))


def test_verify_reports_the_gap(spark, gapped):
    store, cfg, _ = gapped
    before = tree_bytes(store)
    summary = run_rebuild(store, cfg, parts="cq", verify=True, spark=spark, split_bytes=16 * 1024)
    gap = summary.mismatches[0]
    assert (gap.kind, gap.where) == ("data-after-log-end", f"commitlog/{0:020d}")
    assert gap.detail.startswith(GAP) and "bytes of data follow it" in gap.detail
    assert not summary.log_end_clean and summary.log_end_offset < FILE_SIZE
    assert tree_bytes(store) == before


def test_force_rebuilds_up_to_the_gap_with_every_unit_at_its_own_offset(spark, gapped):
    store, cfg, manifest = gapped
    summary = run_rebuild(store, cfg, spark=spark, split_bytes=16 * 1024, force=True)
    kept = {m["physicalOffset"]: m for m in manifest["messages"] if m["physicalOffset"] < FILE_SIZE}
    assert summary.records == len(kept) and any("--force: rebuilt up to it" in w for w in summary.warnings)
    units = 0
    for q in summary.queue_results:
        for off, phy, size, _tags in read_existing_units(store, q.topic, q.queue_id, False, 400):
            m = kept[phy]  # KeyError: a unit for a record after the gap
            assert (m["topic"], m["queueId"], m["queueOffset"], m["size"]) == (q.topic, q.queue_id, off, size)
            units += 1
    assert units == len(kept)


def test_a_queue_offset_that_skips_is_refused_and_writes_nothing(spark, golden_store):
    """No gap between files, but one record's QUEUEOFFSET skips one: writing on would misplace it."""
    store, cfg, manifest = golden_store("store-basic", drop=("index",))
    last = max(manifest["messages"], key=lambda m: m["physicalOffset"])
    path = store / "commitlog" / f"{last['physicalOffset'] // FILE_SIZE * FILE_SIZE:020d}"
    with open(path, "r+b") as f:  # QUEUEOFFSET is at byte 20 of the record; the body CRC does not cover it
        f.seek(last["physicalOffset"] % FILE_SIZE + 20)
        f.write(struct.pack(">q", last["queueOffset"] + 1))
    before = tree_bytes(store)
    with pytest.raises(RebuildRefusedError) as refused:
        run_rebuild(store, cfg, spark=spark, split_bytes=16 * 1024)
    assert str(refused.value).startswith(
        f"queue {last['topic']}/{last['queueId']}: the record at commitlog offset {last['physicalOffset']} has "
        f"queue offset {last['queueOffset'] + 1} but the queue is at {last['queueOffset']}")
    assert tree_bytes(store) == before and not (store / "index").exists()


def test_search_export_and_stats_exit_1_naming_the_gap(spark, gapped, tmp_path):
    store, cfg, manifest = gapped
    first_file = sum(1 for m in manifest["messages"] if m["physicalOffset"] < FILE_SIZE)
    last_file = sum(1 for m in manifest["messages"] if m["physicalOffset"] >= 2 * FILE_SIZE)
    found = run_search([str(store)], build_query(), limit=0, spark=spark, split_bytes=16 * 1024)
    assert len(found.messages) == first_file + last_file and found.summary.stops == []
    assert found.summary.gaps == [f"{store.resolve()}: {GAP} (a missing file?)"]
    exported = run_export([str(store)], build_query(), tmp_path / "out", fmt="jsonl", spark=spark)
    assert exported.summary.gaps == found.summary.gaps and exported.rows_written == len(found.messages)
    for command in ("searchMessages", "statsMessages"):  # the benchmark's no-Spark mode: same plan and scans
        r = _cli(command, "--store", str(store), "--master", "in-process")
        assert r.exit_code == 1, (command, r.stdout, r.stderr)
        assert r.stderr.splitlines() == [f"mqadmin {command}: {found.summary.gaps[0]}; the messages stored there "
                                         f"are missing from the results"], r.stderr
        assert "GAP " in r.stdout
    from spark import search_cli

    assert search_cli.main(search_cli.STATS, ["--store", str(store), "--master", "in-process"]) == 1


def test_contiguous_files_of_another_size_are_no_gap(tmp_path):
    """The check follows the files' own lengths, not mappedFileSizeCommitLog (often not 1 GiB)."""
    from spark.store_input import list_commitlog_files

    d = tmp_path / "commitlog"
    d.mkdir()
    for base in (0, 4096, 8192):
        (d / f"{base:020d}").write_bytes(bytes(4096))
    warnings: list[str] = []
    gaps: list = []
    assert len(list_commitlog_files(Path(d), 1 << 30, warnings, gaps)) == 3 and gaps == []
    (d / f"{4096:020d}").unlink()
    list_commitlog_files(Path(d), 4096, warnings, gaps)
    assert [(g.before, g.end, g.after, g.start) for g in gaps] == [(f"{0:020d}", 4096, f"{8192:020d}", 8192)]
