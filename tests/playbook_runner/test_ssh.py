"""SSH targets against a real OpenSSH server on 127.0.0.1: remote mqadmin steps, sftp, shell,
broker.start/stop of a real mqbroker process, and the failure cases, each with one clear message."""

from __future__ import annotations

import os
import signal
import socket
import time
from pathlib import Path

import pytest

from mqadmin.embedded import EmbeddedAdmin
from playbooks.actions.broker_process import lock_owner

from .conftest import Playbooks, remote_mqadmin, seed_store
from .sshd import Sshd

pytestmark = pytest.mark.timeout(300)


def host_book(server: Sshd, store: Path, steps: str, *, port: int | None = None, key: Path | None = None,
              known_hosts: Path | None = None, tofu: bool = False, create: bool = False) -> str:
    """A playbook on one ssh target; ``create``: its store may be made new on the host (``create: true``)."""
    made = "\n    create: true" if create else ""
    return f'''name: on the host
targets:
  host:
    ssh:
      host: 127.0.0.1
      port: {port or server.port}
      user: {server.user}
      key_file: "{key or server.user_key}"
      known_hosts: "{known_hosts or server.known_hosts}"
      trust_on_first_use: {"true" if tofu else "false"}
      timeout: 5
    store: "{store}"{made}
    mqadmin: "{remote_mqadmin()}"
steps:
{steps}'''


def stop_broker_by_pid(store: Path) -> None:
    pid = lock_owner(store)
    if pid is not None:
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + 30
        while lock_owner(store) is not None and time.monotonic() < deadline:
            time.sleep(0.2)
        if lock_owner(store) is not None:
            os.kill(pid, signal.SIGKILL)


def test_remote_steps_sftp_and_shell(pb: Playbooks, sshd: Sshd, tmp_path: Path) -> None:
    store = tmp_path / "host-store"
    conf = tmp_path / "broker.conf"
    conf.write_text("brokerName=broker-h\n")
    remote_conf = tmp_path / "remote" / "broker.conf"
    remote_conf.parent.mkdir()
    text = host_book(sshd, store, f'''  - name: config file over sftp
    file.copy: {{target: host, src: "{conf}", dest: "{remote_conf}", mode: "0640"}}
  - name: topic on the host's store (mqadmin runs there)
    topic.ensure: {{target: host, topic: host-events, read_queues: 2, write_queues: 2}}
    register: made
  - name: a command on the host
    shell: {{target: host, cmd: "cat {remote_conf}; hostname >/dev/null"}}
    register: out
  - name: the command saw the copied file
    assert: ["'brokerName=broker-h' in out.stdout", "made.read_queues == 2"]
''', create=True)
    path = pb.write("host.yml", text)
    check = pb.run(path, "--check")
    assert check.code == 1  # the shell step is skipped in check mode, so the assertion sees no output
    assert [s["status"] for s in check.doc["steps"][:3]] == ["changed", "changed", "skipped"]
    assert not remote_conf.exists() and not store.exists()

    first = pb.run(path)
    assert first.code == 0, first.stdout
    assert [s["status"] for s in first.doc["steps"]] == ["changed", "changed", "changed", "ok"]
    assert remote_conf.read_text() == "brokerName=broker-h\n" and (remote_conf.stat().st_mode & 0o777) == 0o640
    with EmbeddedAdmin(store) as admin:
        assert admin.topic_info("host-events").read_queue_nums == 2
    second = pb.run(path)
    assert [s["status"] for s in second.doc["steps"]] == ["ok", "ok", "changed", "ok"]


def test_broker_start_and_stop_on_the_host(pb: Playbooks, sshd: Sshd, tmp_path: Path) -> None:
    store = seed_store(tmp_path / "host-store")
    start = pb.write("start.yml", host_book(sshd, store, "  - broker.start: {target: host, timeout: 60}\n"))
    stop = pb.write("stop.yml", host_book(sshd, store, "  - broker.stop: {target: host, timeout: 60}\n"))
    try:
        r = pb.run(start)
        assert r.code == 0, r.stdout
        assert r.doc["steps"][0]["status"] == "changed"
        pid = lock_owner(store)
        assert pid is not None and "mqbroker" in Path(f"/proc/{pid}/cmdline").read_text()
        assert pb.run(start).doc["steps"][0]["status"] == "ok"
        assert pb.run(stop, "--check").doc["steps"][0]["status"] == "changed"
        assert lock_owner(store) == pid  # --check stopped nothing
        r = pb.run(stop)
        assert r.code == 0 and r.doc["steps"][0]["message"] == f"stopped broker pid {pid}"
        assert lock_owner(store) is None and not (store / "abort").exists()  # a clean shutdown
        assert pb.run(stop).doc["steps"][0]["message"] == f"no broker holds {store}"
    finally:
        stop_broker_by_pid(store)


