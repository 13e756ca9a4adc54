"""copyUser/copyAcl -f/-t and the maintenance commands' --verbose, as a newcomer met them:

- a broker address in -f/-t without -n is a usage error naming -n, not "remote mode is not available";
- a -t that is not a store does not get the hint about the default ./store (it came from -t);
- cleanUnusedTopic & co. print Apache's bare ``success`` on stdout, and --verbose's detail starts on a
  line of its own on stderr.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from mqadmin.app import app

DEFAULT_HINT = "the default store, ./store of the current directory"


def _mqadmin(*argv: str):
    return CliRunner().invoke(app, list(argv), env={"NAMESRV_ADDR": "", "RMQ_STORE": ""})


@pytest.mark.parametrize("command", ["copyUser", "copyAcl"])
def test_a_broker_address_in_from_or_to_without_n_is_a_usage_error(cli, command: str) -> None:
    for flags in (["-f", str(cli.store), "-t", "127.0.0.1:10911"], ["-f", "127.0.0.1:10911", "-t", str(cli.store)]):
        r = cli(command, *flags)
        assert r.exit_code == 2, (r.stdout, r.stderr)
        assert "broker address 127.0.0.1:10911 in -f/-t needs -n <namesrv> (or $NAMESRV_ADDR)" in r.stderr
        assert "not available" not in r.stderr


def test_a_to_path_that_is_not_a_store_gets_no_default_store_hint(cli, tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    cli("createUser", "-c", "DefaultCluster", "-u", "alice", "-p", "pw")
    monkeypatch.chdir(tmp_path)  # no --store, no RMQ_STORE: the default store is ./store (absent here)
    for command in ("copyUser", "copyAcl"):
        r = _mqadmin(command, "-f", str(cli.store), "-t", str(tmp_path / "b"))
        assert r.exit_code == 3, (r.stdout, r.stderr)
        assert f"{tmp_path / 'b'} is not a store directory" in r.stderr
        assert DEFAULT_HINT not in r.stderr
        r = _mqadmin(command, "-f", str(tmp_path / "nope"), "-t", str(cli.store))
        assert r.exit_code == 3 and DEFAULT_HINT not in r.stderr, r.stderr


def test_the_default_store_still_gets_its_hint(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    r = _mqadmin("topicList")
    assert r.exit_code == 3
    assert r.stderr.strip().endswith(f"store is not a store directory (it does not exist) ({DEFAULT_HINT}: "
                                     "give --store DIR or set RMQ_STORE)"), r.stderr


@pytest.mark.parametrize("command", ["cleanUnusedTopic", "cleanExpiredCQ", "deleteExpiredCommitLog"])
def test_verbose_detail_starts_on_its_own_line(cli, command: str) -> None:
    r = cli(command, "--verbose")
    assert r.exit_code == 0, r.stderr
    assert r.stdout == "success"  # Apache's System.out.printf("success"): no newline
    assert r.stderr.startswith("\n") and r.stderr.count("\n") >= 2, repr(r.stderr)
    detail = r.stderr.splitlines()[1]
    assert detail.split(": ", 1)[0].count(":") == 1, detail  # host:port: what was done
    quiet = cli(command)
    assert quiet.exit_code == 0 and quiet.stdout == "success" and quiet.stderr == ""
