"""``mqbroker --namesrv-only -c file``: the file's listenPort is the name server's port, as in Apache's
``mqnamesrv -c namesrv.properties`` (it bound 9876 whatever the file said, while the file's owner
looked for it on its listenPort). namesrvPort (the file's, for a file shared with a broker) and the
command line's --namesrvPort / --listenPort still win; getNamesrvConfig reports the port in use."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from net_util import Mqbroker, free_port, run_mqadmin

from tests.net.test_namesrv_config import config_of


@pytest.fixture
def procs() -> Iterator[list[Mqbroker]]:
    started: list[Mqbroker] = []
    yield started
    for p in started:
        p.stop()


def _namesrv(procs: list[Mqbroker], tmp_path: Path, conf_text: str, *args: str) -> str:
    conf = tmp_path / "namesrv.properties"
    conf.write_text(conf_text + f"kvConfigPath={tmp_path / 'kv.json'}\n")
    p = Mqbroker(tmp_path / "s", "--namesrv-only", *args, config=conf, expect_broker=False, free_ports=False)
    procs.append(p)
    assert p.namesrv_addr, p.output()
    return p.namesrv_addr


def _reported_port(addr: str) -> str:
    r = run_mqadmin("getNamesrvConfig", "-n", addr)
    assert r.returncode == 0, r.stdout + r.stderr
    return config_of(r.stdout, addr)["listenPort"]


def test_the_files_listen_port_is_the_name_servers(tmp_path: Path, procs: list[Mqbroker]) -> None:
    port = free_port()
    addr = _namesrv(procs, tmp_path, f"listenPort={port}\n")
    assert addr == f"127.0.0.1:{port}"
    assert _reported_port(addr) == str(port)


def test_listen_port_zero_in_the_file_takes_a_free_port(tmp_path: Path, procs: list[Mqbroker]) -> None:
    addr = _namesrv(procs, tmp_path, "listenPort=0\n")
    assert addr.rpartition(":")[2] not in ("0", "9876")
    assert _reported_port(addr) == addr.rpartition(":")[2]


def test_namesrv_port_in_a_shared_file_wins_over_its_listen_port(tmp_path: Path, procs: list[Mqbroker]) -> None:
    """A file made for ``mqbroker -c`` (name server and broker) names the broker's listenPort and the
    name server's namesrvPort: run as --namesrv-only, it is the namesrvPort."""
    broker_port, ns_port = free_port(), free_port()
    addr = _namesrv(procs, tmp_path, f"listenPort={broker_port}\nnamesrvPort={ns_port}\n")
    assert addr == f"127.0.0.1:{ns_port}"
    assert _reported_port(addr) == str(ns_port)


@pytest.mark.parametrize("flag", ["--namesrvPort", "--listenPort"])
def test_the_command_line_wins_over_the_file(tmp_path: Path, procs: list[Mqbroker], flag: str) -> None:
    in_file, given = free_port(), free_port()
    addr = _namesrv(procs, tmp_path, f"listenPort={in_file}\n", flag, str(given))
    assert addr == f"127.0.0.1:{given}"
    assert _reported_port(addr) == str(given)
