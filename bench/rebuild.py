"""Benchmark: Spark rebuild (local[2]) vs the store core's single-process reput, on one generated store.

Generates a store of about ``--size-mb`` MiB of commitlog (1 KiB bodies, 8 topics x 8 queues, KEYS
and UNIQ_KEY on every message) with the store's own CommitLog, then in the same run, ``--rounds``
times and alternating which goes first:

1. single process: the store core's fastest dispatch, ``ReputMessageService.do_reput`` from the
   first commitlog offset into empty consume queues and an empty index (the reput decoder,
   ``decode_dispatch_fields``, compiled when the hot path is built; it does not check the body CRC,
   which Spark's rebuild does, as recovery would). The store is opened (and its derived files then
   dropped) before the clock starts, so recovery's full decode is not in the figure: Spark is
   compared with the store at its best;
2. Spark: ``run_rebuild(parts=cq,index, master=local[2])`` on the same commitlog, in a session
   started once beforehand; start-up (session, Python workers, and one rebuild of a small warm-up
   store that JIT-compiles the JVM side) is timed separately and ratios including it are printed.

Why alternate and take medians: this machine is shared, and other processes' CPU use hurts the
2-core Spark job more than the 1-core reput. Before every timed run the benchmark waits (up to
``--quiet-wait`` s) for the machine to be quiet and records how busy it was, so both sides run in
the same machine state and the report shows that state. CPU seconds of each side (the driver, the
JVM and the Python workers) are reported too: they do not depend on the other processes. They are
sampled per process (own user+system time, every ``CPU_SAMPLE_S``) while a run lasts, so Spark
workers that exit between two samples cannot make the figure negative (they did when it was
computed from two snapshots of the live process tree).

Checks every round that both produced the same consume queue bytes and index contents, and ends with
one JSON line (ratios named ``..._ratio``; ``..._speedup_vs_reput_ratio`` = reput time / the other
side's time, > 1: faster than the reput; ``spark_cpu_cost_vs_reput_ratio`` = Spark CPU seconds / reput
CPU seconds, > 1: Spark spends more). Target: spark_speedup_vs_reput_ratio >= 1.8 on 2 cores.
Not part of the test suite. Example: ``.venv/bin/python bench/rebuild.py --size-mb 512``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from _args import fraction, nonnegative_float, nonnegative_int, positive_int, work_dir  # noqa: E402

from broker_core.store.codec import hotpath  # noqa: E402
from broker_core.store.codec.message import MessageInner  # noqa: E402
from broker_core.store.commit_log import CommitLog  # noqa: E402
from broker_core.store.message_store import MessageStore  # noqa: E402
from broker_core.store.store_config import StoreConfig  # noqa: E402

TOPICS = 8
QUEUES = 8
BODY_SIZE = 1024
DERIVED = ("consumequeue", "batchconsumequeue", "index")
CLK_TCK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def generate(root: Path, size_mb: int, commitlog_file_mb: int) -> int:
    """Write the commitlog with the store's CommitLog (appending to an existing one); returns messages written."""
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
    return n


def prepare_store_dir(work: Path, size_mb: int, commitlog_file_mb: int) -> Path:
    """``work/store``, emptied unless the store there was made with this shape (its marker says so).

    Why: ``generate`` appends up to ``--size-mb``, so a store left in ``--dir`` by a run with a larger
    size or another commitlog file size was reused as it was and the figures labelled with the new
    options. The same shape is reused (a generation cut short is completed by ``generate``)."""
    store, marker = work / "store", work / "bench-rebuild-shape.json"
    shape = {"size_mb": size_mb, "commitlog_file_mb": commitlog_file_mb, "topics": TOPICS, "queues": QUEUES,
             "body_bytes": BODY_SIZE}
    try:
        found = json.loads(marker.read_text()) if marker.exists() else None
    except (OSError, ValueError):
        found = None
    if found != shape:
        if store.exists():
            print(f"store in {work} was made with another shape ({found or 'an older layout'}), not {shape}: "
                  "generating it again", file=sys.stderr)
        shutil.rmtree(store, ignore_errors=True)
        work.mkdir(parents=True, exist_ok=True)
        marker.write_text(json.dumps(shape))
    return store


def clean_derived(store: Path) -> None:
    """Back to a commitlog-only store: no queues, no index, no checkpoint, no abort marker."""
    for sub in DERIVED:
        shutil.rmtree(store / sub, ignore_errors=True)
    for name in ("abort", "checkpoint"):
        (store / name).unlink(missing_ok=True)


