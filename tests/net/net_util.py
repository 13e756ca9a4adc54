"""Test helpers for the network tests: a blocking raw-frame client and an mqbroker subprocess that is
always stopped by PID (SIGTERM, then SIGKILL), even when the test fails."""

from __future__ import annotations

import itertools
import os
import re
import select
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

from broker_core.client.message import decode_records
from broker_core.remoting import FrameDecoder, RemotingCommand, encode_frame
from broker_core.store.codec.message import MessageExt

REPO = Path(__file__).resolve().parents[2]
_opaque = itertools.count(1000)


def records(body: bytes) -> list[MessageExt]:
    """The records of a PULL/POP/VIEW/QUERY answer body as the broker stored them: not unwrapped, not
    inflated (the client's decoder with both off)."""
    return decode_records(body, decompress=False, unwrap=False)


def run_mqadmin(*args: str) -> subprocess.CompletedProcess[str]:
    """``mqadmin <args>`` as a user runs it: a child process, no NAMESRV_ADDR inherited."""
    env = dict(os.environ, PYTHONPATH=str(REPO))
    env.pop("NAMESRV_ADDR", None)
    return subprocess.run([sys.executable, "-m", "mqadmin.app", *args], capture_output=True, text=True, env=env,
                          cwd=REPO, timeout=120)


def mqadmin(ns: str, *args: str) -> str:
    """``mqadmin <args> -n ns``'s stdout, after asserting it exited 0."""
    r = run_mqadmin(*args, "-n", ns)
    assert r.returncode == 0, f"mqadmin {' '.join(args)} failed ({r.returncode}): {r.stdout}{r.stderr}"
    return r.stdout


def free_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class RawClient:
    """One TCP connection speaking frames; every call waits for the answer with the same opaque."""

    def __init__(self, addr: str, timeout: float = 10.0) -> None:
        host, _, port = addr.rpartition(":")
        self.sock = socket.create_connection((host, int(port)), timeout=timeout)
        self.decoder = FrameDecoder()
        self.inbox: list[RemotingCommand] = []
        self.timeout = timeout

    def send(self, cmd: RemotingCommand) -> None:
        self.sock.sendall(encode_frame(cmd))

    def send_raw(self, data: bytes) -> None:
        self.sock.sendall(data)

    def recv(self, timeout: float | None = None) -> RemotingCommand | None:
        """The next frame, or None when the peer closed the connection."""
        deadline = time.monotonic() + (timeout or self.timeout)
        while not self.inbox:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("no frame within the timeout")
            ready, _, _ = select.select([self.sock], [], [], left)
            if not ready:
                continue
            data = self.sock.recv(1 << 20)
            if not data:
                return None
            self.inbox += self.decoder.feed(data)
        return self.inbox.pop(0)

    def call(self, code: int, ext: dict[str, str] | None = None, body: bytes = b"",
             timeout: float | None = None, **kw: object) -> RemotingCommand:
        cmd = RemotingCommand.request(code, ext, body, opaque=next(_opaque), **kw)  # type: ignore[arg-type]
        self.send(cmd)
        while True:
            got = self.recv(timeout)
            if got is None:
                raise ConnectionError("connection closed before the answer")
            if got.is_response and got.opaque == cmd.opaque:
                return got

    def closed_by_peer(self, timeout: float = 5.0) -> bool:
        try:
            return self.recv(timeout) is None
        except (ConnectionResetError, BrokenPipeError):
            return True

    def close(self) -> None:
        self.sock.close()


_NAMESRV = re.compile(r"The Name Server boot success\. serializeType=JSON, address (\S+)")
_BROKER = re.compile(r"The broker\[(\S+), (\S+)\] boot success")


class Mqbroker:
    """``python -m broker_core.mqbroker`` on free ports; ``stop()`` always ends it by PID."""

    def __init__(self, store: Path, *args: str, config: Path | None = None, expect_namesrv: bool = True,
                 expect_broker: bool = True, free_ports: bool = True) -> None:
        """``free_ports=False`` leaves out ``--listenPort 0 --namesrvPort 0``: the ports are the -c file's
        (or ``args``')."""
        ports = ["--listenPort", "0", "--namesrvPort", "0"] if free_ports else []
        cmd = [sys.executable, "-m", "broker_core.mqbroker", "--store", str(store), *ports, *args]
        if config is not None:
            cmd += ["-c", str(config)]
        env = dict(os.environ, PYTHONPATH=str(REPO), PYTHONUNBUFFERED="1")
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
                                     cwd=REPO)
        self.lines: list[str] = []
        self.namesrv_addr: str | None = None
        self.broker_addr: str | None = None
        self.broker_name: str | None = None
        self._ready = threading.Event()
        self._want = (expect_namesrv, expect_broker)
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        if not self._ready.wait(60):
            self.stop()
            raise RuntimeError("mqbroker did not start:\n" + "\n".join(self.lines))

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))
            if m := _NAMESRV.search(line):
                self.namesrv_addr = m.group(1)
            if m := _BROKER.search(line):
                self.broker_name, self.broker_addr = m.group(1), m.group(2)
            if (not self._want[0] or self.namesrv_addr) and (not self._want[1] or self.broker_addr):
                self._ready.set()
        self._ready.set()

    def output(self) -> str:
        return "\n".join(self.lines)

    def signal(self, sig: int) -> None:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, sig)

    def stop(self, timeout: float = 30.0) -> int:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGCONT)
            os.kill(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.lines += [f"mqbroker did not stop within {timeout:g} s of SIGTERM; its threads:",
                               *_thread_dump(self.proc.pid)]
                os.kill(self.proc.pid, signal.SIGKILL)
                self.proc.wait(10)
        self._reader.join(5)
        return self.proc.returncode


def _thread_dump(pid: int) -> list[str]:
    """Where a process that does not stop is stuck (``py-spy dump``, when installed beside this Python)."""
    spy = Path(sys.executable).with_name("py-spy")
    if not spy.exists():
        return ["(py-spy is not installed: no thread dump)"]
    r = subprocess.run([str(spy), "dump", "--pid", str(pid)], capture_output=True, text=True, timeout=60)
    return (r.stdout + r.stderr).splitlines()
