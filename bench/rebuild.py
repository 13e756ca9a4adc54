"""Benchmark: Spark rebuild (local[2]) vs the store core's single-process reput, on one generated store.

Generates a store of about ``--size-mb`` MiB of commitlog (1 KiB bodies, 8 topics x 8 queues, KEYS
and UNIQ_KEY on every message) with the store's own CommitLog, then in the same run:

1. single process: ``MessageStore.open()`` on the store with no consume queues and no index, i.e.
   recovery re-dispatching every record through the store core's dispatch (what a broker does at
   start-up after losing its consume queues);
2. Spark: ``run_rebuild(parts=cq,index, master=local[2])`` on the same commitlog; session start and
   Python worker start are timed separately and a ratio including them is printed as well.

Prints MB/s of commitlog for each and the ratio, checks both produced the same consume queue bytes,
and ends with one JSON line (ratios named ``..._ratio``). Target: spark_vs_reput_ratio >= 1.5.
Not part of the test suite. Example: ``.venv/bin/python bench/rebuild.py --size-mb 256``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from broker_core.store.codec.message import MessageInner  # noqa: E402
from broker_core.store.commit_log import CommitLog  # noqa: E402
from broker_core.store.message_store import MessageStore  # noqa: E402
from broker_core.store.store_config import StoreConfig  # noqa: E402

TOPICS = 8
QUEUES = 8
BODY_SIZE = 1024


def generate(root: Path, size_mb: int, commitlog_file_mb: int) -> tuple[int, int]:
    """Write the commitlog with the store's CommitLog; returns (messages, commitlog bytes)."""
    config = StoreConfig(store_path_root_dir=str(root), mapped_file_size_commit_log=commitlog_file_mb << 20)
    cl = CommitLog(config)
    cl.load()
    target = size_mb << 20
    body = (b"0123456789abcdef" * (BODY_SIZE // 16 + 1))[:BODY_SIZE]
    n = 0
    pid = os.getpid() & 0xFFFF
    try:
        while cl.max_offset() < target:
            topic_no = n % TOPICS
            msg = MessageInner(
                topic=f"BenchTopic{topic_no}", body=body, queue_id=(n // TOPICS) % QUEUES,
                born_timestamp=1_700_000_000_000 + n,
                properties={"KEYS": f"key-{n} order-{n % 1000}", "TAGS": f"Tag{n % 5}",
                            "UNIQ_KEY": f"7F000001{pid:04X}00001000{n:016X}"})
            res = cl.put_message(msg)
            if not res.ok:
                raise RuntimeError(f"put failed: {res}")
            n += 1
    finally:
        cl.flush()
        cl.close()
    return n, sum(p.stat().st_size for p in (root / "commitlog").iterdir())


def tree_digest(d: Path) -> str:
    h = hashlib.sha256()
    for p in sorted(d.rglob("*")):
        if p.is_file():
            h.update(p.relative_to(d).as_posix().encode())
            with open(p, "rb") as f:
                while chunk := f.read(1 << 20):
                    h.update(chunk)
    return h.hexdigest()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size-mb", type=int, default=2048, help="commitlog size to generate (MiB)")
    ap.add_argument("--commitlog-file-mb", type=int, default=1024, help="mappedFileSizeCommitLog (MiB)")
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--split-mb", type=int, default=64)
    ap.add_argument("--dir", default=None, help="work directory (default: a temp dir, removed afterwards)")
    args = ap.parse_args(argv)

    work = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="rmqops-bench-rebuild-"))
    store = work / "store"
    try:
        t = time.monotonic()
        messages, cl_bytes = generate(store, args.size_mb, args.commitlog_file_mb)
        gen_s = time.monotonic() - t
        print(f"generated {messages:,} messages, {cl_bytes / 2**20:,.0f} MiB commitlog in {gen_s:.1f}s", flush=True)
        cfg_file = work / "broker.conf"
        cfg_file.write_text(f"mappedFileSizeCommitLog={args.commitlog_file_mb << 20}\n", encoding="utf-8")

        # 1. single-process reput: recovery re-dispatches every record (no CQ, no index yet)
        config = StoreConfig(store_path_root_dir=str(store), mapped_file_size_commit_log=args.commitlog_file_mb << 20)
        t = time.monotonic()
        ms = MessageStore(store, config)
        ms.open()
        ms.shutdown()
        reput_s = time.monotonic() - t
        reput_digest = tree_digest(store / "consumequeue")
        for sub in ("consumequeue", "batchconsumequeue", "index"):
            shutil.rmtree(store / sub, ignore_errors=True)

        # 2. Spark rebuild (session started beforehand; startup reported separately)
        from spark.rebuild import run_rebuild
        from spark.session import get_spark

        t = time.monotonic()
        session = get_spark(args.master, "rmqops-bench-rebuild")
        # Start the Python workers too (one trivial task per core): a long-running cluster or a
        # repeated rebuild pays this once, so it is reported with the session start, not the job.
        sc = session.sparkContext
        sc.parallelize(range(sc.defaultParallelism), sc.defaultParallelism).map(lambda x: x).count()
        startup_s = time.monotonic() - t
        try:
            summary = run_rebuild(store, cfg_file, parts=("cq", "index"), master=args.master, spark=session,
                                  split_bytes=args.split_mb << 20)
        finally:
            session.stop()
        spark_s = summary.elapsed_seconds
        data_bytes = summary.commitlog_bytes
        same = tree_digest(store / "consumequeue") == reput_digest
        reput_mbps = data_bytes / 1e6 / reput_s
        spark_mbps = data_bytes / 1e6 / spark_s
        print(f"single-process reput: {reput_s:8.2f}s  {reput_mbps:8.1f} MB/s")
        print(f"spark {args.master:>14}: {spark_s:8.2f}s  {spark_mbps:8.1f} MB/s  (+{startup_s:.1f}s session start)")
        print(f"ratio spark/reput: {reput_s / spark_s:.2f}x  (with session start {reput_s / (spark_s + startup_s):.2f}x)")
        print(f"consume queues identical: {same}; phases: {summary.phase_seconds}")
        result = {
            "bench": "rebuild", "master": args.master, "messages": messages, "records": summary.records,
            "commitlog_mb": round(data_bytes / 1e6, 1), "index_entries": summary.index_entries,
            "reput_s": round(reput_s, 3), "spark_s": round(spark_s, 3), "spark_startup_s": round(startup_s, 3),
            "reput_mb_per_s": round(reput_mbps, 2), "spark_mb_per_s": round(spark_mbps, 2),
            "spark_vs_reput_ratio": round(reput_s / spark_s, 3),
            "spark_with_startup_vs_reput_ratio": round(reput_s / (spark_s + startup_s), 3),
            "cq_identical": same, "cpus": os.cpu_count(),
        }
        print(json.dumps(result), flush=True)
        return 0 if same else 1
    finally:
        if not args.dir:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
