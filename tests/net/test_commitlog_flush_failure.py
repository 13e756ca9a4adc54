"""A commitlog flush that fails (msync: EIO) is logged once, retried, and the broker carries on.

Why: the flush thread had no guard, so one failed msync ended it for good ("Exception in thread
CommitLogFlush"). Under SYNC_FLUSH every later send then waited out syncFlushTimeout (a client with
a shorter timeout retried, and the message was stored twice) until a restart; under ASYNC_FLUSH
nothing was flushed any more. And a SIGTERM while the storage failed ended mqbroker with a
traceback. Now the failure is one line naming the file, "works again" when it ends, the thread
resumes, and a shutdown names the file it could not flush, exits 1 and keeps ``abort``.

The failure is the operating system's: mqbroker runs with an LD_PRELOAD shim whose msync() fails
with EIO while a flag file exists (built here with gcc; skipped without it).
"""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

import pytest
from msync_eio import MsyncEio

from broker_core.broker.broker import Broker
from broker_core.broker.broker_config import BrokerConfig
from tests.net.net_util import Mqbroker, mqadmin

FIRST_FILE = "00000000000000000000"


def _start(store: Path, conf_text: str, eio: MsyncEio, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Mqbroker:
    conf = tmp_path / "broker.conf"
    conf.write_text(conf_text)
    with monkeypatch.context() as m:  # the broker only: mqadmin runs without the shim
        for name, value in eio.env().items():
            m.setenv(name, value)
        return Mqbroker(store, "--grpc-port", "0", config=conf)


def _send(b: Mqbroker) -> tuple[str, float]:
    """``mqadmin sendMessage``'s send status and how long it took."""
    assert b.namesrv_addr is not None
    began = time.monotonic()
    out = mqadmin(b.namesrv_addr, "sendMessage", "-t", "S1", "-p", "x")
    took = time.monotonic() - began
    status = re.search(r"\b(SEND_OK|FLUSH_DISK_TIMEOUT|\w+_NOT_AVAILABLE)\b", out)
    assert status, out
    return status.group(1), took


def _flush_lines(b: Mqbroker) -> list[str]:
    """What the broker said about the commitlog flush (the consume queue flush has its own lines)."""
    return [ln for ln in b.lines if "commitlog flush" in ln or "Exception in thread CommitLogFlush" in ln]


def test_sync_flush_answers_flush_disk_timeout_while_msync_fails_then_send_ok(
        msync_eio: MsyncEio, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    flag = msync_eio.flag
    store = tmp_path / "store"
    b = _start(store, "brokerName=broker-r\nflushDiskType=SYNC_FLUSH\nsyncFlushTimeout=1000\n", msync_eio, tmp_path,
               monkeypatch)
    try:
        assert _send(b)[0] == "SEND_OK"
        flag.touch()
        status, took = _send(b)
        assert status == "FLUSH_DISK_TIMEOUT" and took < 10, (status, took)  # stored, not on disk: said so
        time.sleep(0.5)  # the flush thread keeps retrying meanwhile
        flag.unlink()
        statuses = [_send(b)[0] for _ in range(3)]
        assert statuses == ["SEND_OK"] * 3, statuses + _flush_lines(b)
    finally:
        flag.unlink(missing_ok=True)
        b.stop()
    lines = _flush_lines(b)
    named = f"cannot flush {store}/commitlog/{FIRST_FILE}: Input/output error"
    assert len(lines) == 2, lines  # once, however many retries, then its end
    assert "commitlog flush failed: [Errno 5] " + named in lines[0], lines
    assert "commitlog flush works again" in lines[1], lines


def _positions(b: Mqbroker) -> tuple[int, int]:
    """(commitLogFlushedOffset, commitLogMaxOffset) as ``mqadmin brokerStatus`` shows them."""
    assert b.namesrv_addr is not None and b.broker_addr is not None
    out = mqadmin(b.namesrv_addr, "brokerStatus", "-b", b.broker_addr)
    figures = dict(re.findall(r"^(commitLog(?:Flushed|Max)Offset)\s*:\s*(\d+)", out, re.M))
    return int(figures["commitLogFlushedOffset"]), int(figures["commitLogMaxOffset"])


def test_async_flush_resumes_after_msync_failed(msync_eio: MsyncEio, tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    flag = msync_eio.flag
    store = tmp_path / "store"
    b = _start(store, "brokerName=broker-r\nflushIntervalCommitLog=100\nflushCommitLogLeastPages=0\n", msync_eio,
               tmp_path, monkeypatch)
    try:
        flag.touch()
        assert _send(b)[0] == "SEND_OK"
        time.sleep(1)  # several flush rounds fail
        flushed, written = _positions(b)
        assert flushed < written, (flushed, written)
        flag.unlink()
        deadline = time.monotonic() + 10
        while (p := _positions(b))[0] < p[1] and time.monotonic() < deadline:
            time.sleep(0.2)
        assert p[0] == p[1] > 0, (p, _flush_lines(b))
    finally:
        flag.unlink(missing_ok=True)
        b.stop()
    lines = _flush_lines(b)
    assert len(lines) == 2, lines
    assert f"commitlog flush failed: [Errno 5] cannot flush {store}/commitlog/{FIRST_FILE}" in lines[0], lines
    assert "commitlog flush works again" in lines[1], lines


def test_sigterm_while_msync_fails_names_the_file_exits_1_and_keeps_abort(
        msync_eio: MsyncEio, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    flag = msync_eio.flag
    store = tmp_path / "store"
    b = _start(store, "brokerName=broker-r\nflushDiskType=SYNC_FLUSH\nsyncFlushTimeout=500\n", msync_eio, tmp_path,
               monkeypatch)
    try:
        assert _send(b)[0] == "SEND_OK"
        flag.touch()
        assert _send(b)[0] == "FLUSH_DISK_TIMEOUT"  # in the commitlog, not flushed: shutdown must flush it
    finally:
        code = b.stop()
        flag.unlink(missing_ok=True)
    out = b.output()
    assert code == 1, out[-3000:]
    assert "broker_core/mqbroker.py" not in out, out[-3000:]  # no traceback out of mqbroker's main
    said = [ln for ln in b.lines if ln.startswith("mqbroker: not saved at shutdown: ")]
    assert f"mqbroker: not saved at shutdown: [Errno 5] cannot flush {store}/commitlog/{FIRST_FILE}: " \
           "Input/output error" in said, out[-3000:]
    assert "did NOT shut down cleanly" in out
    assert (store / "abort").exists()
    # the next start recovers as after a crash (the lock was released with the process) and has both
    again = Broker(store, BrokerConfig.from_properties({"brokerName": "broker-r"}))
    try:
        assert again.store.recovery_report.abnormal
        topic = again.get_topic("S1")
        assert topic is not None
        msgs = [m for q in range(topic.read_queue_nums)
                for m in again.pull_message("G", "S1", q, 0, 32).messages]
        assert sorted(bytes(m.body) for m in msgs) == [b"x", b"x"]
    finally:
        again.shutdown()
    assert not (store / "abort").exists()
    assert not os.path.exists(flag)
