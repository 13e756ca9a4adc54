"""A broker out of file descriptors says so: "open files N of L (RLIMIT_NOFILE) ... raise ulimit -n".

Why: run with ``prlimit --nofile=128``, mqbroker's event loop (uvloop, libuv's EMFILE trick) accepted
each new connection and closed it at once; clients saw their connections dropped and the broker's log
had nothing. Apache's Netty logs the accept failure. The limit is lowered on the running broker
(``prlimit --pid``), as an operator's ulimit would have set it at start.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from net_util import RawClient

from broker_core.remoting import RequestCode, ResponseCode
from tests.remoting_broker import BrokerProcess, running_broker
from tests.waiting import wait_for

pytestmark = pytest.mark.skipif(shutil.which("prlimit") is None or not Path("/proc/self/fd").is_dir(),
                                reason="needs prlimit and /proc")

WARNING = re.compile(r"WARNING rmqops\.net: open files (\d+) of (\d+) \(RLIMIT_NOFILE\): (.*); raise ulimit -n")


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    with running_broker(tmp_path) as b:
        yield b


def test_connections_refused_at_rlimit_nofile_are_logged(broker: BrokerProcess) -> None:
    pid = broker.proc.pid
    ok = RawClient(broker.broker_addr)
    assert ok.call(RequestCode.GET_BROKER_RUNTIME_INFO).code == ResponseCode.SUCCESS
    limit = len(os.listdir(f"/proc/{pid}/fd")) + 20
    subprocess.run(["prlimit", f"--pid={pid}", f"--nofile={limit}:{limit}"], check=True)
    clients: list[RawClient] = []
    try:
        for _ in range(40):  # past the limit: the last ones are accepted and closed unseen
            clients.append(RawClient(broker.broker_addr))
        def refused() -> list[re.Match[str]]:
            return [m for m in WARNING.finditer(broker.log_text()) if m.group(3).startswith("new connections are being")]

        wait_for(lambda: refused(), "the RLIMIT_NOFILE warning", 20)
        (m,) = refused()  # once, not once per refused client
        count, of = int(m.group(1)), int(m.group(2))
        assert of == limit and count >= limit - 1, m.group(0)
        assert m.group(3) == "new connections are being refused", m.group(0)
        # the process stays up and answers the connections it holds
        assert ok.call(RequestCode.GET_BROKER_RUNTIME_INFO).code == ResponseCode.SUCCESS
    finally:
        for c in clients:
            c.close()
        ok.close()
