"""``lost+found/`` of a store: where recovery puts the bytes it must not keep, instead of deleting them.

Why: recovery cuts data it cannot trust (a commitlog tail after a corrupt record, consume queue units
after a damaged region). RocketMQ deletes them; an operator may still need them (a flipped byte in
one body discards every later record). Each discarded piece is copied here under its store-relative
path plus a suffix naming the logical offset it started at, before the original is cut or removed.
"""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path

log = logging.getLogger("rmqops.store")

LOST_FOUND_DIR = "lost+found"


def lost_found_dir(store_root: Path) -> Path:
    return store_root / LOST_FOUND_DIR


def save_aside(store_root: Path, path: Path, start: int, data: bytes | memoryview, tag: str = "") -> Path:
    """Write ``data`` (the discarded bytes of ``path`` from byte ``start``) under ``lost+found/``.

    The name keeps the file's path inside the store, the start position and the time, so pieces of
    several recoveries never overwrite each other. Returns the path written (fsynced).
    """
    try:
        rel = path.resolve().relative_to(store_root.resolve())
    except ValueError:
        rel = Path(path.name)
    stamp = time.strftime("%Y%m%d%H%M%S")
    dest = lost_found_dir(store_root) / rel.parent / f"{rel.name}@{start}.{stamp}{tag}"
    dest.parent.mkdir(parents=True, exist_ok=True)
    n = 0
    while dest.exists():
        n += 1
        dest = dest.with_name(f"{rel.name}@{start}.{stamp}{tag}.{n}")
    with open(dest, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    return dest
