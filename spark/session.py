"""The one place that builds a SparkSession for rmqops jobs (local[*] or spark://host:port).

Why one place: every job must run on loopback only (no UI, no public bind), with small memory, with
the same Python as the driver, and with the rmqops packages importable on executors. Keeping these
rules together means a test, the benchmark, ``spark-submit spark/rebuild_store.py`` and
``mqadmin rebuildStore`` all get identical behaviour.
"""

from __future__ import annotations

import os
import sys
import tempfile
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
# Packages executors need to import (the codec, the store classes and these jobs).
SHIPPED_PACKAGES = ("broker_core", "spark")
LOOPBACK = "127.0.0.1"


def spark_home() -> str:
    """SPARK_HOME of the pip-installed pyspark (its jars/ and bin/ live in the package dir)."""
    import pyspark

    return os.path.dirname(pyspark.__file__)


def _prepare_environment() -> None:
    # Workers must run the driver's interpreter (the venv holds the codec's dependencies), and the
    # JVM must bind to loopback even when the host name resolves elsewhere.
    os.environ.setdefault("SPARK_HOME", spark_home())
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    os.environ.setdefault("SPARK_LOCAL_IP", LOOPBACK)
    # Make repo modules importable by Python workers of a local master (they inherit the env).
    paths = [str(REPO_ROOT)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    os.environ["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(paths))


def build_code_zip(dest_dir: str | None = None) -> str:
    """Zip the packages executors import, for ``addPyFile`` on a cluster master.

    A standalone worker starts executors with its own environment, so the code is shipped rather
    than assumed to be installed where the executors run.
    """
    fd, path = tempfile.mkstemp(prefix="rmqops-code-", suffix=".zip", dir=dest_dir)
    os.close(fd)
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for pkg in SHIPPED_PACKAGES:
            for p in sorted((REPO_ROOT / pkg).rglob("*.py")):
                zf.write(p, p.relative_to(REPO_ROOT).as_posix())
    return path


def is_local_master(master: str) -> bool:
    return master == "local" or master.startswith("local[")


def get_spark(master: str = "local[*]", app_name: str = "rmqops", conf: dict[str, str] | None = None):
    """Create (or reuse) the SparkSession for ``master`` with rmqops' loopback/small-memory settings."""
    _prepare_environment()
    from pyspark.sql import SparkSession

    builder = (SparkSession.builder.master(master).appName(app_name)
               .config("spark.driver.host", LOOPBACK)
               .config("spark.driver.bindAddress", LOOPBACK)
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.driver.memory", "1g")
               .config("spark.executor.memory", "1g")
               .config("spark.python.worker.reuse", "true")
               .config("spark.pyspark.python", sys.executable)
               .config("spark.pyspark.driver.python", sys.executable)
               .config("spark.executorEnv.PYTHONPATH", str(REPO_ROOT))
               .config("spark.sql.shuffle.partitions", "8")
               .config("spark.default.parallelism", "8" if not is_local_master(master) else
                       str(max(2, os.cpu_count() or 2))))
    if not is_local_master(master):
        builder = builder.config("spark.cores.max", os.environ.get("RMQOPS_SPARK_CORES_MAX", "2"))
    for k, v in (conf or {}).items():
        builder = builder.config(k, v)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    if not is_local_master(master):
        sc = spark.sparkContext
        if not getattr(sc, "_rmqops_code_shipped", False):
            sc.addPyFile(build_code_zip())
            sc._rmqops_code_shipped = True
    return spark


@contextmanager
def spark_session(master: str = "local[*]", app_name: str = "rmqops",
                  conf: dict[str, str] | None = None, stop: bool = True) -> Iterator:
    """Context manager around :func:`get_spark`; stops the session on exit unless ``stop`` is False."""
    spark = get_spark(master, app_name, conf)
    try:
        yield spark
    finally:
        if stop:
            spark.stop()
