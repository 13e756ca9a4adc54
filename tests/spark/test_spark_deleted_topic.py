"""Records gone from the commitlog: a deleted topic's, and those retention deleted.

A topic deleted and made again: the rebuild leaves the old records out, as recovery does.
Why: deleteTopic removes the queues, but the topic's records stay in the commitlog until retention;
a topic of the same name made later starts its queues at 0. The rebuild walked every record, so the
old ones came back into the new queues: ``--verify`` reported the live queue's units as wrong, and the
rebuild refused the queue (its offsets went 0..4, then 0..2). The broker's tombstones
(config/deletedTopics.json: topic -> commitlog offset at deletion) say which records are gone.

Retention: it deletes whole commitlog files, then only the CQ/BCQ and index files that lie wholly below
the new min offset (Apache's deleteExpiredFile), so the oldest files kept still hold units and entries of
deleted records. verifyStore counts them as expired; ``rebuildStore --verify`` reported every one as an
extra unit or index entry (exit 1) on every store retention had run on. It now draws verifyStore's line.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from broker_core.broker.broker import Broker
from broker_core.broker.broker_config import BrokerConfig
from broker_core.store.codec.batch import BatchItem
from broker_core.store.codec.cq_unit import CQ_STORE_UNIT_SIZE, CQ_UNIT
from broker_core.store.codec.index_format import INDEX_ENTRY, entry_pos
from broker_core.store.config_file import ConfigFileError
from broker_core.store.deleted_topics import read_deleted_topics
from broker_core.store.message_store import MessageStore
from broker_core.store.store_config import StoreConfig
from broker_core.store.verify import verify_store
from spark.index_build import reachable_entries
from spark.queues import read_existing_units
from spark.rebuild import run_rebuild
from spark.scan import CQ_REC, IDX_REC, decode_range
from spark.store_input import load_store_input

SIZES = {"mappedFileSizeCommitLog": str(1024 * 1024), "mappedFileSizeConsumeQueue": str(20 * 1000),
         "maxHashSlotNum": "64", "maxIndexNum": "400"}


def _recreated_topic_store(tmp_path: Path) -> tuple[Path, Path, list[int], int]:
    """Store with T written (5 messages), deleted, made again and written (3): (store, config, the new
    records' commitlog offsets, the cut)."""
    store = tmp_path / "store"
    conf = tmp_path / "broker.conf"
    conf.write_text("".join(f"{k}={v}\n" for k, v in SIZES.items()), encoding="utf-8")
    b = Broker(store, BrokerConfig.from_properties(dict(SIZES)))
    try:
        b.create_or_update_topic("T", 1, 1)
        for i in range(5):
            b.send_message("T", f"old{i}".encode(), {"KEYS": f"old{i}"}, queue_id=0)
        b.delete_topic("T")
        b.create_or_update_topic("T", 1, 1)
        new = [b.send_message("T", f"new{i}".encode(), {"KEYS": f"new{i}"}, queue_id=0).commit_log_offset
               for i in range(3)]
        assert [m.body for m in b.pull_message("G", "T", 0, 0).messages] == [b"new0", b"new1", b"new2"]
    finally:
        b.shutdown()
    return store, conf, new, read_deleted_topics(store / "config")["T"]


def test_decoding_leaves_out_records_below_the_deleted_topic_s_cut(tmp_path: Path) -> None:
    store, conf, new, cut = _recreated_topic_store(tmp_path)
    si = load_store_input(store, conf)
    assert si.deleted_topics == {"T": cut} and all(phy >= cut for phy in new)
    f = si.files[0]
    kept = decode_range(0, 0, f.path, f.base, 0, -1, True, si.delay_levels_ms, True, si.deleted_topics)
    assert [(u[0], u[2]) for u in CQ_REC.iter_unpack(kept.cq[("T", 0)])] == list(enumerate(new))
    assert {phy for _h, phy, _ts in IDX_REC.iter_unpack(kept.index)} == set(new)
    every = decode_range(0, 0, f.path, f.base, 0, -1, True, si.delay_levels_ms, True)  # no tombstones
    assert len(list(CQ_REC.iter_unpack(every.cq[("T", 0)]))) == 8


def test_a_damaged_tombstone_file_is_named_not_a_traceback(tmp_path: Path) -> None:
    (tmp_path / "deletedTopics.json").write_text('{"deletedTopicTable": {"T": "soon"}}', encoding="utf-8")
    with pytest.raises(ConfigFileError, match=r"deletedTopics\.json.*deletedTopicTable\.T"):
        read_deleted_topics(tmp_path)


def test_rebuild_of_a_recreated_topic_verifies_clean_and_keeps_the_new_queue(spark, tmp_path: Path) -> None:
    store, conf, new, _cut = _recreated_topic_store(tmp_path)
    checked = run_rebuild(store, conf, verify=True, spark=spark)
    assert checked.mismatches == []  # the old records' kept index entries are no error either
    summary = run_rebuild(store, conf, spark=spark)
    assert summary.mismatch_count == 0
    units = read_existing_units(store, "T", 0, False, 20 * 1000)
    assert [(u[0], u[1]) for u in units] == list(enumerate(new))
    b = Broker(store, BrokerConfig.from_properties(dict(SIZES)), read_only=True)
    try:
        assert [m.body for m in b.query_message("T", "new1")] == [b"new1"]
        assert b.query_message("T", "old1") == []
    finally:
        b.shutdown()


RETENTION_SIZES = {"mappedFileSizeCommitLog": str(64 * 1024), "mappedFileSizeConsumeQueue": str(20 * 16),
                   "mapperFileSizeBatchConsumeQueue": str(46 * 8), "maxHashSlotNum": "16", "maxIndexNum": "24",
                   "fileReservedTime": "1"}


def _retained_store(tmp_path: Path) -> tuple[Path, Path, dict[int, str]]:
    """Store whose first 64 KiB commitlog file the store's own retention deleted (older than fileReservedTime,
    DELETE_EXPIRED_COMMITLOG): Early (a SimpleCQ queue whose records were all in it), Plain (SimpleCQ) and
    Batch (BatchCQ) keep files with units below the new min, the oldest index file kept entries below it.
    (store, config, commitlog offset -> KEYS of each Plain record)."""
    store = tmp_path / "store"
    conf = tmp_path / "broker.conf"
    conf.write_text("".join(f"{k}={v}\n" for k, v in RETENTION_SIZES.items()), encoding="utf-8")
    b = Broker(store, BrokerConfig.from_properties(dict(RETENTION_SIZES)))
    plain: dict[int, str] = {}
    try:
        b.create_or_update_topic("Early", 1, 1)
        b.create_or_update_topic("Plain", 1, 1)
        b.create_or_update_topic("Batch", 1, 1, attributes="+queue.type=BatchCQ")
        body = b"x" * 900
        for i in range(8):
            b.send_message("Early", body, {"KEYS": f"e{i}"}, queue_id=0)
        for i in range(120):
            plain[b.send_message("Plain", body, {"KEYS": f"p{i}"}, queue_id=0).commit_log_offset] = f"p{i}"
            if i % 2 == 0:
                b.send_batch("Batch", [BatchItem(body[:400], {"KEYS": f"b{i}.{j}"}) for j in range(2)], queue_id=0)
        first = store / "commitlog" / f"{0:020d}"
        old = time.time() - 3 * 86400
        os.utime(first, (old, old))
        assert b.delete_expired_commit_log().deleted_commit_log_files == [first.name]
    finally:
        b.shutdown()
    return store, conf, plain


def _verify_store_issues(store: Path, conf: Path) -> list[tuple[str, str, int]]:
    s = MessageStore(store, StoreConfig.load(conf, root=store), read_only=True).open()
    try:
        return sorted((i.kind, i.where, i.offset) for i in verify_store(s).issues)
    finally:
        s.shutdown()


def test_verify_after_retention_agrees_with_verify_store_and_still_finds_real_extras(spark, tmp_path: Path) -> None:
    store, conf, plain = _retained_store(tmp_path)
    cl_min = 64 * 1024
    slot_num, index_num = int(RETENTION_SIZES["maxHashSlotNum"]), int(RETENTION_SIZES["maxIndexNum"])
    cq_size, bcq_size = 20 * 16, 46 * 8
    # what retention left below the min: the case itself
    for topic, batch in (("Early", False), ("Plain", False), ("Batch", True)):
        units = read_existing_units(store, topic, 0, batch, bcq_size if batch else cq_size)
        assert any(u[1] < cl_min for u in units), topic
    index_files = sorted(store.glob("index/*"))
    assert any(phy < cl_min for _h, phy in reachable_entries(str(index_files[0]), slot_num, index_num))
    assert _verify_store_issues(store, conf) == []  # "store OK"

    # Real damage at the min offset itself: a Plain unit appended after the last one, pointing at the record
    # at the min (the first of the file retention kept), and an index entry of a later Plain record pointed at it.
    size = int.from_bytes((store / "commitlog" / f"{cl_min:020d}").read_bytes()[:4], "big")
    cq_last = sorted(store.glob("consumequeue/Plain/0/*"))[-1]
    data = bytearray(cq_last.read_bytes())
    pos = next(p for p in range(0, len(data), CQ_STORE_UNIT_SIZE) if not any(data[p:p + CQ_STORE_UNIT_SIZE]))
    extra_offset = (int(cq_last.name) + pos) // CQ_STORE_UNIT_SIZE
    CQ_UNIT.pack_into(data, pos, cl_min, size, 0)
    cq_last.write_bytes(bytes(data))
    newest = index_files[-1]
    entries = reachable_entries(str(newest), slot_num, index_num, numbered=True)
    h, moved_from, n = next(e for e in entries if e[1] in plain and e[1] > cl_min)
    idx = bytearray(newest.read_bytes())
    _h, _phy, time_diff, prev = INDEX_ENTRY.unpack_from(idx, entry_pos(slot_num, n))
    INDEX_ENTRY.pack_into(idx, entry_pos(slot_num, n), h, cl_min, time_diff, prev)
    newest.write_bytes(bytes(idx))

    issues = _verify_store_issues(store, conf)
    assert {(k, o) for k, _w, o in issues} == {("cq-mismatch", extra_offset), ("index-key-mismatch", cl_min),
                                               ("index-missing-entry", moved_from)}
    checked = run_rebuild(store, conf, verify=True, spark=spark)
    got = sorted((m.kind, m.where, m.offset) for m in checked.mismatches)
    assert got == [("extra-index-entry", f"index/{newest.name} entry {n}", cl_min),
                   ("extra-unit", "Plain/0", extra_offset),
                   ("missing-index-entry", f"index/{newest.name}", moved_from)], got
    assert checked.expired_units > 0
    extra = next(m for m in checked.mismatches if m.kind == "extra-unit")
    assert extra.actual == (extra_offset, cl_min, size, 0)
