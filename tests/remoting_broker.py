"""A real ``mqbroker`` process (name server + broker) on free loopback ports, for tests over TCP.

Why a subprocess: tests of the remoting client, the contract suite's remoting transport and the
ali-ons interop tests must talk to the broker a user runs, not to objects in the test's process.
The process is always stopped by its PID (SIGTERM, then SIGKILL after 20 s), even when a test fails.
"""

from __future__ import annotations

import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
_NAMESRV = re.compile(r"The Name Server boot success.*address (\S+:\d+)")
_BROKER = re.compile(r"The broker\[([^,\]]+), (\S+:\d+)\] boot success")
_GRPC = re.compile(r"The gRPC v2 endpoint boot success on (\S+:\d+)")


@dataclass
class BrokerProcess:
    namesrv_addr: str
    broker_addr: str
    broker_name: str
    store: Path
    log_path: Path
    proc: subprocess.Popen[str]
    grpc_addr: str | None = None

    def log_text(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


def _stop(proc: subprocess.Popen[str]) -> None:
    if proc.poll() is not None:
        return
    try:
        os.kill(proc.pid, signal.SIGTERM)
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
    except ProcessLookupError:
        pass


@contextmanager
def running_broker(workdir: Path, conf: Mapping[str, str] | None = None, *, broker_name: str = "broker-a",
                   cluster: str = "DefaultCluster", namesrv: str | None = None,
                   startup_timeout: float = 60.0, extra_args: tuple[str, ...] = ()) -> Iterator[BrokerProcess]:
    """Start mqbroker (with its own name server unless ``namesrv`` is given) and yield its addresses."""
    workdir.mkdir(parents=True, exist_ok=True)
    store = workdir / "store"
    props = {"brokerName": broker_name, "brokerClusterName": cluster, "flushDiskType": "ASYNC_FLUSH"}
    props.update(conf or {})
    conf_path = workdir / "broker.conf"
    conf_path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
    cmd = [sys.executable, "-m", "broker_core.mqbroker", "--store", str(store), "-c", str(conf_path),
           "--host", "127.0.0.1", "--listenPort", "0"] + list(extra_args)
    cmd += ["-n", namesrv, "--broker-only"] if namesrv else ["--namesrvPort", "0"]
    log_path = workdir / "mqbroker.log"
    log = log_path.open("w")
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=log, text=True, env=_env(), cwd=str(workdir))
    lines: queue.Queue[str | None] = queue.Queue()

    def pump() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            log.write(line)
            log.flush()
            lines.put(line)
        lines.put(None)

    threading.Thread(target=pump, daemon=True).start()
    try:
        ns_addr, b_addr, g_addr = namesrv, None, None
        deadline = time.monotonic() + startup_timeout
        while b_addr is None or ns_addr is None or g_addr is None:
            try:
                line = lines.get(timeout=max(0.1, deadline - time.monotonic()))
            except queue.Empty:
                line = None
            if line is None:
                raise RuntimeError(f"mqbroker did not start (exit {proc.poll()}):\n{log_path.read_text()}")
            if m := _NAMESRV.search(line):
                ns_addr = m.group(1)
            if m := _BROKER.search(line):
                b_addr = m.group(2)
            if m := _GRPC.search(line):
                g_addr = m.group(1)
        yield BrokerProcess(ns_addr, b_addr, broker_name, store, log_path, proc, g_addr)
    finally:
        _stop(proc)
        log.close()
