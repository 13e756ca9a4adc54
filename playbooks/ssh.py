"""SSH transport for host steps, through paramiko: exec and sftp, with host keys checked.

Why strict by default: a playbook that rotates credentials or stops brokers must not talk to an
impostor. The host key must already be in ``known_hosts`` (default ``~/.ssh/known_hosts``);
``trust_on_first_use: true`` accepts an unknown host once and records its key there. A key that
differs from the recorded one is always refused. Only the configured ``key_file`` is offered (no
agent, no key search), so "wrong key" means exactly that. Every failure is one clear line.
"""

from __future__ import annotations

import hashlib
import logging
import posixpath
import re
import select
import shlex
import socket
import stat
import time
from dataclasses import dataclass
from pathlib import Path

import paramiko
from paramiko.hostkeys import HostKeyEntry, InvalidHostKey

from playbooks.actions.base import CommandResult
from playbooks.errors import TransportError

DEFAULT_TIMEOUT = 10.0
# paramiko logs a traceback when its transport thread fails (a port that closes on us); the failure
# is reported as one line by connect(), so with no logging configured that traceback must not reach
# stderr (Python's last-resort handler). A configured root logger still sees it.
logging.getLogger("paramiko").addHandler(logging.NullHandler())
KEY_TYPES: tuple[type[paramiko.PKey], ...] = (paramiko.Ed25519Key, paramiko.ECDSAKey, paramiko.RSAKey)
PGID_MARK = b"rmqops-pgid "
"""First line of every remote command's stdout: its process group, so a timed-out command can be stopped."""
READ_CHUNK = 1 << 16
POLL_SECONDS = 0.5
STOP_GRACE_POLLS = 10
"""After SIGTERM, how many 0.2 s polls a timed-out command's process group gets before SIGKILL."""


@dataclass(frozen=True)
class SshSpec:
    host: str
    user: str
    key_file: str
    port: int = 22
    known_hosts: str = "~/.ssh/known_hosts"
    trust_on_first_use: bool = False
    timeout: float = DEFAULT_TIMEOUT

    def __post_init__(self) -> None:
        if not 1 <= self.port <= 65535:
            raise ValueError(f"port must be 1-65535, got {self.port}")

    @property
    def address(self) -> str:
        return f"{self.user}@{self.host}:{self.port}"

    @property
    def known_hosts_path(self) -> Path:
        return Path(self.known_hosts).expanduser()


def _filename_of(error: OSError, path: Path) -> str:
    """``: <file>`` when the OSError is about another file than ``path`` (a parent that is not a directory)."""
    return f": {error.filename}" if error.filename and str(error.filename) != str(path) else ""


