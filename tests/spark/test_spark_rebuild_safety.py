"""A rebuild never damages the store it reads: sizes come from the store's files, a refusal changes
nothing, a failed swap says what it replaced, and ``--verify`` writes nothing in the store.

All tests in this module share one local[2] SparkSession (the ``spark`` fixture).
"""

from __future__ import annotations

import pytest
from spark_helpers import tree_bytes

from spark.rebuild import RebuildRefusedError, run_rebuild


def _store_bytes(store) -> dict[str, bytes]:
    return tree_bytes(store)


# ------------------------------------------------------------------ sizes come from the store's files

def test_rebuild_without_config_keeps_the_stores_queue_file_sizes(spark, golden_store, golden_root):
    store, _cfg, _manifest = golden_store("store-basic")
    summary = run_rebuild(store, None, parts="cq,offsets", spark=spark)
    assert summary.cq_files == 16
    # 400-byte CQ files as the store was made with, not the default 6,000,000 bytes
    assert tree_bytes(store / "consumequeue") == tree_bytes(golden_root / "store-basic" / "consumequeue")


@pytest.mark.parametrize("verify", [False, True])
def test_index_of_another_geometry_is_refused_in_one_line_and_nothing_changes(spark, golden_store, verify):
    store, _cfg, _manifest = golden_store("store-basic")
    before = _store_bytes(store)
    with pytest.raises(RebuildRefusedError) as e:
        run_rebuild(store, None, spark=spark, verify=verify)
    msg = str(e.value)
    assert "\n" not in msg
    assert "is 4296 bytes, expected 420000040 (maxHashSlotNum=5000000, maxIndexNum=20000000)" in msg
    assert "give --config with the store's maxHashSlotNum/maxIndexNum" in msg
    assert _store_bytes(store) == before


# ------------------------------------------------------------------ a refused or failed swap changes nothing

def _damage_a_cq_unit(store) -> None:
    """A unit of GoldenTopicA/0 pointing nowhere: something the rebuild has to replace."""
    with open(store / "consumequeue" / "GoldenTopicA" / "0" / "00000000000000000400", "r+b") as f:
        f.seek(380)
        f.write(b"\0" * 8 + b"\x7f\xff\xff\xff")


def _chattr(flag: str, path) -> bool:
    import shutil
    import subprocess

    if shutil.which("chattr") is None:
        return False
    return subprocess.run(["chattr", flag, str(path)], capture_output=True).returncode == 0


def test_an_index_directory_that_cannot_be_replaced_is_refused_before_anything_changes(spark, golden_store):
    from spark.rebuild import RebuildWriteError

    store, cfg, _manifest = golden_store("store-basic")
    _damage_a_cq_unit(store)
    before = _store_bytes(store)
    if not _chattr("+i", store / "index"):
        pytest.skip("chattr +i needs root and a file system that supports it")
    try:
        with pytest.raises(RebuildWriteError) as e:
            run_rebuild(store, cfg, spark=spark)
    finally:
        _chattr("-i", store / "index")
    assert str(e.value) == f"cannot replace {store / 'index'}: it is not writable; nothing was written"
    after = _store_bytes(store)
    after.pop("lock", None)
    before.pop("lock", None)
    assert after == before  # the damaged CQ is still there, no rmqops/ offset tables
    assert not (store / "rmqops").exists()


def test_a_symlinked_consumequeue_is_rebuilt_through_the_link(spark, golden_store, golden_root, tmp_path):
    store, cfg, _manifest = golden_store("store-basic")
    _damage_a_cq_unit(store)
    elsewhere = tmp_path / "cq-elsewhere"
    (store / "consumequeue").rename(elsewhere)
    (store / "consumequeue").symlink_to(elsewhere)
    run_rebuild(store, cfg, spark=spark)
    assert (store / "consumequeue").is_symlink() and (store / "consumequeue").resolve() == elsewhere
    assert tree_bytes(elsewhere) == tree_bytes(golden_root / "store-basic" / "consumequeue")
    assert not list(store.glob(".rmqops-rebuild-*"))


# ------------------------------------------------------------------ --verify beside a running broker

