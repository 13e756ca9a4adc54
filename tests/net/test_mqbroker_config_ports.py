"""listenPort=0 in the broker's config file gives the gRPC endpoint a free port too, as --listenPort 0
does: two brokers configured that way on one host no longer both reach for grpcServerPort 8081. A
grpcServerPort the file names still wins. Every process is stopped by PID."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
from pathlib import Path

from net_util import REPO, free_port

from tests.waiting import wait_for

_GRPC = re.compile(r"The gRPC v2 endpoint boot success on [^:\s]+:(\d+)")


class ConfigPortsBroker:
    """``mqbroker -c conf`` with no --listenPort (the file's listenPort is the one in force); output read
    by a thread into ``lines``."""

    def __init__(self, store: Path, conf: Path) -> None:
        cmd = [sys.executable, "-m", "broker_core.mqbroker", "--store", str(store), "-c", str(conf),
               "--namesrvPort", "0"]
        env = dict(os.environ, PYTHONPATH=str(REPO), PYTHONUNBUFFERED="1")
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
                                     cwd=REPO)
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))

    def grpc_port(self) -> int:
        def found() -> int | None:
            if self.proc.poll() is not None and not any(_GRPC.search(x) for x in self.lines):
                raise AssertionError("mqbroker exited:\n" + "\n".join(self.lines))
            return next((int(m.group(1)) for m in map(_GRPC.search, self.lines) if m), None)

        return wait_for(found, "the gRPC boot line", 60)

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                os.kill(self.proc.pid, signal.SIGKILL)
                self.proc.wait(10)
        self._reader.join(5)



def test_listen_port_0_in_the_config_gives_grpc_a_free_port(tmp_path: Path, procs) -> None:
    ports = []
    for name in ("a", "b"):
        conf = tmp_path / f"{name}.conf"
        conf.write_text(f"brokerName=broker-{name}\nlistenPort=0\n")
        p = ConfigPortsBroker(tmp_path / name, conf)
        procs.append(p)
        ports.append(p.grpc_port())
    assert 8081 not in ports and len(set(ports)) == 2, ports


def test_a_grpc_port_in_the_config_still_wins(tmp_path: Path, procs) -> None:
    port = free_port()
    conf = tmp_path / "b.conf"
    conf.write_text(f"listenPort=0\ngrpcServerPort={port}\n")
    p = ConfigPortsBroker(tmp_path / "store", conf)
    procs.append(p)
    assert p.grpc_port() == port
