"""A consume queue flush that fails every pass is logged once, naming the file, and again when it works.

Why: the flush service runs every 200 ms and logged a traceback on each failed pass: 58-71 tracebacks
in an 11 s EIO window, ~4000 lines a minute on a read-only filesystem. The failure is now one line
naming the consume queue directory and the error (repeated at most once a minute, with a count), and
a line when a pass works again, as the timer tick and the periodic config flush do.

The failure is real: msync fails with EIO through an LD_PRELOAD shim (built with gcc, else skipped)
while a flag file exists.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from msync_eio import MsyncEio

HERE = Path(__file__).resolve().parent

WRITER = r"""
import logging, sys, time
from pathlib import Path
from store_util import make_msg, small_config
from broker_core.store.message_store import MessageStore

logging.basicConfig(stream=sys.stdout, level=logging.WARNING, format="%(levelname)s %(message)s")
root, flag = Path(sys.argv[1]), Path(sys.argv[2])
store = MessageStore(root, small_config(flush_interval_consume_queue=50)).open().start()
for i in range(5):
    store.put_message(make_msg("Flush", 0, b"x", key=f"k{i}"))
flag.touch()
for i in range(20):  # new units to flush on every pass (200 ms) for 2 s
    store.put_message(make_msg("Flush", 0, b"y", key=f"e{i}"))
    time.sleep(0.1)
flag.unlink()
time.sleep(0.6)
store.shutdown()
print("done", flush=True)
"""


def test_failing_consume_queue_flush_is_logged_once_and_when_it_works_again(tmp_path: Path,
                                                                           msync_eio: MsyncEio) -> None:
    flag = msync_eio.flag
    env = dict(os.environ, PYTHONPATH=os.pathsep.join((str(HERE.parents[1]), str(HERE))), **msync_eio.env())
    res = subprocess.run([sys.executable, "-c", WRITER, str(tmp_path / "store"), str(flag)],
                         capture_output=True, text=True, env=env, timeout=120)
    assert res.returncode == 0 and res.stdout.endswith("done\n"), res.stdout[-2000:] + res.stderr[-2000:]
    lines = [ln for ln in res.stdout.splitlines() if "consume queue flush" in ln]
    failed = [ln for ln in lines if "failed" in ln and "works again" not in ln]
    assert len(failed) == 1, lines
    assert "Traceback" not in res.stdout + res.stderr
    # the file whose msync failed first: a queue's or the checkpoint written after the queues
    named = (str(tmp_path / "store" / "consumequeue" / "Flush" / "0"), str(tmp_path / "store" / "checkpoint"))
    assert any(n in failed[0] for n in named) and "Input/output error" in failed[0], failed[0]
    assert len([ln for ln in lines if "works again" in ln]) == 1, lines


REOPEN = r"""
import sys
from pathlib import Path
from store_util import make_msg, small_config
from broker_core.store.message_store import MessageStore

root, flag = Path(sys.argv[1]), Path(sys.argv[2])
store = MessageStore(root, small_config()).open()
assert store.put_message(make_msg("Shut", 0, b"kept", key="kept")).ok
flag.touch()
try:
    store.shutdown()
except OSError as e:
    print("shutdown failed:", e, flush=True)
flag.unlink()
again = MessageStore(root, small_config()).open()  # the same process: the lock must be free
print("abnormal", again.recovery_report.abnormal, flush=True)
print("bodies", [bytes(m.body) for m in again.get_messages("Shut", 0, 0, 4).messages], flush=True)
again.shutdown()
print("done", flush=True)
"""


def test_a_shutdown_whose_flush_fails_still_releases_the_store_and_keeps_abort(tmp_path: Path,
                                                                               msync_eio: MsyncEio) -> None:
    """A store whose shutdown cannot flush (EIO) raised before closing its files and releasing its
    lock, so the process that owned it could not open it again (an embedding application, mqbroker's
    in-process users). Now it says what failed, closes, releases, and keeps ``abort``: the next open,
    in the same process, recovers as after a crash and has the message."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join((str(HERE.parents[1]), str(HERE))), **msync_eio.env())
    res = subprocess.run([sys.executable, "-c", REOPEN, str(tmp_path / "store"), str(msync_eio.flag)],
                         capture_output=True, text=True, env=env, timeout=120)
    out = res.stdout + res.stderr
    assert res.returncode == 0 and res.stdout.endswith("done\n"), out[-3000:]
    assert "shutdown failed:" in res.stdout and "Input/output error" in res.stdout, out[-3000:]
    assert "abnormal True" in res.stdout and "bodies [b'kept']" in res.stdout, out[-3000:]
