"""SSH targets when things go wrong on the way: dropped connections, commands past their deadline,
floods of output, hung remote mqadmin, typos in store paths, ``~`` in them, and the rolling report.

Each test runs against this module's own real OpenSSH server (the ``sshd`` fixture is per module), so
it may drop that server's sessions and restart it. The server runs with ``SetEnv HOME=<tmp>/home`` so
that ``~`` on the host means a directory of the test, not the real home of the user.
"""

from __future__ import annotations

import os
import pwd
import shutil
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from broker_core.store.store_dir import is_store_dir, store_dir_from
from playbooks.actions import REGISTRY
from playbooks.errors import TransportError
from playbooks.inventory import (
    DEFAULT_ADMIN_STEP_TIMEOUT,
    REMOTE_WAIT_SLACK,
    remote_step_deadline,
    shell_path,
)
from playbooks.ssh import SshHost, SshSpec

from .conftest import Playbooks, remote_mqadmin, seed_store
from .sshd import SSHD, Sshd
from .test_ssh import host_book

pytestmark = pytest.mark.timeout(300)


# -- the module's sshd: HOME of its sessions, dropping and restarting it ------------------------------

def _children(pid: int) -> list[int]:
    """Every descendant of ``pid`` (from /proc), deepest last."""
    parents: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rpartition(")")[2].split()[1])
        parents.setdefault(ppid, []).append(int(entry.name))
    out: list[int] = []
    todo = list(parents.get(pid, []))
    while todo:
        child = todo.pop()
        out.append(child)
        todo += parents.get(child, [])
    return out


def drop_sessions(server: Sshd) -> None:
    """SIGKILL every session process of the server (each connection drops at once, as in a crash)."""
    assert server.proc is not None
    for pid in _children(server.proc.pid):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + 10
    while _children(server.proc.pid) and time.monotonic() < deadline:
        time.sleep(0.05)