def tree_digest(d: Path) -> str:
    h = hashlib.sha256()
    for p in sorted(d.rglob("*")) if d.is_dir() else []:
        if p.is_file():
            h.update(p.relative_to(d).as_posix().encode())
            with open(p, "rb") as f:
                while chunk := f.read(1 << 20):
                    h.update(chunk)
    return h.hexdigest()


def index_digest(d: Path) -> str:
    """Index files' contents in name order (names are creation times, so they differ between runs)."""
    h = hashlib.sha256()
    for p in sorted(d.iterdir()) if d.is_dir() else []:
        with open(p, "rb") as f:
            while chunk := f.read(1 << 20):
                h.update(chunk)
    return h.hexdigest()


def outputs_digest(store: Path) -> tuple[str, str]:
    return tree_digest(store / "consumequeue"), index_digest(store / "index")


# ------------------------------------------------------------------------------ machine state / CPU

def _cpu_times() -> tuple[int, int]:
    """(busy, total) jiffies of the whole machine from /proc/stat."""
    with open("/proc/stat", encoding="ascii") as f:
        vals = [int(x) for x in f.readline().split()[1:]]
    idle = vals[3] + (vals[4] if len(vals) > 4 else 0)
    total = sum(vals[:8])
    return total - idle, total


def machine_busy(seconds: float = 1.0) -> float:
    """Fraction of all cores busy over ``seconds`` (ours are idle meanwhile: this is everyone else)."""
    b0, t0 = _cpu_times()
    time.sleep(seconds)
    b1, t1 = _cpu_times()
    return (b1 - b0) / (t1 - t0) if t1 > t0 else 0.0


def wait_quiet(max_wait: float, threshold: float) -> float:
    """Wait until the machine is at most ``threshold`` busy (or ``max_wait`` passed); return the last busy."""
    deadline = time.monotonic() + max_wait
    busy = machine_busy()
    while busy > threshold and time.monotonic() < deadline:
        busy = machine_busy()
    return busy


CPU_SAMPLE_S = 0.1


