"""SSH transport for host steps, through paramiko: exec and sftp, with host keys checked.

Why strict by default: a playbook that rotates credentials or stops brokers must not talk to an
impostor. The host key must already be in ``known_hosts`` (default ``~/.ssh/known_hosts``);
``trust_on_first_use: true`` accepts an unknown host once and records its key there. A key that
differs from the recorded one is always refused. Only the configured ``key_file`` is offered (no
agent, no key search), so "wrong key" means exactly that. Every failure is one clear line.
"""

from __future__ import annotations

import hashlib
import shlex
import stat
from dataclasses import dataclass
from pathlib import Path

import paramiko

from playbooks.actions.base import CommandResult
from playbooks.errors import TransportError

DEFAULT_TIMEOUT = 10.0


@dataclass(frozen=True)
class SshSpec:
    host: str
    user: str
    key_file: str
    port: int = 22
    known_hosts: str = "~/.ssh/known_hosts"
    trust_on_first_use: bool = False
    timeout: float = DEFAULT_TIMEOUT

    @property
    def address(self) -> str:
        return f"{self.user}@{self.host}:{self.port}"

    @property
    def known_hosts_path(self) -> Path:
        return Path(self.known_hosts).expanduser()


class _TrustOnFirstUse(paramiko.MissingHostKeyPolicy):
    """Accept an unknown host key and record it in known_hosts (only when the playbook says so)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def missing_host_key(self, client: paramiko.SSHClient, hostname: str, key: paramiko.PKey) -> None:
        client.get_host_keys().add(hostname, key.get_name(), key)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path, "a", encoding="ascii") as f:
            f.write(f"{hostname} {key.get_name()} {key.get_base64()}\n")


class SshHost:
    """One SSH connection to a target host, opened on first use; HostOps over exec + sftp."""

    def __init__(self, spec: SshSpec) -> None:
        self.spec = spec
        self.name = f"{spec.host}:{spec.port}"
        self._client: paramiko.SSHClient | None = None
        self._sftp: paramiko.SFTPClient | None = None

    # -- connection ---------------------------------------------------------------------------------
    def connect(self) -> paramiko.SSHClient:
        if self._client is not None:
            return self._client
        spec = self.spec
        client = paramiko.SSHClient()
        known = spec.known_hosts_path
        if known.exists():
            try:
                client.load_host_keys(str(known))
            except (OSError, paramiko.SSHException) as e:
                raise TransportError(f"cannot read known_hosts {known}: {e}") from None
        client.set_missing_host_key_policy(_TrustOnFirstUse(known) if spec.trust_on_first_use
                                           else paramiko.RejectPolicy())
        key_path = Path(spec.key_file).expanduser()
        if not key_path.is_file():
            raise TransportError(f"ssh {spec.address}: key_file {key_path} does not exist")
        try:
            client.connect(spec.host, port=spec.port, username=spec.user, key_filename=str(key_path),
                           timeout=spec.timeout, banner_timeout=spec.timeout, auth_timeout=spec.timeout,
                           allow_agent=False, look_for_keys=False)
        except paramiko.BadHostKeyException as e:
            client.close()
            raise TransportError(
                f"ssh {spec.address}: host key mismatch: the server offered {e.key.get_name()} "
                f"{_fingerprint(e.key)} but {known} records {_fingerprint(e.expected_key)}; refusing to "
                "connect (possible man-in-the-middle; if the host was reinstalled, remove its old line)") from None
        except paramiko.AuthenticationException:
            client.close()
            raise TransportError(f"ssh {spec.address}: authentication failed with key {key_path} "
                                 "(the server does not accept this key for this user)") from None
        except paramiko.SSHException as e:
            client.close()
            text = str(e)
            if "not found in known_hosts" in text:
                raise TransportError(
                    f"ssh {spec.address}: unknown host key (not in {known}); add it "
                    f"(ssh-keyscan -p {spec.port} {spec.host} >> {known}) or set trust_on_first_use: true "
                    "on the target") from None
            raise TransportError(f"ssh {spec.address}: {text}") from None
        except TimeoutError:
            client.close()
            raise TransportError(f"ssh {spec.address}: unreachable (no answer within {spec.timeout:g}s)") from None
        except OSError as e:
            client.close()
            reason = e.strerror or str(e)
            if isinstance(e, paramiko.ssh_exception.NoValidConnectionsError):
                reason = "connection refused"
            raise TransportError(f"ssh {spec.address}: unreachable ({reason})") from None
        self._client = client
        return client

    def close(self) -> None:
        if self._sftp is not None:
            self._sftp.close()
            self._sftp = None
        if self._client is not None:
            self._client.close()
            self._client = None

    def sftp(self) -> paramiko.SFTPClient:
        if self._sftp is None:
            try:
                self._sftp = self.connect().open_sftp()
            except paramiko.SSHException as e:
                raise TransportError(f"ssh {self.spec.address}: sftp is not available: {e}") from None
        return self._sftp

    # -- HostOps ------------------------------------------------------------------------------------
    def run(self, command: str, stdin: bytes | None = None, timeout: float | None = None) -> CommandResult:
        client = self.connect()
        try:
            chan_in, chan_out, chan_err = client.exec_command(command, timeout=timeout)
            if stdin is not None:
                chan_in.write(stdin)
            chan_in.channel.shutdown_write()
            out = chan_out.read()
            err = chan_err.read()
            rc = chan_out.channel.recv_exit_status()
        except TimeoutError:
            raise TransportError(f"ssh {self.spec.address}: command timed out after {timeout:g}s") from None
        except (paramiko.SSHException, OSError) as e:
            raise TransportError(f"ssh {self.spec.address}: {e}") from None
        return CommandResult(rc, out.decode("utf-8", "replace"), err.decode("utf-8", "replace"))

    def exists(self, path: str) -> bool:
        try:
            self.sftp().stat(path)
            return True
        except FileNotFoundError:
            return False
        except OSError as e:
            raise TransportError(f"ssh {self.spec.address}: cannot stat {path}: {e}") from None

    def sha256(self, path: str) -> str | None:
        try:
            with self.sftp().open(path, "rb") as f:
                digest = hashlib.sha256()
                while chunk := f.read(1 << 20):
                    digest.update(chunk)
                return digest.hexdigest()
        except FileNotFoundError:
            return None
        except OSError as e:
            raise TransportError(f"ssh {self.spec.address}: cannot read {path}: {e}") from None

    def put(self, local_path: Path, remote_path: str, mode: int | None) -> None:
        sftp = self.sftp()
        tmp = f"{remote_path}.rmqops-tmp"
        try:
            sftp.put(str(local_path), tmp)
            if mode is not None:
                sftp.chmod(tmp, mode)
            elif (st := local_path.stat()) is not None:
                sftp.chmod(tmp, stat.S_IMODE(st.st_mode))
            sftp.posix_rename(tmp, remote_path)
        except OSError as e:
            raise TransportError(f"ssh {self.spec.address}: cannot write {remote_path}: {e}") from None


def _fingerprint(key: paramiko.PKey) -> str:
    import base64

    digest = hashlib.sha256(key.asbytes()).digest()
    return "SHA256:" + base64.b64encode(digest).decode("ascii").rstrip("=")


def quote(parts: list[str]) -> str:
    return " ".join(shlex.quote(p) for p in parts)
