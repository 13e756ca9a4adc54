"""Benchmark: concurrent reput (enableBuildConsumeQueueConcurrently) vs the serial reput, same store.

Generates a commitlog of about ``--size-mb`` MiB (bench/rebuild.py's shape: 1 KiB bodies, 8 topics x
8 queues, KEYS and UNIQ_KEY on every message), then ``--rounds`` times, alternating which goes first:
open the store, drop its consume queues and index (untimed, as bench/rebuild.py does), and time
``do_reput`` from the first commitlog offset with the option off and on. The concurrent side's
worker pool is started before the clock (a broker starts it once); its start-up is reported apart.
Checks that both wrote the same consume queue bytes and index contents, and ends with one JSON line
with ``concurrent_vs_serial_reput_ratio`` (serial seconds / concurrent seconds, medians).

Example: ``.venv/bin/python bench/reput.py --size-mb 256``. Not part of the test suite.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from _args import positive_int  # noqa: E402
from rebuild import generate, outputs_digest  # noqa: E402

from broker_core.store.codec import hotpath  # noqa: E402
from broker_core.store.message_store import MessageStore  # noqa: E402
from broker_core.store.store_config import StoreConfig  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--size-mb", type=positive_int, default=256)
    ap.add_argument("--file-mb", type=positive_int, default=128, help="commitlog file size")
    ap.add_argument("--rounds", type=positive_int, default=3)
    ap.add_argument("--workers", type=positive_int, default=os.cpu_count() or 2)
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bench-reput-") as tmp:
        root = Path(tmp)
        t = time.monotonic()
        n = generate(root, args.size_mb, args.file_mb)
        print(f"generated {n} messages ({args.size_mb} MiB) in {time.monotonic() - t:.1f}s", flush=True)

        def run(concurrent: bool) -> tuple[float, float, int, tuple[str, str]]:
            config = StoreConfig(store_path_root_dir=str(root), mapped_file_size_commit_log=args.file_mb << 20,
                                 enable_build_consume_queue_concurrently=concurrent,
                                 batch_dispatch_request_thread_pool_nums=args.workers)
            ms = MessageStore(root, config)
            ms.open()
            ms.delete_topics(ms.topics())
            assert ms.index_service is not None
            ms.index_service.destroy()
            ms.reput.reput_from_offset = ms.commit_log.min_offset()
            pool_s = 0.0
            if concurrent:
                t0 = time.monotonic()
                pool = ms.reput._get_pool()  # a broker starts its pool once
                list(pool.map(abs, range(args.workers * 4)))
                pool_s = time.monotonic() - t0
            t0 = time.monotonic()
            dispatched = ms.reput.do_reput()
            elapsed = time.monotonic() - t0
            ms.shutdown()
            return elapsed, pool_s, dispatched, outputs_digest(root)

        serial: list[float] = []
        concurrent: list[float] = []
        pool_start: list[float] = []
        digests = set()
        for r in range(args.rounds + 1):  # round 0 warms the page cache and is discarded
            order = (False, True) if r % 2 else (True, False)
            for mode in order:
                elapsed, pool_s, dispatched, digest = run(mode)
                digests.add(digest)
                if r == 0:
                    continue
                (concurrent if mode else serial).append(elapsed)
                if mode:
                    pool_start.append(pool_s)
                print(f"round {r} {'concurrent' if mode else 'serial    '}: {dispatched} records in {elapsed:.2f}s "
                      f"({dispatched / elapsed:,.0f}/s)", flush=True)
        if len(digests) != 1:
            raise SystemExit("concurrent and serial reput wrote different files")
        s, c = statistics.median(serial), statistics.median(concurrent)
        print(json.dumps({
            "bench": "reput", "implementation": hotpath.IMPLEMENTATION, "messages": n, "store_mib": args.size_mb,
            "workers": args.workers, "cpus": os.cpu_count(), "loadavg": os.getloadavg(),
            "serial_s": round(s, 3), "concurrent_s": round(c, 3),
            "serial_records_per_s": round(n / s), "concurrent_records_per_s": round(n / c),
            "serial_runs_s": [round(x, 3) for x in serial], "concurrent_runs_s": [round(x, 3) for x in concurrent],
            "pool_start_s": round(statistics.median(pool_start), 3),
            "concurrent_vs_serial_reput_ratio": round(s / c, 3)}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
