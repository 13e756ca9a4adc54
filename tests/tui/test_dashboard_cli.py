"""``mqadmin dashboard`` as a command: bad targets fail in one line; on a terminal it starts and quits."""

from __future__ import annotations

import os
import pty
import re
import select
import subprocess
import sys
import time
from pathlib import Path

from typer.testing import CliRunner

from mqadmin.app import app

REPO = Path(__file__).resolve().parent.parent.parent


def _invoke(*args: str):  # noqa: ANN202
    return CliRunner().invoke(app, ["dashboard", *args], env={"NAMESRV_ADDR": "", "RMQ_STORE": ""})


def test_missing_store_is_one_line_and_exit_3(tmp_path):
    result = _invoke("--store", str(tmp_path / "nope"))
    assert result.exit_code == 3
    assert result.stderr.strip().count("\n") == 0
    assert "does not exist" in result.stderr


def test_unreachable_name_server_is_one_line_and_exit_1():
    result = _invoke("-n", "127.0.0.1:1")  # port 1: nothing listens there, never a shared fixed port
    assert result.exit_code == 1
    assert result.stderr.strip().count("\n") == 0
    assert "127.0.0.1:1" in result.stderr


def test_bad_refresh_and_screen_are_usage_errors(golden_store):
    store = golden_store("store-basic")
    assert _invoke("--store", str(store.dir), "--refresh", "0").exit_code == 2
    bad = _invoke("--store", str(store.dir), "--config", str(store.conf), "--screen", "nope")
    assert bad.exit_code == 2 and "--screen" in bad.stderr


def test_dashboard_starts_on_a_terminal_and_q_quits(golden_store):
    store = golden_store("store-timer")
    env = dict(os.environ, PYTHONPATH=str(REPO), TERM="xterm-256color", COLUMNS="120", LINES="40",
               NAMESRV_ADDR="", RMQ_STORE="")
    leader, follower = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "mqadmin.app", "dashboard", "--store", str(store.dir),
                             "--config", str(store.conf), "--screen", "timers"],
                            stdin=follower, stdout=follower, stderr=follower, env=env, close_fds=True)
    os.close(follower)
    seen = b""
    try:
        deadline = time.monotonic() + 60
        # The count is as of the wall clock: the golden timers (due 2026-11-22/23) leave the wheel's 7-day
        # window as real time passes, so "6 pending" held only until 2026-11-29 04:05 UTC. The count
        # itself is asserted with a fixed clock in test_dashboard_screens and test_dashboard_admin.
        wheel_line = re.compile(rb"Timer wheel: \d+ pending")
        while not wheel_line.search(seen) and time.monotonic() < deadline:
            ready, _, _ = select.select([leader], [], [], 0.5)
            if ready:
                try:
                    seen += os.read(leader, 65536)
                except OSError:
                    break
        assert wheel_line.search(seen), seen[-2000:]
        os.write(leader, b"q")
        deadline = time.monotonic() + 30
        while proc.poll() is None and time.monotonic() < deadline:  # keep draining: a full pty blocks the app
            ready, _, _ = select.select([leader], [], [], 0.2)
            if ready:
                try:
                    os.read(leader, 65536)
                except OSError:
                    break
        assert proc.wait(timeout=5) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(leader)
