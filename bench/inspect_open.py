"""Read-only open cost of a ~1 GiB and a ~4 GiB store (issue 11 item 11); prints one JSON line.

Why: every mqadmin read command opens the store read-only. That open used to decode and CRC-check
the whole last commitlog file (and more after a crash), so inspection cost grew with the store.
It now validates only beyond what the consume queues confirm, so the cost should barely grow with
the store size: ``open_time_growth_ratio`` = (4 GiB open time) / (1 GiB open time), target <= 1.5.

Shape: one store, 1 GiB commitlog files (the default), 16 KiB bodies over 8 queues of one topic,
keys on every message. It is written to ~1 GiB, measured, then extended to ~4 GiB (same shape, same
run) and measured again. Each open is repeated ``--reps`` times; medians are reported, with every
repetition. Needs ~4.5 GiB free next to ``--dir`` (checked first); the store is deleted at the end.

Usage: ``python bench/inspect_open.py [--small-gib 1] [--large-gib 4] [--reps 5] [--dir DIR]``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _args import positive_float, positive_int, work_dir  # noqa: E402

from broker_core.store.codec.message import MessageInner  # noqa: E402
from broker_core.store.message_store import MessageStore  # noqa: E402
from broker_core.store.store_config import StoreConfig  # noqa: E402

GIB = 1 << 30
BODY = 16 * 1024
BATCH = 32  # messages per put_messages call: fewer Python calls per GiB


def fill(root: Path, target_bytes: int, start: int) -> tuple[int, int]:
    """Append messages until the commitlog holds ``target_bytes``; returns (next message number, bytes)."""
    store = MessageStore(root, StoreConfig(message_index_enable=True)).open()
    body = os.urandom(BODY)
    i = start
    try:
        while store.get_max_phy_offset() < target_bytes:
            q = i % 8
            msgs = [MessageInner("InspectTopic", body, {"KEYS": f"k{i + j}", "TAGS": "t"}, q,
                                 born_host=("10.0.0.1", 5000), store_host=("127.0.0.1", 10911))
                    for j in range(BATCH)]
            r = store.put_messages(msgs)
            if not r.ok:
                raise SystemExit(f"put failed: {r.status} {r.remark}")
            i += BATCH
        store.wait_for_dispatch(600)
        size = store.get_max_phy_offset()
    finally:
        store.shutdown()
    return i, size


def time_open(root: Path, reps: int) -> list[float]:
    out = []
    for _ in range(reps):
        t0 = time.perf_counter()
        store = MessageStore(root, StoreConfig(), read_only=True).open()
        store.topics()
        elapsed = time.perf_counter() - t0
        store.shutdown()
        out.append(round(elapsed, 4))
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--small-gib", type=positive_float, default=1.0)
    ap.add_argument("--large-gib", type=positive_float, default=4.0)
    ap.add_argument("--reps", type=positive_int, default=5)
    ap.add_argument("--dir", type=work_dir, default=None,
                    help="where to build the store, in a temp dir under it; created if missing (default: the system's)")
    args = ap.parse_args()
    if args.large_gib <= args.small_gib:
        ap.error("--large-gib must be above --small-gib")
    base = Path(args.dir or tempfile.gettempdir())
    need = int(args.large_gib * GIB * 1.15)
    free = shutil.disk_usage(base).free
    if free < need:
        raise SystemExit(f"inspect_open: needs {need / GIB:.1f} GiB free in {base}, only {free / GIB:.1f} GiB")
    root = Path(tempfile.mkdtemp(prefix="inspect-open-", dir=base))
    try:
        t0 = time.perf_counter()
        n, bytes_small = fill(root, int(args.small_gib * GIB), 0)
        build_small = time.perf_counter() - t0
        small = time_open(root, args.reps)
        t0 = time.perf_counter()
        _, bytes_large = fill(root, int(args.large_gib * GIB), n)
        build_large = time.perf_counter() - t0
        large = time_open(root, args.reps)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    med_small, med_large = statistics.median(small), statistics.median(large)
    print(json.dumps({
        "bench": "inspect_open", "small_store_gib": round(bytes_small / GIB, 2), "large_store_gib": round(bytes_large / GIB, 2),
        "open_small_s": med_small, "open_large_s": med_large,
        "open_time_growth_ratio": round(med_large / med_small, 3) if med_small else None,
        "open_small_runs": small, "open_large_runs": large,
        "build_small_s": round(build_small, 1), "build_large_s": round(build_large, 1),
        "loadavg": os.getloadavg()[0],
    }))


if __name__ == "__main__":
    main()
