"""Spark rebuild/verify of consume queues, BatchCQ, index and offsets against real RocketMQ golden stores.

All tests in this module share one local[2] SparkSession (the ``spark`` fixture).
"""

from __future__ import annotations

import os
import struct
from pathlib import Path

import pytest
from spark_helpers import index_contents, manifest_key_queries, tree_bytes

from broker_core.store.batch_consume_queue import BatchConsumeQueue
from broker_core.store.codec.hashing import index_key_hash
from broker_core.store.codec.index_format import (
    HASH_SLOT,
    INDEX_ENTRY,
    IndexHeaderValues,
    entry_pos,
    slot_pos,
)
from broker_core.store.codec.message import RECORD_VALID, check_record
from broker_core.store.config_file import read_config_json, write_config_json
from broker_core.store.dispatch import build_dispatch_request
from broker_core.store.index_service import IndexService
from broker_core.store.store_config import parse_delay_levels
from broker_core.store.store_lock import StoreLock
from spark.index_build import reachable_entries
from spark.offsets import OFFSET_TIME_TABLE, RMQOPS_DIR, offset_at_time
from spark.rebuild import (
    RebuildError,
    RebuildRefusedError,
    _diff_hash_bucket,
    _index_where,
    render_summary,
    run_rebuild,
)
from spark.scan import data_after_stop

LONG_MAX = 2**63 - 1
FILE_SIZE = 65536


def _query_all(index_dir: Path, manifest: dict) -> dict[tuple[str, str], list[int]]:
    s = manifest["settings"]
    svc = IndexService(index_dir, s["maxHashSlotNum"], s["maxIndexNum"], read_only=True)
    try:
        return {(t, k): sorted(svc.query_offset(t, k, 64, 0, LONG_MAX)) for t, k, _ in manifest_key_queries(manifest)}
    finally:
        svc.shutdown()


def _write_at(path: Path, pos: int, data: bytes) -> None:
    with open(path, "r+b") as f:
        f.seek(pos)
        f.write(data)


def test_rebuild_store_basic_byte_identical(spark, golden_store, golden_root):
    store, cfg, manifest = golden_store("store-basic", drop=("consumequeue", "index"))
    summary = run_rebuild(store, cfg, spark=spark, split_bytes=16 * 1024)
    assert summary.records == 200
    assert summary.log_end_clean and summary.log_end_offset == manifest["commitLogMaxOffset"]
    assert summary.ranges > 3  # the 64 KiB files were split into several decode tasks
    assert tree_bytes(store / "consumequeue") == tree_bytes(golden_root / "store-basic" / "consumequeue")
    assert summary.cq_files == 16 and summary.index_files == 3
    # Index: every golden key query answers identically through the store's IndexService ...
    answers = _query_all(store / "index", manifest)
    for topic, key, expected in manifest_key_queries(manifest):
        assert answers[(topic, key)] == expected, (topic, key)
    # ... and the files are even byte-identical to the ones Java wrote (names are creation times).
    assert index_contents(store / "index") == index_contents(golden_root / "store-basic" / "index")
    for q in summary.queue_results:
        mq = manifest["queues"][q.topic][str(q.queue_id)]
        assert (q.min_offset, q.max_offset, q.max_phy_offset) == (mq["minOffset"], mq["maxOffset"],
                                                                  mq["maxPhysicOffset"])
    assert not list(store.glob(".rmqops-rebuild-*"))  # staging removed
    assert render_summary(summary).row_count > 5


def test_a_killed_rebuilds_staging_directory_is_moved_to_lost_found(spark, golden_store, golden_root):
    """A rebuild killed with -9 left its staging directory (a whole rebuilt copy of the queues) in the
    store for ever; the next rebuild moves it into lost+found/ and says so."""
    store, cfg, _ = golden_store("store-basic", drop=("consumequeue", "index"))
    stale = store / ".rmqops-rebuild-4242-1700000000000"
    (stale / "consumequeue" / "T" / "0").mkdir(parents=True)
    (stale / "consumequeue" / "T" / "0" / "00000000000000000000").write_bytes(b"\x01" * 20)
    summary = run_rebuild(store, cfg, spark=spark, split_bytes=16 * 1024)
    moved = store / "lost+found" / "rmqops-rebuild-4242-1700000000000"
    assert not stale.exists() and (moved / "consumequeue" / "T" / "0" / "00000000000000000000").read_bytes() == b"\x01" * 20
    assert f"an interrupted rebuild left its staging directory {stale.name}; moved to {moved}" in summary.warnings
    assert tree_bytes(store / "consumequeue") == tree_bytes(golden_root / "store-basic" / "consumequeue")


