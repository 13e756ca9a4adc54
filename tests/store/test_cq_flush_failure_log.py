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
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent

SHIM = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>
int msync(void *a, size_t l, int f) {
    static int (*real)(void *, size_t, int);
    const char *flag = getenv("EIO_FLAG");
    if (flag && access(flag, F_OK) == 0) { errno = EIO; return -1; }
    if (!real) real = dlsym(RTLD_NEXT, "msync");
    return real(a, l, f);
}
"""

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


def test_failing_consume_queue_flush_is_logged_once_and_when_it_works_again(tmp_path: Path) -> None:
    if shutil.which("gcc") is None:
        pytest.skip("gcc is needed to build the msync EIO shim")
    src = tmp_path / "eio.c"
    src.write_text(SHIM)
    shim = tmp_path / "eio.so"
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(shim), str(src), "-ldl"], check=True)
    flag = tmp_path / "eio.flag"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join((str(HERE.parents[1]), str(HERE))),
               LD_PRELOAD=str(shim), EIO_FLAG=str(flag))
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