def test_failing_remote_step_stops_the_play(pb: Playbooks, sshd: Sshd, tmp_path: Path) -> None:
    store = tmp_path / "s"
    path = pb.write("p.yml", host_book(sshd, store, '''  - name: fails on the host
    shell: {target: host, cmd: "echo about to fail; echo disk full >&2; exit 4"}
  - name: never runs
    topic.ensure: {target: host, topic: t}
'''))
    r = pb.run(path)
    assert r.code == 1
    assert [s["status"] for s in r.doc["steps"]] == ["failed"]
    assert r.doc["steps"][0]["message"] == f"command exited with 4 on 127.0.0.1:{sshd.port}: disk full"
    assert not store.exists()


def test_remote_mqadmin_failure_is_reported(pb: Playbooks, sshd: Sshd, tmp_path: Path) -> None:
    text = host_book(sshd, tmp_path / "s", "  - topic.ensure: {target: host, topic: t}\n").replace(
        remote_mqadmin(), "/nonexistent/mqadmin")
    r = pb.run(pb.write("p.yml", text))
    assert r.code == 1
    msg = r.doc["steps"][0]["message"]
    assert msg.startswith("`/nonexistent/mqadmin playbook step` on 127.0.0.1:") and "exited with 127" in msg


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_unreachable_host(pb: Playbooks, sshd: Sshd, tmp_path: Path) -> None:
    port = _closed_port()
    r = pb.run(pb.write("p.yml", host_book(sshd, tmp_path / "s", "  - shell: {target: host, cmd: 'true'}\n",
                                           port=port)))
    assert r.code == 1
    assert r.doc["steps"][0]["message"] == f"ssh {sshd.user}@127.0.0.1:{port}: unreachable (connection refused)"


def test_wrong_key(pb: Playbooks, sshd: Sshd, tmp_path: Path) -> None:
    r = pb.run(pb.write("p.yml", host_book(sshd, tmp_path / "s", "  - shell: {target: host, cmd: 'true'}\n",
                                           key=sshd.wrong_key)))
    assert r.code == 1
    assert r.doc["steps"][0]["message"] == (
        f"ssh {sshd.user}@127.0.0.1:{sshd.port}: authentication failed with key {sshd.wrong_key} "
        "(the server does not accept this key for this user)")


def test_host_key_mismatch(pb: Playbooks, sshd: Sshd, tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    r = pb.run(pb.write("p.yml", host_book(sshd, tmp_path / "s", f"  - shell: {{target: host, cmd: 'touch {marker}'}}\n",
                                           known_hosts=sshd.known_hosts_mismatch, tofu=True)))
    assert r.code == 1
    msg = r.doc["steps"][0]["message"]
    assert msg.startswith(f"ssh {sshd.user}@127.0.0.1:{sshd.port}: host key mismatch: the server offered "
                          "ssh-ed25519 SHA256:")
    assert "refusing to connect" in msg
    assert not marker.exists()


def test_unknown_host_needs_trust_on_first_use(pb: Playbooks, sshd: Sshd, tmp_path: Path) -> None:
    known = tmp_path / "known_hosts"
    steps = "  - shell: {target: host, cmd: 'true'}\n"
    r = pb.run(pb.write("p.yml", host_book(sshd, tmp_path / "s", steps, known_hosts=known)))
    assert r.code == 1
    assert r.doc["steps"][0]["message"] == (
        f"ssh {sshd.user}@127.0.0.1:{sshd.port}: unknown host key (not in {known}); add it "
        f"(ssh-keyscan -p {sshd.port} 127.0.0.1 >> {known}) or set trust_on_first_use: true on the target")
    assert not known.exists()
    r = pb.run(pb.write("p.yml", host_book(sshd, tmp_path / "s", steps, known_hosts=known, tofu=True)))
    assert r.code == 0
    recorded = known.read_text().split()
    assert recorded[0] == f"[127.0.0.1]:{sshd.port}" and recorded[2] == sshd.known_hosts.read_text().split()[2]
    r = pb.run(pb.write("p.yml", host_book(sshd, tmp_path / "s", steps, known_hosts=known)))
    assert r.code == 0  # now known: strict checking passes


def test_step_command_reports_bad_requests_as_json(tmp_path: Path) -> None:
    import json
    import subprocess
    import sys

    from .conftest import REPO

    cmd = [sys.executable, "-m", "mqadmin.app", "playbook", "step", "--store", str(tmp_path / "s"), "--output", "json"]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    bad = subprocess.run(cmd, input=b'{"action": "no.such"}', capture_output=True, env=env, timeout=60)
    assert bad.returncode == 0
    assert json.loads(bad.stdout)["message"] == "bad step request on stdin: 'no.such'"
    request = json.dumps({"action": "group.ensure", "args": {"group": "g"}}).encode()
    refused = subprocess.run(cmd, input=request, capture_output=True, env=env, timeout=60)
    assert json.loads(refused.stdout)["message"] == (f"{tmp_path / 's'} is not a store directory (it does not exist) "
                                                     "(give the target create: true to make a new store there)")
    assert not (tmp_path / "s").exists()  # a store is made on a host only for a target with create: true
    good = subprocess.run([*cmd, "--create"], input=request, capture_output=True, env=env, timeout=60)
    assert json.loads(good.stdout)["status"] == "changed"
