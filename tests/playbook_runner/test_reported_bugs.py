"""Regression tests for the tester's report on `mqadmin playbook` (bugs 1-12 and minor items a-e).

Each test names its item; each failed on the code before the fix. The SSH cases run against the real
test sshd (see sshd.py); the Ctrl-C cases run `mqadmin playbook run` as a process and send it SIGINT."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from mqadmin.embedded import EmbeddedAdmin
from playbooks.actions.broker_process import lock_owner
from tests.waiting import wait_for

from .conftest import REPO, Playbooks, seed_store
from .sshd import Sshd
from .test_actions import book
from .test_ssh import host_book, stop_broker_by_pid

pytestmark = pytest.mark.timeout(300)


def two_targets(tmp_path: Path) -> str:
    return (f'name: t\ntargets:\n  s1: {{store: "{tmp_path / "s1"}", create: true}}\n'
            f'  s2: {{store: "{tmp_path / "s2"}", create: true}}\nsteps:\n')


# -- 1 --------------------------------------------------------------------------------------------------

def test_1_broker_start_and_stop_on_a_store_directory_that_does_not_exist_yet(pb: Playbooks, tmp_path: Path) -> None:
    """Before: start said "a broker already holds" (the plan's temporary store was writable, so it
    looked held) and started nothing; stop failed "locked but its owner process cannot be found"."""
    store = tmp_path / "newstore"
    conf = tmp_path / "broker.conf"
    conf.write_text("listenPort=0\nnamesrvPort=0\n")
    stop = pb.write("stop.yml", book(store, "  - broker.stop: {timeout: 30}\n", conf))
    r = pb.run(stop)
    assert r.code == 0, r.stdout
    assert r.doc["steps"][0]["message"] == f"no broker holds {store}" and not store.exists()
    start = pb.write("start.yml", book(store, "  - broker.start: {timeout: 60}\n", conf))
    try:
        assert pb.run(start, "--check").doc["steps"][0]["status"] == "changed"
        r = pb.run(start)
        assert r.code == 0, r.stdout
        assert r.doc["steps"][0]["status"] == "changed", r.doc
        assert lock_owner(store) is not None
        r = pb.run(stop)
        assert r.code == 0 and r.doc["steps"][0]["message"].startswith("stopped broker pid ")
        assert lock_owner(store) is None
    finally:
        stop_broker_by_pid(store)


# -- 2 --------------------------------------------------------------------------------------------------

def test_2_file_copy_mode_unquoted_octal_mode_change_alone_and_bad_modes(pb: Playbooks, tmp_path: Path) -> None:
    src = tmp_path / "src"
    src.write_text("secret\n")
    a, b = tmp_path / "out" / "a", tmp_path / "out" / "b"
    r = pb.run(pb.write("p.yml", book(tmp_path / "s", f'''  - file.copy: {{src: "{src}", dest: "{a}", mode: 0644}}
  - file.copy: {{src: "{src}", dest: "{b}", mode: "0644"}}
''')))
    assert r.code == 0, r.stdout
    assert (a.stat().st_mode & 0o777) == 0o644 and (b.stat().st_mode & 0o777) == 0o644
    only_mode = pb.write("m.yml", book(tmp_path / "s", f'  - file.copy: {{src: "{src}", dest: "{b}", mode: "0600"}}\n'))
    r = pb.run(only_mode, "--check")
    assert r.doc["steps"][0]["status"] == "changed" and (b.stat().st_mode & 0o777) == 0o644
    r = pb.run(only_mode)
    assert r.doc["steps"][0]["status"] == "changed"
    assert r.doc["steps"][0]["changes"] == [{"what": f"file {b} on localhost", "field": "mode", "old": "0644",
                                            "new": "0600"}]
    assert (b.stat().st_mode & 0o777) == 0o600
    assert pb.run(only_mode).doc["steps"][0]["status"] == "ok"
    for mode, message in (('"u+rw"', "file.copy: mode must be an octal file mode like \"0644\""),
                          ("644", "file.copy: mode 644 is the decimal number 644")):
        bad = pb.write("bad.yml", book(tmp_path / "s", f'  - file.copy: {{src: "{src}", dest: "{a}", mode: {mode}}}\n'))
        for r in (pb.check(bad), pb.run(bad)):
            assert r.code == 2 and f"{bad}:7: {message}" in r.stderr, r.stderr


def test_2_file_copy_mode_change_alone_over_ssh(pb: Playbooks, sshd: Sshd, tmp_path: Path) -> None:
    src = tmp_path / "src"
    src.write_text("x\n")
    dest = tmp_path / "remote" / "f"
    dest.parent.mkdir()
    steps = f'  - file.copy: {{target: host, src: "{src}", dest: "{dest}", mode: "{{{{ m }}}}"}}\n'
    path = pb.write("p.yml", host_book(sshd, tmp_path / "s", steps))
    assert pb.run(path, "-e", "m=0644").code == 0 and (dest.stat().st_mode & 0o777) == 0o644
    r = pb.run(path, "-e", "m=0600")
    assert r.code == 0 and r.doc["steps"][0]["status"] == "changed", r.stdout
    assert (dest.stat().st_mode & 0o777) == 0o600


def test_2b_file_copy_over_ssh_expands_home_and_makes_parents(pb: Playbooks, sshd: Sshd, tmp_path: Path) -> None:
    """As the local target's copy does: ``~/x`` is the remote user's home, missing directories are made.
    Before, SFTP took ``~`` as a directory name and a missing parent failed the step."""
    import pwd
    import shutil

    src = tmp_path / "src"
    src.write_text("x\n")
    top = f".rmqops-test-{os.getpid()}-{tmp_path.name}"
    home = Path(pwd.getpwnam(sshd.user).pw_dir)
    made = [home / top / "a" / "b" / "f", tmp_path / "remote" / "c" / "d" / "f"]
    steps = (f'  - file.copy: {{target: host, src: "{src}", dest: "~/{top}/a/b/f"}}\n'
             f'  - file.copy: {{target: host, src: "{src}", dest: "{made[1]}"}}\n')
    path = pb.write("p.yml", host_book(sshd, tmp_path / "s", steps))
    try:
        r = pb.run(path)
        assert r.code == 0 and [s["status"] for s in r.doc["steps"]] == ["changed", "changed"], r.stdout
        assert [p.read_text() for p in made] == ["x\n", "x\n"]
        r = pb.run(path)  # and it finds them again: nothing to do
        assert r.code == 0 and [s["status"] for s in r.doc["steps"]] == ["ok", "ok"], r.stdout
    finally:
        shutil.rmtree(home / top, ignore_errors=True)


# -- 3 --------------------------------------------------------------------------------------------------

def test_3_limit_does_not_change_what_register_sees(pb: Playbooks, tmp_path: Path) -> None:
    path = pb.write("p.yml", two_targets(tmp_path) + '''  - topic.ensure: {topic: t1}
    target: "s*"
    register: a
  - assert: ["a.results | length == 2"]
  - topic.ensure: {topic: t2}
    target: s1
    register: b
  - topic.ensure: {topic: t3}
    target: s2
    when: not b.failed and b.skipped
''')
    r = pb.run(path, "--limit", "s2")
    assert r.code == 0, r.stdout
    assert [(s["step"], s["target"], s["status"]) for s in r.doc["steps"]] == [
        (1, "s2", "changed"), (2, "-", "ok"), (3, "s1", "skipped"), (4, "s2", "changed")]
    assert not (tmp_path / "s1").exists()


# -- 4 --------------------------------------------------------------------------------------------------

def test_4_until_is_not_evaluated_when_check_mode_skips_the_step(pb: Playbooks, tmp_path: Path) -> None:
    path = pb.write("p.yml", book(tmp_path / "s", '''  - shell: {cmd: "echo ready"}
    register: c
    until: "'ready' in c.stdout"
  - group.ensure: {group: after}
'''))
    r = pb.run(path, "--check")
    assert r.code == 0, r.stdout
    assert [s["status"] for s in r.doc["steps"]] == ["skipped", "changed"]
    assert pb.run(path).code == 0


# -- 5 --------------------------------------------------------------------------------------------------

def _mqadmin(*args: str, home: Path) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(REPO), "HOME": str(home), "NAMESRV_ADDR": "", "RMQ_STORE": ""}
    return subprocess.Popen([sys.executable, "-m", "mqadmin.app", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=env, start_new_session=True)


def _log_events(log: Path) -> list[dict]:
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def test_5_ctrl_c_reports_what_ran_and_what_was_in_flight(tmp_path: Path) -> None:
    log = tmp_path / "run.jsonl"
    play = tmp_path / "p.yml"
    play.write_text(book(tmp_path / "s", '''  - group.ensure: {group: first}
  - shell: {cmd: "sleep 60"}
  - group.ensure: {group: never}
'''))
    p = _mqadmin("playbook", "run", str(play), "--log", str(log), "--output", "json", home=tmp_path)
    wait_for(lambda: any(e["event"] == "step" for e in _log_events(log)), "the first step in the run log", 60)
    time.sleep(0.5)  # the shell step is running
    os.killpg(p.pid, signal.SIGINT)  # as Ctrl-C does: the whole process group
    out, err = p.communicate(timeout=60)
    assert p.returncode == 130, err
    assert err.decode() == "mqadmin playbook: interrupted\n"
    doc = json.loads(out)
    assert doc["interrupted"] is True
    assert [(s["name"], s["status"]) for s in doc["steps"]] == [("group.ensure", "changed"), ("shell", "interrupted")]
    assert doc["stopped"] == "interrupted during step 2 'shell' on local; later steps were not run"
    events = _log_events(log)
    assert [e["event"] for e in events] == ["run_start", "step", "step", "run_end"]
    assert events[-1]["interrupted"] is True


def _step_processes(store: Path) -> list[int]:
    out = []
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            if "playbook step" in cmd and str(store) in cmd:
                out.append(int(pid))
    return out


def test_5_ctrl_c_stops_the_remote_step_over_ssh(sshd: Sshd, tmp_path: Path) -> None:
    store = seed_store(tmp_path / "host-store", consumed=0)
    play = tmp_path / "p.yml"
    play.write_text(host_book(sshd, store, "  - wait.lag: {target: host, group: orders-billing, timeout: 120, "
                                           "interval: 0.2}\n"))
    p = _mqadmin("playbook", "run", str(play), "--log", str(tmp_path / "run.jsonl"), "--output", "json",
                 home=tmp_path)
    try:
        wait_for(lambda: _step_processes(store), "the step's mqadmin process", 60)
        os.killpg(p.pid, signal.SIGINT)
        out, _ = p.communicate(timeout=60)
        assert p.returncode == 130
        assert [s["status"] for s in json.loads(out)["steps"]] == ["interrupted"]
        wait_for(lambda: not _step_processes(store), "the step's mqadmin process to end", 20)  # before: it waited out its 120 s there
    finally:
        if p.poll() is None:
            p.kill()
        for pid in _step_processes(store):
            os.kill(pid, signal.SIGKILL)


# -- 6 --------------------------------------------------------------------------------------------------

def test_6_check_reports_what_run_refuses(pb: Playbooks, tmp_path: Path) -> None:
    later = pb.write("later.yml", book(tmp_path / "s", '''  - group.ensure: {group: a}
    when: r.changed
  - group.ensure: {group: b}
    register: r
'''))
    r = pb.check(later)
    assert r.code == 2
    assert r.stderr == (f"mqadmin playbook: {later}:8: variable 'r' is not defined (registered by step 2, "
                        "which runs later)\n")
    env = pb.write("env.yml", book(tmp_path / "s", '  - group.ensure: {group: "{{ env.RMQOPS_TEST_UNSET_X }}"}\n'))
    r = pb.check(env)
    assert "valid playbook" in r.stdout
    assert r.stderr == (f"mqadmin playbook: warning: {env}:7: environment variable RMQOPS_TEST_UNSET_X is not set "
                        "at check time (used as env.RMQOPS_TEST_UNSET_X)\n")


def test_6b_an_optional_environment_variable(pb: Playbooks, tmp_path: Path) -> None:
    """``env.X | default(..)`` makes X optional, as it does for any other variable. Before, an unset X was
    refused all the same, at validation and at run time, so a playbook could not read one if set."""
    seed_store(tmp_path / "s")
    steps = ('  - group.ensure: {group: "{{ env.RMQOPS_TEST_UNSET_G | default(\'g-fallback\') }}"}\n'
             '  - group.ensure: {group: "g-{{ \'set\' if env.RMQOPS_TEST_UNSET_G is defined else \'unset\' }}"}\n')
    path = pb.write("optional.yml", book(tmp_path / "s", steps))
    r = pb.check(path)
    assert r.code == 0 and r.stderr == ""
    r = pb.run(path)
    assert r.code == 0 and [s["status"] for s in r.doc["steps"]] == ["changed", "changed"], r.stdout
    with EmbeddedAdmin(tmp_path / "s") as admin:
        assert {"g-fallback", "g-unset"} <= set(admin.list_groups())
    required = pb.write("required.yml", book(tmp_path / "s", '  - group.ensure: {group: "{{ env.RMQOPS_TEST_UNSET_H }}"}\n'))
    r = pb.run(required)
    assert r.code == 2 and r.stderr == (f"mqadmin playbook: {required}:7: environment variable "
                                        "RMQOPS_TEST_UNSET_H is not set (used as env.RMQOPS_TEST_UNSET_H)\n")


# -- 7 --------------------------------------------------------------------------------------------------

def test_7_a_playbook_that_is_not_utf8(pb: Playbooks, tmp_path: Path) -> None:
    path = tmp_path / "latin1.yml"
    path.write_bytes(b"name: caf\xe9\ntargets: {s: {store: /tmp/x}}\nsteps:\n  - topic.ensure: {topic: a}\n")
    for r in (pb.check(path), pb.run(path)):
        assert r.code == 2
        assert r.stderr == f"mqadmin playbook: {path}: not UTF-8 (byte 0xe9 at offset 9)\n"


# -- 8 --------------------------------------------------------------------------------------------------

@pytest.fixture
def fake_ports() -> Iterator[tuple[int, int]]:
    """(a port that accepts and closes at once, a port that accepts and never says anything)."""
    closer, silent = socket.socket(), socket.socket()
    held: list[socket.socket] = []
    for s in (closer, silent):
        s.bind(("127.0.0.1", 0))
        s.listen(8)

    def serve(s: socket.socket, keep: bool) -> None:
        while True:
            try:
                c, _ = s.accept()
            except OSError:
                return
            held.append(c) if keep else c.close()

    for s, keep in ((closer, False), (silent, True)):
        threading.Thread(target=serve, args=(s, keep), daemon=True).start()
    try:
        yield closer.getsockname()[1], silent.getsockname()[1]
    finally:
        for s in (closer, silent, *held):
            s.close()


def test_8_ports_that_are_not_ssh_servers_and_a_port_out_of_range(sshd: Sshd, fake_ports: tuple[int, int],
                                                                   tmp_path: Path) -> None:
    closing, silent = fake_ports
    steps = "  - shell: {target: host, cmd: 'true'}\n"
    for port, message in ((closing, "closed the connection without an SSH banner"),
                          (silent, "did not answer as an SSH server (no banner in 2s)")):
        play = tmp_path / f"p{port}.yml"
        play.write_text(host_book(sshd, tmp_path / "s", steps, port=port).replace("timeout: 5", "timeout: 2"))
        p = _mqadmin("playbook", "run", str(play), "--log", str(tmp_path / "run.jsonl"), "--output", "json",
                     home=tmp_path)
        out, err = p.communicate(timeout=60)
        assert p.returncode == 1
        assert err == b"", err.decode()  # before: paramiko's traceback
        assert json.loads(out)["steps"][0]["message"] == f"ssh {sshd.user}@127.0.0.1:{port}: {message}" + (
            " (not an SSH server, or sshd refused more connections: MaxStartups)" if port == closing else "")
    play = tmp_path / "range.yml"
    play.write_text(host_book(sshd, tmp_path / "s", steps, port=70000))
    r = Playbooks(tmp_path).check(play)
    assert r.code == 2 and f"{play}:6: target 'host': ssh.port must be 1-65535, got 70000" in r.stderr


# -- 9 --------------------------------------------------------------------------------------------------

def test_9_passphrase_protected_and_garbage_key_files(pb: Playbooks, sshd: Sshd, tmp_path: Path) -> None:
    protected = tmp_path / "id_pass"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "hunter22", "-f", str(protected)], check=True)
    garbage = tmp_path / "id_garbage"
    garbage.write_bytes(bytes(range(256)) * 2)
    steps = "  - shell: {target: host, cmd: 'true'}\n"
    for key, message in ((protected, "the key is protected by a passphrase"),
                         (garbage, "not a private key file (binary data, not a key in text form)")):
        r = pb.run(pb.write("p.yml", host_book(sshd, tmp_path / "s", steps, key=key)))
        assert r.code == 1
        assert r.doc["steps"][0]["message"].startswith(f"ssh {sshd.user}@127.0.0.1:{sshd.port}: {key}: {message}"), \
            r.doc["steps"][0]["message"]


# -- 10 -------------------------------------------------------------------------------------------------

def test_10_check_fails_broker_config_like_the_run_without_a_config_file(pb: Playbooks, tmp_path: Path) -> None:
    path = pb.write("p.yml", book(tmp_path / "s", "  - broker.config: {config: {maxMessageSize: 1048576}}\n"))
    for args in (("--check",), ()):  # refused before anything runs, as playbook check refuses it
        r = pb.run(path, *args)
        assert r.code == 2, args
        assert f"{path}:7: broker.config on store target 'local' needs config: on that target" in r.stderr, r.stderr


# -- 11 -------------------------------------------------------------------------------------------------

def test_11_merge_key_with_an_explicit_override(pb: Playbooks, tmp_path: Path) -> None:
    store = tmp_path / "s"
    text = f'''name: merge
targets:
  s: {{store: "{store}", create: true}}
vars:
  d: &d {{read_queues: 2, write_queues: 2}}
steps:
  - topic.ensure:
      <<: *d
      topic: b
      read_queues: 4
'''
    r = pb.run(pb.write("p.yml", text))
    assert r.code == 0, r.stderr
    with EmbeddedAdmin(store) as admin:
        t = admin.topic_info("b")
        assert (t.read_queue_nums, t.write_queue_nums) == (4, 2)
    dup = pb.write("dup.yml", text + "      read_queues: 8\n")
    r = pb.check(dup)
    assert r.code == 2 and f"{dup}:11: duplicate key 'read_queues' (first on line 10)" in r.stderr


# -- 12 -------------------------------------------------------------------------------------------------

def test_12_nested_aliases_are_refused_fast(pb: Playbooks, tmp_path: Path) -> None:
    levels = ['  a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for prev, name in zip("abcdefg", "bcdefgh", strict=True):
        levels.append(f"  {name}: &{name} [{','.join([f'*{prev}'] * 9)}]")
    path = pb.write("bomb.yml", "name: x\ntargets:\n  l: {store: /nonexistent}\nvars:\n" + "\n".join(levels)
                    + "\nsteps:\n  - topic.ensure: {topic: a}\n")
    started = time.monotonic()
    r = pb.check(path)
    assert time.monotonic() - started < 10
    assert r.code == 2 and f"{path}: the YAML has more than 100,000 nodes" in r.stderr
    fine = pb.write("fine.yml", "name: x\ntargets:\n  l: {store: /nonexistent}\nvars:\n" + "\n".join(levels[:3])
                    + "\nsteps:\n  - topic.ensure: {topic: a}\n")
    assert pb.check(fine).code == 0


# -- minor ----------------------------------------------------------------------------------------------

def test_a_limit_with_an_unknown_part_is_an_error(pb: Playbooks, tmp_path: Path) -> None:
    path = pb.write("p.yml", two_targets(tmp_path) + "  - group.ensure: {target: s1, group: g}\n")
    r = pb.run(path, "--limit", "s1,typo")
    assert r.code == 2
    assert r.stderr == "mqadmin playbook: --limit 'typo' matches no target (defined: s1, s2)\n"
    assert not (tmp_path / "s1").exists()


def test_b_values_under_secret_keys_of_a_mapping_are_masked(pb: Playbooks, tmp_path: Path) -> None:
    secret = "Nested-Secret-99"
    path = pb.write("p.yml", book(tmp_path / "s", '''  - shell: {cmd: "echo {{ db.password }} {{ db.user }}; exit 3"}
''').replace("steps:\n", f"vars:\n  db: {{user: admin, password: {secret}}}\nsteps:\n"))
    r = pb.run(path)
    assert r.code == 1
    assert secret not in r.stdout and secret not in pb.log.read_text()
    assert r.doc["steps"][0]["message"] == "command exited with 3 on localhost: ******** admin"


def test_c_file_copy_onto_a_directory_leaves_no_temp_file(pb: Playbooks, tmp_path: Path) -> None:
    src = tmp_path / "src"
    src.write_text("x")
    dest = tmp_path / "out" / "conf"
    dest.mkdir(parents=True)
    r = pb.run(pb.write("p.yml", book(tmp_path / "s", f'  - file.copy: {{src: "{src}", dest: "{dest}"}}\n')))
    assert r.code == 1
    assert r.doc["steps"][0]["message"] == f"dest {dest} on localhost is a directory; dest: must name the file to write"
    assert sorted(p.name for p in dest.parent.iterdir()) == ["conf"]


def test_d_command_line_errors_have_one_prefix(pb: Playbooks, tmp_path: Path) -> None:
    path = pb.write("p.yml", book(tmp_path / "s", "  - group.ensure: {group: g}\n"))
    r = pb.run(path, "-e", "store")
    assert r.code == 2 and r.stderr == "mqadmin playbook: -e 'store': expected KEY=VALUE\n"


def test_e_default_run_logs_of_runs_in_one_second_are_separate_files(pb: Playbooks, tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    from typer.testing import CliRunner

    from mqadmin.app import app

    real_gmtime = time.gmtime
    frozen = time.time()
    monkeypatch.setattr(time, "gmtime", lambda *_: real_gmtime(frozen))  # both runs in the same second
    path = pb.write("p.yml", book(tmp_path / "s", "  - group.ensure: {group: g}\n"))
    home = tmp_path / "home"
    for _ in range(2):
        r = CliRunner().invoke(app, ["playbook", "run", str(path)], env={"HOME": str(home), "NAMESRV_ADDR": "",
                                                                        "RMQ_STORE": ""})
        assert r.exit_code == 0, r.output
    logs = sorted((home / ".rmqops" / "runs").iterdir())
    assert len(logs) == 2
    for log in logs:
        assert [e["event"] for e in _log_events(log)] == ["run_start", "step", "run_end"]