def test_rebuild_store_batchcq_byte_identical(spark, golden_store, golden_root):
    store, cfg, manifest = golden_store("store-batchcq", drop=("consumequeue", "batchconsumequeue", "index"))
    summary = run_rebuild(store, cfg, spark=spark, split_bytes=4096)
    gold = golden_root / "store-batchcq"
    assert tree_bytes(store / "batchconsumequeue") == tree_bytes(gold / "batchconsumequeue")
    assert tree_bytes(store / "consumequeue") == tree_bytes(gold / "consumequeue")
    assert index_contents(store / "index") == index_contents(gold / "index")
    assert summary.bcq_files == 4
    # No topics.json: GoldenBatchTopic was recognised as BatchCQ from its inner-batch records.
    types = {(q.topic, q.queue_id): q.cq_type for q in summary.queue_results}
    assert types[("GoldenBatchTopic", 0)] == "BatchCQ" and types[("GoldenSimpleTopic", 0)] == "SimpleCQ"
    s = manifest["settings"]
    lookups = manifest["batchCqLookups"]
    assert lookups
    for qid in sorted({lk["queueId"] for lk in lookups}):
        bcq = BatchConsumeQueue("GoldenBatchTopic", qid, store / "batchconsumequeue",
                                s["mapperFileSizeBatchConsumeQueue"], read_only=True)
        bcq.load()
        bcq.recover()
        try:
            for lk in (x for x in lookups if x["queueId"] == qid):
                unit = bcq.get_unit(lk["lookupOffset"])
                assert unit is not None and unit.queue_offset == lk["unitQueueOffset"]
                assert (unit.phy_offset, unit.size, unit.tags_code, unit.batch_num) == (
                    lk["pos"], lk["size"], lk["tagsCode"], lk["batchNum"])
        finally:
            bcq.close()


def _reference_index(store: Path, index_dir: Path, slot_num: int, index_num: int) -> None:
    """Index built by the store's own IndexService, record by record in commitlog order."""
    svc = IndexService(index_dir, slot_num, index_num)
    levels = parse_delay_levels("1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h")
    try:
        for path in sorted((store / "commitlog").iterdir()):
            data = path.read_bytes()
            pos = 0
            while True:
                chk = check_record(data, pos, len(data))
                if chk.kind != RECORD_VALID:
                    break
                req = build_dispatch_request(chk.message, levels)
                svc.build_index(req.topic, req.commit_log_offset, req.store_timestamp, req.uniq_key, req.keys,
                                req.tran_type)
                pos += chk.size
    finally:
        svc.shutdown()


def test_rebuilt_index_matches_index_service_over_many_files(spark, golden_store, tmp_path):
    """Small index files (36 entries each): keys of one decode range land in several files, and
    every file's header is pre-set from the previous one, exactly as IndexService does it."""
    store, cfg, manifest = golden_store("store-basic", drop=("index",), maxIndexNum=37, maxHashSlotNum=16)
    cq_before = tree_bytes(store / "consumequeue")
    summary = run_rebuild(store, cfg, parts=("index",), spark=spark, split_bytes=8192)
    ref = tmp_path / "ref-index"
    _reference_index(store, ref, 16, 37)
    assert summary.index_files == len(list(ref.iterdir())) == 13
    assert index_contents(store / "index") == index_contents(ref)
    assert tree_bytes(store / "consumequeue") == cq_before  # parts=index leaves the queues alone


def test_verify_clean_store_reports_nothing_and_writes_nothing(spark, golden_store):
    store, cfg, _ = golden_store("store-basic")
    before = tree_bytes(store)
    summary = run_rebuild(store, cfg, verify=True, spark=spark, split_bytes=16 * 1024)
    assert summary.mismatches == []
    assert summary.cq_files == 16 and summary.index_files == 3  # files checked
    assert tree_bytes(store) == before


