"""Recovery benchmark: clean reopen vs reopen after kill -9, of the same indexed store (one JSON line).

Why: a broker killed mid-run must come back quickly *and* with every index entry (issue 17: 20.4 s
after kill -9 against 7.4 s clean, for 1,000,000 indexed messages, because the not-yet-full index
file was deleted and every record re-dispatched). This measures exactly that, on this machine, in
one run:

1. a child process writes ``--messages`` messages (``--body`` bytes, 8 queues, a UNIQ_KEY and one
   KEYS token each: two index entries per message) into a fresh store with the default
   StoreConfig, waits until everything is dispatched, says ``ready`` and is killed with SIGKILL:
   the *crashed* master (``abort`` present);
2. a copy of it is opened writable once (abnormal recovery) and shut down cleanly: the *clean*
   master. That first recovery checks *every* key (``query_offsets_by_key`` of each UNIQ_KEY and
   KEYS token must give exactly its record): nothing indexed before the kill may be missing;
3. ``--reps`` times, after one discarded warm-up pair: fresh copies of *both* masters are made
   and synced to disk (not timed: the two sides then find the page cache in the same state), then
   a child process opens each copy, alternating which side goes first, and reports the time
   ``MessageStore.open()`` took and its whole-process time.

Why fresh copies for both sides: this bench first reopened one clean store again and again (each
open found it just used and shut down by the previous one) against a just-copied crashed store, so
the two sides did not start from the same file and page-cache state (it reported 1.66x at 1M).

Every timed open is checked too: the index holds exactly ``2 x messages`` entries and a sample of
keys (random ones plus the last 1,000 written, the ones a crash endangers) each find their message.
``crash_reopen_vs_clean_ratio`` is the ratio of the medians of ``open()`` (target <= 1.5); the
paired ratios (crash / clean of the same repetition), their spread and the load average are printed
because the machine is shared; ``crash_dispatched`` is how many records each crash reopen
re-dispatched.

Usage: ``python bench/recovery.py [--messages 1000000] [--reps 3] [--dir DIR]``.
Modes used internally: ``--write ROOT`` and ``--open ROOT``.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from _args import nonnegative_int, positive_int, work_dir  # noqa: E402

from broker_core.store.codec.message import MessageInner  # noqa: E402
from broker_core.store.message_store import MessageStore  # noqa: E402
from broker_core.store.store_config import StoreConfig  # noqa: E402

TOPIC = "RecoveryBench"
QUEUES = 8


def uniq_key(i: int) -> str:
    return f"7F0000010000{i:020X}"


def message(i: int, body: bytes) -> MessageInner:
    return MessageInner(topic=TOPIC, body=body, queue_id=i % QUEUES, born_timestamp=1_700_000_000_000 + i,
                        properties={"UNIQ_KEY": uniq_key(i), "KEYS": f"key-{i}", "TAGS": "TagA"},
                        born_host=("10.0.0.1", 40000), store_host=("127.0.0.1", 10911))


def config() -> StoreConfig:
    """RocketMQ's defaults, except the commitlog file size when ``RMQ_BENCH_COMMITLOG_MB`` is set."""
    mb = int(os.environ.get("RMQ_BENCH_COMMITLOG_MB", "1024"))
    return StoreConfig(mapped_file_size_commit_log=mb << 20)


