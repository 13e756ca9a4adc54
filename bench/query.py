"""Key query benchmark: p50/p99 of a query by key in-process and as a whole ``mqadmin`` process (one JSON line).

Why: operators look messages up by key with ``mqadmin queryMsgByKey --store DIR``; the whole process
(interpreter start, imports, a read-only open of the store, the IndexFile lookup, the output) is
what they wait for, and issue 17 measured 3.9 s of it on a 1,000,000-message store, nearly all the
read-only open re-validating every record. Target: whole process <= 0.5 s.

The store: written by ``bench/recovery.py``'s writer child (``--messages`` messages, UNIQ_KEY and
one KEYS token each, ``--body`` bytes, default StoreConfig), shut down cleanly. With ``--dir`` a clean
store left there by an earlier run is reused only if its marker (``bench-query-shape.json``) records
the same shape: messages, body size, topic, queues and commitlog file size; otherwise it is written
again. ``store`` in the JSON says which, with that shape. Figures:

* ``read_only_open_s``: ``MessageStore(..., read_only=True).open()`` in this process;
* ``inproc_*``: ``MessageStore.query_message(topic, key)`` on that open store for ``--queries``
  random keys (each must return its one message): p50/p99 in microseconds;
* ``process_*``: ``python -m mqadmin.app queryMsgByKey --store DIR -t TOPIC -k KEY`` run
  ``--runs`` times (after one discarded warm-up), each must exit 0 and print the message id;
  ``python_floor_s`` is the same interpreter importing the mqadmin app and exiting, for scale.
  Both run with bytecode caching on (as an installed package), whatever PYTHONDONTWRITEBYTECODE says.
* ratios (project rule: against a peer or limit of the same run): ``process_p50_vs_target_ratio`` is
  ``process_p50_s`` / the 0.5 s target (<= 1: target met); ``process_p50_vs_python_floor_ratio`` is
  ``process_p50_s`` / ``python_floor_s`` (how many interpreter-and-import starts the whole query costs;
  1 would mean the store open, lookup and output cost nothing). Both from the unrounded times.

Usage: ``python bench/query.py [--messages 1000000] [--dir DIR]``.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
for p in (str(REPO), str(HERE)):
    if p not in sys.path:
        sys.path.insert(0, p)

from _args import positive_int, work_dir  # noqa: E402
from recovery import QUEUES, TOPIC, config, make_clean_store  # noqa: E402

from broker_core.store.message_store import MessageStore  # noqa: E402
from broker_core.store.store_config import StoreConfig  # noqa: E402

TARGET_PROCESS_S = 0.5  # issue 17: whole-process mqadmin queryMsgByKey on a 1,000,000-message store


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


MARKER = "bench-query-shape.json"


def store_shape(n: int, body: int) -> dict:
    """Every parameter that shapes the store ``make_clean_store`` writes (the writer child's message
    layout and its commitlog file size, which ``RMQ_BENCH_COMMITLOG_MB`` can change)."""
    return {"messages": n, "body_bytes": body, "topic": TOPIC, "queues": QUEUES,
            "commitlog_file_bytes": config().mapped_file_size_commit_log}


def clean_store(root: Path, n: int, body: int) -> dict:
    """A cleanly shut-down indexed store at ``root``, reused only when its marker records the very shape
    asked for (``store_shape``); any other store there is deleted and written again."""
    shape = store_shape(n, body)
    marker = root / MARKER
    try:
        found = json.loads(marker.read_text())
    except (OSError, ValueError):
        found = None
    if found == shape and not (root / "abort").exists():
        return {"reused": True, **shape}
    if root.exists():
        shutil.rmtree(root)
    write_s = make_clean_store(root, n, body)
    marker.write_text(json.dumps(shape))
    return {"reused": False, "write_and_dispatch_s": round(write_s, 2), **shape}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--messages", type=positive_int, default=1_000_000)
    ap.add_argument("--body", type=positive_int, default=1024, help="body size in bytes (default 1024)")
    ap.add_argument("--queries", type=positive_int, default=2000, help="in-process queries")
    ap.add_argument("--runs", type=positive_int, default=10, help="whole-process mqadmin runs")
    ap.add_argument("--dir", type=work_dir, default=None, help="work directory (created if missing, kept; its store reused when --messages, --body "
                                                "and the commitlog file size match); default: a temp dir")
    args = ap.parse_args()
    n = args.messages
    work = args.dir if args.dir else Path(tempfile.mkdtemp(prefix="rmqops-bench-query-"))
    root = work / "store"
    load_before = [round(x, 2) for x in os.getloadavg()]
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    # An installed mqadmin runs from cached bytecode (pip compiles it); with PYTHONDONTWRITEBYTECODE
    # set (some shells and CI do) every run would compile ~300 modules again, ~0.35 s of CPU that is
    # not the tool's. The children may write .pyc files (the warm-up does), as an install would have.
    no_pyc_in_parent = env.pop("PYTHONDONTWRITEBYTECODE", None) is not None
    try:
        made = clean_store(root, n, args.body)
        rng = random.Random(11)

        t0 = time.perf_counter()
        store = MessageStore(root, StoreConfig(), read_only=True).open()  # file sizes come from the files
        ro_open_s = time.perf_counter() - t0
        try:
            keys = [rng.randrange(n) for _ in range(args.queries)]
            lat = []
            for i in keys:
                t = time.perf_counter()
                found = store.query_message(TOPIC, f"key-{i}")
                lat.append(time.perf_counter() - t)
                if len(found) != 1 or found[0].keys != f"key-{i}":
                    raise RuntimeError(f"key-{i}: {len(found)} messages found")
        finally:
            store.shutdown()

        def mqadmin(i: int) -> float:
            t = time.perf_counter()
            proc = subprocess.run([sys.executable, "-m", "mqadmin.app", "queryMsgByKey", "--store", str(root), "-t", TOPIC,
                                   "-k", f"key-{i}"], capture_output=True, text=True, env=env, cwd=REPO)
            took = time.perf_counter() - t
            if proc.returncode != 0 or "#Message ID" not in proc.stdout:
                raise RuntimeError(f"mqadmin queryMsgByKey key-{i} failed ({proc.returncode}): "
                                   f"{proc.stdout[-500:]} {proc.stderr[-1500:]}")
            return took

        def floor() -> float:
            t = time.perf_counter()
            subprocess.run([sys.executable, "-c", "import mqadmin.app"], check=True, env=env, cwd=REPO)
            return time.perf_counter() - t

        mqadmin(0)  # warm-up: page cache, .pyc files
        floor()
        proc_runs, floor_runs = [], []
        for _ in range(args.runs):
            proc_runs.append(mqadmin(rng.randrange(n)))
            floor_runs.append(floor())
        med = statistics.median
        p50, floor_s = percentile(proc_runs, 0.5), med(floor_runs)
        print(json.dumps({
            "bench": "query", "messages": n, "body_bytes": args.body, "cpus": os.cpu_count(), "loadavg_before": load_before,
            "loadavg_after": [round(x, 2) for x in os.getloadavg()], "store": made,
            "read_only_open_s": round(ro_open_s, 3),
            "inproc_queries": len(lat),
            "inproc_p50_us": round(percentile(lat, 0.5) * 1e6, 1),
            "inproc_p99_us": round(percentile(lat, 0.99) * 1e6, 1),
            "process_runs": len(proc_runs),
            "process_p50_s": round(p50, 3),
            "process_p99_s": round(percentile(proc_runs, 0.99), 3),
            "process_max_s": round(max(proc_runs), 3),
            "python_floor_s": round(floor_s, 3),
            "target_process_s": TARGET_PROCESS_S,
            "process_p50_vs_target_ratio": round(p50 / TARGET_PROCESS_S, 3),
            "process_p50_vs_python_floor_ratio": round(p50 / floor_s, 3),
            "bytecode_cache": True, "parent_had_pythondontwritebytecode": no_pyc_in_parent,
            "process_s_runs": [round(x, 3) for x in proc_runs],
        }))
    finally:
        if not args.dir:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
