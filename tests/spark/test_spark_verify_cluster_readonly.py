"""``rebuildStore --verify`` on a ``spark://`` master writes nothing in the store: a read-only store
(``chattr +i``) verifies as in local mode. Its own standalone cluster (module scope)."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from spark.rebuild import run_rebuild


def _chattr(flag: str, path) -> bool:
    if shutil.which("chattr") is None:
        return False
    return subprocess.run(["chattr", flag, str(path)], capture_output=True).returncode == 0


def test_cluster_verify_of_a_read_only_store_writes_nothing_and_passes(standalone_cluster, golden_store):
    store, cfg, _manifest = golden_store("store-basic")
    before = sorted(p.name for p in store.iterdir())
    if not _chattr("+i", store):
        pytest.skip("chattr +i needs root and a file system that supports it")
    try:
        summary = run_rebuild(store, cfg, master=standalone_cluster, verify=True)
    finally:
        _chattr("-i", store)
    assert summary.mismatch_count == 0 and summary.records == 200
    assert sorted(p.name for p in store.iterdir()) == before
