"""brokerStatus -c with one broker that does not answer prints the brokers that did and names the other.

Why: Apache's BrokerStatusSubCommand asks broker after broker, each in its own try/catch; here the first
broker that timed out failed the command with no output at all, so the health check an operator runs
when a cluster misbehaves showed nothing of the brokers that were fine (clusterList lists them)."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

from net_util import run_mqadmin as mqadmin

from tests.remoting_broker import running_broker


def test_broker_status_of_a_cluster_prints_the_brokers_that_answer(tmp_path: Path) -> None:
    with running_broker(tmp_path / "a") as a, \
            running_broker(tmp_path / "b", broker_name="broker-b", namesrv=a.namesrv_addr) as b:
        n = a.namesrv_addr
        assert "broker-b" in mqadmin("clusterList", "-n", n).stdout
        os.kill(b.proc.pid, signal.SIGSTOP)  # still registered, answers nothing
        try:
            text = mqadmin("brokerStatus", "-n", n, "-c", "DefaultCluster")
            as_json = mqadmin("brokerStatus", "-n", n, "-c", "DefaultCluster", "--output", "json")
        finally:
            os.kill(b.proc.pid, signal.SIGCONT)
    for r in (text, as_json):
        assert r.returncode == 1, r.stdout + r.stderr
        assert r.stderr.startswith(f"mqadmin brokerStatus: 1 broker(s) did not answer: broker-b ({b.broker_addr}): "), \
            r.stderr
        assert len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr
    lines = text.stdout.splitlines()
    assert lines and all(line.startswith(a.broker_addr) for line in lines), text.stdout
    assert [a.broker_addr, "brokerName", ":", "broker-a"] in [line.split() for line in lines], text.stdout
    statuses = json.loads(as_json.stdout)
    assert list(statuses) == [a.broker_addr] and statuses[a.broker_addr]["brokerName"] == "broker-a"
