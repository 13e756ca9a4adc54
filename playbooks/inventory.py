"""Targets and where a step runs: a store directory here, a cluster, or an SSH host.

Why: a step names a target; the runner asks that target's executor to run the action and gets an
``Outcome`` back, whatever the transport. A store target runs actions in this process over an
embedded Admin. A cluster target (``namesrv: host:port``) runs them here over a remote Admin. An SSH
target runs Admin actions *on the host* (``mqadmin playbook step`` over exec, arguments on stdin so
secrets never appear on a command line) and host actions (shell, file.copy) here through exec/sftp.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import stat
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import date, datetime
from pathlib import Path
from typing import Any

from broker_core.store.store_dir import expand_store_path, not_a_store_reason
from mqadmin.admin import Admin
from mqadmin.errors import AdminError, NotAStoreError
from playbooks.actions.base import Action, CommandResult, HostOps, Outcome
from playbooks.actions.store import STEP_DEADLINE_ACTIONS
from playbooks.errors import StepError, TransportError
from playbooks.ssh import SshHost, SshSpec


@dataclass(frozen=True)
class Target:
    """A rendered target: exactly one of ``store`` (alone), ``namesrv``, or ``ssh`` (+ its store/mqadmin).
    ``create``: the store may be made new where there is none (the target's ``create: true``)."""

    name: str
    store: str | None = None
    config: str | None = None
    namesrv: str | None = None
    ssh: SshSpec | None = None
    mqadmin: str = "mqadmin"
    create: bool = False

    @property
    def kind(self) -> str:
        return "ssh" if self.ssh else "cluster" if self.namesrv else "store"


CREATE_HINT = "give the target create: true"


def missing_store_message(store_dir: Path, target: str | None, hint: str | None = CREATE_HINT) -> str:
    """mqadmin's refusal of a write on a path that is not a store, said for a playbook target:
    ``target local: /x is not a store directory (it does not exist) (give ... to make a new store there)``."""
    prefix = f"target {target}: " if target else ""
    return f"{prefix}{not_a_store_reason(store_dir)}" + (f" ({hint} to make a new store there)" if hint else "")


DEFAULT_ADMIN_STEP_TIMEOUT = 600.0
"""Seconds an Admin step without a ``timeout:`` of its own may take on an SSH host (as a shell step's default)."""
REMOTE_WAIT_SLACK = 600.0
"""Beyond a waiting step's own ``timeout:``: opening and closing the store on the host (recovery)."""


# ------------------------------------------------------------------------------------------- this host

class LocalHost:
    """HostOps on this machine."""

    name = "localhost"

    def run(self, command: str, stdin: bytes | None = None, timeout: float | None = None) -> CommandResult:
        """The command in a process group of its own, stopped whole when it times out (or the run is
        interrupted): killing only /bin/sh left ``(sleep 3; touch f)`` running after "timed out"."""
        p = subprocess.Popen(["/bin/sh", "-c", command], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, start_new_session=True)
        try:
            out, err = p.communicate(stdin or b"", timeout=timeout)
        except subprocess.TimeoutExpired:
            _stop_group(p)
            raise StepError(f"command timed out after {timeout:g}s; stopped its process group {p.pid}") from None
        except BaseException:  # Ctrl-C: in a session of its own the command would not get the SIGINT
            _stop_group(p)
            raise
        return CommandResult(p.returncode, out.decode("utf-8", "replace"), err.decode("utf-8", "replace"))

    def exists(self, path: str) -> bool:
        return Path(path).expanduser().exists()

    def sha256(self, path: str) -> str | None:
        """The file's digest, None when there is none; IsADirectoryError for a directory (a caller
        about to write there must say so before it promises a change)."""
        import hashlib

        p = Path(path).expanduser()
        if p.is_dir():
            raise IsADirectoryError(path)
        if not p.is_file():
            return None
        return hashlib.sha256(p.read_bytes()).hexdigest()

    def mode(self, path: str) -> int | None:
        try:
            return stat.S_IMODE(Path(path).expanduser().stat().st_mode)
        except FileNotFoundError:
            return None

    def chmod(self, path: str, mode: int) -> None:
        try:
            Path(path).expanduser().chmod(mode)
        except OSError as e:
            raise StepError(f"cannot set mode {mode:04o} on {path}: {e.strerror or e}") from None

    def put(self, local_path: Path, remote_path: str, mode: int | None) -> None:
        """Write via a temp file and rename, so the destination is never half written; a failed
        write leaves no temp file behind; IsADirectoryError when ``remote_path`` is a directory."""
        dest = Path(remote_path).expanduser()
        if dest.is_dir():
            raise IsADirectoryError(str(dest))
        tmp = dest.with_name(dest.name + ".rmqops-tmp")
        try:
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(local_path, tmp)
            tmp.chmod(mode if mode is not None else stat.S_IMODE(local_path.stat().st_mode))
            with open(tmp, "rb") as f:
                os.fsync(f.fileno())
            os.replace(tmp, dest)
        except OSError as e:
            tmp.unlink(missing_ok=True)
            raise StepError(f"cannot write {dest}: {e.strerror or e}") from None


def _stop_group(p: subprocess.Popen[bytes]) -> None:
    """SIGKILL to the command's process group (its children too), then reap it."""
    import signal

    try:
        os.killpg(p.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    p.communicate()


# ------------------------------------------------------------------------------------------- contexts

class _RunContext:
    """What every ActionContext of a real run shares: no store of its own unless it sets one, and the
    real clock (a step's waits and timeouts are real time on this machine)."""

    store_dir: Path | None = None
    config_file: str | None = None

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)

    def now(self) -> float:
        return time.monotonic()


class StoreContext(_RunContext):
    """ActionContext over a store directory on this machine (also what `playbook step` uses on a host)."""

    def __init__(self, store_dir: Path, config_file: str | None, host: HostOps | None = None,
                 create: bool = False, target: str | None = None) -> None:
        # `playbook step --store '~/s'` on a host: the runner quotes the path, mqadmin expands it
        self.store_dir = expand_store_path(store_dir)
        self.config_file = config_file
        self._host = host or LocalHost()
        self.create = create  # the target's create: true (`playbook step --create` on a host)
        self.target = target

    @contextmanager
    def admin(self, writes: bool) -> Iterator[Admin]:
        from mqadmin.connect import open_local_admin

        if not self.store_dir.exists() and not self.create:
            # As mqadmin without --create: a typo in store: must not build a new store (nor plan against
            # an empty one). NotFoundError: broker.start/stop read that as "no broker holds it".
            raise NotAStoreError(missing_store_message(self.store_dir, self.target))
        if not writes and not self.store_dir.exists():
            # A store that does not exist yet (create: true) is planned against as an empty one, made in a temporary
            # directory (nothing is created at the target). It is made with a writable Admin, then read
            # through a read-only one like any other plan: a writable Admin holds the store lock, and
            # would report a broker active (brokerActive) on a store no broker holds.
            with tempfile.TemporaryDirectory(prefix="rmqops-plan-") as empty:
                with open_local_admin(empty, self.config_file, writes=True, create=True) as maker:
                    maker.broker_status()  # the Admin opens its store on first use: this makes it
                with open_local_admin(empty, self.config_file, writes=False) as admin:
                    yield admin
            return
        # Only a target with create: true sets a new store up (mqadmin's --create). A failed step changes
        # nothing: the Admin takes away a store it built, as it does for mqadmin.
        with open_local_admin(self.store_dir, self.config_file, writes=writes, create=writes and self.create) as admin:
            yield admin

    def host(self) -> HostOps:
        return self._host


class ClusterContext(_RunContext):
    """ActionContext over a running cluster (remote mode)."""

    def __init__(self, namesrv: str) -> None:
        self.namesrv = namesrv

    @contextmanager
    def admin(self, writes: bool) -> Iterator[Admin]:
        from mqadmin.connect import open_remote_admin

        with open_remote_admin(self.namesrv) as admin:
            yield admin

    def host(self) -> HostOps:
        raise StepError(f"a cluster target ({self.namesrv}) has no host to run commands on; use an ssh target")


class SshHostContext(_RunContext):
    """Host actions on an SSH target: only ``host()`` is there; Admin actions run on the host itself."""

    def __init__(self, host: SshHost) -> None:
        self._host = host

    @contextmanager
    def admin(self, writes: bool) -> Iterator[Admin]:
        raise StepError("host actions do not use an Admin; Admin actions run on the host through mqadmin")
        yield  # pragma: no cover - a generator for contextmanager

    def host(self) -> HostOps:
        return self._host


# ------------------------------------------------------------------------------------------- executors

def run_guarded(fn: Any) -> Outcome:
    """An action's failures as a failed Outcome with one line (never a traceback in the report)."""
    try:
        return fn()
    except (StepError, TransportError, AdminError) as e:
        return Outcome("failed", message=e.message)
    except Exception as e:  # noqa: BLE001 - one line per failed step, whatever went wrong
        return Outcome("failed", message=f"{type(e).__name__}: {e}")


class Executors:
    """Runs actions on targets; keeps one SSH connection per target for the whole run."""

    def __init__(self) -> None:
        self._ssh: dict[SshSpec, SshHost] = {}

    def close(self) -> None:
        for host in self._ssh.values():
            host.close()
        self._ssh.clear()

    def ssh_host(self, spec: SshSpec) -> SshHost:
        if spec not in self._ssh:
            self._ssh[spec] = SshHost(spec)
        return self._ssh[spec]

    def execute(self, target: Target, action: Action, args: dict[str, Any], check: bool) -> Outcome:
        if target.ssh is not None:
            host = self.ssh_host(target.ssh)
            if action.placement == "host":
                return run_guarded(lambda: action.run(SshHostContext(host), args, check))
            return run_guarded(lambda: self._remote_step(host, target, action, args, check))
        if target.namesrv:
            return run_guarded(lambda: action.run(ClusterContext(target.namesrv or ""), args, check))
        store = Path(target.store or "").expanduser()
        context = StoreContext(store, target.config, create=target.create, target=target.name)
        return run_guarded(lambda: action.run(context, args, check))

    @staticmethod
    def _remote_step(host: SshHost, target: Target, action: Action, args: dict[str, Any], check: bool) -> Outcome:
        if not target.store:
            raise StepError(f"{action.name} on ssh target {target.name} needs store: (the store path on that host)")
        # --stop-on-eof: the step ends when this side closes the channel (Ctrl-C here), not only at its end
        command = f"{target.mqadmin} playbook step --stop-on-eof --store {shell_path(target.store)}"
        if target.create:
            command += " --create"
        if target.config:
            command += f" --config {shell_path(target.config)}"
        if check:
            command += " --check"
        payload = json.dumps({"action": action.name, "args": args}, default=_json_default).encode() + b"\n"
        timeout = remote_step_deadline(action, args)
        result = host.run(command, stdin=payload, timeout=timeout, keep_stdin_open=True)
        for line in reversed(result.stdout.strip().splitlines()):
            if line.startswith("{"):
                try:
                    return Outcome.from_dict(json.loads(line))
                except ValueError:
                    break
        last = (result.stderr.strip() or result.stdout.strip() or "(no output)").splitlines()[-1]
        raise StepError(f"`{target.mqadmin} playbook step` on {host.name} exited with {result.rc}: {last}")


def remote_step_deadline(action: Action, args: dict[str, Any]) -> float:
    """Seconds a whole Admin step on an SSH host may take before it is stopped there. Why a total
    deadline: a host whose disk hangs (NFS) must fail its step, not hold the play. ``timeout:`` of
    store.verify / store.rebuild is that deadline; for a step that waits by itself (wait.lag,
    broker.start/stop) it is the wait, and the step gets REMOTE_WAIT_SLACK more to open and close
    its store; any other Admin step gets DEFAULT_ADMIN_STEP_TIMEOUT."""
    timeout = args.get("timeout")
    if not isinstance(timeout, int | float) or isinstance(timeout, bool):
        return DEFAULT_ADMIN_STEP_TIMEOUT
    return float(timeout) if action.name in STEP_DEADLINE_ACTIONS else float(timeout) + REMOTE_WAIT_SLACK


def shell_path(path: str) -> str:
    """``path`` quoted for the remote shell with a leading ``~``/``~/`` left outside the quotes, so
    the host's shell expands it to the target user's home (as ``store: ~/s`` means on a store target)."""
    if path == "~":
        return "~"
    if path.startswith("~/"):
        return "~/" + shlex.quote(path[2:]) if path[2:] else "~/"
    return shlex.quote(path)


def _json_default(value: Any) -> Any:
    if isinstance(value, datetime | date):
        return value.isoformat()
    return str(value)
