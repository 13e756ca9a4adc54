"""verifyStore beside a live writer gives no false alarms (issue 11 item 12).

Why: an operator runs ``mqadmin verifyStore`` while the broker writes. The read-only open sees the
commitlog, the consume queues and the index files at slightly different moments, and the writer
keeps adding records, units and index entries (and new files) meanwhile; comparing those views
reported index-bad-offset / index-missing-entry / beyond-log "damage" that was only the writer
being ahead. verifyStore must check only a consistent snapshot of what was dispatched.

The writer is a real second process (``store_util.py writer``) with tiny files, so commitlog, CQ
and index files roll every few messages; the test runs verifyStore repeatedly beside it (bounded
in rounds and time) and stops the writer by its pid, also on failure.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from store_util import small_config

from broker_core.store.message_store import MessageStore
from broker_core.store.verify import verify_store

STORE_UTIL = Path(__file__).with_name("store_util.py")
ROUNDS = 15


def test_verify_beside_a_live_writer_reports_nothing(tmp_path: Path) -> None:
    root = tmp_path / "store"
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[2]) + os.pathsep
               + os.environ.get("PYTHONPATH", ""))
    with open(tmp_path / "acks", "w") as acks:
        writer = subprocess.Popen([sys.executable, str(STORE_UTIL), "writer", str(root), "0"], stdout=acks,
                                  stderr=subprocess.PIPE, env=env)
    try:
        deadline = time.monotonic() + 30
        while (tmp_path / "acks").stat().st_size < 20_000:  # a few hundred messages, many files
            assert writer.poll() is None, writer.stderr.read().decode() if writer.stderr else ""
            assert time.monotonic() < deadline, "the writer wrote too little"
            time.sleep(0.05)
        problems = []
        checked = 0
        end = time.monotonic() + 60
        for _ in range(ROUNDS):
            if time.monotonic() > end:
                break
            assert writer.poll() is None, "the writer stopped"
            store = MessageStore(root, small_config(), read_only=True).open()
            try:
                report = verify_store(store)
            finally:
                store.shutdown()
            checked += 1
            problems += [f"{i.kind} {i.where} {i.offset}: {i.detail}" for i in report.issues]
            assert report.records > 0 and report.index_entries > 0
        assert checked >= 5
        assert not problems, f"{len(problems)} false alarm(s) in {checked} runs: {problems[:5]}"
    finally:
        if writer.poll() is None:
            os.kill(writer.pid, signal.SIGKILL)
        writer.wait(timeout=10)


def test_verify_of_a_crashed_store_still_finds_a_damaged_index_entry(tmp_path: Path) -> None:
    """The snapshot bound only leaves out what the writer was still adding: older damage is reported."""
    root = tmp_path / "store"
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[2]) + os.pathsep
               + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.run([sys.executable, str(STORE_UTIL), "writer", str(root), "300"], capture_output=True,
                          env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr.decode()[-2000:]
    (root / "abort").write_text("4242")  # as a writer killed after its last put leaves it
    store = MessageStore(root, small_config(), read_only=True).open()
    try:
        assert verify_store(store).issues == []
    finally:
        store.shutdown()
    first = sorted((root / "index").iterdir())[0]
    cfg = small_config()
    entry_1 = 40 + cfg.max_hash_slot_num * 4 + 20  # header, hash slots, entry 0 is unused
    with open(first, "r+b") as f:
        f.seek(entry_1)
        old = f.read(4)
        f.seek(entry_1)
        f.write(bytes(b ^ 0x5A for b in old))
    store = MessageStore(root, small_config(), read_only=True).open()
    try:
        kinds = {i.kind for i in verify_store(store).issues}
    finally:
        store.shutdown()
    assert "index-key-mismatch" in kinds, kinds
