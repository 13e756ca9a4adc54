"""The same rebuild through a real Spark standalone cluster (master + one worker on 127.0.0.1)."""

from __future__ import annotations

from spark_helpers import index_contents, tree_bytes

from spark.rebuild import run_rebuild


def test_cluster_rebuild_is_byte_identical(standalone_cluster, golden_store, golden_root):
    store, cfg, manifest = golden_store("store-batchcq", drop=("consumequeue", "batchconsumequeue", "index"))
    summary = run_rebuild(store, cfg, master=standalone_cluster, split_bytes=4096)
    gold = golden_root / "store-batchcq"
    assert summary.master.startswith("spark://127.0.0.1:")
    assert summary.records == len(manifest["messages"])
    assert tree_bytes(store / "batchconsumequeue") == tree_bytes(gold / "batchconsumequeue")
    assert tree_bytes(store / "consumequeue") == tree_bytes(gold / "consumequeue")
    assert index_contents(store / "index") == index_contents(gold / "index")
