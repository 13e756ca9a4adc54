"""SSH targets and the files around the connection: a damaged known_hosts, a known_hosts that
trust_on_first_use cannot write, and a file.copy whose connection is lost half way.

Each failure must be one line naming the file at fault (and the host), never a bare paramiko
exception, and a copy cut off must not leave its temporary file on the host. The module runs its own
real OpenSSH server on a port of 33400-33499 (it drops that server's sessions).
"""

from __future__ import annotations

import os
import signal
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from .conftest import Playbooks
from .sshd import Sshd, available, keygen, start_sshd
from .test_ssh import host_book
from .test_ssh_robustness import _children, restart

pytestmark = pytest.mark.timeout(120)

PORTS = range(33400, 33500)


def port_in_range(skip: int | None = None) -> int:
    """A port of this module's range that nothing listens on (``skip``: one already taken)."""
    for port in PORTS:
        if port == skip:
            continue
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError("no free port in 33400-33499")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sshd]:
    why = available()
    if why:
        pytest.skip(why)
    sshd = start_sshd(tmp_path_factory.mktemp("sshd"), port=port_in_range())
    try:
        yield sshd
    finally:
        sshd.stop()


def only_step(pb: Playbooks, path: Path) -> dict:
    r = pb.run(path)
    assert r.code == 1, r.stdout
    [step] = r.doc["steps"]
    assert step["status"] == "failed"
    return step


# -- a damaged known_hosts names itself (no server needed: it is read before connecting) -----------------

@pytest.mark.parametrize(("content", "why"), [
    (b"# mine\n[127.0.0.1]:32699 ssh-ed25519 AAAA!!!notbase64\n",
     ":2: not a valid host key line (its key is not base64: "),
    (b"[127.0.0.1]:1 ssh-ed25519 AAAAC3NzaC1lZDI1NTE5\n",
     ":1: not a valid ssh-ed25519 key (The key must be exactly 32 bytes long)"),
    (b"# ok\n\n\xbb\xff\x00\x13binary",
     ":3: not text (bytes that are not UTF-8; a line is: host, key type, base64 key)"),
    (b"@revoked * ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl\n",
     ":1: @revoked lines are not supported (this SSH client cannot honour them; give the target a "
     "known_hosts file without them)"),
])
def test_a_damaged_known_hosts_is_one_line_naming_the_file_and_line(pb: Playbooks, tmp_path: Path,
                                                                    content: bytes, why: str) -> None:
    known = tmp_path / "kh"
    known.write_bytes(content)
    key = keygen(tmp_path / "id_any")
    port = port_in_range()  # closed: the file must be refused before any connection
    step = only_step(pb, pb.write("p.yml", f'''name: kh
targets:
  host:
    ssh: {{host: 127.0.0.1, port: {port}, user: root, key_file: "{key}", known_hosts: "{known}"}}
steps:
  - shell: {{target: host, cmd: 'true'}}
'''))
    assert step["message"].startswith(f"ssh root@127.0.0.1:{port}: known_hosts {known}{why}"), step["message"]
    assert "\n" not in step["message"]
    assert known.read_bytes() == content


# -- trust_on_first_use with a known_hosts that cannot be written -------------------------------------------

def test_trust_on_first_use_names_the_known_hosts_it_cannot_write(pb: Playbooks, server: Sshd,
                                                                  tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory\n")
    known = blocker / "known_hosts"
    marker = tmp_path / "ran"
    step = only_step(pb, pb.write("p.yml", host_book(server, tmp_path / "s", f"  - shell: {{target: host, cmd: "
                                                                             f"'touch {marker}'}}\n",
                                                     known_hosts=known, tofu=True)))
    assert step["message"] == (f"ssh {server.user}@127.0.0.1:{server.port}: trust_on_first_use: cannot record "
                               f"the host key in known_hosts {known} (File exists: {blocker})"), step["message"]
    assert not marker.exists()  # the key was not recorded, so it was not trusted either


# -- a copy whose connection is lost -------------------------------------------------------------------------

def drop_sessions_when(server: Sshd, appears: Path, within: float = 30, listener_too: bool = False) -> threading.Thread:
    """A thread that SIGKILLs every session process of ``server`` as soon as ``appears`` exists; the
    listening sshd stays (the client can connect again) unless ``listener_too``."""
    assert server.proc is not None
    pid = server.proc.pid

    def watch() -> None:
        deadline = time.monotonic() + within
        while not appears.exists() and time.monotonic() < deadline:
            time.sleep(0.001)
        sessions = _children(pid)
        if listener_too:
            os.kill(pid, signal.SIGKILL)
            # Reaped means its listening socket is closed: a client reconnecting once the sessions
            # die is refused, not queued on a socket about to vanish (reset by peer).
            server.proc.wait(10)
        for child in sessions:  # stop them all first, so none finishes the copy while others die
            os.kill(child, signal.SIGSTOP)
        for child in sessions:
            os.kill(child, signal.SIGKILL)

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    return thread


def test_a_copy_cut_off_names_host_and_file_and_removes_its_temporary_file(pb: Playbooks, server: Sshd,
                                                                          tmp_path: Path) -> None:
    src = tmp_path / "big.bin"
    with open(src, "wb") as f:
        f.write(os.urandom(1 << 20) * 96)  # 96 MB: the copy takes far longer than the watcher needs
    dest = tmp_path / "host" / "big.bin"
    tmp = dest.with_name("big.bin.rmqops-tmp")
    watcher = drop_sessions_when(server, tmp)
    step = only_step(pb, pb.write("p.yml", host_book(server, tmp_path / "s", f"  - file.copy: {{target: host, "
                                                                             f'src: "{src}", dest: "{dest}"}}\n')))
    watcher.join(10)
    assert step["message"] == (f"ssh {server.user}@127.0.0.1:{server.port}: the connection to the host was lost "
                               f"while copying {src} to {dest} (the temporary file was removed)"), step["message"]
    assert not tmp.exists()
    assert not dest.exists()


def test_a_copy_cut_off_names_the_temporary_file_it_could_not_remove(pb: Playbooks, server: Sshd,
                                                                     tmp_path: Path) -> None:
    src = tmp_path / "big.bin"
    with open(src, "wb") as f:
        f.write(os.urandom(1 << 20) * 96)
    dest = tmp_path / "host" / "big.bin"
    tmp = dest.with_name("big.bin.rmqops-tmp")
    watcher = drop_sessions_when(server, tmp, listener_too=True)  # the host is gone: no clean-up possible
    try:
        step = only_step(pb, pb.write("p.yml", host_book(server, tmp_path / "s", f"  - file.copy: {{target: host, "
                                                                                 f'src: "{src}", dest: "{dest}"}}\n')))
        watcher.join(10)
        assert step["message"] == (
            f"ssh {server.user}@127.0.0.1:{server.port}: the connection to the host was lost while copying {src} "
            f"to {dest} (the temporary file {tmp} may be left on the host: unreachable (connection refused))"
        ), step["message"]
        assert tmp.exists() and not dest.exists()
    finally:
        restart(server)
