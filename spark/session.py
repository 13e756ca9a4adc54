"""The one place that builds a SparkSession for rmqops jobs (local[*] or spark://host:port).

Why one place: every job must run on loopback only (no UI, no public bind), with small memory, with
the same Python as the driver, and with the rmqops packages importable on executors. Keeping these
rules together means a test, the benchmark, ``spark-submit spark/rebuild_store.py`` and
``mqadmin rebuildStore`` all get identical behaviour.
"""

from __future__ import annotations

import atexit
import os
import sys
import tempfile
import threading
import time
import zipfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
# Packages executors need to import (the codec, the store classes and these jobs).
SHIPPED_PACKAGES = ("broker_core", "spark")
LOOPBACK = "127.0.0.1"
# The driver JVM's log4j2 configuration: silent while the session starts (a failure reaches Python as an
# exception and is reported in one line; Spark's own log printed pages of Java stacks first), then
# get_spark sets the level to ERROR as before.
DRIVER_LOG_CONFIG = Path(__file__).resolve().with_name("log4j2-driver.properties")
# Executor memory on a cluster master (a worker offering less never starts an executor for the job).
EXECUTOR_MEMORY_ENV = "RMQOPS_SPARK_EXECUTOR_MEMORY"
DEFAULT_EXECUTOR_MEMORY = "1g"
# How long a cluster master gets to register the application and start its first executor.
EXECUTOR_WAIT_ENV = "RMQOPS_SPARK_EXECUTOR_WAIT_S"
DEFAULT_EXECUTOR_WAIT_S = 60.0
_POLL_S = 0.1


