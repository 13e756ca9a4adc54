"""A failed timer flush names its file, is tried again on the next flush, and still closes the files.

Why: the timer log, wheel and checkpoint passed msync's bare "[Errno 5] Input/output error" up, so
the broker's "timer tick failed" line named no file. Worse, the timer log and wheel marked themselves
clean before their msync: after one failed flush the next one skipped their pages and the checkpoint
then recorded a timer log flush position that had never reached the disk. A shutdown whose flush
failed left every timer file mapped and the store not closed.

The failure is real: msync fails with EIO through an LD_PRELOAD shim (built with gcc, else skipped)
while a flag file exists; with MSYNC_LOG the shim lists the msyncs that went through.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from msync_eio import MsyncEio

HERE = Path(__file__).resolve().parent

RETRY = r"""
import ctypes, sys
from pathlib import Path
from test_timer_message_store import T0, FakeClock, _config, _put_timer
from broker_core.store.message_store import MessageStore
from broker_core.store.timer.timer_message_store import TimerMessageStore

root, flag, synced = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3])
clock = FakeClock(T0)
ms = MessageStore(root, _config(), clock=clock).open()
ts = TimerMessageStore(ms, clock=clock)
_put_timer(ms, clock, "A", delay_ms=60_000)
ts.tick()
ts.flush()
_put_timer(ms, clock, "B", delay_ms=90_000)
ts.tick()  # B's unit written to the timer log and the wheel, not flushed yet
flag.touch()
try:
    ts.flush()
except OSError as e:
    print("failed:", e, flush=True)
flag.unlink()


def span(mm):
    c = ctypes.c_char.from_buffer(mm)
    try:
        return ctypes.addressof(c), len(mm)
    finally:
        del c


spans = {"timer log": span(ts.timer_log._files[0].mm), "timer wheel": span(ts.timer_wheel._mm)}
synced.write_text("")
ts.flush()
calls = [tuple(map(int, ln.split())) for ln in synced.read_text().splitlines()]
for name, (start, size) in spans.items():
    hit = any(start <= a < start + size or a <= start < a + n for a, n in calls)
    print(name, "synced" if hit else "skipped", flush=True)
ts.shutdown()
ms.shutdown()
"""

SHUTDOWN = r"""
import sys
from pathlib import Path
from test_timer_message_store import T0, FakeClock, _config, _put_timer
from broker_core.store.message_store import MessageStore
from broker_core.store.timer.timer_message_store import TimerMessageStore

root, flag = Path(sys.argv[1]), Path(sys.argv[2])
clock = FakeClock(T0)
ms = MessageStore(root, _config(), clock=clock).open()
ts = TimerMessageStore(ms, clock=clock)
_put_timer(ms, clock, "A", delay_ms=60_000)
ts.tick()
flag.touch()
try:
    ts.shutdown()
except OSError as e:
    print("shutdown failed:", e, flush=True)
flag.unlink()
print("closed", ts.timer_wheel.closed, all(f.mm.closed for f in ts.timer_log._files), flush=True)
ms.shutdown()
"""


def _run(script: str, args: list[str], msync_eio: MsyncEio, **env: str) -> list[str]:
    full_env = dict(os.environ, PYTHONPATH=os.pathsep.join((str(HERE.parents[1]), str(HERE))),
                    **msync_eio.env(), **env)
    res = subprocess.run([sys.executable, "-c", script, *args], capture_output=True, text=True, env=full_env,
                         timeout=120)
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    assert "Traceback" not in res.stdout + res.stderr
    return res.stdout.splitlines()


def test_a_failed_timer_flush_names_its_file_and_the_next_flush_writes_what_it_missed(
        tmp_path: Path, msync_eio: MsyncEio) -> None:
    synced = tmp_path / "msync.log"
    out = _run(RETRY, [str(tmp_path / "store"), str(msync_eio.flag), str(synced)], msync_eio,
               MSYNC_LOG=str(synced))
    failed = [ln for ln in out if ln.startswith("failed:")]
    timer_log_dir = tmp_path / "store" / "timerlog"
    assert len(failed) == 1 and f"cannot flush timer log file {timer_log_dir}" in failed[0], out
    assert "Input/output error" in failed[0], out
    # the pages the failed flush did not reach are flushed by the next one, not taken as clean
    assert "timer log synced" in out and "timer wheel synced" in out, out


def test_a_timer_shutdown_whose_flush_fails_says_which_file_and_still_closes(
        tmp_path: Path, msync_eio: MsyncEio) -> None:
    out = _run(SHUTDOWN, [str(tmp_path / "store"), str(msync_eio.flag)], msync_eio)
    assert any(ln.startswith("shutdown failed:") and "cannot flush timer log file" in ln for ln in out), out
    assert "closed True True" in out, out
