"""Starting and stopping a Spark job from mqadmin: a bad --master, an address where no master answers,
and Ctrl-C while a rebuild runs. Each case prints one line, no Java stack and no Python traceback.

The mqadmin runs that start Spark run in subprocesses (their own driver JVM, their own SIGINT), so
nothing here shares or stops a session of another test.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import threading
import time

import pytest
from spark_helpers import REPO, mqadmin_argv, mqadmin_env, stderr_lines, tree_bytes
from typer.testing import CliRunner

from broker_core.store.store_lock import holder_fields
from mqadmin.app import app


@pytest.mark.parametrize("master, line", [
    ("spark://127.0.0.1", "bad Spark master 'spark://127.0.0.1': expected spark://host:port[,host:port]"),
    ("local[x]", "unsupported Spark master 'local[x]': use local[*], local[N] or spark://host:port"),
    ("yarn", "unsupported Spark master 'yarn': use local[*], local[N] or spark://host:port"),
    ("local[0]", "bad Spark master 'local[0]': the thread count of local[N] must be >= 1 (or * for one per core)"),
])
@pytest.mark.parametrize("command", ["rebuildStore", "searchMessages"])
def test_a_malformed_master_is_a_usage_error(golden_copy, monkeypatch, command, master, line):
    """It exited 1, as if the job had failed; a URL that cannot be right is a usage error: exit 2."""
    from spark import rebuild, search

    def no_spark(*a, **k):
        raise AssertionError("Spark must not start")

    monkeypatch.setattr(rebuild, "get_spark", no_spark)
    monkeypatch.setattr(search, "get_spark", no_spark)
    store = golden_copy("store-basic")
    r = CliRunner().invoke(app, [command, "--store", str(store), "--master", master],
                           env={"NAMESRV_ADDR": "", "RMQ_STORE": ""})
    assert r.exit_code == 2, (r.stdout, r.stderr)
    assert r.stderr.splitlines() == [f"mqadmin {command}: {line} (see 'mqadmin {command} --help')"]


@pytest.fixture
def silent_port():
    """A port that accepts TCP connections and never says a word (the URL check passes there)."""
    server = socket.create_server(("127.0.0.1", 0))
    conns: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                conns.append(server.accept()[0])
            except TimeoutError:
                continue
            except OSError:
                return

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield server.getsockname()[1]
    stop.set()
    thread.join(timeout=5)
    for c in conns:
        c.close()
    server.close()


def test_an_address_where_no_master_answers_is_one_line_in_bounded_time(golden_store, silent_port):
    """Spark retried for 60 s, printing a Java stack per retry, then "Spark failed: An error occurred while
    calling None.org.apache.spark.sql.classic.SparkSession."."""
    store, cfg, _ = golden_store("store-basic")
    master = f"spark://127.0.0.1:{silent_port}"
    t0 = time.monotonic()
    proc = subprocess.run(mqadmin_argv("rebuildStore", "--store", str(store), "--config", str(cfg), "--verify",
                                       "--master", master),
                          capture_output=True, text=True, env=mqadmin_env(RMQOPS_SPARK_EXECUTOR_WAIT_S="3"),
                          cwd=str(REPO), timeout=150)
    assert proc.returncode == 1, proc.stderr[-3000:]
    assert stderr_lines(proc.stderr) == [
        f"mqadmin rebuildStore: no Spark master answers at {master}: nothing there answered Spark's RPC within "
        f"3 s (set RMQOPS_SPARK_EXECUTOR_WAIT_S to wait longer)"], proc.stderr[-3000:]
    assert time.monotonic() - t0 < 45


def test_ctrl_c_during_a_rebuild_is_one_line_and_leaves_the_store_unchanged(golden_store):
    """Ctrl-C printed four tracebacks (PySpark's SIGINT handler calling into the JVM from inside a Py4J call,
    then Java's log of rejected tasks) before "interrupted"; nothing said what had become of the store."""
    store, cfg, _ = golden_store("store-basic", drop=("index",))
    before = tree_bytes(store)
    proc = subprocess.Popen(mqadmin_argv("rebuildStore", "--store", str(store), "--config", str(cfg)),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=mqadmin_env(),
                            cwd=str(REPO), start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        # The decode job's exchange directory: Spark is up and the first job is being submitted or runs.
        while not list(store.glob(".rmqops-rebuild-*/exchange")):
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the rebuild never started its first job"
            time.sleep(0.005)
        # who holds the store, for a refused broker's or mqadmin's message: this mqadmin, not "a broker"
        assert holder_fields(store).get("role") == "mqadmin"
        os.killpg(proc.pid, signal.SIGINT)  # what Ctrl-C sends: the whole foreground process group
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == 130, (out, err)
    assert stderr_lines(err) == [f"mqadmin rebuildStore: interrupted; the store {store.resolve()} was left "
                                 f"unchanged"], err
    assert tree_bytes(store) == before and not list(store.glob(".rmqops-*"))


def test_the_guard_defers_the_first_ctrl_c_and_cancels_the_jobs():
    """The handler never raises inside whatever the main thread is doing (a Py4J call): it cancels the
    jobs from another thread; the driver stops at its next check. A second Ctrl-C interrupts at once."""
    from spark.interrupt import InterruptGuard

    cancelled = threading.Event()

    class Context:
        def cancelAllJobs(self) -> None:  # noqa: N802 - SparkContext's name
            cancelled.set()

    before = signal.getsignal(signal.SIGINT)
    with InterruptGuard() as guard:
        guard.attach(Context())
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.05)  # the handler runs between bytecodes of this thread
        assert guard.requested and cancelled.wait(5)
        with pytest.raises(KeyboardInterrupt):
            guard.check()
        with pytest.raises(KeyboardInterrupt):
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.05)
    assert signal.getsignal(signal.SIGINT) is before


def test_an_interrupt_after_files_were_swapped_in_names_them(tmp_path):
    from spark.rebuild import RebuildInterrupted

    written = [tmp_path / "config" / "consumerOffset.json", tmp_path / "consumequeue", tmp_path / "consumequeue"]
    assert str(RebuildInterrupted(tmp_path, [str(p) for p in written])) == (
        f"interrupted after writing config/consumerOffset.json, consumequeue in {tmp_path}; nothing else in the "
        f"store was changed")


def test_the_code_zip_shipped_to_a_cluster_is_removed_when_the_process_exits(tmp_path) -> None:
    """Every job on a cluster master left its ~650 KB rmqops-code-*.zip in the temp directory for good."""
    import sys

    done = subprocess.run([sys.executable, "-c", "from spark.session import build_code_zip; "
                           f"import os; p = build_code_zip({str(tmp_path)!r}); print(p, os.path.getsize(p))"],
                          capture_output=True, text=True, timeout=60, cwd=str(REPO))
    assert done.returncode == 0, done.stderr
    path, size = done.stdout.split()
    assert int(size) > 0 and path.startswith(str(tmp_path))
    assert not os.path.exists(path) and list(tmp_path.iterdir()) == []
