"""What the kill -9 loops (delayed messages, transactions, pop, the traffic mix) share.

Why a module: each runs a writer script in its own process, kills it with SIGKILL after a while and
reads the lines it flushed (each line an acknowledgement), then reads every message of a topic.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path

from broker_core.store.codec.message import MessageExt
from broker_core.store.message_store import GetMessageStatus, MessageStore

TESTS = Path(__file__).resolve().parent


def run_and_kill(script: Path, args: list[str], kill_after: float) -> list[str]:
    """Run ``script args``, SIGKILL it ``kill_after`` seconds after the start (or when it has ended),
    and return the lines it wrote. A line starting with ``fail`` (a refused put) fails the test."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(TESTS.parent), os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.Popen([sys.executable, str(script), *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=env)
    try:
        proc.wait(kill_after)
    except subprocess.TimeoutExpired:
        os.kill(proc.pid, signal.SIGKILL)
    out, err = proc.communicate(timeout=10)
    assert proc.returncode == -signal.SIGKILL, f"the writer ended on its own ({proc.returncode}): {err[-2000:]}"
    lines = out.splitlines()
    assert not [line for line in lines if line.startswith("fail")], lines[:3]
    return lines


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