def _process_table() -> dict[int, tuple[int, int, int]]:
    """pid -> (parent pid, start time, own user+system jiffies) of every process."""
    table: dict[int, tuple[int, int, int]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", encoding="ascii", errors="replace") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        table[int(name)] = (int(fields[1]), int(fields[19]), int(fields[11]) + int(fields[12]))
    return table


def _tree(table: dict[int, tuple[int, int, int]], root: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for pid, (ppid, _start, _cpu) in table.items():
        children.setdefault(ppid, []).append(pid)
    out, stack = [], [root]
    while stack:
        pid = stack.pop()
        out.append(pid)
        stack.extend(children.get(pid, []))
    return out


class TreeCpu:
    """CPU seconds used by this process and its descendants (the Spark JVM, its Python workers) during
    a run, sampled per process: a process's own user+system time at its last sample minus at its
    first (zero for processes started during the run). Children's times are never taken from the
    parents' cumulative fields, so an exiting worker is neither lost twice nor counted twice; what it
    used after its last sample (at most CPU_SAMPLE_S) is missed.
    """

    def __init__(self) -> None:
        self.first: dict[tuple[int, int], int] = {}
        self.last: dict[tuple[int, int], int] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _sample(self, initial: bool = False) -> None:
        table = _process_table()
        for pid in _tree(table, os.getpid()):
            if pid not in table:
                continue
            _ppid, start, cpu = table[pid]
            key = (pid, start)
            if key not in self.first:
                self.first[key] = cpu if initial else 0
            self.last[key] = cpu

    def _run(self) -> None:
        while not self._stop.wait(CPU_SAMPLE_S):
            self._sample()

    def __enter__(self) -> TreeCpu:
        self._sample(initial=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self._sample()

    @property
    def seconds(self) -> float:
        return sum(self.last[k] - self.first[k] for k in self.last) / CLK_TCK


def timed(fn: Callable[[], object]) -> tuple[float, float, object]:
    with TreeCpu() as cpu:
        t0 = time.monotonic()
        out = fn()
        wall = time.monotonic() - t0
    return wall, cpu.seconds, out


# ------------------------------------------------------------------------------------------- ceiling

def open_for_reput(store: Path, config: StoreConfig) -> MessageStore:
    """Open the store (recovery dispatches everything: untimed), then drop what it derived."""
    ms = MessageStore(store, config)
    ms.open()
    ms.delete_topics(ms.topics())
    assert ms.index_service is not None
    ms.index_service.destroy()
    ms.reput.reput_from_offset = ms.commit_log.min_offset()
    return ms


def _half_child(store: Path, file_mb: int) -> int:
    """Child of ``two_halves_in_parallel``: open its store untimed, wait for "go", time ``do_reput`` and
    the shutdown that flushes what it wrote (both sides of the benchmark time their flush)."""
    clean_derived(store)
    ms = open_for_reput(store, StoreConfig(store_path_root_dir=str(store), mapped_file_size_commit_log=file_mb << 20))
    print("ready", flush=True)
    sys.stdin.readline()
    c0, t0 = time.process_time(), time.monotonic()
    n = ms.reput.do_reput()
    ms.shutdown()  # timed, as on the reput side: the queues' and index's flush is part of the work
    wall, cpu = time.monotonic() - t0, time.process_time() - c0
    print(json.dumps({"s": wall, "cpu_s": cpu, "records": n}), flush=True)
    return 0


def two_halves_in_parallel(store: Path, work: Path, file_mb: int) -> dict:
    """The ceiling of any 2-way split of this dispatch: two processes, each the store's own reput
    over one half of the commitlog files (a copy of them in a store of its own), started together.
    Its wall time is what a perfect 2-core job with the reput's per-record work would take here."""
    import subprocess

    files = sorted((store / "commitlog").iterdir())
    halves = [files[:len(files) // 2], files[len(files) // 2:]]
    procs = []
    for i, half in enumerate(halves):
        d = work / f"half{i}"
        shutil.rmtree(d, ignore_errors=True)
        (d / "commitlog").mkdir(parents=True)
        for f in half:
            shutil.copyfile(f, d / "commitlog" / f.name)
        procs.append(subprocess.Popen([sys.executable, __file__, "--half-child", str(d),
                                       "--commitlog-file-mb", str(file_mb)], stdin=subprocess.PIPE,
                                      stdout=subprocess.PIPE, text=True, env=dict(os.environ, PYTHONPATH=str(REPO))))
    for p in procs:
        assert p.stdout is not None and p.stdout.readline().strip() == "ready"
    t0 = time.monotonic()
    for p in procs:
        assert p.stdin is not None
        p.stdin.write("go\n")
        p.stdin.flush()
    outs = [json.loads(p.stdout.readline()) for p in procs]  # type: ignore[union-attr]
    wall = time.monotonic() - t0
    for p in procs:
        p.wait(timeout=120)
    for i in range(2):
        shutil.rmtree(work / f"half{i}", ignore_errors=True)
    return {"s": round(wall, 3), "halves": outs, "files": [len(h) for h in halves]}


# ------------------------------------------------------------------------------------------- main

def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size-mb", type=positive_int, default=2048, help="commitlog size to generate (MiB)")
    ap.add_argument("--commitlog-file-mb", type=positive_int, default=1024, help="mappedFileSizeCommitLog (MiB)")
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--split-mb", type=positive_int, default=64)
    ap.add_argument("--rounds", type=positive_int, default=3, help="timed runs of each side (alternating)")
    ap.add_argument("--warmup-mb", type=nonnegative_int, default=64,
                    help="size of the store rebuilt once before timing (counted as Spark start-up); 0: none")
    ap.add_argument("--quiet-wait", type=nonnegative_float, default=60.0,
                    help="max seconds to wait before each run for the machine to be quiet")
    ap.add_argument("--quiet-busy", type=fraction, default=0.10,
                    help="machine busy fraction counted as quiet (0..1)")
    ap.add_argument("--dir", type=work_dir, default=None,
                    help="work directory (created if missing), kept afterwards; a store generated there before with the same "
                         "--size-mb and --commitlog-file-mb is reused, any other is generated again")
    ap.add_argument("--ceiling", action="store_true",
                    help="also time two reputs over the two halves of the commitlog files in parallel each round")
    ap.add_argument("--half-child", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.half_child:
        return _half_child(Path(args.half_child), args.commitlog_file_mb)

    work = args.dir if args.dir else Path(tempfile.mkdtemp(prefix="rmqops-bench-rebuild-"))
    store = prepare_store_dir(work, args.size_mb, args.commitlog_file_mb)
    try:
        t = time.monotonic()
        written = generate(store, args.size_mb, args.commitlog_file_mb)
        gen_s = time.monotonic() - t
        cl_bytes = sum(p.stat().st_size for p in (store / "commitlog").iterdir())
        print(f"generated {written:,} messages ({cl_bytes / 2**20:,.0f} MiB of commitlog files) in {gen_s:.1f}s",
              flush=True)
        cfg_file = work / "broker.conf"
        cfg_file.write_text(f"mappedFileSizeCommitLog={args.commitlog_file_mb << 20}\n", encoding="utf-8")
        config = StoreConfig(store_path_root_dir=str(store), mapped_file_size_commit_log=args.commitlog_file_mb << 20)

        from spark.rebuild import REBUILD_SPARK_CONF, run_rebuild
        from spark.session import get_spark

        # Start-up, paid once by a long-running cluster or a series of rebuilds, so it is reported
        # apart from the job: the session, the Python workers (one trivial task per core), and a
        # rebuild of a small store, which JIT-compiles the JVM's scheduling path (the first rebuild
        # in a fresh JVM spends seconds of CPU compiling). The reput gets the same warm-up run.
        warm = work / "warmup"
        if args.warmup_mb > 0:
            generate(warm / "store", args.warmup_mb, args.commitlog_file_mb)
            (warm / "broker.conf").write_text(cfg_file.read_text(encoding="utf-8"), encoding="utf-8")
            clean_derived(warm / "store")
            ms = MessageStore(warm / "store", StoreConfig(store_path_root_dir=str(warm / "store"),
                                                          mapped_file_size_commit_log=args.commitlog_file_mb << 20))
            ms.open()
            ms.shutdown()
            clean_derived(warm / "store")
        t = time.monotonic()
        session = get_spark(args.master, "rmqops-bench-rebuild", REBUILD_SPARK_CONF)  # as the job starts it
        sc = session.sparkContext
        sc.parallelize(range(sc.defaultParallelism), sc.defaultParallelism).map(lambda x: x).count()
        session_s = time.monotonic() - t
        if args.warmup_mb > 0:
            run_rebuild(warm / "store", warm / "broker.conf", parts=("cq", "index"), master=args.master,
                        spark=session, split_bytes=args.split_mb << 20)
        startup_s = time.monotonic() - t
        print(f"spark start-up {startup_s:.1f}s (session + workers {session_s:.1f}s, "
              f"{args.warmup_mb} MiB warm-up rebuild {startup_s - session_s:.1f}s)", flush=True)

        def reput(ms: MessageStore) -> object:
            dispatched = ms.reput.do_reput()
            ms.shutdown()
            return dispatched

        def rebuild() -> object:
            return run_rebuild(store, cfg_file, parts=("cq", "index"), master=args.master, spark=session,
                               split_bytes=args.split_mb << 20)

        runs: dict[str, list[dict]] = {"reput": [], "spark": []}
        identical = True
        summary = None
        try:
            for rnd in range(args.rounds):
                order = ("reput", "spark") if rnd % 2 == 0 else ("spark", "reput")
                digests = {}
                for side in order:
                    clean_derived(store)
                    ms = open_for_reput(store, config) if side == "reput" else None
                    busy = wait_quiet(args.quiet_wait, args.quiet_busy)
                    wall, cpu, out = timed((lambda: reput(ms)) if side == "reput" else rebuild)  # noqa: B023
                    if side == "spark":
                        summary = out
                    digests[side] = outputs_digest(store)
                    runs[side].append({"s": round(wall, 3), "cpu_s": round(cpu, 2), "busy_before": round(busy, 3),
                                       "loadavg": round(os.getloadavg()[0], 2)})
                    print(f"round {rnd + 1} {side:5}: {wall:7.2f}s wall {cpu:7.2f}s cpu "
                          f"(machine {busy:.0%} busy before)", flush=True)
                if args.ceiling:
                    busy = wait_quiet(args.quiet_wait, args.quiet_busy)
                    load = os.getloadavg()[0]
                    c = two_halves_in_parallel(store, work, args.commitlog_file_mb)
                    c.update(busy_before=round(busy, 3), loadavg=round(load, 2))
                    runs.setdefault("halves", []).append(c)
                    print(f"round {rnd + 1} two halves in parallel: {c['s']:7.2f}s wall "
                          f"(cpu {[round(h['cpu_s'], 2) for h in c['halves']]}, load {load:.1f})", flush=True)
                same = digests["reput"] == digests["spark"]
                identical = identical and same
                if not same:
                    print(f"round {rnd + 1}: OUTPUTS DIFFER (cq, index): reput {digests['reput']} "
                          f"spark {digests['spark']}", flush=True)
        finally:
            session.stop()
        assert summary is not None
        data_bytes = summary.commitlog_bytes  # type: ignore[attr-defined]
        reput_s = statistics.median(r["s"] for r in runs["reput"])
        spark_s = statistics.median(r["s"] for r in runs["spark"])
        reput_cpu = statistics.median(r["cpu_s"] for r in runs["reput"])
        spark_cpu = statistics.median(r["cpu_s"] for r in runs["spark"])
        reput_mbps = data_bytes / 1e6 / reput_s
        spark_mbps = data_bytes / 1e6 / spark_s
        print(f"single-process reput ({hotpath.IMPLEMENTATION} hot path): median {reput_s:8.2f}s  {reput_mbps:8.1f} MB/s  ({reput_cpu:.1f}s cpu)")
        print(f"spark {args.master:>14}: median {spark_s:8.2f}s  {spark_mbps:8.1f} MB/s  ({spark_cpu:.1f}s cpu, "
              f"+{startup_s:.1f}s session start)")
        print(f"spark speed-up over reput (reput time / spark time): {reput_s / spark_s:.2f}x  "
              f"(with session start {reput_s / (spark_s + startup_s):.2f}x)")
        print(f"outputs identical: {identical}; last spark phases: {summary.phase_seconds}")  # type: ignore[attr-defined]
        result = {
            "bench": "rebuild", "master": args.master, "rounds": args.rounds,
            "reput_side": "ReputMessageService.do_reput from the first offset (decode_dispatch_fields)",
            "hot_path": hotpath.IMPLEMENTATION,
            "records": summary.records, "commitlog_mb": round(data_bytes / 1e6, 1),  # type: ignore[attr-defined]
            "index_entries": summary.index_entries,  # type: ignore[attr-defined]
            "reput_s": round(reput_s, 3), "spark_s": round(spark_s, 3), "spark_startup_s": round(startup_s, 3),
            "spark_session_s": round(session_s, 3), "warmup_mb": args.warmup_mb,
            "reput_cpu_s": reput_cpu, "spark_cpu_s": spark_cpu,
            "reput_mb_per_s": round(reput_mbps, 2), "spark_mb_per_s": round(spark_mbps, 2),
            # Speed-ups (reput time / Spark time: > 1, Spark is faster) and a cost (Spark CPU / reput CPU).
            "spark_speedup_vs_reput_ratio": round(reput_s / spark_s, 3),
            "spark_with_startup_speedup_vs_reput_ratio": round(reput_s / (spark_s + startup_s), 3),
            "spark_cpu_cost_vs_reput_ratio": round(spark_cpu / reput_cpu, 3) if reput_cpu else None,
            "round_spark_speedup_ratios": [round(a["s"] / b["s"], 3)
                                           for a, b in zip(runs["reput"], runs["spark"], strict=True)],
            "busy_before_max": max(r["busy_before"] for side in runs.values() for r in side),
            "runs": runs, "outputs_identical": identical, "cpus": os.cpu_count(),
            "loadavg_median": round(statistics.median(r["loadavg"] for side in ("reput", "spark")
                                                      for r in runs[side]), 2),
        }
        if runs.get("halves"):
            halves_s = statistics.median(r["s"] for r in runs["halves"])
            # The ceiling: a 2-way split of the reput's own per-record work, run on both cores.
            result["two_halves_parallel_s"] = round(halves_s, 3)
            result["two_halves_speedup_vs_reput_ratio"] = round(reput_s / halves_s, 3)
            half_cpu = statistics.median(sum(h["cpu_s"] for h in r["halves"]) for r in runs["halves"])
            result["cpu_based_two_halves_speedup_vs_reput_ratio"] = round(reput_cpu / (half_cpu / 2), 3)
            result["cpu_based_spark_speedup_vs_reput_ratio"] = round(
                reput_cpu / (spark_cpu / (os.cpu_count() or 1)), 3)
        print(json.dumps(result), flush=True)
        return 0 if identical else 1
    finally:
        if not args.dir:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
