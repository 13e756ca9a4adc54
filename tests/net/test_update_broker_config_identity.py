"""updateBrokerConfig -n of the broker's identity or ports: never applied to the running broker, which
keeps answering where it is registered; written to its config file (mqbroker -c) for the next start.

Why: the broker registers as brokerIP1:listenPort under brokerName every 30 s; a live listenPort of
12345 made it register a port nothing listened on, so clients and ``mqadmin -n`` lost it (and could not
even undo the change through the name server). A broker without a config file refuses them
(tests/playbook_runner/test_broker_config_file.py)."""

from __future__ import annotations

import re
from pathlib import Path

from tests.net.test_mqadmin_partial_change import mqadmin
from tests.remoting_broker import running_broker


def _live(n: str, addr: str, key: str) -> str:
    r = mqadmin("getBrokerConfig", "-n", n, "-b", addr)
    assert r.returncode == 0, r.stderr
    m = re.search(rf"^{key}\s+=\s+(\S*)$", r.stdout, re.M)
    assert m is not None, r.stdout
    return m.group(1)


def test_a_new_listen_port_or_name_goes_to_the_file_and_the_broker_keeps_its_address(tmp_path: Path) -> None:
    with running_broker(tmp_path / "a") as a:
        n, addr = a.namesrv_addr, a.broker_addr
        port = addr.rsplit(":", 1)[1]
        for key, value in (("listenPort", "12345"), ("brokerName", "broker-z")):
            r = mqadmin("updateBrokerConfig", "-n", n, "-b", addr, "-k", key, "-v", value)
            assert r.returncode == 0, r.stdout + r.stderr
        assert _live(n, addr, "listenPort") == port and _live(n, addr, "brokerName") == "broker-a"
        written = (tmp_path / "a" / "broker.conf").read_text().splitlines()
        assert "listenPort=12345" in written and "brokerName=broker-z" in written, written
        listed = mqadmin("clusterList", "-n", n)
        assert listed.returncode == 0 and f"broker-a                0     {addr}" in listed.stdout, listed.stdout
        # the value it has (a getBrokerConfig round trip) is no change
        r = mqadmin("updateBrokerConfig", "-n", n, "-b", addr, "-k", "listenPort", "-v", port)
        assert r.returncode == 0, r.stderr
