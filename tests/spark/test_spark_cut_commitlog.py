"""A last commitlog file cut short (``truncate``): the rebuild refuses it as the broker and verifyStore do.

Why: rebuildStore took a cut last file for a torn tail ("recovery stops there too"), exited 0, rewrote the
consume queues and clamped consumer offsets (25 -> 20) to what was left, while the broker and
``mqadmin verifyStore`` refuse to open such a store at all. All Spark tests in this module share one
local[2] session (the ``spark`` fixture); the refusal comes before Spark is used.
"""

from __future__ import annotations

import os

import pytest
from spark_helpers import tree_bytes
from typer.testing import CliRunner

from broker_core.store.config_file import write_config_json
from mqadmin.app import app
from spark.rebuild import RebuildRefusedError, run_rebuild

FILE_SIZE = 65536
FIRST = f"{0:020d}"
LAST = f"{2 * FILE_SIZE:020d}"


def _cli(*args: str):
    return CliRunner().invoke(app, list(args), env={"NAMESRV_ADDR": "", "RMQ_STORE": ""})


@pytest.mark.parametrize("length", [29146, 29000], ids=["at-a-record-boundary", "inside-a-record"])
def test_a_cut_last_commitlog_file_is_refused_in_verify_stores_words_and_nothing_is_written(spark, golden_store,
                                                                                            length):
    store, cfg, _ = golden_store("store-basic")
    write_config_json(store / "config" / "consumerOffset.json",
                      {"offsetTable": {"GoldenTopicA@g1": {0: 25, 1: 25}}})  # both past the cut
    os.truncate(store / "commitlog" / LAST, length)
    before = tree_bytes(store)
    problem = (f"commitlog/{LAST}: length {length} differs from the {FILE_SIZE} bytes of {FIRST}, the first file "
               f"of this log (its files are all one size): one of them was truncated or extended")

    verify = _cli("verifyStore", "--store", str(store), "--config", str(cfg))
    assert verify.exit_code == 1 and problem in verify.stderr, (verify.stdout, verify.stderr)
    for force in (False, True):  # no log end to rebuild up to: --force does not help
        with pytest.raises(RebuildRefusedError) as refused:
            run_rebuild(store, cfg, spark=spark, split_bytes=16 * 1024, force=force)
        text = str(refused.value)
        assert problem in text and text.endswith("the broker cannot open the store with it (nor can mqadmin "
                                                 "verifyStore), so nothing was written"), text
        assert "recovery stops there" not in text and "\n" not in text
    with pytest.raises(RebuildRefusedError, match="so nothing was checked"):
        run_rebuild(store, cfg, verify=True, spark=spark, split_bytes=16 * 1024)
    r = _cli("rebuildStore", "--store", str(store), "--config", str(cfg))
    assert r.exit_code == 1, (r.stdout, r.stderr)
    assert r.stderr.splitlines() == [f"mqadmin rebuildStore: {text}"]
    assert tree_bytes(store) == before and not list(store.glob(".rmqops-*"))


def test_an_empty_last_file_is_no_cut_file(spark, golden_store):
    """A file the broker pre-created and never sized holds nothing: the broker skips it, so does the rebuild."""
    store, cfg, _ = golden_store("store-basic", drop=("consumequeue", "index"))
    (store / "commitlog" / f"{3 * FILE_SIZE:020d}").touch()
    summary = run_rebuild(store, cfg, parts="cq", spark=spark, split_bytes=16 * 1024)
    assert summary.log_end_clean and summary.commitlog_files == 3
