"""The same rebuild through a real Spark standalone cluster (master + one worker on 127.0.0.1)."""

from __future__ import annotations

import time

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


# ------------------------------------------------------------------------------ no master, no executor

def _rebuild_verify(store, cfg, master: str, **env: str):
    import subprocess

    from spark_helpers import REPO, mqadmin_argv, mqadmin_env

    t0 = time.monotonic()
    proc = subprocess.run(mqadmin_argv("rebuildStore", "--store", str(store), "--config", str(cfg), "--verify",
                                       "--master", master),
                          capture_output=True, text=True, env=mqadmin_env(**env), cwd=str(REPO), timeout=150)
    return proc, time.monotonic() - t0


def test_a_worker_port_is_no_master_in_one_line_at_once(standalone_cluster, golden_store):
    """It answers TCP, so the URL check passed; Spark then retried for 60 s, printing ~200 lines of Java stacks,
    and ended in "Spark failed: An error occurred while calling None.org.apache.spark.sql.classic.SparkSession"."""
    from spark_helpers import stderr_lines

    store, cfg, _ = golden_store("store-basic")
    master = f"spark://127.0.0.1:{standalone_cluster.worker_port}"
    proc, took = _rebuild_verify(store, cfg, master)
    assert proc.returncode == 1, proc.stderr[-3000:]
    assert stderr_lines(proc.stderr) == [
        f"mqadmin rebuildStore: no Spark master answers at {master}: a Spark process answers there, but not a "
        f"master (a worker's port?): Cannot find endpoint: spark://Master@127.0.0.1:{standalone_cluster.worker_port}"]
    assert took < 40


def test_no_executor_granted_fails_in_one_line_within_the_wait(standalone_cluster, golden_store):
    """The worker offers 1g; a job asking 2g per executor waited forever, silently (the log was at ERROR)."""
    from spark_helpers import stderr_lines

    store, cfg, _ = golden_store("store-basic")
    proc, took = _rebuild_verify(store, cfg, standalone_cluster, RMQOPS_SPARK_EXECUTOR_MEMORY="2g",
                                 RMQOPS_SPARK_EXECUTOR_WAIT_S="5")
    assert proc.returncode == 1, proc.stderr[-3000:]
    assert stderr_lines(proc.stderr) == [
        f"mqadmin rebuildStore: no Spark worker at {standalone_cluster} granted an executor with 2g within 5 s: "
        f"give workers more memory (or free cores) or set spark.executor.memory (RMQOPS_SPARK_EXECUTOR_MEMORY=512m)"]
    assert took < 60
