"""``broker.start`` / ``broker.stop``: mqbroker as a process on the target's host.

Why here and not in Admin: starting and stopping a process is about a machine, not about a broker's
state. These actions run on the host that holds the store (inside ``mqadmin playbook step`` on an
SSH target). "Running" means the store lock is held (Admin's brokerActive), so a broker started by
hand, or a Java one, counts too. ``broker.stop`` finds the lock's owner through ``/proc/locks``,
checks it is a broker, sends SIGTERM and waits until the lock is free (SIGKILL only with
``force: true``); ``broker.start`` runs ``mqbroker --store`` (``-c`` the step's or the target's config)
detached and waits until it holds the lock, reporting the tail of its log if it exits instead. It
says which config it starts with, and refuses to start without one a broker whose last boot line in
its log names one: it would come back with RocketMQ's defaults (DefaultCluster/broker-a, an embedded
name server), out of its cluster.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

from mqadmin.errors import NotFoundError
from playbooks.actions.base import ActionContext, Change, Outcome, Param, poll, seconds
from playbooks.errors import StepError

LOG_NAME = "mqbroker.log"
BROKER_MARKERS = ("mqbroker", "BrokerStartup")


def broker_running(ctx: ActionContext) -> bool:
    try:
        with ctx.admin(writes=False) as admin:
            return admin.broker_status().get("brokerActive") == "true"
    except NotFoundError:
        return False


def _store(ctx: ActionContext) -> Path:
    if ctx.store_dir is None:
        raise StepError("this action needs a target with a store: directory")
    return ctx.store_dir


def lock_owner(store_dir: Path) -> int | None:
    """The PID holding the POSIX lock on ``<store>/lock`` (from /proc/locks), if any."""
    try:
        inode = os.stat(store_dir / "lock").st_ino
        lines = Path("/proc/locks").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        fields = line.split()
        if "->" in fields:  # a waiter, not the holder
            continue
        if len(fields) >= 6 and fields[1] == "POSIX" and fields[5].rsplit(":", 1)[-1] == str(inode):
            return int(fields[4])
    return None


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return ""


def _reap(pid: int) -> None:
    """Collect the exit status when the broker was our own child (no zombie left behind)."""
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass


class BrokerStop:
    name = "broker.stop"
    params = {"timeout": Param((int, float), default=60, parse=seconds), "force": Param((bool,), default=False)}
    placement = "admin"

    def run(self, ctx: ActionContext, args: dict[str, Any], check: bool) -> Outcome:
        store = _store(ctx)
        if not broker_running(ctx):
            return Outcome("ok", message=f"no broker holds {store}")
        pid = lock_owner(store)
        if pid is None:
            raise StepError(f"{store} is locked but its owner process cannot be found in /proc/locks")
        cmdline = _cmdline(pid)
        if not any(m in cmdline for m in BROKER_MARKERS):
            raise StepError(f"process {pid} holds {store}/lock but is not a broker ({cmdline[:120]!r}); not stopping it")
        change = Change(f"broker on {store}", "running", True, False)
        if check:
            return Outcome("changed", [change], f"would stop broker pid {pid}")
        os.kill(pid, signal.SIGTERM)
        timeout = float(args.get("timeout") or 60)

        def stopped() -> tuple[bool, str]:
            _reap(pid)
            return not broker_running(ctx), f"broker pid {pid} still holds {store} after {timeout:g}s"

        done, message = poll(ctx, timeout, 0.2, stopped)
        if not done and args.get("force"):
            os.kill(pid, signal.SIGKILL)
            done, message = poll(ctx, 10, 0.2, stopped)
        if not done:
            return Outcome("failed", [change], message, {"pid": pid})
        return Outcome("changed", [change], f"stopped broker pid {pid}", {"pid": pid})


class BrokerStart:
    name = "broker.start"
    params = {"timeout": Param((int, float), default=60, parse=seconds),
              "config": Param((str,), help="broker config on the host (default: the target's config:)"),
              "log_file": Param((str,), help=f"where its output goes (default: <store>/{LOG_NAME})")}
    placement = "admin"

    def run(self, ctx: ActionContext, args: dict[str, Any], check: bool) -> Outcome:
        store = _store(ctx)
        if broker_running(ctx):
            return Outcome("ok", message=f"a broker already holds {store}")
        change = Change(f"broker on {store}", "running", False, True)
        log_path = Path(args.get("log_file") or store / LOG_NAME)
        config = args.get("config") or ctx.config_file
        if not config:
            previous = previous_config(log_path)
            if previous is not None:
                raise StepError(
                    f"the broker on {store} last started with config {previous} ({log_path}); this target has no "
                    f"config: (nor the step), and without it the broker would come back as DefaultCluster/broker-a "
                    f"with an embedded name server, out of its cluster: give the target config: {previous}")
        started_with = f"config {config}" if config else "no config file (RocketMQ's defaults)"
        if check:
            return Outcome("changed", [change], f"would start mqbroker on {store} with {started_with}")
        store.mkdir(parents=True, exist_ok=True)
        cmd = [sys.executable, "-m", "broker_core.mqbroker", "--store", str(store)]
        if config:
            cmd += ["-c", str(config)]
        with open(log_path, "ab") as log:
            proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                    start_new_session=True, close_fds=True)
        timeout = float(args.get("timeout") or 60)

        def started() -> tuple[bool, str]:
            if proc.poll() is not None:
                return True, f"mqbroker exited with {proc.returncode}"
            return broker_running(ctx), f"mqbroker (pid {proc.pid}) did not take the store lock within {timeout:g}s"

        done, message = poll(ctx, timeout, 0.2, started)
        if proc.returncode is not None or not done:
            if proc.returncode is None:
                proc.terminate()
            tail = _tail(log_path)
            return Outcome("failed", [change], f"{message}: {tail}", {"log_file": str(log_path)})
        return Outcome("changed", [change], f"started mqbroker pid {proc.pid} on {store} with {started_with}",
                       {"pid": proc.pid, "log_file": str(log_path), "config": str(config) if config else None})


# mqbroker's boot line names its config file: "... (cluster C, store S, config /x/broker.conf, pid 1)"
_BOOT_CONFIG = re.compile(r"The broker\[.*\] boot success\. .*, config (.+), pid \d+\)$")


def previous_config(log_path: Path) -> str | None:
    """The config file the last broker that logged to ``log_path`` started with (its last boot line);
    None when it had none, or the log says nothing (a broker started by hand logs elsewhere)."""
    last: str | None = None
    try:
        with open(log_path, encoding="utf-8", errors="replace") as f:
            for line in f:
                if "boot success" in line and (m := _BOOT_CONFIG.search(line.rstrip())):
                    last = m.group(1)
    except OSError:
        return None
    return None if last in (None, "none") else last


def _tail(path: Path) -> str:
    try:
        lines = path.read_text(errors="replace").strip().splitlines()
    except OSError:
        return "(no log)"
    return " | ".join(lines[-3:]) or "(empty log)"
