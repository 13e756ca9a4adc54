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
