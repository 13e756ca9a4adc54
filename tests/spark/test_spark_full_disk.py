"""rebuildStore on a full disk, through mqadmin in this process.

Why a module of its own: the command makes its Spark session and stops it when it ends, as it does for
an operator; beside the other rebuild tests it would stop the session their module shares.
"""

from __future__ import annotations

from golden_helpers import copy_golden_store
from small_fs import fill
from spark_helpers import tree_bytes, write_store_config


def test_rebuild_on_a_full_disk_fails_with_its_cause_and_changes_nothing(manifests, small_fs, tmp_path):
    """The operator read "Spark failed: An exception was thrown from the Python worker:", the first
    line of the job's failure, and not why: the cause is the task's own exception."""
    from typer.testing import CliRunner

    from mqadmin.app import app

    store = copy_golden_store("store-basic", small_fs / "store")
    cfg = write_store_config(manifests["store-basic"], tmp_path / "store-basic.conf")
    before = tree_bytes(store)
    fill(small_fs / "filler")
    r = CliRunner().invoke(app, ["rebuildStore", "--store", str(store), "--config", str(cfg)],
                           env={"NAMESRV_ADDR": "", "RMQ_STORE": ""})
    # a task's exchange file (tmpfs) or, first, the driver's staging directory (ext4)
    err = r.stderr
    assert r.exit_code == 1 and len(err.splitlines()) == 1, err
    assert err == "mqadmin rebuildStore: Spark failed: OSError: [Errno 28] No space left on device\n" or (
        err.startswith(f"mqadmin rebuildStore: cannot write {store}/.rmqops-rebuild-")
        and err.endswith(": No space left on device\n")), err
    assert tree_bytes(store) == before and not list(store.glob(".rmqops-rebuild-*"))
