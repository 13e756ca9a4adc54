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


def test_cluster_search_equals_plain_scan(standalone_cluster, golden_copy):
    """searchMessages on the standalone master + worker: two stores, SQL92 and a time window."""
    from search_oracle import FIELDS, scan_store, select

    from spark.search import build_query, run_search

    basic, batch = golden_copy("store-basic"), golden_copy("store-batchcq")
    plain = scan_store(basic)[0] + scan_store(batch)[0]
    times = sorted(m["storeTimestamp"] for m in plain)
    begin, end = times[20], times[-20]
    where = "TAGS IN ('TagA', 'BTag0', 'S') OR KEYS = 'hot'"
    result = run_search([basic, batch], build_query(begin_ms=begin, end_ms=end, where=where), limit=0,
                        master=standalone_cluster, split_bytes=16 * 1024)
    assert result.summary.master.startswith("spark://127.0.0.1:")
    expected = select(plain, begin=begin, end=end, where=where)
    assert expected and [{k: m[k] for k in FIELDS} for m in result.messages] == expected
