"""Fixtures for the Spark job tests: a shared local SparkSession, golden store helpers, and a real
Spark standalone master + worker on 127.0.0.1 started from pyspark's own launcher (``spark-class``).

Session start costs seconds, so one local session serves a whole test module. The standalone
cluster is bounded in time (startup waits at most ``CLUSTER_START_TIMEOUT``) and both JVMs are
killed by process group afterwards.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from spark_helpers import write_store_config

from spark.session import get_spark, spark_home

CLUSTER_START_TIMEOUT = 90.0


@pytest.fixture(scope="module")
def spark():
    """One local[2] SparkSession per test module, stopped at module end."""
    session = get_spark("local[2]", "rmqops-tests")
    yield session
    session.stop()


@pytest.fixture
def golden_store(golden_copy, manifests, tmp_path):
    """Factory: a writable golden store copy plus its config file: ``(store_dir, config_path, manifest)``."""

    def make(name: str, drop: tuple[str, ...] = (), **config_overrides: object):
        store = golden_copy(name)
        for sub in drop:
            path = store / sub
            if path.exists():
                import shutil

                shutil.rmtree(path)
        cfg = write_store_config(manifests[name], tmp_path / f"{name}.conf", **config_overrides)
        return store, cfg, manifests[name]

    return make


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_for(predicate, timeout: float, what: str, procs: list[subprocess.Popen], logs: list[Path]) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        for p in procs:
            if p.poll() is not None:
                tail = "\n".join(log.read_text(errors="replace")[-2000:] for log in logs if log.exists())
                raise RuntimeError(f"spark process exited ({p.returncode}) while waiting for {what}:\n{tail}")
        time.sleep(0.3)
    tail = "\n".join(log.read_text(errors="replace")[-2000:] for log in logs if log.exists())
    raise TimeoutError(f"timed out after {timeout}s waiting for {what}:\n{tail}")


def _port_open(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(0.2)
        return s.connect_ex(("127.0.0.1", port)) == 0


class ClusterUrl(str):
    """The master URL (a str, as before), plus the worker's RPC port: a Spark process that is not a master."""

    worker_port: int


@pytest.fixture(scope="module")
def standalone_cluster(tmp_path_factory) -> Iterator[str]:
    """Start a Spark standalone Master and one Worker (2 cores, 1g) on 127.0.0.1; yield the master URL
    (``.worker_port``: the worker's port)."""
    home = spark_home()
    spark_class = os.path.join(home, "bin", "spark-class")
    work = tmp_path_factory.mktemp("spark-standalone")
    env = dict(os.environ)
    env.update({
        "SPARK_HOME": home,
        "SPARK_LOCAL_IP": "127.0.0.1",
        "SPARK_MASTER_HOST": "127.0.0.1",
        "SPARK_LOG_DIR": str(work),
        "SPARK_WORKER_DIR": str(work / "worker"),
        "PYSPARK_PYTHON": sys.executable,
        "SPARK_NO_DAEMONIZE": "1",
    })
    master_port, master_ui, worker_port, worker_ui = (_free_port() for _ in range(4))
    master_log = work / "master.log"
    worker_log = work / "worker.log"
    procs: list[subprocess.Popen] = []
    url = f"spark://127.0.0.1:{master_port}"
    try:
        with open(master_log, "wb") as out:
            procs.append(subprocess.Popen(
                [spark_class, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                 "--port", str(master_port), "--webui-port", str(master_ui)],
                stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True))
        _wait_for(lambda: _port_open(master_port), CLUSTER_START_TIMEOUT, "the master port", procs, [master_log])
        with open(worker_log, "wb") as out:
            procs.append(subprocess.Popen(
                [spark_class, "org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1",
                 "--port", str(worker_port), "--webui-port", str(worker_ui), "--cores", "2", "--memory", "1g",
                 "--work-dir", str(work / "worker"), url],
                stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True))
        _wait_for(lambda: "Registering worker" in master_log.read_text(errors="replace"),
                  CLUSTER_START_TIMEOUT, "the worker to register", procs, [master_log, worker_log])
        cluster = ClusterUrl(url)
        cluster.worker_port = worker_port
        yield cluster
    finally:
        for p in reversed(procs):
            if p.poll() is None:
                try:
                    os.killpg(p.pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
        for p in reversed(procs):
            try:
                p.wait(timeout=15)
            except subprocess.TimeoutExpired:
                try:
                    os.killpg(p.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                p.wait(timeout=5)
