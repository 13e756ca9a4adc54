"""A topic deleted and made again: the rebuild leaves the old records out, as recovery does.

Why: deleteTopic removes the queues, but the topic's records stay in the commitlog until retention;
a topic of the same name made later starts its queues at 0. The rebuild walked every record, so the
old ones came back into the new queues: ``--verify`` reported the live queue's units as wrong, and the
rebuild refused the queue (its offsets went 0..4, then 0..2). The broker's tombstones
(config/deletedTopics.json: topic -> commitlog offset at deletion) say which records are gone.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from broker_core.broker.broker import Broker
from broker_core.broker.broker_config import BrokerConfig
from broker_core.store.config_file import ConfigFileError
from broker_core.store.deleted_topics import read_deleted_topics
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
