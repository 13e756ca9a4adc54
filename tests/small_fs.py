"""A small filesystem to fill: the full-disk tests of the store and of the broker's config files.

Why a module: a full disk is tested on a real one, a small tmpfs and a loop-mounted ext4 image that
the test mounts itself (root and mkfs.ext4 needed; otherwise it is skipped, saying why) and always
unmounts; several test modules need it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest


def mount_small_fs(kind: str, mnt: Path, size_mb: int) -> None:
    """Mount a small filesystem of ``kind`` on ``mnt`` (root only), or skip saying why not."""
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip(f"needs root and mount(8) to mount a small {kind} for a full disk (run the suite as root)")
    if kind == "tmpfs":
        res = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size_mb}m", "tmpfs", str(mnt)],
                             capture_output=True, text=True)
    else:
        if shutil.which("mkfs.ext4") is None:
            pytest.skip("mkfs.ext4 is missing (apt-get install e2fsprogs; .ci/run does it)")
        img = mnt.parent / "ext4.img"
        with open(img, "wb") as f:
            f.truncate(size_mb << 20)
        # -m 0: no blocks reserved for root, so the disk is full when df says so
        res = subprocess.run(["mkfs.ext4", "-q", "-F", "-m", "0", str(img)], capture_output=True, text=True)
        if res.returncode == 0:
            # barrier=0: an fsync still writes to the image but does not also flush the host disk's cache for
            # the image file (thrown away after the test, and no test cuts the power); with barriers, the
            # SYNC_FLUSH writers that fill it spent most of their time there (9.7 s -> 4.5 s to fill 16 MiB)
            res = subprocess.run(["mount", "-o", "loop,barrier=0", str(img), str(mnt)], capture_output=True,
                                 text=True)
    if res.returncode != 0:
        pytest.skip(f"cannot mount a small {kind} here: {res.stderr.strip()}")


@pytest.fixture(params=["tmpfs", "ext4"])
def small_fs(request, tmp_path: Path):  # noqa: ANN001, ANN201 - pytest request; yields the mount point
    """A small filesystem the test fills: tmpfs (6 MiB) or a loop-mounted ext4 image (16 MiB)."""
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    kind = request.param
    mount_small_fs(kind, mnt, 6 if kind == "tmpfs" else 16)
    try:
        yield mnt
    finally:
        subprocess.run(["umount", str(mnt)], check=False, capture_output=True)
        if os.path.ismount(mnt):
            subprocess.run(["umount", "-l", str(mnt)], check=False)
        (tmp_path / "ext4.img").unlink(missing_ok=True)


def fill(path: Path) -> None:
    """Take every free block of the filesystem holding ``path`` (unbuffered: no failing flush on close)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        for n in (64 << 10, 4096, 512, 1):
            chunk = bytes(n)
            try:
                while os.write(fd, chunk) == n:
                    pass
            except OSError:
                pass
    finally:
        os.close(fd)


def fill_leaving(path: Path, free_bytes: int) -> None:
    """Fill the filesystem holding ``path`` up to ``free_bytes`` of free space (a file written there).

    Why beside ``fill``: a disk with every block taken reads 100% used, and the store then refuses puts
    for diskSpaceWarningLevelRatio before a file creation or growth can fail; some tests need the disk
    short of room for one file while puts are still accepted.
    """
    st = os.statvfs(path.parent)
    todo = st.f_bavail * st.f_frsize - free_bytes
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        chunk = bytes(64 << 10)
        while todo > 0:
            todo -= os.write(fd, chunk[:min(todo, len(chunk))])
    finally:
        os.close(fd)
