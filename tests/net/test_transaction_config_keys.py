"""mqadmin getBrokerConfig / updateBrokerConfig of the transaction op-batch and metrics keys on a running
mqbroker: listed with Apache 5.x's defaults though the -c file does not set them, and
transactionOpBatchInterval taken live (it was refused as an unknown key)."""

from __future__ import annotations

import re
from pathlib import Path

from net_util import run_mqadmin

from tests.remoting_broker import running_broker


def _config(n: str, addr: str) -> dict[str, str]:
    r = run_mqadmin("getBrokerConfig", "-n", n, "-b", addr)
    assert r.returncode == 0, r.stderr
    return dict(re.findall(r"^(\w+)\s+=\s+(\S*)$", r.stdout, re.M))


def test_get_lists_them_and_update_takes_the_op_batch_interval(tmp_path: Path) -> None:
    with running_broker(tmp_path / "a") as a:
        n, addr = a.namesrv_addr, a.broker_addr
        got = _config(n, addr)
        assert {k: got.get(k) for k in ("transactionOpBatchInterval", "transactionOpMsgMaxSize",
                                        "transactionMetricFlushInterval", "enableTransactionMetrics")} == {
            "transactionOpBatchInterval": "3000", "transactionOpMsgMaxSize": "4096",
            "transactionMetricFlushInterval": "10000", "enableTransactionMetrics": "true"}
        r = run_mqadmin("updateBrokerConfig", "-n", n, "-b", addr, "-k", "transactionOpBatchInterval", "-v", "100")
        assert r.returncode == 0, r.stdout + r.stderr
        assert _config(n, addr)["transactionOpBatchInterval"] == "100"
        assert "transactionOpBatchInterval=100" in (tmp_path / "a" / "broker.conf").read_text().splitlines()
        r = run_mqadmin("updateBrokerConfig", "-n", n, "-b", addr, "-k", "transactionOpMsgMaxSize", "-v", "0")
        assert r.returncode != 0 and "transactionOpMsgMaxSize" in r.stdout + r.stderr
        assert _config(n, addr)["transactionOpMsgMaxSize"] == "4096"
