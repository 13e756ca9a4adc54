"""A real OpenSSH server for the playbook SSH tests, on 127.0.0.1, with its own keys and config.

Why real: host key checking, key authentication, exec and sftp are exactly what can go wrong between
paramiko and OpenSSH; a fake server would agree with whatever the client does. The server runs in the
foreground (-D -e) from the test's own sshd_config, on a free port, and is stopped by PID.
"""

from __future__ import annotations

import os
import pwd
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

SSHD = "/usr/sbin/sshd"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def keygen(path: Path, kind: str = "ed25519") -> Path:
    subprocess.run(["ssh-keygen", "-q", "-t", kind, "-N", "", "-C", "rmqops-test", "-f", str(path)], check=True)
    return path


def available() -> str | None:
    """None when the tests can run, else why not."""
    if not Path(SSHD).exists():
        return f"{SSHD} is missing (Debian openssh-server; .ci/run installs it)"
    if shutil.which("ssh-keygen") is None:
        return "ssh-keygen is missing (openssh-client)"
    if os.geteuid() != 0:
        return "sshd needs root here (privilege separation directory /run/sshd)"
    return None


@dataclass
class Sshd:
    root: Path
    port: int
    user: str
    user_key: Path
    wrong_key: Path
    host_key: Path
    known_hosts: Path
    known_hosts_mismatch: Path
    proc: subprocess.Popen | None = None

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.kill(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=10)


def start_sshd(root: Path, port: int | None = None) -> Sshd:
    """A running sshd on ``port`` (a free one when None), its keys and known_hosts under ``root``."""
    root.mkdir(parents=True, exist_ok=True)
    Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)
    host_key = keygen(root / "ssh_host_ed25519_key")
    keygen(root / "other_host_ed25519_key")
    user_key = keygen(root / "id_user")
    wrong_key = keygen(root / "id_wrong")
    authorized = root / "authorized_keys"
    authorized.write_text((root / "id_user.pub").read_text())
    authorized.chmod(0o600)
    port = port or free_port()
    user = pwd.getpwuid(os.geteuid()).pw_name
    config = root / "sshd_config"
    config.write_text("\n".join([
        f"Port {port}", "ListenAddress 127.0.0.1", f"HostKey {host_key}", f"PidFile {root / 'sshd.pid'}",
        f"AuthorizedKeysFile {authorized}", "PubkeyAuthentication yes", "PasswordAuthentication no",
        "KbdInteractiveAuthentication no", "PermitRootLogin prohibit-password", "UsePAM no", "StrictModes no",
        "Subsystem sftp internal-sftp", "LogLevel VERBOSE", "MaxStartups 50", "",
    ]))
    known = root / "known_hosts"
    known.write_text(f"[127.0.0.1]:{port} {(root / 'ssh_host_ed25519_key.pub').read_text().split()[0]} "
                     f"{(root / 'ssh_host_ed25519_key.pub').read_text().split()[1]}\n")
    mismatch = root / "known_hosts_mismatch"
    other = (root / "other_host_ed25519_key.pub").read_text().split()
    mismatch.write_text(f"[127.0.0.1]:{port} {other[0]} {other[1]}\n")
    log = open(root / "sshd.log", "wb")  # noqa: SIM115 - the server's lifetime
    proc = subprocess.Popen([SSHD, "-D", "-e", "-f", str(config)], stdout=log, stderr=subprocess.STDOUT,
                            stdin=subprocess.DEVNULL)
    server = Sshd(root, port, user, user_key, wrong_key, host_key, known, mismatch, proc)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"sshd exited with {proc.returncode}: {(root / 'sshd.log').read_text()[-2000:]}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1) as s:
                if s.recv(4).startswith(b"SSH-"):
                    return server
        except OSError:
            time.sleep(0.1)
    server.stop()
    raise RuntimeError("sshd did not accept connections within 20s")