class _TrustOnFirstUse(paramiko.MissingHostKeyPolicy):
    """Accept an unknown host key and record it in known_hosts (only when the playbook says so)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def missing_host_key(self, client: paramiko.SSHClient, hostname: str, key: paramiko.PKey) -> None:
        """Record the key, then accept it. A known_hosts that cannot be written is a failure naming it
        (the host answered: an OSError here must not read as an unreachable host), and the key is not
        accepted, so the next run does not trust a key it never recorded."""
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with open(self.path, "a", encoding="ascii") as f:
                f.write(f"{hostname} {key.get_name()} {key.get_base64()}\n")
        except OSError as e:
            raise TransportError(f"trust_on_first_use: cannot record the host key in known_hosts {self.path} "
                                 f"({e.strerror or e}{_filename_of(e, self.path)})") from None
        client.get_host_keys().add(hostname, key.get_name(), key)


class SshHost:
    """One SSH connection to a target host, opened on first use; HostOps over exec + sftp."""

    def __init__(self, spec: SshSpec) -> None:
        self.spec = spec
        self.name = f"{spec.host}:{spec.port}"
        self._client: paramiko.SSHClient | None = None
        self._sftp: paramiko.SFTPClient | None = None

    # -- connection ---------------------------------------------------------------------------------
    def connect(self) -> paramiko.SSHClient:
        """The live connection, opened again when the last one died (sshd restarted, a dropped network
        between steps): a cached client whose transport is gone would fail every later step on the host,
        retries included."""
        if self._client is not None and self._alive():
            return self._client
        self.close()
        spec = self.spec
        client = paramiko.SSHClient()
        known = spec.known_hosts_path
        _load_known_hosts(client, spec, known)
        client.set_missing_host_key_policy(_TrustOnFirstUse(known) if spec.trust_on_first_use
                                           else paramiko.RejectPolicy())
        key_path = Path(spec.key_file).expanduser()
        pkey = _load_key(spec, key_path)
        sock = _open_socket(spec)
        try:
            client.connect(spec.host, port=spec.port, username=spec.user, pkey=pkey, sock=sock,
                           timeout=spec.timeout, banner_timeout=spec.timeout, auth_timeout=spec.timeout,
                           allow_agent=False, look_for_keys=False)
        except TransportError as e:  # _TrustOnFirstUse could not record the key
            client.close()
            raise TransportError(f"ssh {spec.address}: {e.message}") from None
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
            handshake_done = _handshake_done(client)
            client.close()
            text = str(e)
            if not handshake_done:
                # paramiko gives up waiting for the key exchange silently, then fails later with its own
                # "No existing session": what happened is a server that answered and then went quiet.
                raise TransportError(
                    f"ssh {spec.address}: the SSH handshake did not complete within {spec.timeout:g}s (the "
                    "server sent its banner, then stopped answering: an overloaded or stuck sshd)") from None
            if "not found in known_hosts" in text:
                raise TransportError(
                    f"ssh {spec.address}: unknown host key (not in {known}); add it "
                    f"(ssh-keyscan -p {spec.port} {spec.host} >> {known}) or set trust_on_first_use: true "
                    "on the target") from None
            raise TransportError(f"ssh {spec.address}: {text}") from None
        except TimeoutError:
            client.close()
            raise TransportError(f"ssh {spec.address}: unreachable (no answer within {spec.timeout:g}s)") from None
        except OSError as e:  # the connection dropped during the handshake (_open_socket made it)
            client.close()
            raise TransportError(f"ssh {spec.address}: unreachable ({e.strerror or e})") from None
        self._client = client
        return client

    def close(self) -> None:
        """Close the connection; one that already died closes quietly (paramiko's sftp close sends a
        message, EOFError on a dead transport: closing must not fail the step or the run's end)."""
        if self._sftp is not None:
            try:
                self._sftp.close()
            except (OSError, EOFError, paramiko.SSHException):
                pass
            self._sftp = None
        if self._client is not None:
            self._client.close()
            self._client = None

    def _alive(self) -> bool:
        transport = self._client.get_transport() if self._client is not None else None
        return transport is not None and transport.is_active()

    def sftp(self) -> paramiko.SFTPClient:
        if self._sftp is not None and not self._alive():
            self.close()  # its connection died: connect() below opens a new one
        if self._sftp is None:
            try:
                self._sftp = self.connect().open_sftp()
            except paramiko.SSHException as e:
                raise TransportError(f"ssh {self.spec.address}: sftp is not available: {e}") from None
        return self._sftp

    # -- HostOps ------------------------------------------------------------------------------------
    def run(self, command: str, stdin: bytes | None = None, timeout: float | None = None,
            keep_stdin_open: bool = False) -> CommandResult:
        """Run ``command``; ``keep_stdin_open``: do not send EOF after ``stdin`` (a command that stops
        when its stdin closes then stops when this side goes away). Interrupted (Ctrl-C), the channel
        is closed at once.

        ``timeout`` is a deadline for the whole command, as on a local target (paramiko's own timeout
        is per read: a command that keeps printing never hit it). stdout and stderr are read together,
        so neither can fill its window and stall the other. A command past its deadline is stopped on
        the host: sshd sends no signal to a command without a terminal when its channel closes, so its
        process group (the one sshd made for it with setsid) is killed over a second channel."""
        deadline = None if timeout is None else time.monotonic() + timeout
        chan = self._open_channel()
        streams = _Streams()
        try:
            chan.exec_command(_in_process_group(command))
            if stdin is not None:
                chan.sendall(stdin)
            if not keep_stdin_open:
                chan.shutdown_write()
            streams.collect(chan, deadline)
            rc = self._exit_status(chan, deadline)
        except KeyboardInterrupt:
            chan.close()
            raise
        except TimeoutError:
            chan.close()
            stopped = self._stop(streams.pgid())
            raise TransportError(f"ssh {self.spec.address}: command timed out after {timeout:g}s "
                                 f"({stopped})") from None
        except (paramiko.SSHException, OSError, EOFError) as e:
            chan.close()
            raise TransportError(f"ssh {self.spec.address}: {e}") from None
        out, err = streams.output()
        return CommandResult(rc, out.decode("utf-8", "replace"), err.decode("utf-8", "replace"))

    def _open_channel(self) -> paramiko.Channel:
        """A new session channel. A connection that turns out dead when the channel is opened (its
        transport thread has not noticed yet) is opened again once: nothing ran on it, so this retry
        cannot run a command twice."""
        for attempt in (1, 2):
            transport = self.connect().get_transport()
            try:
                if transport is None:
                    raise paramiko.SSHException("SSH session not active")
                return transport.open_session(timeout=self.spec.timeout)
            except (paramiko.SSHException, OSError, EOFError) as e:
                self.close()
                if attempt == 2:
                    raise TransportError(f"ssh {self.spec.address}: cannot open a session: {e}") from None
        raise AssertionError("unreachable")  # pragma: no cover

    def _exit_status(self, chan: paramiko.Channel, deadline: float | None) -> int:
        """The command's exit status. paramiko reports a channel closed without one as -1: when the
        connection died, that is a lost host, not a command that "exited with -1"."""
        if not chan.status_event.wait(None if deadline is None else max(0.0, deadline - time.monotonic())):
            raise TimeoutError
        if chan.exit_status != -1:
            return chan.exit_status
        transport = chan.get_transport()
        transport.join(1.0)  # it unlinks its channels before it marks itself inactive
        if not transport.is_active():
            raise TransportError(f"ssh {self.spec.address}: the connection to the host was lost during the "
                                 "step (the command may have run in part)")
        return -1

    def _stop(self, pgid: int | None) -> str:
        """SIGTERM to a timed-out command's process group, SIGKILL if it is still there about 2 s later;
        what happened, for the step's message."""
        if pgid is None:
            return "it did not report its process group; it may still run on the host"
        script = (f"kill -TERM -- -{pgid} 2>/dev/null || exit 0; i=0; while [ $i -lt {STOP_GRACE_POLLS} ]; do "
                  f"sleep 0.2; kill -0 -- -{pgid} 2>/dev/null || exit 0; i=$((i+1)); done; "
                  f"kill -KILL -- -{pgid} 2>/dev/null; exit 0")
        try:
            chan = self._open_channel()
            try:
                chan.settimeout(self.spec.timeout + STOP_GRACE_POLLS)
                chan.exec_command(script)
                chan.shutdown_write()
                while chan.recv(READ_CHUNK):
                    pass
            finally:
                chan.close()
        except (TransportError, paramiko.SSHException, OSError, EOFError) as e:
            return f"could not stop it on the host: {e}"
        return f"stopped on the host: process group {pgid}"

    def exists(self, path: str) -> bool:
        try:
            self.sftp().stat(_sftp_path(path))
            return True
        except FileNotFoundError:
            return False
        except OSError as e:
            raise TransportError(f"ssh {self.spec.address}: cannot stat {path}: {e}") from None

    def sha256(self, path: str) -> str | None:
        """The file's digest, None when there is none; IsADirectoryError for a directory (sftp opens
        one without complaint and then fails with a bare "Failure")."""
        self._refuse_directory(path)
        try:
            with self.sftp().open(_sftp_path(path), "rb") as f:
                digest = hashlib.sha256()
                while chunk := f.read(1 << 20):
                    digest.update(chunk)
                return digest.hexdigest()
        except FileNotFoundError:
            return None
        except OSError as e:
            raise TransportError(f"ssh {self.spec.address}: cannot read {path}: {e}") from None

    def _refuse_directory(self, path: str) -> None:
        try:
            st_mode = self.sftp().stat(_sftp_path(path)).st_mode
        except FileNotFoundError:
            return
        except OSError as e:
            raise TransportError(f"ssh {self.spec.address}: cannot stat {path}: {e}") from None
        if st_mode is not None and stat.S_ISDIR(st_mode):
            raise IsADirectoryError(path)

    def mode(self, path: str) -> int | None:
        try:
            st_mode = self.sftp().stat(_sftp_path(path)).st_mode
        except FileNotFoundError:
            return None
        except OSError as e:
            raise TransportError(f"ssh {self.spec.address}: cannot stat {path}: {e}") from None
        return stat.S_IMODE(st_mode) if st_mode is not None else None

    def chmod(self, path: str, mode: int) -> None:
        try:
            self.sftp().chmod(_sftp_path(path), mode)
        except OSError as e:
            raise TransportError(f"ssh {self.spec.address}: cannot set mode {mode:04o} on {path}: {e}") from None

    def put(self, local_path: Path, remote_path: str, mode: int | None) -> None:
        """Write via a temporary file and a rename, creating missing parent directories, as the local
        target's put does (a playbook must not behave differently on a host); IsADirectoryError when
        ``remote_path`` is a directory. A failed write, the connection lost included, removes its
        temporary file (over a new connection when the old one died) or names it when it cannot."""
        sftp = self.sftp()
        path = _sftp_path(remote_path)
        tmp = f"{path}.rmqops-tmp"
        self._refuse_directory(remote_path)  # IsADirectoryError, as sha256: the caller names the step's field
        writing = False
        try:
            _make_parents(sftp, path)
            writing = True
            sftp.put(str(local_path), tmp)
            if mode is not None:
                sftp.chmod(tmp, mode)
            elif (st := local_path.stat()) is not None:
                sftp.chmod(tmp, stat.S_IMODE(st.st_mode))
            sftp.posix_rename(tmp, path)
        except (OSError, EOFError, paramiko.SSHException) as e:
            # paramiko reports a lost connection as EOFError or "Server connection dropped", naming
            # neither host nor file; an OSError on a dead transport (a reset socket) is one too
            lost = isinstance(e, EOFError | paramiko.SSHException) or not self._alive()
            what = (f"the connection to the host was lost while copying {local_path} to {remote_path}" if lost
                    else f"cannot write {remote_path}: {_write_problem(e)}")
            if lost:
                self.close()  # its transport may not know yet: the clean-up must connect again
            left = self._remove_temporary(tmp) if writing else None
            if left is not None:
                cleanup = f" (the temporary file {tmp} may be left on the host: {left})"
            else:  # after a lost connection, say so: the user may wonder about a half-written file
                cleanup = " (the temporary file was removed)" if lost and writing else ""
            raise TransportError(f"ssh {self.spec.address}: {what}{cleanup}") from None

    def _remove_temporary(self, tmp: str) -> str | None:
        """Remove ``tmp`` (a failed put's), connecting again if the connection died; None when it is
        gone, else why it may remain."""
        try:
            self.sftp().remove(tmp)
        except FileNotFoundError:
            return None
        except TransportError as e:  # the host cannot be reached again
            return e.message.removeprefix(f"ssh {self.spec.address}: ")
        except (OSError, EOFError, paramiko.SSHException) as e:
            return f"{e.strerror or e}" if isinstance(e, OSError) else str(e) or "the connection was lost again"
        return None


class _Streams:
    """stdout and stderr of one remote command, read together as they arrive."""

    def __init__(self) -> None:
        self.out = bytearray()
        self.err = bytearray()

    def collect(self, chan: paramiko.Channel, deadline: float | None) -> None:
        """Read both streams until the command's end of output; TimeoutError at ``deadline``."""
        while True:
            if deadline is not None and time.monotonic() >= deadline:
                raise TimeoutError
            if chan.recv_ready():
                self.out += chan.recv(READ_CHUNK)
            elif chan.recv_stderr_ready():
                self.err += chan.recv_stderr(READ_CHUNK)
            elif chan.eof_received or chan.closed:
                return
            else:
                wait = POLL_SECONDS if deadline is None else min(POLL_SECONDS, deadline - time.monotonic())
                select.select([chan], [], [], max(0.0, wait))

    def pgid(self) -> int | None:
        """The process group the command's wrapper printed first (None when it never got that far)."""
        line, newline, _ = bytes(self.out).partition(b"\n")
        if not newline or not line.startswith(PGID_MARK):
            return None
        digits = line[len(PGID_MARK):]
        return int(digits) if digits.isdigit() and int(digits) > 1 else None

    def output(self) -> tuple[bytes, bytes]:
        """(stdout without the wrapper's first line, stderr)."""
        out = bytes(self.out)
        if out.startswith(PGID_MARK):
            out = out.partition(b"\n")[2]
        return out, bytes(self.err)


def _in_process_group(command: str) -> str:
    """``command`` run by the login shell after one line naming its process group. sshd starts every
    command without a terminal in a new session (setsid), so the login shell's pid ``$$`` is the group
    of everything the command starts, short of daemons that leave it on purpose (mqbroker, nohup …&
    with setsid). ``eval`` keeps the login shell's own syntax, as a plain exec request would."""
    return f"printf '{PGID_MARK.decode()}%s\\n' \"$$\"; eval {shlex.quote(command)}"


def _handshake_done(client: paramiko.SSHClient) -> bool:
    """Whether the key exchange finished (the server's host key is known)."""
    transport = client.get_transport()
    return transport is not None and transport.host_key is not None


def _sftp_path(path: str) -> str:
    """``~`` and ``~/x`` as the local target reads them: the SFTP server does not expand ``~``, and it
    resolves a relative path against the login (home) directory, so ``~/x`` is sent as ``x``."""
    if path == "~":
        return "."
    return path[2:] or "." if path.startswith("~/") else path


def _make_parents(sftp: paramiko.SFTPClient, path: str) -> None:
    """mkdir -p of ``path``'s parent over SFTP."""
    missing = []
    parent = posixpath.dirname(path)
    while parent not in ("", "/", "."):
        try:
            sftp.stat(parent)
            break
        except FileNotFoundError:
            missing.append(parent)
            parent = posixpath.dirname(parent)
    for directory in reversed(missing):
        sftp.mkdir(directory)


def _load_known_hosts(client: paramiko.SSHClient, spec: SshSpec, known: Path) -> None:
    """The recorded host keys, when ``known`` exists. A damaged file is refused (host keys are what
    the connection trusts) with its name and line: paramiko raises InvalidHostKey, ValueError or
    UnicodeDecodeError for it, none of them saying which file or line."""
    if not known.exists():
        return
    where = f"ssh {spec.address}: known_hosts {known}"
    try:
        client.load_host_keys(str(known))
    except IsADirectoryError:
        raise TransportError(f"{where}: is a directory, not a file") from None
    except OSError as e:
        raise TransportError(f"{where}: cannot read it ({e.strerror or e})") from None
    except Exception:  # noqa: BLE001 - whatever paramiko raised, the line at fault says more
        raise TransportError(f"{where}{_known_hosts_fault(known)}") from None


def _known_hosts_fault(path: Path) -> str:
    """``:N: what is wrong`` for the first line of ``path`` that paramiko cannot load (read again line
    by line as paramiko does, since its errors carry at most the line's text)."""
    try:
        data = path.read_bytes()
    except OSError as e:
        return f": cannot read it ({e.strerror or e})"
    for number, raw in enumerate(data.split(b"\n"), 1):
        try:
            line = raw.decode("utf-8").strip()
        except UnicodeDecodeError:
            return f":{number}: not text (bytes that are not UTF-8; a line is: host, key type, base64 key)"
        if not line or line.startswith("#"):
            continue
        if line.startswith("@"):
            return (f":{number}: {line.split()[0]} lines are not supported (this SSH client cannot honour them; "
                    "give the target a known_hosts file without them)")
        try:
            HostKeyEntry.from_line(line, number)
        except InvalidHostKey as e:
            return f":{number}: not a valid host key line (its key is not base64: {str(e.exc).splitlines()[0]})"
        except paramiko.SSHException:
            continue  # paramiko skips such a line too
        except Exception as e:  # noqa: BLE001 - the key's own parser: ValueError, struct.error, ...
            return f":{number}: not a valid {line.split()[1]} key ({e})"
    return ": paramiko cannot read it as a known_hosts file"


def _load_key(spec: SshSpec, key_path: Path) -> paramiko.PKey:
    """The key_file as a private key, before connecting: an encrypted key is refused by paramiko before
    any authentication (it is not "the server does not accept this key"), and a file that is not a key
    must name itself rather than surface as a bare decoding error."""
    if not key_path.is_file():
        raise TransportError(f"ssh {spec.address}: key_file {key_path} does not exist")
    why = "not an OpenSSH, PEM RSA or ECDSA private key"
    for key_type in KEY_TYPES:
        try:
            return key_type.from_private_key_file(str(key_path))
        except paramiko.PasswordRequiredException:
            raise TransportError(f"ssh {spec.address}: {key_path}: the key is protected by a passphrase (not "
                                 "supported: use an unencrypted deploy key for the playbook)") from None
        except (paramiko.SSHException, ValueError, IndexError, TypeError) as e:  # UnicodeDecodeError is one
            if isinstance(e, UnicodeDecodeError):
                why = "binary data, not a key in text form"
        except OSError as e:
            raise TransportError(f"ssh {spec.address}: cannot read key_file {key_path}: {e.strerror or e}") from None
    raise TransportError(f"ssh {spec.address}: {key_path}: not a private key file ({why})")


def _open_socket(spec: SshSpec) -> socket.socket:
    """Connect, then wait for the server's first bytes (peeked, left for paramiko): a port that closes
    the connection or never sends an SSH banner gets one clear line, not paramiko's traceback or its
    "No existing session"."""
    where = f"ssh {spec.address}"
    try:
        sock = socket.create_connection((spec.host, spec.port), timeout=spec.timeout)
    except TimeoutError:
        raise TransportError(f"{where}: unreachable (no answer within {spec.timeout:g}s)") from None
    except ConnectionRefusedError:
        raise TransportError(f"{where}: unreachable (connection refused)") from None
    except OSError as e:
        raise TransportError(f"{where}: unreachable ({e.strerror or e})") from None
    try:
        first = sock.recv(4, socket.MSG_PEEK)
    except TimeoutError:
        sock.close()
        raise TransportError(f"{where}: did not answer as an SSH server (no banner in "
                             f"{spec.timeout:g}s)") from None
    except OSError as e:
        sock.close()
        raise TransportError(f"{where}: unreachable ({e.strerror or e})") from None
    if not first:
        sock.close()
        raise TransportError(f"{where}: closed the connection without an SSH banner "
                             "(not an SSH server, or sshd refused more connections: MaxStartups)")
    return sock


def _fingerprint(key: paramiko.PKey) -> str:
    import base64

    digest = hashlib.sha256(key.asbytes()).digest()
    return "SHA256:" + base64.b64encode(digest).decode("ascii").rstrip("=")


def quote(parts: list[str]) -> str:
    return " ".join(shlex.quote(p) for p in parts)


_SHORT_PUT = re.compile(r"size mismatch in put!\s+(\d+) != (\d+)")


def _write_problem(e: OSError) -> str:
    """Why a put failed, in the words the local target uses. paramiko writes pipelined and ignores the
    server's failed writes, then finds the file short: "size mismatch in put!  2097152 != 3000000".
    A file the server took only part of is a full disk (or a full quota) on the host, so say that."""
    m = _SHORT_PUT.search(str(e))
    if m and int(m.group(1)) < int(m.group(2)):
        return f"No space left on device on the host (it took {m.group(1)} of {m.group(2)} bytes)"
    return e.strerror or str(e)
