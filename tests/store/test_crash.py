"""kill -9 a SYNC_FLUSH writer at random moments; recovery must keep every acknowledged message.

Why: SYNC_FLUSH promises that an acknowledged put survives a crash, and abnormal recovery (the
``abort`` file is left behind) must rebuild consume queues and the index so that they never point
past the recovered commitlog tail. The writer is a real separate process killed with SIGKILL.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

from store_util import make_msg, small_config, verify_consistency

from broker_core.store.message_store import GetMessageStatus, MessageStore
from broker_core.store.store_config import SYNC_FLUSH

HERE = Path(__file__).resolve().parent
ROUNDS = 5


def run_and_kill(root: Path, acks_before_kill: int) -> list[tuple[int, int, str, int, int, str]]:
    """Start the writer, read acknowledgements, SIGKILL it after ``acks_before_kill`` of them."""
    proc = subprocess.Popen([sys.executable, str(HERE / "store_util.py"), "writer", str(root), "0"],
                            stdout=subprocess.PIPE, text=True, bufsize=1)
    acks = []
    try:
        deadline = time.monotonic() + 10
        while len(acks) < acks_before_kill and time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            assert line.startswith("ack "), line
            _, phy, size, topic, qid, qoff, key = line.split()
            acks.append((int(phy), int(size), topic, int(qid), int(qoff), key))
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)
        # acknowledgements already in the pipe were acknowledged before the kill: they count too
        for line in proc.stdout.read().splitlines():
            if line.startswith("ack ") and len(line.split()) == 7:
                _, phy, size, topic, qid, qoff, key = line.split()
                acks.append((int(phy), int(size), topic, int(qid), int(qoff), key))
        proc.stdout.close()
    assert proc.returncode == -signal.SIGKILL
    return acks


def test_kill_minus_nine_keeps_acknowledged_messages(tmp_path: Path) -> None:
    seed = random.randrange(1 << 30)
    rnd = random.Random(seed)
    root = tmp_path / "store"
    all_acks: list[tuple[int, int, str, int, int, str]] = []
    t0 = time.monotonic()
    for rnd_no in range(ROUNDS):
        acks = run_and_kill(root, rnd.randrange(5, 150))
        assert acks, f"round {rnd_no} (seed {seed}): the writer acknowledged nothing"
        all_acks.extend(acks)
        assert (root / "abort").exists()
        store = MessageStore(root, small_config(flush_disk_type=SYNC_FLUSH)).open()
        try:
            rep = store.recovery_report
            assert rep.abnormal, f"seed {seed}"
            by_phy = verify_consistency(store)
            for phy, size, topic, qid, qoff, key in all_acks:
                m = by_phy.get(phy)
                assert m is not None, f"seed {seed} round {rnd_no}: acknowledged record at {phy} lost"
                assert (m.store_size, m.topic, m.queue_id, m.queue_offset, m.keys) == (size, topic, qid, qoff, key)
            for phy, _size, topic, qid, qoff, key in rnd.sample(all_acks, min(30, len(all_acks))):
                assert [x.commit_log_offset for x in store.query_message(topic, key)] == [phy], (seed, key)
                r = store.get_messages(topic, qid, qoff, 1)
                assert r.status is GetMessageStatus.FOUND and r.messages[0].commit_log_offset == phy
            # keep writing after recovery: offsets continue where the recovered queues end
            for qid in (0, 1):
                nxt = store.get_max_offset_in_queue("CrashA", qid)
                r = store.put_message(make_msg("CrashA", qid, b"after-crash", key=f"after{rnd_no}-{qid}"))
                assert r.ok and r.queue_offset == nxt and r.wrote_offset >= rep.process_offset
                assert [m.body for m in store.query_message("CrashA", f"after{rnd_no}-{qid}")] == [b"after-crash"]
            verify_consistency(store)
        finally:
            store.shutdown()
        assert not (root / "abort").exists()
    # a last clean open: normal recovery, same data
    store = MessageStore(root, small_config(), read_only=True).open()
    try:
        assert not store.recovery_report.abnormal
        by_phy = verify_consistency(store)
        assert all(a[0] in by_phy for a in all_acks)
    finally:
        store.shutdown()
    assert time.monotonic() - t0 < 30