def _unlink_index_entry(index_file: Path, slot_num: int, index_num: int, key_hash: int, phy: int) -> None:
    """Take the entry (key_hash, phy) out of its slot chain, as if it had never been indexed."""
    data = bytearray(index_file.read_bytes())
    count = IndexHeaderValues.decode(data).index_count
    target = next(n for n in range(1, count)
                  if INDEX_ENTRY.unpack_from(data, entry_pos(slot_num, n))[:2] == (key_hash, phy))
    prev_of_target = INDEX_ENTRY.unpack_from(data, entry_pos(slot_num, target))[3]
    spos = slot_pos(slot_num, key_hash)
    if HASH_SLOT.unpack_from(data, spos)[0] == target:
        HASH_SLOT.pack_into(data, spos, prev_of_target)
    else:
        for n in range(target + 1, count):
            kh, p, td, prev = INDEX_ENTRY.unpack_from(data, entry_pos(slot_num, n))
            if prev == target:
                INDEX_ENTRY.pack_into(data, entry_pos(slot_num, n), kh, p, td, prev_of_target)
                break
    index_file.write_bytes(bytes(data))


def test_verify_finds_exactly_the_planted_damage(spark, golden_store):
    store, cfg, manifest = golden_store("store-basic")
    s = manifest["settings"]
    # 1. a CQ unit pointing to a wrong commitlog offset: GoldenTopicA queue 1, offset 3
    cq_file = store / "consumequeue" / "GoldenTopicA" / "1" / "00000000000000000000"
    phy, size, tags = struct.unpack_from(">qiq", cq_file.read_bytes(), 3 * 20)
    _write_at(cq_file, 3 * 20, struct.pack(">q", phy + 8))
    # 2. a missing index entry: a UNIQ_KEY that maps to exactly one record
    q = next(q for q in manifest["keyQueries"]
             if len(q["key"]) == 32 and len(q["expectedPhysicalOffsets"]) == 1 and q["topic"] == "GoldenTopicB")
    full_key = f"{q['topic']}#{q['key']}"
    victim_phy = q["expectedPhysicalOffsets"][0]
    for f in sorted((store / "index").iterdir()):
        try:
            _unlink_index_entry(f, s["maxHashSlotNum"], s["maxIndexNum"], index_key_hash(full_key), victim_phy)
            victim_file = f.name
            break
        except StopIteration:
            continue
    before = tree_bytes(store)
    summary = run_rebuild(store, cfg, verify=True, spark=spark, split_bytes=16 * 1024)
    assert tree_bytes(store) == before
    got = sorted((m.kind, m.where, m.offset) for m in summary.mismatches)
    assert got == [("missing-index-entry", f"index/{victim_file}", victim_phy), ("wrong-unit", "GoldenTopicA/1", 3)]
    wrong = next(m for m in summary.mismatches if m.kind == "wrong-unit")
    assert wrong.expected == (3, phy, size, tags) and wrong.actual == (3, phy + 8, size, tags)
    missing = next(m for m in summary.mismatches if m.kind == "missing-index-entry")
    assert full_key in missing.detail and victim_file in missing.detail


def test_extra_index_entry_names_its_file_and_entry_number(golden_store):
    """verify said where = "index" for a bad entry; an operator needs the file (and the entry)."""
    store, _cfg, manifest = golden_store("store-basic")
    s = manifest["settings"]
    paths = sorted(str(p) for p in (store / "index").iterdir())
    h, phy, n = reachable_entries(paths[1], s["maxHashSlotNum"], s["maxIndexNum"], numbered=True)[5]
    from spark.rebuild import _HP, _index_headers

    expected = _HP.pack(h, phy + 1, -1, -1)  # the commitlog implies a key the file does not hold ...
    actual = _HP.pack(h, phy, 1, n)  # ... and the file holds one the commitlog does not imply
    diffs = sorted(_diff_hash_bucket((0, [(0, expected), (1, actual)])))
    assert diffs == [(h, phy, 0, 1, [(1, n)]), (h, phy + 1, 1, 0, [])]
    names = [os.path.basename(p) for p in paths]
    headers = _index_headers(paths)
    assert _index_where(names, headers, phy, [(1, n)]) == f"index/{names[1]} entry {n}"
    assert _index_where(names, headers, phy + 1, []) == f"index/{names[1]}"


