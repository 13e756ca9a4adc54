"""The spark-submit scripts (``spark/rebuild_store.py``, ``spark/search_messages.py``) refuse a bad --master or
--config as mqadmin does: one line on stderr, exit 2 for a malformed URL, 1 otherwise, before Spark starts.

Why: the scripts skipped mqadmin's --master check, so ``--master yarn`` left Spark waiting ~20 min for a YARN
ResourceManager, and ``local[0]`` passed the URL check and failed as "An error occurred while calling
None..."; a missing or bad --config was a Python traceback. Each run is its own process (its own JVM).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest
from spark_helpers import REPO, mqadmin_env, stderr_lines
from typer.testing import CliRunner

from mqadmin.app import app
from spark.master_url import MasterUrlUsageError, parse_master
from spark.session import spark_home

SCRIPTS = [("rebuild_store.py", "rebuildStore"), ("search_messages.py", "searchMessages")]
NOTHING_THERE = 32811  # in this suite's port range; nothing listens there
LOCAL_0 = "bad Spark master 'local[0]': the thread count of local[N] must be >= 1 (or * for one per core)"


def _run(argv: list[str], timeout: float = 90) -> subprocess.CompletedProcess:
    """Run in its own process group, killed whole when it outlives ``timeout`` (Spark waiting for YARN)."""
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=str(REPO),
                            env=mqadmin_env(PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable,
                                           SPARK_LOCAL_IP="127.0.0.1"),
                            start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        pytest.fail(f"{argv[1:3]} still running after {timeout} s")
    return subprocess.CompletedProcess(argv, proc.returncode, out, err)


def test_local_with_no_threads_is_a_usage_error():
    for master in ("local[0]", "local[00]", "local[0,3]"):
        with pytest.raises(MasterUrlUsageError, match="must be >= 1"):
            parse_master(master)
    for master in ("local", "local[1]", "local[*]", "local[2,3]", "local[*,2]"):
        assert parse_master(master) == []


def test_spark_submit_rebuild_store_with_master_yarn_exits_2_at_once(golden_copy):
    store = golden_copy("store-basic")
    proc = _run([os.path.join(spark_home(), "bin", "spark-submit"), "spark/rebuild_store.py", "--store", str(store),
                 "--master", "yarn"])
    assert proc.returncode == 2, proc.stdout[-3000:] + proc.stderr[-3000:]
    # spark-submit runs the driver with its stderr merged into the JVM's stdout
    assert proc.stdout.splitlines() == [
        "rebuildStore: unsupported Spark master 'yarn': use local[*], local[N] or spark://host:port"]
    assert stderr_lines(proc.stderr) == []


@pytest.mark.parametrize("master, status, line", [
    ("yarn", 2, "unsupported Spark master 'yarn': use local[*], local[N] or spark://host:port"),
    ("local[0]", 2, LOCAL_0),
    (f"spark://127.0.0.1:{NOTHING_THERE}", 1,
     f"cannot reach Spark master spark://127.0.0.1:{NOTHING_THERE}: 127.0.0.1:{NOTHING_THERE}: Connection refused"),
])
@pytest.mark.parametrize("script, prog", SCRIPTS)
def test_the_scripts_check_the_master_as_mqadmin_does(golden_copy, script, prog, master, status, line):
    store = golden_copy("store-basic")
    proc = _run([sys.executable, f"spark/{script}", "--store", str(store), "--master", master])
    assert proc.returncode == status, proc.stderr[-3000:]
    assert stderr_lines(proc.stderr) == [f"{prog}: {line}"]


@pytest.mark.parametrize("script, prog", SCRIPTS)
def test_a_missing_or_bad_config_is_one_line_naming_the_file(golden_copy, tmp_path, script, prog):
    store = golden_copy("store-basic")
    missing = tmp_path / "missing.conf"
    bad = tmp_path / "bad.conf"
    bad.write_text("mappedFileSizeCommitLog=abc\n", encoding="utf-8")
    for config, line in ((missing, f"cannot read config file {missing}: No such file or directory"),
                         (bad, f"config file {bad}: mappedFileSizeCommitLog: expected an integer, got 'abc'")):
        proc = _run([sys.executable, f"spark/{script}", "--store", str(store), "--config", str(config),
                     "--master", "local[1]"])
        assert proc.returncode == 1, proc.stderr[-3000:]
        assert stderr_lines(proc.stderr) == [f"{prog}: {line}"]


def test_mqadmin_search_with_a_bad_config_is_its_one_line_failure(golden_copy, tmp_path):
    """It was "unexpected failure: ... (run with --verbose for the details)"."""
    store = golden_copy("store-basic")
    bad = tmp_path / "bad.conf"
    bad.write_text("mappedFileSizeCommitLog=abc\n", encoding="utf-8")
    r = CliRunner().invoke(app, ["searchMessages", "--store", str(store), "--config", str(bad), "--master",
                                 "in-process"], env={"NAMESRV_ADDR": "", "RMQ_STORE": ""})
    assert r.exit_code == 1, (r.stdout, r.stderr)
    assert r.stderr.splitlines() == [
        f"mqadmin searchMessages: config file {bad}: mappedFileSizeCommitLog: expected an integer, got 'abc'"]
