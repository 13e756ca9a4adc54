"""Benchmark: searchMessages with Spark local[2] vs the same scan in one process, on one generated store.

Generates a store of about ``--size-mb`` MiB of commitlog with the store's own batch writes
(``CommitLog.put_messages``: 8 topics, ~1 KiB text bodies, TAGS, KEYS, UNIQ_KEY and user properties
``orderId`` / ``amount``; store timestamps advance 1 ms per batch, so the store spans a known time
range), then in the same run, ``--rounds`` times and alternating which side goes first:

* full scan: ``--where "TAGS = 'Tag1' AND amount > 900"`` over every record;
* selective: the same query with a time window of 5% of the store's time span (in the middle),
  so pruning by the first/last store timestamps of files and ranges does most of the work.

Each runs with Spark (``run_search(master=local[2])`` in a session started and warmed up once) and
in this process (``run_search(master=IN_PROCESS)``: the same compiled walk ``select_records`` with the
same pushed-down query, the same verdict cache, the same pruning and the same driver-side decode of
the final matches; without time bounds it scans each file as one range, as Spark needs ranges only to
split work between its tasks). Both sides must return identical answers. Reports records/s (records validated per second of wall time; for the selective search
also the whole store's records per second, the figure an operator feels), the CPU seconds of each
side, how busy the machine was before each run (it waits up to ``--quiet-wait`` s for the machine
to be quiet, so both sides run in the same state), and one JSON line with ``spark_speedup_vs_single_ratio``
(single-process full-scan wall time / Spark full-scan wall time, > 1: Spark is faster; target >= 1.7 on
2 cores), ``window_spark_speedup_vs_single_ratio`` (the same for the selective search),
``pruned_speedup_vs_full_ratio`` (Spark full scan / Spark selective search) and
``spark_cpu_cost_vs_single_ratio`` (Spark's CPU seconds / the single process's, > 1: Spark spends
more). Medians over the rounds. The store is generated in a fresh directory under the system's temp
dir and deleted at the end, unless ``--dir`` is given: then it is kept, and reused by a later run only
if ``bench-meta.json`` there records the same ``--size-mb`` and ``--commitlog-file-mb`` (otherwise it
is generated again; ``store_reused`` in the JSON says which). Not part of the test suite.
Example: ``.venv/bin/python bench/search.py --size-mb 2048``.
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

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from _args import fraction, nonnegative_float, positive_int, work_dir  # noqa: E402

from broker_core.store.codec.message import MessageInner  # noqa: E402
from broker_core.store.commit_log import CommitLog  # noqa: E402
from broker_core.store.store_config import ASYNC_FLUSH, StoreConfig  # noqa: E402
from spark.search import IN_PROCESS, SEARCH_SPARK_CONF, SearchUsageError, build_query, run_search  # noqa: E402
from spark.session import get_spark  # noqa: E402

TOPICS = 8
BATCH = 32
BODY_SIZE = 1024
BASE_TS = 1_790_000_000_000
CLK_TCK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
WORDS = ("refund", "order", "payment", "shipped", "customer", "invoice", "cancel", "retry", "alpha", "beta")


def generate(root: Path, size_mb: int, file_mb: int) -> tuple[int, int, int, int]:
    """Write the commitlog with batch appends; returns (messages, first/last store ts, commitlog bytes)."""
    config = StoreConfig(store_path_root_dir=str(root), mapped_file_size_commit_log=file_mb << 20,
                         flush_disk_type=ASYNC_FLUSH)
    cl = CommitLog(config)
    cl.load()
    target = size_mb << 20
    text = " ".join(WORDS[(i * 7) % len(WORDS)] for i in range(200)).encode()
    bodies = [(text[i:] + text[:i])[:BODY_SIZE] for i in range(0, 64)]
    n = 0
    batch_no = 0
    ts = BASE_TS
    try:
        while cl.max_offset() < target:
            topic_no = batch_no % TOPICS
            ts = BASE_TS + batch_no
            msgs = []
            for _ in range(BATCH):
                msgs.append(MessageInner(
                    topic=f"BenchTopic{topic_no}", body=bodies[n % len(bodies)], queue_id=batch_no % 4,
                    born_timestamp=ts - 5, store_timestamp=ts, keep_store_timestamp=True,
                    properties={"KEYS": f"key-{n}", "TAGS": f"Tag{n % 5}", "UNIQ_KEY": f"7F0000010000{n:020X}",
                                "orderId": str(n % 100_000), "amount": str(n % 1000)}))
                n += 1
            res = cl.put_messages(msgs)
            if not res.ok:
                raise RuntimeError(f"put failed: {res}")
            batch_no += 1
        written = cl.max_offset()
    finally:
        cl.flush()
        cl.close()
    return n, BASE_TS, ts, written


def store_shape(size_mb: int, commitlog_file_mb: int) -> dict:
    """What ``generate`` makes a store from: the two options and its fixed layout."""
    return {"size_mb": size_mb, "commitlog_file_mb": commitlog_file_mb, "topics": TOPICS, "batch": BATCH,
            "body_size": BODY_SIZE, "base_ts": BASE_TS}


def read_meta(meta: Path) -> dict | None:
    """``bench-meta.json`` of an earlier run (None when missing, unreadable or of the old list form)."""
    try:
        found = json.loads(meta.read_text())
    except (OSError, ValueError):
        return None
    return found if isinstance(found, dict) else None


def _cpu_times() -> tuple[int, int]:
    with open("/proc/stat", encoding="ascii") as f:
        vals = [int(x) for x in f.readline().split()[1:]]
    idle = vals[3] + (vals[4] if len(vals) > 4 else 0)
    return sum(vals[:8]) - idle, sum(vals[:8])


def machine_busy(seconds: float = 1.0) -> float:
    """Fraction of all cores busy over ``seconds`` while this benchmark idles (everyone else's load)."""
    b0, t0 = _cpu_times()
    time.sleep(seconds)
    b1, t1 = _cpu_times()
    return (b1 - b0) / (t1 - t0) if t1 > t0 else 0.0


def wait_quiet(max_wait: float, threshold: float) -> float:
    """Wait until everyone else keeps at most ``threshold`` of the cores busy (or ``max_wait`` passed)."""
    deadline = time.monotonic() + max_wait
    busy = machine_busy(0.5)
    while busy > threshold and time.monotonic() < deadline:
        busy = machine_busy(0.5)
    return busy


def tree_cpu_seconds() -> float:
    """utime+stime (+ reaped children) of this process and every live descendant (JVM, Python workers)."""
    root = os.getpid()
    children: dict[int, list[tuple[int, list[str]]]] = {}
    own = None
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", encoding="ascii", errors="replace") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(name) == root:
            own = fields
        children.setdefault(int(fields[1]), []).append((int(name), fields))
    if own is None:
        return 0.0
    total = 0
    stack = [(root, own)]
    while stack:
        pid, fields = stack.pop()
        total += sum(int(x) for x in fields[11:15])
        stack.extend(children.get(pid, []))
    return total / CLK_TCK


def sql92_where(text: str) -> str:
    """A ``--where`` that ``build_query`` accepts (SQL92 that compiles), checked by argparse.

    Why: it was first compiled after the store (2 GiB by default) was generated, and a bad one then
    ended in a traceback; now it is a usage error (one line, exit 2) before any work."""
    try:
        build_query(where=text)
    except SearchUsageError as e:
        raise argparse.ArgumentTypeError("not valid " + str(e).removeprefix("bad --where ")) from None
    return text


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size-mb", type=positive_int, default=2048, help="commitlog size to generate (MiB)")
    ap.add_argument("--commitlog-file-mb", type=positive_int, default=1024, help="mappedFileSizeCommitLog (MiB)")
    ap.add_argument("--split-mb", type=positive_int, default=64)
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--rounds", type=positive_int, default=3)
    ap.add_argument("--window-fraction", type=fraction, default=0.05)
    ap.add_argument("--where", type=sql92_where, default="TAGS = 'Tag1' AND amount > 900",
                    help="SQL92 filter of both searches (checked before the store is generated)")
    ap.add_argument("--quiet-wait", type=nonnegative_float, default=20.0,
                    help="max seconds to wait before each run for the machine to be quiet")
    ap.add_argument("--quiet-busy", type=fraction, default=0.25, help="busy fraction counted as quiet (0..1)")
    ap.add_argument("--dir", type=work_dir, default=None,
                    help="work directory (created if missing), kept afterwards (a store there is reused if made with the same "
                         "--size-mb and --commitlog-file-mb, else generated again); default: a temp dir")
    args = ap.parse_args(argv)

    work = args.dir if args.dir else Path(tempfile.mkdtemp(prefix="rmqops-bench-search-"))
    store = work / "store"
    try:
        t = time.monotonic()
        meta = work / "bench-meta.json"
        shape = store_shape(args.size_mb, args.commitlog_file_mb)
        found = read_meta(meta) if args.dir else None
        reused = found is not None and found.get("shape") == shape and (store / "commitlog").is_dir()
        if reused:
            assert found is not None
            n, first_ts, last_ts, size = found["messages"], found["first_ts"], found["last_ts"], found["bytes"]
            gen_s = 0.0
        else:
            if args.dir and meta.exists():
                made = (found or {}).get("shape") or {}
                print(f"store in {work} was made with --size-mb {made.get('size_mb', '?')} --commitlog-file-mb "
                      f"{made.get('commitlog_file_mb', '?')} (or an older layout), not --size-mb {args.size_mb} "
                      f"--commitlog-file-mb {args.commitlog_file_mb}: generating it again", file=sys.stderr)
            meta.unlink(missing_ok=True)  # a generation cut short must not be taken for a finished one
            shutil.rmtree(store, ignore_errors=True)
            n, first_ts, last_ts, size = generate(store, args.size_mb, args.commitlog_file_mb)
            meta.write_text(json.dumps({"shape": shape, "messages": n, "first_ts": first_ts, "last_ts": last_ts,
                                        "bytes": size}))
            gen_s = time.monotonic() - t
        print(f"store: {n:,} messages, {size / 2**20:,.0f} MiB, "
              + ("reused" if reused else f"generated in {gen_s:.1f}s"), file=sys.stderr)
        span = last_ts - first_ts
        mid = first_ts + span // 2
        half = int(span * args.window_fraction / 2)
        full_q = build_query(where=args.where)
        sel_q = build_query(where=args.where, begin_ms=mid - half, end_ms=mid + half)
        split = args.split_mb << 20

        t = time.monotonic()
        spark = get_spark(args.master, "rmqops-bench-search", SEARCH_SPARK_CONF)  # as the job starts it
        # Warm-up: one untimed full search, so every Python worker has imported the job's modules
        # and the JVM has compiled its scheduling path (a one-range warm-up left one worker cold).
        run_search([store], full_q, limit=100, spark=spark, split_bytes=split)
        startup_s = time.monotonic() - t

        runs: dict[str, list[tuple[float, float, object]]] = {k: [] for k in
                                                              ("spark_full", "single_full", "spark_sel", "single_sel")}

        def run(kind: str) -> None:
            q = full_q if kind.endswith("full") else sel_q
            if kind.startswith("spark"):
                c0, t0 = tree_cpu_seconds(), time.monotonic()
                r = run_search([store], q, limit=100, spark=spark, split_bytes=split)
                runs[kind].append((time.monotonic() - t0, tree_cpu_seconds() - c0, r))
            else:
                # This process only: an idle Python worker of the JVM exiting meanwhile must not count.
                c0, t0 = time.process_time(), time.monotonic()
                r = run_search([store], q, limit=100, master=IN_PROCESS, split_bytes=split)
                runs[kind].append((time.monotonic() - t0, time.process_time() - c0, r))

        busy = []
        loads: list[float] = []
        for i in range(args.rounds):
            order = ["spark_full", "single_full", "spark_sel", "single_sel"]
            if i % 2:
                order = ["single_full", "spark_full", "single_sel", "spark_sel"]
            for kind in order:
                busy.append(wait_quiet(args.quiet_wait, args.quiet_busy))
                loads.append(os.getloadavg()[0])
                run(kind)
                w, c, r = runs[kind][-1]
                print(f"round {i + 1} {kind}: {w:.2f}s wall, {c:.1f} CPU-s, {r.summary.records_scanned:,} records, "
                      f"{r.summary.messages_matched:,} matched, files {r.summary.files_scanned}/"
                      f"{r.summary.files_total}, ranges {r.summary.ranges_scanned}", file=sys.stderr)
        spark.stop()

        def med(kind: str, i: int = 0) -> float:
            return statistics.median(x[i] for x in runs[kind])

        for a, b in (("spark_full", "single_full"), ("spark_sel", "single_sel")):
            ra, rb = runs[a][0][2], runs[b][0][2]
            assert ra.messages == rb.messages and ra.summary.messages_matched == rb.summary.messages_matched, a
        full_rec = runs["spark_full"][0][2].summary.records_scanned
        sel = runs["spark_sel"][0][2].summary
        out = {
            "bench": "search", "size_mb": args.size_mb, "commitlog_file_mb": args.commitlog_file_mb,
            "store_reused": reused, "store_mib": round(size / 2**20), "messages": n, "commitlog_files": sel.files_total,
            "split_mb": args.split_mb, "master": args.master, "rounds": args.rounds, "where": args.where,
            "window_fraction": args.window_fraction, "matched_full": runs["spark_full"][0][2].summary.messages_matched,
            "matched_window": sel.messages_matched, "window_files_scanned": sel.files_scanned,
            "window_ranges_scanned": sel.ranges_scanned, "window_records_scanned": sel.records_scanned,
            "spark_full_s": round(med("spark_full"), 2), "single_full_s": round(med("single_full"), 2),
            "spark_window_s": round(med("spark_sel"), 2), "single_window_s": round(med("single_sel"), 2),
            "spark_full_records_per_s": round(full_rec / med("spark_full")),
            "single_full_records_per_s": round(full_rec / med("single_full")),
            "spark_window_store_records_per_s": round(full_rec / med("spark_sel")),
            "single_window_store_records_per_s": round(full_rec / med("single_sel")),
            "spark_full_cpu_s": round(med("spark_full", 1), 1), "single_full_cpu_s": round(med("single_full", 1), 1),
            # A cost: Spark's CPU seconds over the single process's (> 1: Spark spends more).
            "spark_cpu_cost_vs_single_ratio": round(med("spark_full", 1) / med("single_full", 1), 2),
            "spark_startup_s": round(startup_s, 1), "generate_s": round(gen_s, 1),
            "machine_busy_median": round(statistics.median(busy), 2),
            "loadavg_1min_median": round(statistics.median(loads), 2), "loadavg_1min_max": round(max(loads), 2),
            # Speed-ups: the slower side's time over the faster one's (> 1: Spark, or pruning, is faster).
            # What the wall-time speed-up would be with both cores Spark's own and busy all along.
            "cpu_based_spark_speedup_vs_single_ratio": round(
                med("single_full", 1) / (med("spark_full", 1) / (os.cpu_count() or 1)), 2),
            "spark_speedup_vs_single_ratio": round(med("single_full") / med("spark_full"), 2),
            "window_spark_speedup_vs_single_ratio": round(med("single_sel") / med("spark_sel"), 2),
            "pruned_speedup_vs_full_ratio": round(med("spark_full") / med("spark_sel"), 2),
        }
        print(json.dumps(out))
    finally:
        if not args.dir:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