def _messages_by_phy(manifest: dict) -> list[dict]:
    return sorted(manifest["messages"], key=lambda m: m["physicalOffset"])


def _check_cut(summary, manifest: dict, store: Path, cut: int) -> None:
    kept = [m for m in manifest["messages"] if m["physicalOffset"] < cut]
    assert summary.records == len(kept)
    assert summary.log_end_offset == cut and not summary.log_end_clean and summary.stopped_early
    assert any(str(cut) in w for w in summary.warnings)
    expected_max: dict[tuple[str, int], int] = {}
    for m in kept:
        k = (m["topic"], m["queueId"])
        expected_max[k] = max(expected_max.get(k, 0), m["queueOffset"] + 1)
    assert {(q.topic, q.queue_id): q.max_offset for q in summary.queue_results} == expected_max
    answers = _query_all(store / "index", manifest)
    for topic, key, offsets in manifest_key_queries(manifest):
        assert answers[(topic, key)] == [o for o in offsets if o < cut], (topic, key)


def test_torn_last_record_stops_where_recovery_stops(spark, golden_store):
    store, cfg, manifest = golden_store("store-basic", drop=("consumequeue", "index"))
    last = _messages_by_phy(manifest)[-1]
    phy, size = last["physicalOffset"], last["size"]
    path = store / "commitlog" / f"{phy // FILE_SIZE * FILE_SIZE:020d}"
    _write_at(path, phy % FILE_SIZE + 60, bytes(size - 60))  # the write was torn after 60 bytes
    summary = run_rebuild(store, cfg, spark=spark, split_bytes=16 * 1024)
    _check_cut(summary, manifest, store, phy)


def _corrupt_mid_log(store: Path, manifest: dict) -> tuple[int, Path]:
    """Flip a body byte of a record in file 1 with intact records after it; (its offset, its file)."""
    victim = next(m for m in _messages_by_phy(manifest)
                  if m["physicalOffset"] > 100_000 and m["sysFlag"] == 0 and m["bodyLength"] > 20)
    phy = victim["physicalOffset"]
    path = store / "commitlog" / f"{phy // FILE_SIZE * FILE_SIZE:020d}"
    pos = phy % FILE_SIZE + 88 + 5  # inside the body (IPv4 hosts: body starts at 88)
    data = path.read_bytes()
    _write_at(path, pos, bytes([data[pos] ^ 0xFF]))
    return phy, path


def test_corrupt_record_with_data_after_it_is_refused_and_writes_nothing(spark, golden_store):
    """It rebuilt up to the damage and exited 0: every intact message after it became unreachable."""
    store, cfg, manifest = golden_store("store-basic")
    phy, path = _corrupt_mid_log(store, manifest)
    before = tree_bytes(store)
    with pytest.raises(RebuildRefusedError) as refused:
        run_rebuild(store, cfg, spark=spark, split_bytes=16 * 1024)
    follow = sum(m["size"] for m in manifest["messages"] if m["physicalOffset"] >= phy)  # this record and later
    assert str(refused.value).startswith(f"commitlog {path.name} at offset {phy}: ") and "CRC" in str(refused.value)
    assert f", and {follow} bytes of data follow it; " in str(refused.value) and "--force" in str(refused.value)
    assert "\n" not in str(refused.value) and tree_bytes(store) == before
    checked = run_rebuild(store, cfg, verify=True, spark=spark, split_bytes=16 * 1024)
    bad = [m for m in checked.mismatches if m.kind == "data-after-log-end"]
    assert [(m.where, m.offset) for m in bad] == [(f"commitlog/{path.name}", phy)] and f"{follow} bytes" in bad[0].detail


def test_corrupt_body_crc_with_force_stops_where_recovery_stops(spark, golden_store):
    store, cfg, manifest = golden_store("store-basic", drop=("consumequeue", "index"))
    phy, _path = _corrupt_mid_log(store, manifest)
    summary = run_rebuild(store, cfg, spark=spark, split_bytes=16 * 1024, force=True)
    assert "CRC" in summary.log_end_reason
    assert any("--force: rebuilt up to it" in w for w in summary.warnings)
    _check_cut(summary, manifest, store, phy)


