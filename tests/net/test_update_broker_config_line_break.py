"""updateBrokerConfig -n refuses a key or value with a line break in it, and changes nothing.

Why: UPDATE_BROKER_CONFIG's body is ``key=value`` lines, and the key and value went into it as given:
``-k deleteWhen -v "05<LF>fileReservedTime=1"`` set two keys, the second one past mqadmin's unknown-key
check (which saw deleteWhen only)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from net_util import run_mqadmin as mqadmin

from mqadmin.errors import UsageProblem
from tests.remoting_broker import running_broker


def _live(n: str, addr: str) -> dict[str, str]:
    r = mqadmin("getBrokerConfig", "-n", n, "-b", addr)
    assert r.returncode == 0, r.stderr
    return dict(re.findall(r"^(deleteWhen|fileReservedTime)\s+=\s+(\S*)$", r.stdout, re.M))


def test_a_line_break_in_a_key_or_value_is_refused(tmp_path: Path) -> None:
    from mqadmin.transport.remoting import RemotingBrokerClient

    with running_broker(tmp_path / "a") as a:
        n, addr = a.namesrv_addr, a.broker_addr
        before = _live(n, addr)
        assert before == {"deleteWhen": "04", "fileReservedTime": "72"}, before
        for flag, key, value in (("-v/--value", "deleteWhen", "05\nfileReservedTime=1"),
                                 ("-v/--value", "deleteWhen", "05\rfileReservedTime=1"),
                                 ("-k/--key", "fileReservedTime=1\ndeleteWhen", "05")):
            r = mqadmin("updateBrokerConfig", "-n", n, "-b", addr, "-k", key, "-v", value)
            assert r.returncode == 2, r.stdout + r.stderr
            assert r.stderr.startswith(f"mqadmin updateBrokerConfig: {flag} must not contain a line break"), r.stderr
            assert len(r.stderr.strip().splitlines()) == 1
        # what the transport sends for any caller (a playbook's config map too), with every separator the
        # broker splits lines at
        client = RemotingBrokerClient(n)
        try:
            with pytest.raises(UsageProblem, match=r"value of 'deleteWhen' has a line break"):
                client.update_broker_config(addr, {"deleteWhen": "05\u2028fileReservedTime=1"})
        finally:
            client.close()
        assert _live(n, addr) == before
