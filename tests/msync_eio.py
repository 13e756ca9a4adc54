"""A storage failure the operating system gives: msync() failing with EIO while a flag file exists.

Why a module: the flush tests of the store and of mqbroker need a real failed flush (no mock of our
own code), made by an LD_PRELOAD shim built here with gcc (skipped without it). A process fails its
msync calls when it preloads ``shim`` with ``EIO_FLAG`` naming ``flag`` and that file exists; with
``MSYNC_LOG`` naming a file it appends each msync that went through to it ("address length" lines), so
a test can tell which mapping a flush reached.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

SHIM = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>
#include <stdio.h>
int msync(void *a, size_t l, int f) {
    static int (*real)(void *, size_t, int);
    const char *flag = getenv("EIO_FLAG");
    if (flag && access(flag, F_OK) == 0) { errno = EIO; return -1; }
    if (!real) real = dlsym(RTLD_NEXT, "msync");
    const char *log = getenv("MSYNC_LOG");
    if (log) { FILE *o = fopen(log, "a"); if (o) { fprintf(o, "%lu %lu\n", (unsigned long)a, (unsigned long)l); fclose(o); } }
    return real(a, l, f);
}
"""


@dataclass(frozen=True)
class MsyncEio:
    shim: Path
    flag: Path

    def env(self) -> dict[str, str]:
        """The environment variables that make a process's msync fail while ``flag`` exists."""
        return {"LD_PRELOAD": str(self.shim), "EIO_FLAG": str(self.flag)}


@pytest.fixture
def msync_eio(tmp_path: Path) -> Iterator[MsyncEio]:
    gcc = shutil.which("gcc")
    if gcc is None:
        pytest.skip("gcc is needed to build the msync EIO shim")
    src, shim = tmp_path / "eio.c", tmp_path / "eio.so"
    src.write_text(SHIM)
    subprocess.run([gcc, "-shared", "-fPIC", "-o", str(shim), str(src), "-ldl"], check=True)
    eio = MsyncEio(shim, tmp_path / "eio.flag")
    yield eio
    eio.flag.unlink(missing_ok=True)
