"""updateBrokerConfig -c reads and checks every broker before it changes any.

Why: the unknown-key check reads each broker's config, and it ran broker by broker inside the change:
with broker-b not answering, broker-a was changed, then the read of broker-b timed out, and the cluster's
brokers disagreed on the setting. A broker found silent in the check now changes nothing anywhere."""

from __future__ import annotations

import os
import signal
from pathlib import Path

from net_util import run_mqadmin as mqadmin

from tests.remoting_broker import running_broker


def _flush_interval(n: str, addr: str) -> str:
    out = mqadmin("getBrokerConfig", "-n", n, "-b", addr).stdout
    return next(line.split("=", 1)[1].strip() for line in out.splitlines()
                if line.split("=", 1)[0].strip() == "flushIntervalCommitLog")


def test_a_silent_broker_found_in_the_check_changes_nothing(tmp_path: Path) -> None:
    with running_broker(tmp_path / "a") as a, \
            running_broker(tmp_path / "b", broker_name="broker-b", namesrv=a.namesrv_addr) as b:
        n = a.namesrv_addr
        assert "broker-b" in mqadmin("clusterList", "-n", n).stdout
        before = _flush_interval(n, a.broker_addr)
        os.kill(b.proc.pid, signal.SIGSTOP)  # still registered, answers nothing
        try:
            r = mqadmin("updateBrokerConfig", "-n", n, "-c", "DefaultCluster", "-k", "flushIntervalCommitLog",
                        "-v", "650")
        finally:
            os.kill(b.proc.pid, signal.SIGCONT)
        assert r.returncode == 1, r.stdout + r.stderr
        assert b.broker_addr in r.stderr and r.stderr.rstrip().endswith("(nothing was changed)"), r.stderr
        assert len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr
        assert "success" not in r.stdout
        assert _flush_interval(n, a.broker_addr) == before != "650"
        assert _flush_interval(n, b.broker_addr) == before
        ok = mqadmin("updateBrokerConfig", "-n", n, "-c", "DefaultCluster", "-k", "flushIntervalCommitLog", "-v", "650")
        assert ok.returncode == 0, ok.stderr
        assert _flush_interval(n, a.broker_addr) == _flush_interval(n, b.broker_addr) == "650"
