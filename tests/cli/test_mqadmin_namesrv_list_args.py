"""-n as a list of name servers: a malformed entry (no port, port 0, anywhere in the list) is a usage
error (exit 2) naming it before anything is sent, as ``-n ";"`` already is; and -b on a store
directory still names that store's broker (the direct -b of remote mode is for -n only)."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from mqadmin.app import app


def run(*args: str, env: dict[str, str] | None = None):
    return CliRunner().invoke(app, list(args), env={"NAMESRV_ADDR": "", "RMQ_STORE": "", **(env or {})})


@pytest.mark.parametrize("namesrv, entry, why", [
    ("127.0.0.1", "127.0.0.1", "is not host:port"),
    ("127.0.0.1:0", "127.0.0.1:0", "has no valid port (1-65535)"),
    ("127.0.0.1:1;127.0.0.1", "127.0.0.1", "is not host:port"),
    ("127.0.0.1;127.0.0.1:1", "127.0.0.1", "is not host:port"),
    ("127.0.0.1:1; host:99999 ", "host:99999", "has no valid port (1-65535)"),
])
def test_a_malformed_name_server_entry_is_a_usage_error(namesrv: str, entry: str, why: str) -> None:
    for command in (["clusterList"], ["updateKvConfig", "-s", "N", "-k", "k", "-v", "v"]):
        r = run(*command, "-n", namesrv)
        assert r.exit_code == 2, (command, r.stdout, r.stderr)
        assert r.stdout == ""
        assert r.stderr.strip().splitlines() == [
            f"mqadmin {command[0]}: -n/--namesrvAddr: name server address {entry!r} {why} "
            f"(expected host:port[;host:port]) (see 'mqadmin {command[0]} --help')"]


def test_a_malformed_namesrv_addr_variable_is_a_usage_error_too() -> None:
    r = run("clusterList", env={"NAMESRV_ADDR": "localhost"})
    assert r.exit_code == 2 and "$NAMESRV_ADDR: name server address 'localhost' is not host:port" in r.stderr


def test_blank_entries_are_still_skipped() -> None:
    """``a;`` and ``a;;b`` are RocketMQ's own lists (its split drops blanks): nothing to refuse there."""
    r = run("clusterList", "-n", "127.0.0.1:1;;127.0.0.1:2;")
    assert r.exit_code == 1 and "cannot connect to any name server (127.0.0.1:1; 127.0.0.1:2)" in r.stderr


def test_broker_addr_on_a_store_directory_names_the_stores_broker(cli) -> None:
    r = cli("brokerStatus", "-b", "10.1.2.3:10911")
    assert r.exit_code == 3
    assert "broker address '10.1.2.3:10911' is not this store's broker (127.0.0.1:10911)" in r.stderr
    assert cli("brokerStatus", "-b", "127.0.0.1:10911").exit_code == 0
