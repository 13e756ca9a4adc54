"""What the kill -9 loops (delayed messages, transactions, pop, the traffic mix) share.

Why a module: each runs a writer script in its own process, kills it with SIGKILL after a while and
reads the lines it flushed (each line an acknowledgement), then reads every message of a topic.
"""

from __future__ import annotations

import atexit
import json
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


# Run as ``python -c PREWARM script tests_dir``: the script's imports first (its module code under a name
# that is not ``__main__``, with the paths its ``__main__`` block would add; a failure there only means
# less is cached), then it waits for one JSON line of arguments on stdin and runs as the script would.
PREWARM = """
import json, os, runpy, sys
script, tests_dir = sys.argv[1], sys.argv[2]
path = list(sys.path)
sys.path[:0] = [os.path.dirname(script), tests_dir, os.path.dirname(tests_dir)]
try:
    runpy.run_path(script, run_name="__prewarm__")
except Exception:
    pass
sys.path[:] = [os.path.dirname(script), *path]
line = sys.stdin.readline()
if not line:
    sys.exit(0)
sys.argv = [script, *json.loads(line)]
runpy.run_path(script, run_name="__main__")
"""

_spares: dict[Path, subprocess.Popen[str]] = {}


def _spawn(script: Path) -> subprocess.Popen[str]:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(TESTS.parent), os.environ.get("PYTHONPATH", "")]))
    return subprocess.Popen([sys.executable, "-c", PREWARM, str(script), str(TESTS)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


@atexit.register
def _drop_spares() -> None:
    """A spare left by a loop that failed half-way: it would exit at its stdin's end anyway."""
    while _spares:
        proc = _spares.popitem()[1]
        proc.kill()
        proc.communicate()


def start_writer(script: Path, args: list[str], prewarm_next: bool = False) -> subprocess.Popen[str]:
    """``script args`` running (stdout and stderr piped), from a spare process whose imports are done
    if the previous call left one; ``prewarm_next`` leaves one for the next call (see ``run_and_kill``)."""
    proc = _spares.pop(script, None) or _spawn(script)
    assert proc.stdin is not None
    proc.stdin.write(json.dumps(args) + "\n")
    proc.stdin.flush()  # (left open: ``communicate`` closes it)
    if prewarm_next:
        _spares[script] = _spawn(script)
    return proc


def run_and_kill(script: Path, args: list[str], kill_after: float, start_timeout: float = 60.0,
                 prewarm_next: bool = False) -> list[str]:
    """Run ``script args``, SIGKILL it ``kill_after`` seconds after its first line (or when it has
    ended), and return the lines it wrote. A line starting with ``fail`` (a refused put) fails the test.

    Why from the first line, not from the start: the kill is meant to land in traffic; on a loaded
    machine the writer's start-up (imports, recovery) alone took longer than ``kill_after``, so every
    cycle was killed before its first put and the loop tested nothing ("the writer hardly ran").

    ``prewarm_next``: start the next cycle's process now, so that its interpreter start and imports
    (a second or so on a loaded machine, every cycle) overlap this cycle's traffic instead of adding
    to the loop; it opens the store only when its turn comes, so every kill still lands on one
    writer at a time."""
    proc = start_writer(script, args, prewarm_next)
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