class SparkStartError(RuntimeError):
    """The session could not start on the master asked for; the message is one line naming the cause
    (no Spark master at that address, no executor granted)."""


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
    than assumed to be installed where the executors run. The driver serves the file to executors
    for as long as its context lives, so it is removed when this process exits: every cluster job
    left a ~650 KB zip in the temp directory for good.
    """
    fd, path = tempfile.mkstemp(prefix="rmqops-code-", suffix=".zip", dir=dest_dir)
    os.close(fd)
    atexit.register(_remove_quietly, path)
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for pkg in SHIPPED_PACKAGES:
            for p in sorted((REPO_ROOT / pkg).rglob("*.py")):
                zf.write(p, p.relative_to(REPO_ROOT).as_posix())
    return path


def _remove_quietly(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


def is_local_master(master: str) -> bool:
    return master == "local" or master.startswith("local[")


def executor_wait_seconds() -> float:
    """``RMQOPS_SPARK_EXECUTOR_WAIT_S`` (default 60): the bound on waiting for a cluster master."""
    text = os.environ.get(EXECUTOR_WAIT_ENV, "").strip()
    try:
        value = float(text) if text else DEFAULT_EXECUTOR_WAIT_S
    except ValueError:
        raise SparkStartError(f"{EXECUTOR_WAIT_ENV}={text!r} is not a number of seconds") from None
    return value if value > 0 else DEFAULT_EXECUTOR_WAIT_S


def _java_options(extra: str | None) -> str:
    return " ".join(o for o in (f"-Dlog4j2.configurationFile={DRIVER_LOG_CONFIG.as_uri()}", extra) if o)


def get_spark(master: str = "local[*]", app_name: str = "rmqops", conf: dict[str, str] | None = None, *,
              wait_s: float | None = None, interrupted: Callable[[], bool] | None = None):
    """Create (or reuse) the SparkSession for ``master`` with rmqops' loopback/small-memory settings.

    On a cluster master the session is only returned once an executor runs: a master that does not
    register the application, or workers that grant no executor (too little memory, e.g. less than
    ``spark.executor.memory``, ``RMQOPS_SPARK_EXECUTOR_MEMORY`` or 1g; or no free cores), are a
    SparkStartError naming the cause instead of a job that waits forever. Each of the two waits
    (registration, counted once the driver JVM is up; then the first executor) lasts at most
    ``wait_s`` (default ``RMQOPS_SPARK_EXECUTOR_WAIT_S`` or 60 s). An address where a Spark process
    answers that is not a master (a worker's port) is told within seconds.
    ``interrupted()`` true while waiting raises KeyboardInterrupt there.
    """
    _prepare_environment()
    from pyspark.sql import SparkSession

    local = is_local_master(master)
    extra = dict(conf or {})
    builder = (SparkSession.builder.master(master).appName(app_name)
               .config("spark.driver.host", LOOPBACK)
               .config("spark.driver.bindAddress", LOOPBACK)
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.driver.memory", "1g")
               .config("spark.executor.memory", os.environ.get(EXECUTOR_MEMORY_ENV, "").strip()
                       or DEFAULT_EXECUTOR_MEMORY)
               .config("spark.driver.extraJavaOptions", _java_options(extra.pop("spark.driver.extraJavaOptions", None)))
               .config("spark.python.worker.reuse", "true")
               .config("spark.pyspark.python", sys.executable)
               .config("spark.pyspark.driver.python", sys.executable)
               .config("spark.executorEnv.PYTHONPATH", str(REPO_ROOT))
               .config("spark.sql.shuffle.partitions", "8")
               .config("spark.default.parallelism", "8" if not local else
                       str(max(2, os.cpu_count() or 2))))
    if not local:
        builder = builder.config("spark.cores.max", os.environ.get("RMQOPS_SPARK_CORES_MAX", "2"))
    for k, v in extra.items():
        builder = builder.config(k, v)
    wait = wait_s if wait_s is not None and wait_s > 0 else executor_wait_seconds()
    spark = _start(builder, master, local, wait, interrupted)
    try:
        spark.sparkContext.setLogLevel("ERROR")
        if not local:
            deadline = time.monotonic() + wait
            sc = spark.sparkContext
            if not getattr(sc, "_rmqops_code_shipped", False):
                sc.addPyFile(build_code_zip())
                sc._rmqops_code_shipped = True
            _wait_for_executor(spark, master, deadline, wait, interrupted)
    except BaseException:
        stop_quietly(spark)
        raise
    return spark


def stop_quietly(spark) -> None:
    """Stop a session without the Java log of tasks cut short (a cancelled job, an abandoned start)."""
    try:
        spark.sparkContext.setLogLevel("OFF")
    except Exception:  # noqa: BLE001 - stopping anyway
        pass
    try:
        spark.stop()
    except Exception:  # noqa: BLE001 - best effort: the process is ending or the context is gone
        pass


def _start(builder, master: str, local: bool, wait: float, interrupted: Callable[[], bool] | None):
    """``builder.getOrCreate()`` in a helper thread, watched from this one.

    Why a thread: on a cluster master the constructor blocks until the master registers the
    application, and when no master answers Spark gives up only after ~60 s of retries, logging a
    Java stack per retry. Watching lets the one-line answer come at once from our own look-up of the
    master endpoint, or ``wait`` seconds after it was sent when nothing answers it. It also keeps
    PySpark from installing its SIGINT handler (only done on the main thread), whose reentrant Py4J
    call printed tracebacks on Ctrl-C.
    """
    box: dict[str, object] = {}

    def build() -> None:
        try:
            box["spark"] = builder.getOrCreate()
        except BaseException as e:  # noqa: BLE001 - handed to the waiting thread
            box["error"] = e

    thread = threading.Thread(target=build, name="rmqops-spark-start", daemon=True)
    thread.start()
    probe = None if local else _MasterProbe(master)
    while thread.is_alive():
        thread.join(_POLL_S)
        if not thread.is_alive():
            break
        if interrupted is not None and interrupted():
            raise KeyboardInterrupt
        if probe is not None:
            verdict = probe.poll()
            if verdict:
                raise SparkStartError(f"no Spark master answers at {master}: {verdict}")
            if probe.pending and time.monotonic() >= probe.started + wait:
                raise SparkStartError(f"no Spark master answers at {master}: nothing there answered Spark's RPC "
                                      f"within {wait:g} s (set {EXECUTOR_WAIT_ENV} to wait longer)")
    if "error" in box:
        error = box["error"]
        if local:
            raise error  # type: ignore[misc]
        verdict = probe.poll() if probe is not None else None
        from .failure import failure_cause

        raise SparkStartError(f"no Spark master answers at {master}: "
                              f"{verdict or failure_cause(error)}") from None  # type: ignore[arg-type]
    return box["spark"]


class _MasterProbe:
    """Looks up the ``Master`` endpoint at each address of a ``spark://`` URL through the starting
    driver's own RPC environment (what Spark's app client does before registering), without blocking.

    ``poll()`` is None while undecided or when a master answered, else why none did (every address
    refused: nothing Spark there, or a Spark process without a master endpoint, e.g. a worker).
    """

    def __init__(self, master: str) -> None:
        self.uris = [f"spark://Master@{hp.strip()}" for hp in master[len("spark://"):].split(",")
                     if hp.strip()] if master.startswith("spark://") else []
        self.futures: list | None = None
        self.started = 0.0  # when the look-ups began (the driver JVM was up)
        self.failures: dict[str, str] = {}
        self.done = not self.uris

    def poll(self) -> str | None:
        if self.done:
            return self.verdict()
        try:
            if self.futures is None:
                self.futures = self._look_up()
                if self.futures is None:
                    return None
                self.started = time.monotonic()
            for uri, future in self.futures:
                if uri in self.failures or not future.isCompleted():
                    continue
                tried = future.value().get()
                if tried.isSuccess():
                    self.done = True
                    self.failures.clear()
                    return None
                error = tried.failed().get()
                name = error.getClass().getSimpleName()
                message = error.getMessage() or name
                if name == "RpcEndpointNotFoundException":
                    message = f"a Spark process answers there, but not a master (a worker's port?): {message}"
                self.failures[uri] = message
            if len(self.failures) == len(self.uris):
                self.done = True
        except Exception:  # noqa: BLE001 - the JVM is starting or failing: Spark's own outcome decides
            self.done = True
        return self.verdict()

    def _look_up(self) -> list | None:
        """Start the look-ups once the driver's SparkEnv exists (None before).

        Through Java reflection on a few named members only: Py4J's own method lookup lists every
        method of a class, and SparkEnv's name classes (protobuf) that are not on the classpath.
        """
        from pyspark import SparkContext

        jvm, gateway = SparkContext._jvm, SparkContext._gateway
        if jvm is None or gateway is None:
            return None
        cls = jvm.java.lang.Class
        no_types = gateway.new_array(jvm.java.lang.Class, 0)
        no_args = gateway.new_array(jvm.java.lang.Object, 0)
        env_object = cls.forName("org.apache.spark.SparkEnv$")
        env = env_object.getMethod("get", no_types).invoke(env_object.getField("MODULE$").get(None), no_args)
        if env is None:
            return None
        field = cls.forName("org.apache.spark.SparkEnv").getDeclaredField("rpcEnv")
        field.setAccessible(True)
        rpc_env = field.get(env)
        types = gateway.new_array(jvm.java.lang.Class, 1)
        types[0] = cls.forName("java.lang.String")
        look_up = cls.forName("org.apache.spark.rpc.RpcEnv").getMethod("asyncSetupEndpointRefByURI", types)
        futures = []
        for uri in self.uris:
            args = gateway.new_array(jvm.java.lang.Object, 1)
            args[0] = uri
            futures.append((uri, look_up.invoke(rpc_env, args)))
        return futures

    @property
    def pending(self) -> bool:
        """Look-ups sent, none answered yet (nothing that speaks Spark's RPC replies there): the case
        Spark itself waits out for minutes. A master that answered is left to Spark's registration."""
        return self.futures is not None and not self.done

    def verdict(self) -> str | None:
        if not self.done or not self.failures or len(self.failures) < len(self.uris):
            return None
        return "; ".join(self.failures.values())


def _wait_for_executor(spark, master: str, deadline: float, wait: float,
                       interrupted: Callable[[], bool] | None) -> None:
    """Return once an executor has registered (the driver's own block manager counts as one entry)."""
    sc = spark.sparkContext
    jsc = sc._jsc.sc()
    while jsc.getExecutorMemoryStatus().size() < 2:
        if interrupted is not None and interrupted():
            raise KeyboardInterrupt
        if time.monotonic() >= deadline:
            memory = sc.getConf().get("spark.executor.memory") or DEFAULT_EXECUTOR_MEMORY
            raise SparkStartError(
                f"no Spark worker at {master} granted an executor with {memory} within {wait:g} s: give workers "
                f"more memory (or free cores) or set spark.executor.memory ({EXECUTOR_MEMORY_ENV}=512m)")
        time.sleep(_POLL_S)


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
