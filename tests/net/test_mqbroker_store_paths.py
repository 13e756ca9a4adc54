"""Where the commitlog goes for the path settings of real Apache broker.conf files, through the real
``mqbroker`` and ``mqadmin`` processes.

Why: ``~`` was expanded in storePathRootDir but not in storePathCommitLog (the commitlog went to
``<cwd>/~/store/commitlog``); ``mqbroker --store B -c broker.conf`` with the file's
``storePathCommitLog=A/commitlog`` under its ``storePathRootDir=A`` moved everything to B but the
commitlog; Apache 5.x's multi-path ``storePathCommitLog=/d1/commitlog,/d2/commitlog`` became one
directory named ``commitlog,...``. Every broker is stopped by PID.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

from net_util import REPO

from tests.waiting import wait_for

BASE = "brokerClusterName=DefaultCluster\nbrokerName=broker-a\n"


class Mqbroker:
    """``mqbroker <args> --listenPort 0 --namesrvPort 0 --grpc-port 0`` in ``cwd`` with ``home`` as $HOME;
    output read by a thread into ``lines``."""

    def __init__(self, cwd: Path, home: Path, *args: str) -> None:
        cmd = [sys.executable, "-m", "broker_core.mqbroker", *args, "--listenPort", "0", "--namesrvPort", "0",
               "--grpc-port", "0"]
        env = dict(os.environ, PYTHONPATH=str(REPO), PYTHONUNBUFFERED="1", HOME=str(home))
        env.pop("RMQ_STORE", None)
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
                                     cwd=cwd)
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))

    def booted(self) -> None:
        def found() -> bool:
            if self.proc.poll() is not None and not any("broker[" in x and "boot success" in x for x in self.lines):
                raise AssertionError("mqbroker exited:\n" + "\n".join(self.lines))
            return any("broker[" in x and "boot success" in x for x in self.lines)

        wait_for(found, "the broker's boot line", 60)

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                os.kill(self.proc.pid, signal.SIGKILL)
                self.proc.wait(10)
        self._reader.join(5)


def run_until_booted(cwd: Path, home: Path, *args: str) -> list[str]:
    broker = Mqbroker(cwd, home, *args)
    try:
        broker.booted()
    finally:
        broker.stop()
    return broker.lines


def mqadmin(cwd: Path, home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(REPO), HOME=str(home))
    for var in ("NAMESRV_ADDR", "RMQ_STORE"):
        env.pop(var, None)
    return subprocess.run([sys.executable, "-m", "mqadmin.app", *args], capture_output=True, text=True, env=env,
                          cwd=cwd, timeout=120)


def dirs(tmp_path: Path) -> tuple[Path, Path]:
    work, home = tmp_path / "work", tmp_path / "home"
    work.mkdir()
    home.mkdir()
    return work, home


def test_tilde_in_store_path_commit_log_is_the_home_directory(tmp_path: Path) -> None:
    work, home = dirs(tmp_path)
    conf = work / "broker.conf"
    conf.write_text(BASE + "storePathRootDir=~/store\nstorePathCommitLog=~/store/commitlog\n")
    run_until_booted(work, home, "-c", str(conf))
    assert (home / "store" / "commitlog").is_dir()
    assert not (work / "~").exists()  # was <cwd>/~/store/commitlog


def test_store_flag_moves_a_commit_log_that_lies_in_the_files_root(tmp_path: Path) -> None:
    """README's ``mqbroker --store ./b -c b.conf`` with an Apache broker.conf (root A, commitlog A/commitlog):
    the commitlog goes with the store to B, not left behind in A."""
    work, home = dirs(tmp_path)
    a, b = tmp_path / "A", tmp_path / "B"
    conf = work / "broker.conf"
    conf.write_text(BASE + f"storePathRootDir={a}\nstorePathCommitLog={a}/commitlog\n")
    run_until_booted(work, home, "--store", str(b), "-c", str(conf))
    assert (b / "commitlog").is_dir() and not a.exists()


def test_a_commit_log_outside_the_files_root_stays_and_the_boot_output_names_it(tmp_path: Path) -> None:
    work, home = dirs(tmp_path)
    a, b, disk2 = tmp_path / "A", tmp_path / "B", tmp_path / "disk2" / "commitlog"
    conf = work / "broker.conf"
    conf.write_text(BASE + f"storePathRootDir={a}\nstorePathCommitLog={disk2}\n")
    lines = run_until_booted(work, home, "--store", str(b), "-c", str(conf))
    assert disk2.is_dir() and not (b / "commitlog").exists() and not a.exists()
    named = [x for x in lines if "commitlog" in x.lower() and str(disk2) in x]
    assert len(named) == 1 and "storePathCommitLog" in named[0], lines


def test_mqadmin_store_with_config_reads_the_moved_commit_log(tmp_path: Path) -> None:
    """``mqadmin --store B --config broker.conf`` takes the commitlog where the broker put it (B/commitlog),
    not the file's A/commitlog."""
    work, home = dirs(tmp_path)
    a, b = tmp_path / "A", tmp_path / "B"
    conf = work / "broker.conf"
    conf.write_text(BASE + f"storePathRootDir={a}\nstorePathCommitLog={a}/commitlog\n")
    target = ("--store", str(b), "--config", str(conf))
    r = mqadmin(work, home, "updateTopic", "-t", "T", "-c", "DefaultCluster", *target, "--create")
    assert r.returncode == 0, r.stdout + r.stderr
    r = mqadmin(work, home, "sendMessage", "-t", "T", "-p", "hello", *target)
    assert r.returncode == 0, r.stdout + r.stderr
    assert any((b / "commitlog").iterdir()) and not a.exists()


def test_multi_path_commit_log_is_refused_in_one_line(tmp_path: Path) -> None:
    work, home = dirs(tmp_path)
    d1, d2 = tmp_path / "d1" / "commitlog", tmp_path / "d2" / "commitlog"
    conf = work / "broker.conf"
    conf.write_text(BASE + f"storePathRootDir={tmp_path}/store\nstorePathCommitLog={d1},{d2}\n")
    broker = Mqbroker(work, home, "-c", str(conf))
    try:
        assert broker.proc.wait(60) == 1
    finally:
        broker.stop()
    errors = [x for x in broker.lines if x.startswith("mqbroker:")]
    assert len(errors) == 1, broker.lines
    assert "storePathCommitLog" in errors[0] and str(conf) in errors[0] and "multi-path" in errors[0]
    assert "not supported" in errors[0]
    assert not (tmp_path / "d1").exists() and not (tmp_path / "store").exists()
    r = mqadmin(work, home, "topicList", "--config", str(conf))
    assert r.returncode != 0
    lines = [x for x in (r.stdout + r.stderr).splitlines() if x.strip()]
    assert len(lines) == 1 and "storePathCommitLog" in lines[0] and "multi-path" in lines[0], lines
    assert str(conf) in lines[0]