def test_data_after_stop_tells_a_torn_tail_from_damage(tmp_path):
    record = struct.pack(">i", 200) + bytes(range(1, 197))
    torn = tmp_path / "torn"
    torn.write_bytes(bytes(1000) + record[:60] + bytes(4000))  # a header, the rest never written
    assert data_after_stop(str(torn), 1000) == 0
    damaged = tmp_path / "damaged"
    damaged.write_bytes(bytes(1000) + record + record + bytes(100))  # a bad record, then an intact one
    assert data_after_stop(str(damaged), 1000) == 400
    assert data_after_stop(str(damaged), 1000, end=1200) == 0  # the next range is counted by its decode
    garbage = tmp_path / "garbage"
    garbage.write_bytes(bytes(1000) + b"\xff" * 8 + bytes(100))  # no plausible TOTALSIZE: its bytes count
    assert data_after_stop(str(garbage), 1000) == 8


def test_mqadmin_rebuild_store_documents_force():
    from typer.testing import CliRunner

    from mqadmin.app import app

    r = CliRunner().invoke(app, ["rebuildStore", "--help"], env={"NAMESRV_ADDR": "", "COLUMNS": "200"})
    assert "--force" in r.stdout and "as recovery would" in " ".join(r.stdout.split())


def test_consumer_offsets_clamped_and_reported(spark, golden_store):
    store, cfg, manifest = golden_store("store-basic")
    offsets_path = store / "config" / "consumerOffset.json"
    write_config_json(offsets_path, {
        "dataVersion": {"counter": 7, "stateVersion": 0, "timestamp": 1700000000000},
        "offsetTable": {"GoldenTopicA@g1": {0: 30, 1: 10, 2: -3},
                        "NoSuchTopic@g1": {0: 5},
                        "GoldenTopicB@g2": {3: 25}}})
    cq_before = tree_bytes(store / "consumequeue")
    original = offsets_path.read_bytes()
    checked = run_rebuild(store, cfg, parts=("offsets",), verify=True, spark=spark)
    assert offsets_path.read_bytes() == original  # verify only reports
    summary = run_rebuild(store, cfg, parts=("offsets",), spark=spark)
    changes = sorted((c.key, c.queue_id, c.old, c.new, c.reason) for c in summary.offset_changes)
    assert changes == sorted((c.key, c.queue_id, c.old, c.new, c.reason) for c in checked.offset_changes) == [
        ("GoldenTopicA@g1", 0, 30, 25, "above max"),
        ("GoldenTopicA@g1", 2, -3, 0, "below min"),
        ("NoSuchTopic@g1", 0, 5, 0, "above max"),
    ]
    table = read_config_json(offsets_path)["offsetTable"]
    assert table == {"GoldenTopicA@g1": {"0": 25, "1": 10, "2": 0}, "NoSuchTopic@g1": {"0": 0},
                     "GoldenTopicB@g2": {"3": 25}}
    assert read_config_json(offsets_path)["dataVersion"]["counter"] == 8
    assert offsets_path.with_name("consumerOffset.json.bak").exists()
    assert tree_bytes(store / "consumequeue") == cq_before
    # The by-time table never answers later than the first message stored at or after the time.
    times = read_config_json(store / RMQOPS_DIR / OFFSET_TIME_TABLE)
    gran = times["granularityMs"]
    for m in manifest["messages"][::7]:
        table_q = times["queues"][m["topic"]][str(m["queueId"])]
        ans = offset_at_time(table_q, m["storeTimestamp"], 25, gran)
        first_at_or_after = min(x["queueOffset"] for x in manifest["messages"]
                                if (x["topic"], x["queueId"]) == (m["topic"], m["queueId"])
                                and x["storeTimestamp"] >= m["storeTimestamp"])
        assert ans <= first_at_or_after


def test_rebuild_refuses_a_store_held_by_a_broker(spark, golden_store):
    store, cfg, _ = golden_store("store-basic", drop=("index",))
    lock = StoreLock(store)
    lock.acquire()
    try:
        with pytest.raises(RebuildError, match="stop the broker"):
            run_rebuild(store, cfg, spark=spark)
    finally:
        lock.release()
    assert not (store / "index").exists()