def test_verify_beside_a_writer_does_not_count_units_written_after_the_scan(spark, golden_store):
    """Units and index entries of records the scan did not reach are newer than the scan, not extra.

    A writer holds the store and puts a few messages; their records are then zeroed in the commitlog
    (what the scan saw before the writer wrote them), while their units and index entries stay.
    """
    from broker_core.store.codec.message import MessageInner
    from broker_core.store.message_store import MessageStore
    from broker_core.store.store_config import StoreConfig

    store, cfg, manifest = golden_store("store-basic")
    old_end = manifest["commitLogMaxOffset"]
    writer = MessageStore(store, StoreConfig.load(cfg, root=store)).open()
    try:
        for i in range(5):
            msg = MessageInner(topic="GoldenTopicA", body=b"late-%d" % i, properties={"KEYS": f"late{i}"},
                               queue_id=0, born_host=("10.0.0.9", 5555), store_host=("127.0.0.1", 10911))
            assert writer.put_message(msg).ok
        new_end = writer.commit_log.max_offset()
        assert old_end < new_end < 3 * 65536  # still in the last file: no file after the zeroed bytes
        last = store / "commitlog" / f"{2 * 65536:020d}"
        with open(last, "r+b") as f:
            f.seek(old_end - 2 * 65536)
            f.write(bytes(new_end - old_end))
        summary = run_rebuild(store, cfg, spark=spark, verify=True)
    finally:
        writer.shutdown()
    assert summary.log_end_offset == old_end
    assert summary.mismatches == []
    assert summary.after_scan_units == 5 and summary.after_scan_index_entries >= 5
    assert any("written by the broker holding the store after the scan" in w for w in summary.warnings)


def test_verify_counts_records_not_yet_dispatched_as_verify_store_does(spark, golden_store):
    """kill -9 while dispatch lagged leaves the newest records without their units: verifyStore counts them
    "not yet dispatched" (store OK; the broker dispatches them on start), while rebuildStore --verify
    listed each as a missing unit and exited 1. A unit missing before the newest dispatched record is
    still damage."""
    import subprocess
    import sys
    from pathlib import Path

    from broker_core.store.codec.message import MessageInner
    from broker_core.store.message_store import MessageStore
    from broker_core.store.store_config import StoreConfig

    store, cfg, _manifest = golden_store("store-basic")
    config = StoreConfig.load(cfg, root=store)
    writer = MessageStore(store, config).open()
    try:
        offsets = []
        for i in range(3):
            msg = MessageInner(topic="GoldenTopicA", body=b"lagging-%d" % i, properties={"KEYS": f"lag{i}"},
                               queue_id=0, born_host=("10.0.0.9", 5555), store_host=("127.0.0.1", 10911))
            offsets.append(writer.put_message(msg).queue_offset)
    finally:
        writer.shutdown()
    size = config.mapped_file_size_consume_queue

    def zero_unit(queue_offset: int) -> None:  # what a dispatch that never ran left: no unit
        pos = queue_offset * 20
        path = store / "consumequeue" / "GoldenTopicA" / "0" / f"{pos - pos % size:020d}"
        with open(path, "r+b") as f:
            f.seek(pos % size)
            f.write(bytes(20))

    for q in offsets:
        zero_unit(q)
    (store / "abort").write_text("")  # the broker did not stop cleanly
    mqadmin = str(Path(sys.executable).with_name("mqadmin"))
    verify_store = subprocess.run([mqadmin, "verifyStore", "--store", str(store), "--config", str(cfg)],
                                  capture_output=True, text=True)
    assert verify_store.returncode == 0 and "store OK" in verify_store.stdout, verify_store.stdout
    summary = run_rebuild(store, cfg, spark=spark, verify=True)
    assert summary.mismatches == []
    assert summary.not_dispatched_units == 3 and summary.not_dispatched_index_entries == 0
    assert any("not yet dispatched" in w for w in summary.warnings), summary.warnings
    zero_unit(offsets[0] - 2)  # a unit missing before dispatched ones: damage, reported by both
    verify_store = subprocess.run([mqadmin, "verifyStore", "--store", str(store), "--config", str(cfg)],
                                  capture_output=True, text=True)
    assert verify_store.returncode == 1, verify_store.stdout
    summary = run_rebuild(store, cfg, spark=spark, verify=True)
    assert ("missing-unit", "GoldenTopicA/0", offsets[0] - 2) in [(m.kind, m.where, m.offset)
                                                                   for m in summary.mismatches]
