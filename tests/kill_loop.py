"""What the kill -9 loops (delayed messages, transactions, pop, the traffic mix) share.

Why a module: each runs a writer script in its own process, kills it with SIGKILL after a while and
reads the lines it flushed (each line an acknowledgement), then reads every message of a topic.
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import time
from collections.abc import Iterable
from pathlib import Path

from broker_core.store.codec.message import MessageExt
from broker_core.store.message_store import GetMessageStatus, MessageStore

TESTS = Path(__file__).resolve().parent


def run_and_kill(script: Path, args: list[str], kill_after: float, start_timeout: float = 60.0) -> list[str]:
    """Run ``script args``, SIGKILL it ``kill_after`` seconds after its first line (or when it has
    ended), and return the lines it wrote. A line starting with ``fail`` (a refused put) fails the test.

    Why from the first line, not from the start: the kill is meant to land in traffic; on a loaded
    machine the writer's start-up (imports, recovery) alone took longer than ``kill_after``, so every
    cycle was killed before its first put and the loop tested nothing ("the writer hardly ran")."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(TESTS.parent), os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.Popen([sys.executable, str(script), *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=env)
    first = _first_line(proc, start_timeout)
    try:
        proc.wait(kill_after)
    except subprocess.TimeoutExpired:
        os.kill(proc.pid, signal.SIGKILL)
    out, err = proc.communicate(timeout=10)
    assert proc.returncode == -signal.SIGKILL, f"the writer ended on its own ({proc.returncode}): {err[-2000:]}"
    lines = (first + out).splitlines()
    assert not [line for line in lines if line.startswith("fail")], lines[:3]
    return lines


def _first_line(proc: subprocess.Popen[str], timeout: float) -> str:
    """The writer's first line, read byte by byte from the pipe's descriptor (nothing is left in a
    reader's buffer, so ``communicate`` then gets all the rest); empty if none came within ``timeout``."""
    assert proc.stdout is not None
    fd = proc.stdout.fileno()
    got = bytearray()
    deadline = time.monotonic() + timeout
    while not got.endswith(b"\n"):
        ready, _, _ = select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
        chunk = os.read(fd, 1) if ready else b""
        if not chunk:
            break
        got += chunk
    return got.decode()


def topic_messages(store: MessageStore, topic: str, queue_ids: Iterable[int]) -> list[tuple[int, MessageExt]]:
    """(queueId, message) of every message in those queues of ``topic``, in queue order."""
    out = []
    for qid in queue_ids:
        off = 0
        while True:
            r = store.get_messages(topic, qid, off, 64)
            out += [(qid, m) for m in r.messages]
            if r.status is not GetMessageStatus.FOUND or r.next_begin_offset <= off:
                break
            off = r.next_begin_offset
    return out