def restart(server: Sshd) -> None:
    """Stop the server and its sessions, then start it again on the same port with the same keys."""
    drop_sessions(server)
    server.stop()
    log = open(server.root / "sshd.log", "ab")  # noqa: SIM115 - the server's lifetime
    server.proc = subprocess.Popen([SSHD, "-D", "-e", "-f", str(server.root / "sshd_config")], stdout=log,
                                   stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", server.port), timeout=1) as s:
                if s.recv(4).startswith(b"SSH-"):
                    return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError("sshd did not come back within 20s")


@pytest.fixture(scope="module")
def host(sshd: Sshd) -> Sshd:
    """The module's sshd, its sessions' HOME set to a directory of the test."""
    home = sshd.root / "home"
    home.mkdir(exist_ok=True)
    config = sshd.root / "sshd_config"
    config.write_text(config.read_text() + f"SetEnv HOME={home}\n")
    restart(sshd)
    return sshd


def spec_of(server: Sshd) -> SshSpec:
    return SshSpec(host="127.0.0.1", user=server.user, key_file=str(server.user_key), port=server.port,
                   known_hosts=str(server.known_hosts), timeout=5)


def gone(pid: int, within: float) -> bool:
    """Whether process ``pid`` has ended (a zombie counts) within ``within`` seconds."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
        except OSError:
            return True
        if state == "Z":
            return True
        time.sleep(0.1)
    return False


def kill_if_alive(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def step_of(pb: Playbooks, path: Path, *args: str) -> dict:
    return pb.run(path, *args).doc["steps"][0]


# -- 1: store.verify / store.rebuild on a path that is not a store ---------------------------------------

def test_store_verify_and_rebuild_refuse_a_missing_store_locally_and_over_ssh(pb: Playbooks, host: Sshd,
                                                                             tmp_path: Path) -> None:
    missing = tmp_path / "no-such-store"
    text = host_book(host, missing, "  - store.verify: {target: [local, host]}\n").replace(
        "targets:\n", f'targets:\n  local: {{store: "{missing}"}}\n')
    both = pb.write("verify.yml", text)
    r = pb.run(both)  # the local store is found missing before any step runs
    assert r.code == 2 and r.stderr == (f"mqadmin playbook: {both}:3: target local: {missing} is not a store "
                                        "directory (it does not exist)\n")
    r = pb.run(pb.write("host.yml", host_book(host, missing, "  - store.verify: {target: host}\n", create=True)))
    assert r.code == 1
    assert [(s["target"], s["status"], s["message"]) for s in r.doc["steps"]] == [
        ("host", "failed", f"{missing} is not a store directory (it does not exist)")]
    rebuild = pb.write("rebuild.yml", f'name: r\ntargets:\n  local: {{store: "{missing}", create: true}}\n'
                                      "steps:\n  - store.rebuild: {target: local, force: true}\n")
    assert step_of(pb, rebuild, "--check")["message"] == f"{missing} is not a store directory (it does not exist)"
    assert not missing.exists()


# -- 2: a dropped connection is opened again ---------------------------------------------------------------

def test_a_dropped_connection_is_opened_again_once_sshd_is_back(host: Sshd) -> None:
    ssh = SshHost(spec_of(host))
    try:
        assert ssh.run("echo one", timeout=30).stdout == "one\n"
        restart(host)  # sshd restarted: the cached connection's transport is dead
        assert ssh.run("echo two", timeout=30).stdout == "two\n"
    finally:
        ssh.close()


# -- 3, 4, 5: a total deadline, the command stopped at it, both streams read together ----------------------

def test_a_timed_out_command_is_stopped_on_the_host(pb: Playbooks, host: Sshd, tmp_path: Path) -> None:
    pidfile, marker = tmp_path / "sleep.pid", tmp_path / "done"
    cmd = f"sleep 30 & echo $! > {pidfile}; wait; touch {marker}"
    step = step_of(pb, pb.write("p.yml", host_book(host, tmp_path / "s", f"  - shell: {{target: host, cmd: '{cmd}', "
                                                                            "timeout: 2}\n")))
    pid = int(pidfile.read_text())
    try:
        assert step["status"] == "failed"
        assert step["message"].startswith(f"ssh {host.user}@127.0.0.1:{host.port}: command timed out after 2s "
                                          "(stopped on the host: process group "), step["message"]
        assert gone(pid, within=5), "the timed-out command still runs on the host"
        assert not marker.exists()
    finally:
        kill_if_alive(pid)


def test_the_timeout_is_a_total_deadline_while_the_command_prints(pb: Playbooks, host: Sshd, tmp_path: Path) -> None:
    cmd = "i=0; while [ $i -lt 40 ]; do echo tick $i; i=$((i+1)); sleep 0.25; done"
    path = pb.write("p.yml", host_book(host, tmp_path / "s", f"  - shell: {{target: host, cmd: '{cmd}', timeout: 2}}\n"))
    started = time.monotonic()
    step = step_of(pb, path)
    assert step["status"] == "failed" and "command timed out after 2s" in step["message"], step
    assert time.monotonic() - started < 8  # not the 10 s the command would take


def test_a_flood_on_stderr_does_not_stall_stdout(pb: Playbooks, host: Sshd, tmp_path: Path) -> None:
    cmd = "head -c 5000000 /dev/zero | tr \"\\\\0\" x >&2; echo done-out"
    steps = (f"  - shell: {{target: host, cmd: '{cmd}', timeout: 20}}\n    register: big\n"
             "  - assert: [\"big.stdout == 'done-out\\\\n'\", \"big.stderr[-3:] == 'xxx'\"]\n")
    r = pb.run(pb.write("p.yml", host_book(host, tmp_path / "s", steps)))
    assert [s["status"] for s in r.doc["steps"]] == ["changed", "ok"], r.doc["steps"]
    assert r.doc["steps"][0]["duration_ms"] < 15000


# -- 6: a hung remote mqadmin ------------------------------------------------------------------------------

def test_a_hung_remote_mqadmin_is_stopped_at_the_step_timeout(pb: Playbooks, host: Sshd, tmp_path: Path) -> None:
    pidfile = tmp_path / "mqadmin.pid"
    hung = tmp_path / "hung-mqadmin"
    hung.write_text(f"#!/bin/sh\necho $$ > {pidfile}\nexec sleep 60\n")
    hung.chmod(0o755)
    store = seed_store(tmp_path / "s")
    text = host_book(host, store, "  - store.verify: {target: host, timeout: 3}\n").replace(remote_mqadmin(), str(hung))
    started = time.monotonic()
    step = step_of(pb, pb.write("p.yml", text))
    pid = int(pidfile.read_text())
    try:
        assert step["status"] == "failed"
        assert "command timed out after 3s (stopped on the host" in step["message"], step
        assert time.monotonic() - started < 15
        assert gone(pid, within=5)
    finally:
        kill_if_alive(pid)


def test_remote_admin_step_deadlines() -> None:
    """store.verify/rebuild: timeout: is the deadline; waits: their wait plus slack; others: the default."""
    assert remote_step_deadline(REGISTRY["store.verify"], {"timeout": 5}) == 5
    assert remote_step_deadline(REGISTRY["store.rebuild"], {"timeout": 7.5}) == 7.5
    assert remote_step_deadline(REGISTRY["wait.lag"], {"timeout": 60}) == 60 + REMOTE_WAIT_SLACK
    assert remote_step_deadline(REGISTRY["topic.ensure"], {"topic": "t"}) == DEFAULT_ADMIN_STEP_TIMEOUT


# -- 7: file.copy onto a directory ---------------------------------------------------------------------------

def test_file_copy_onto_a_directory_fails_in_check_mode_and_for_real(pb: Playbooks, host: Sshd,
                                                                     tmp_path: Path) -> None:
    src, dest = tmp_path / "broker.conf", tmp_path / "destdir"
    src.write_text("brokerName=broker-a\n")
    dest.mkdir()
    text = host_book(host, tmp_path / "s", f'  - file.copy: {{target: [local, host], src: "{src}", dest: "{dest}"}}\n'
                     ).replace("targets:\n", f'targets:\n  local: {{store: "{tmp_path / "s"}"}}\n')
    path = pb.write("p.yml", text)
    for args in (("--check",), ()):
        r = pb.run(path, *args)
        assert r.code == 1
        assert [(s["status"], s["message"]) for s in r.doc["steps"]] == [
            ("failed", f"dest {dest} on {where} is a directory; dest: must name the file to write")
            for where in ("localhost", f"127.0.0.1:{host.port}")]
    assert list(dest.iterdir()) == []


# -- 8: ~ in store: on an SSH target ---------------------------------------------------------------------------

def test_a_store_under_home_on_an_ssh_target_is_under_home(pb: Playbooks, host: Sshd, tmp_path: Path) -> None:
    login_dir = Path(pwd.getpwnam(host.user).pw_dir)  # where sshd starts the command
    literal = login_dir / "~"
    existed = literal.exists()
    text = host_book(host, Path("~/rmqops-tilde/store"), "  - topic.ensure: {target: host, topic: tt}\n", create=True)
    try:
        step = step_of(pb, pb.write("p.yml", text))
        assert step["status"] == "changed", step
        assert is_store_dir(host.root / "home" / "rmqops-tilde" / "store")
        assert literal.exists() == existed, f"a directory literally named {literal} was made"
    finally:
        if not existed and literal.exists():
            shutil.rmtree(literal)


def test_store_paths_expand_a_leading_tilde(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("RMQ_STORE", raising=False)
    assert store_dir_from("~/s") == tmp_path / "s"
    monkeypatch.setenv("RMQ_STORE", "~/env-store")
    assert store_dir_from(None) == tmp_path / "env-store"
    assert store_dir_from("~no-such-user-rmqops/s") == Path("~no-such-user-rmqops/s")
    assert shell_path("~/my store") == "~/'my store'" and shell_path("/a b") == "'/a b'" and shell_path("~") == "~"


# -- 9: one precise line for a stalled handshake and a connection lost mid-step ---------------------------------

@pytest.fixture
def banner_then_silence() -> Iterator[int]:
    """A port that sends an SSH banner and then nothing (a stuck sshd)."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    held: list[socket.socket] = []

    def serve() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            conn.sendall(b"SSH-2.0-OpenSSH_9.2\r\n")
            held.append(conn)

    threading.Thread(target=serve, daemon=True).start()
    try:
        yield server.getsockname()[1]
    finally:
        for s in (server, *held):
            s.close()


def test_a_server_that_stalls_after_its_banner_is_named(pb: Playbooks, host: Sshd, banner_then_silence: int,
                                                        tmp_path: Path) -> None:
    text = host_book(host, tmp_path / "s", "  - shell: {target: host, cmd: 'true'}\n",
                     port=banner_then_silence).replace("timeout: 5", "timeout: 2")
    assert step_of(pb, pb.write("p.yml", text))["message"] == (
        f"ssh {host.user}@127.0.0.1:{banner_then_silence}: the SSH handshake did not complete within 2s (the "
        "server sent its banner, then stopped answering: an overloaded or stuck sshd)")


def test_a_connection_lost_during_a_step_is_named(host: Sshd) -> None:
    ssh = SshHost(spec_of(host))
    killer = threading.Timer(1.5, drop_sessions, args=(host,))
    killer.start()
    try:
        with pytest.raises(TransportError) as caught:
            ssh.run("sleep 20; echo never", timeout=60)
    finally:
        killer.cancel()
        ssh.close()
    assert caught.value.message == (f"ssh {host.user}@127.0.0.1:{host.port}: the connection to the host was lost "
                                    "during the step (the command may have run in part)")


# -- serial: the targets of batches that did not run are in the report ---------------------------------------

def test_targets_of_batches_not_run_are_reported_as_skipped(pb: Playbooks, tmp_path: Path) -> None:
    targets = "".join(f'  {t}: {{store: "{tmp_path / t}"}}\n' for t in "abc")
    path = pb.write("p.yml", f"name: rolling\ntargets:\n{targets}steps:\n"
                             "  - shell: {target: [a, b, c], cmd: \"test {{ target }} != a\"}\n    serial: 1\n")
    r = pb.run(path)
    assert r.code == 1
    assert [(s["target"], s["status"], s["message"]) for s in r.doc["steps"]][1:] == [
        (t, "skipped", "not run: an earlier batch failed") for t in "bc"]
    assert r.doc["skipped"] == 2