def write_store(root: Path, n: int, body_size: int, clean: bool = False) -> None:
    """Child: write ``n`` messages, wait for dispatch, flush, say ready, then wait to be killed
    (``clean``: shut the store down and exit instead)."""
    body = (b"0123456789abcdef" * (body_size // 16 + 1))[:body_size]
    store = MessageStore(root, config()).open()
    store.start()
    for i in range(n):
        r = store.put_message(message(i, body))
        if not r.ok:
            raise SystemExit(f"put {i} failed: {r.status} {r.remark}")
    if not store.wait_for_dispatch(600):
        raise SystemExit("dispatch did not catch up")
    store.flush()
    if clean:
        store.shutdown()
        print("ready", flush=True)
        return
    print("ready", flush=True)
    time.sleep(3600)


def open_store(root: Path, n: int, sample: int, all_keys: bool = False) -> dict:
    """Child: time a writable open (recovery), check the index, shut down; returns the figures.

    ``all_keys``: every message's two keys must give exactly its own offset (``query_offsets_by_key``,
    the index alone), not just a sample (``query_message``).
    """
    t0 = time.perf_counter()
    store = MessageStore(root, config()).open()
    open_s = time.perf_counter() - t0
    try:
        report = store.recovery_report
        assert store.index_service is not None
        entries = store.index_service.stats().entry_count
        if all_keys:
            phys = _record_offsets(store)
            wanted = list(range(n))
            missing = [i for i in wanted if i >= len(phys)
                       or store.query_offsets_by_key(TOPIC, f"key-{i}") != [phys[i]]
                       or store.query_offsets_by_key(TOPIC, uniq_key(i)) != [phys[i]]]
        else:
            rng = random.Random(7)
            wanted = sorted(set(rng.sample(range(n), min(sample, n)) + list(range(max(0, n - 1000), n))))
            missing = [i for i in wanted if len(store.query_message(TOPIC, f"key-{i}")) != 1
                       or len(store.query_message(TOPIC, uniq_key(i))) != 1]
        max_q = sum(store.get_max_offset_in_queue(TOPIC, q) for q in range(QUEUES))
    finally:
        store.shutdown()
    return {"open_s": round(open_s, 3), "abnormal": report.abnormal if report else None,
            "dispatched": report.dispatched if report else None, "index_entries": entries,
            "keys_checked": len(wanted), "keys_missing": len(missing), "queue_messages": max_q}


def _record_offsets(store: MessageStore) -> list[int]:
    """Commitlog offset of message i (i-th in queue i % 8 at queue offset i // 8), from the queues."""
    per_queue = []
    for q in range(QUEUES):
        cq = store.consume_queues.get((TOPIC, q))
        per_queue.append([u.phy_offset for u in cq.iter_all_units()] if cq is not None else [])
    out = []
    i = 0
    while i // QUEUES < len(per_queue[i % QUEUES]):
        out.append(per_queue[i % QUEUES][i // QUEUES])
        i += 1
    return out


def copy_store(src: Path, dst: Path) -> None:
    """Copy a store keeping its files sparse (index and commitlog files are mostly holes)."""
    if dst.exists():
        shutil.rmtree(dst)
    subprocess.run(["cp", "-a", "--sparse=always", str(src), str(dst)], check=True)


def child_open(root: Path, n: int, sample: int, all_keys: bool = False) -> dict:
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, __file__, "--open", str(root), "--messages", str(n), "--sample", str(sample)]
                          + (["--all-keys"] if all_keys else []), capture_output=True, text=True, env=env)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise RuntimeError(f"open of {root} failed: {proc.stderr[-3000:]}")
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    out["process_s"] = round(wall, 3)
    return out


def make_clean_store(root: Path, n: int, body_size: int) -> float:
    """Run the writer child with a clean shutdown at the end; returns the seconds it took."""
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    t0 = time.perf_counter()
    subprocess.run([sys.executable, __file__, "--write", str(root), "--clean", "--messages", str(n), "--body",
                    str(body_size)], check=True, stdout=subprocess.DEVNULL, env=env)
    return time.perf_counter() - t0


def make_crashed_store(root: Path, n: int, body_size: int) -> float:
    """Run the writer child until ``ready`` and SIGKILL it; returns the seconds it took."""
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, __file__, "--write", str(root), "--messages", str(n),
                             "--body", str(body_size)], stdout=subprocess.PIPE, text=True, env=env)
    try:
        line = proc.stdout.readline() if proc.stdout else ""
        if line.strip() != "ready":
            raise RuntimeError(f"writer ended without 'ready' (exit {proc.wait()})")
        took = time.perf_counter() - t0
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
    if not (root / "abort").exists():
        raise RuntimeError("the killed writer left no abort file: not a crashed store")
    return took


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--messages", type=positive_int, default=1_000_000)
    ap.add_argument("--body", type=positive_int, default=1024, help="body size in bytes (default 1024)")
    ap.add_argument("--reps", type=positive_int, default=3)
    ap.add_argument("--commitlog-file-mb", type=positive_int, default=1024,
                    help="mappedFileSizeCommitLog in MiB (default RocketMQ's 1024; smaller files reach a "
                         "multi-file store with fewer messages)")
    ap.add_argument("--sample", type=nonnegative_int, default=2000, help="random keys checked per open (plus the last 1000)")
    ap.add_argument("--dir", type=work_dir, default=None,
                    help="work directory (created if missing, kept); default: a temp dir, removed")
    ap.add_argument("--write", type=Path, default=None, help=argparse.SUPPRESS)
    ap.add_argument("--open", type=Path, default=None, help=argparse.SUPPRESS)
    ap.add_argument("--clean", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--all-keys", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.write is not None:
        write_store(args.write, args.messages, args.body, args.clean)
        return
    if args.open is not None:
        print(json.dumps(open_store(args.open, args.messages, args.sample, args.all_keys)))
        return

    n = args.messages
    os.environ["RMQ_BENCH_COMMITLOG_MB"] = str(args.commitlog_file_mb)  # for the children
    work = args.dir if args.dir else Path(tempfile.mkdtemp(prefix="rmqops-bench-recovery-"))
    load_before = [round(x, 2) for x in os.getloadavg()]
    try:
        master, clean_master = work / "crashed-master", work / "clean-master"
        clean, crash = work / "clean", work / "crash"
        for p in (master, clean_master, clean, crash):
            if p.exists():
                shutil.rmtree(p)
        write_s = make_crashed_store(master, n, args.body)
        copy_store(master, clean_master)
        # The crashed store's first recovery, every key checked; it leaves the clean master behind.
        first_recovery = child_open(clean_master, n, args.sample, all_keys=True)
        runs: dict[str, list[dict]] = {"clean": [], "crash": []}

        def pair(order: tuple[str, str]) -> dict[str, dict]:
            """Fresh copies of both masters, synced (untimed), then both opened in ``order``."""
            copy_store(clean_master, clean)
            copy_store(master, crash)
            os.sync()
            return {side: child_open(clean if side == "clean" else crash, n, args.sample) for side in order}

        pair(("clean", "crash"))  # warm-up (page cache, .pyc files), discarded
        for r in range(args.reps):
            got = pair(("clean", "crash") if r % 2 == 0 else ("crash", "clean"))
            for side in ("clean", "crash"):
                runs[side].append(got[side])
        med = statistics.median
        clean_s = med(x["open_s"] for x in runs["clean"])
        crash_s = med(x["open_s"] for x in runs["crash"])
        paired = [c["open_s"] / k["open_s"] for c, k in zip(runs["crash"], runs["clean"], strict=True)]
        expected = 2 * n
        all_runs = runs["clean"] + runs["crash"]
        print(json.dumps({
            "bench": "recovery", "messages": n, "body_bytes": args.body,
            "commitlog_file_mb": args.commitlog_file_mb, "reps": len(runs["clean"]),
            "cpus": os.cpu_count(), "loadavg_before": load_before,
            "loadavg_after": [round(x, 2) for x in os.getloadavg()],
            "write_and_dispatch_s": round(write_s, 2),
            "clean_open_s": clean_s, "crash_open_s": crash_s,
            "crash_reopen_vs_clean_ratio": round(crash_s / clean_s, 3) if clean_s else None,
            "crash_reopen_vs_clean_ratio_paired": round(med(paired), 3),
            "paired_spread": [round(min(paired), 3), round(max(paired), 3)],
            "clean_process_s": med(x["process_s"] for x in runs["clean"]),
            "crash_process_s": med(x["process_s"] for x in runs["crash"]),
            "crash_dispatched": [x["dispatched"] for x in runs["crash"]],
            "crash_all_keys_checked": first_recovery["keys_checked"],
            "crash_keys_missing": first_recovery["keys_missing"],
            "index_entries_expected": expected,
            "index_entries_ok": all(x["index_entries"] == expected for x in all_runs + [first_recovery]),
            "index_entries_seen": sorted({x["index_entries"] for x in all_runs}),
            "keys_missing": sum(x["keys_missing"] for x in all_runs),
            "queue_messages_ok": all(x["queue_messages"] == n for x in all_runs + [first_recovery]),
            "first_recovery_of_crash": first_recovery,
            "runs": runs,
        }))
    finally:
        if not args.dir:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
