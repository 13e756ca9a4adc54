"""Store append benchmark: put + dispatch throughput against same-run baselines (prints one JSON line).

Why: absolute msg/s depend on the machine; the ratios to what bare Python can do on the same machine
in the same run (an encode-and-copy loop into an mmap, sequential page-cache writes) tell whether
the store's hot path wastes time. Figures:

* (a) ``put_dispatch_*``: per-message ``put_message`` with synchronous dispatch to the consume queue
  and the index, 1 KiB bodies, ASYNC_FLUSH; ratio to the bare encode+copy loop.
* (b) ``batchcq_*``: ``put_inner_batch`` of 64 x 1 KiB items on a BatchCQ topic; ratio of MB/s to
  sequential page-cache write bandwidth. ``batchcq_write_buffer_*``: the same with the store's write
  buffer (``transientStorePoolEnable``: records committed to the file in ~1 MiB writes); its timed
  section ends with ``wait_for_dispatch`` (every record committed and in its queue), the default
  store's too (a no-op there: it dispatches each put at once). The three run interleaved.
* (c) ``sync_*``: SYNC_FLUSH with 16 producer threads: puts/s, fsyncs/s and puts per fsync.
* ``implementation``: the hot path in use ("c" or "python"); ``fallback_put_dispatch_*`` are (a)
  again in a child process on the pure-Python twin (``RMQ_PURE_PYTHON=1``).

What bounds (b) (measured on a 2-core AMD EPYC VM, CPU time): the baseline moves 1 MiB per write
call; the store must also compute BODYCRC (64 KiB: 2.7 us with the compiled VPCLMULQDQ CRC, 5.9 us
through isal) and write one ~67 KiB record. A page-cache write of one such record costs about twice
as much per byte as a 1 MiB write (2.5 against 4.8-5.6 GB/s: the kernel gives large writes large
folios), which is what the write buffer recovers by committing ~1 MiB at a time. A loop doing only
CRC + those grouped writes reaches ~0.8 of the baseline. Note the baseline writes into a file without
blocks allocated ahead, which costs more than writing into posix_fallocate'd blocks as the store does
(3.7 against 5.6 GB/s of CPU here): it is kept as it was, it only makes the ratio easier.

* Default store (``batchcq_ratio``): every put writes its record at once (readers see it when the
  put returns), so the figure stays bound by one ~67 KiB pwrite a record (~0.3): that write is the
  largest part of its time, then the CRC and the copy into the record scratch of the one-call put
  (``fast_put.put_inner_batch_fast``); unchanged by the write buffer work.
* Write buffer (``batchcq_write_buffer_ratio``, the figure issue 17's 0.6 target is reached on):
  the put is one flat function around one compiled call (``buffered_put.put_inner_batch_buffered``
  over ``hotpath.buffer_inner_batch``: INNER_BASE/INNER_NUM, record encode and CRC, the body kept
  by reference, the parts and dispatch entry appended to the buffer), the
  commit one pwritev of ~1 MiB (16 records, 48 buffers), and each committed record's BatchCQ unit
  and index entries one compiled call (``hotpath.dispatch_inner_batch``) in a flat loop. Profiled
  a batch (medians, machine under load 6): commit pwritev ~17 us (about half), encode + CRC
  ~4-7 us, put bookkeeping in Python ~6 us (lock, queue offset, INNER_BASE/INNER_NUM, buffer
  lists, result), dispatch ~3 us (unit and index state in Python). What is left is the kernel's
  copy into the page cache and ~9 us of Python a batch; dispatch waits for the commit by design
  (RocketMQ's reput reads committed data only), so it cannot be folded into the put's call.
  Committing more than 1 MiB at a time was not faster here (2 and 4 MiB measured slower), nor
  are 2 MiB-aligned commits (the drifting ~1 MiB commits already write at the aligned rate,
  ~5 GB/s of CPU into the fallocated file; only a fixed sub-page misalignment is slow).
  Measured (7 reps a run, other benchmarks running on the machine): with a steady baseline
  (~3,300-3,500 MB/s, load 1.8-2.2) ``batchcq_write_buffer_ratio`` 0.41-0.51 (CPU 0.51-0.53; runs
  with a collapsing baseline gave up to 0.69); the code before this path in the same minutes: 0.36
  (CPU 0.435). The store's CPU a batch, taken apart by switching parts off in one process: ~40 us
  in all; the commit's pwritev ~19 us (more than the ~14 us of a bare loop of the same writes:
  the Python between commits leaves the caches cold), dispatch ~6-9 us (~1.8 us of it the compiled
  unit + index call, the rest Python and the index slot table's cache and TLB misses), the put
  ~15 us (encode + CRC 4.3 us, Python ~10 us). 0.6 needs ~31 us: the remaining gap is Python,
  which only moving the buffer bookkeeping and the dispatch state into compiled code would close.
  On a busy machine the page-cache baseline swings (150-3,400 MB/s within one run) and a longer
  run is preempted more than the 0.08 s baseline: read the ``*_runs`` lists and the load too.

Fairness: the bare loop writes the store's own record bytes (``baseline_same_bytes`` checks three of
them, the store time aside); the store does its consume queue unit and index entries on top.

Noise: the machines this runs on are small and shared, so a single run of each side says little.
One run of each side is made first and discarded (the first is always slow: cold page cache and
allocator). Each baseline and its subject then run ``--reps`` times, interleaved (A B, then B A,
...) so that load changes hit both sides alike; every run starts from a fresh store directory; the
SYNC_FLUSH scenario is repeated ``--reps`` times too. The load average before and after is
printed: compare figures only between runs under similar load. The JSON reports the
median of each side and the ratio of the medians, plus every repetition's figures (``*_runs``).
The ``*_cpu`` ratios use the same runs timed by this thread's CPU time instead of wall time; the
``*_paired`` ratios are the median of each repetition's own ratio (its two runs are adjacent, so a
machine that changes speed between repetitions moves both sides of a pair together).

Usage: ``python bench/store_append.py [--messages N] [--reps R] [--profile] [--only-batchcq]`` (runs in
a temp dir).
"""

from __future__ import annotations

import argparse
import json
import mmap
import os
import shutil
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from broker_core.store.codec import hotpath  # noqa: E402
from broker_core.store.codec.batch import BatchItem, encode_batch  # noqa: E402
from broker_core.store.codec.hashing import rmq_crc32  # noqa: E402
from broker_core.store.codec.message import MessageInner  # noqa: E402
from broker_core.store.message_store import MessageStore  # noqa: E402
from broker_core.store.store_config import ASYNC_FLUSH, SYNC_FLUSH, StoreConfig  # noqa: E402
from broker_core.store.topic_config import TopicConfig  # noqa: E402

BODY = bytes(range(256)) * 4  # 1 KiB
TOPIC = "BenchTopic"
_HEAD = struct.Struct(">iiiiiqqiq8sq8siqi")


class Timed:
    """Wall-clock and this thread's CPU time (user + system) of one timed section.

    CPU time is reported beside wall time because other processes on a small shared machine
    stretch wall time a lot and CPU time much less; every scenario here runs in the calling thread.
    """

    wall: float
    cpu: float

    def __enter__(self) -> Timed:
        self._w0 = time.perf_counter()
        self._c0 = time.thread_time()
        return self

    def __exit__(self, *exc: object) -> None:
        self.wall = time.perf_counter() - self._w0
        self.cpu = time.thread_time() - self._c0


def config(flush: str) -> StoreConfig:
    return StoreConfig(mapped_file_size_commit_log=256 * 1024 * 1024, flush_disk_type=flush)


def make_msg(i: int, body: bytes = BODY, queue_id: int | None = None) -> MessageInner:
    return MessageInner(topic=TOPIC, body=body, queue_id=i % 8 if queue_id is None else queue_id,
                        properties={"UNIQ_KEY": f"7F000001{i:024X}", "KEYS": f"key{i}", "TAGS": "TagA",
                                    "WAIT": "true"},
                        born_timestamp=1_700_000_000_000, born_host=("10.0.0.1", 40000),
                        store_host=("127.0.0.1", 10911))


def bare_encode_copy(n: int, directory: Path, keep: list[bytes] | None = None) -> tuple[float, float]:
    """msg/s (wall, CPU) of the minimum Python work per record: encode header/props, CRC the body (with
    the store's own CRC function, so a faster CRC helps both sides alike), copy it into an mmap.

    The records are byte for byte the store's records of ``make_msg`` (queue offset i // 8 in queue
    i % 8, the same commitlog offsets), the store timestamp aside: ``same_bytes_as_store`` checks it.
    ``keep`` receives a copy of records 0, 1 and n - 1 when given."""
    path = directory / "bare.mmap"
    size = 256 * 1024 * 1024
    with open(path, "w+b") as f:
        f.truncate(size)
        mm = mmap.mmap(f.fileno(), size)
    born = bytes([10, 0, 0, 1]) + (40000).to_bytes(4, "big")
    store = bytes([127, 0, 0, 1]) + (10911).to_bytes(4, "big")
    topic = TOPIC.encode()
    pos = 0
    with Timed() as t:
        for i in range(n):
            props = f"UNIQ_KEY\x017F000001{i:024X}\x02KEYS\x01key{i}\x02TAGS\x01TagA\x02WAIT\x01true\x02".encode()
            total = _HEAD.size + len(BODY) + 1 + len(topic) + 2 + len(props)
            if pos + total > size:
                pos = 0
            buf = bytearray(total)
            _HEAD.pack_into(buf, 0, total, -626843481, rmq_crc32(BODY), i % 8, 0, i // 8, pos, 0,
                            1_700_000_000_000, born, int(time.time() * 1000), store, 0, 0, len(BODY))
            p = _HEAD.size
            buf[p:p + len(BODY)] = BODY
            p += len(BODY)
            buf[p] = len(topic)
            buf[p + 1:p + 1 + len(topic)] = topic
            p += 1 + len(topic)
            buf[p:p + 2] = len(props).to_bytes(2, "big")
            buf[p + 2:] = props
            mm[pos:pos + total] = buf
            pos += total
    if keep is not None:
        keep.extend(bytes(buf) for buf in _records_at(mm, (0, 1, n - 1)))
    mm.close()
    path.unlink()
    return n / t.wall, n / t.cpu


def _records_at(buf, indexes: tuple[int, ...]) -> list[memoryview]:
    """Records number ``indexes`` of a run of records starting at 0 (walking TOTALSIZE)."""
    out, pos, i, want = [], 0, 0, set(indexes)
    while len(out) < len(want):
        total = int.from_bytes(buf[pos:pos + 4], "big")
        if i in want:
            out.append(memoryview(buf)[pos:pos + total])
        pos += total
        i += 1
    return out


STORE_TIMESTAMP_AT = 56  # IPv4 born host: 48 + 8


def same_bytes_as_store(bare: list[bytes], store: list[bytes]) -> bool:
    """The baseline is fair only if it writes what the store writes: equal records but the store time."""
    def masked(rec: bytes) -> bytes:
        return rec[:STORE_TIMESTAMP_AT] + rec[STORE_TIMESTAMP_AT + 8:]
    return len(bare) == len(store) == 3 and all(masked(a) == masked(b) for a, b in zip(bare, store, strict=True))


def page_cache_write_mb_s(directory: Path, total_mb: int = 256) -> tuple[float, float]:
    """Sequential buffered write bandwidth (MB/s: wall, CPU), 1 MiB writes, no fsync: the page-cache
    ceiling."""
    path = directory / "seq.bin"
    chunk = os.urandom(1 << 20)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    with Timed() as t:
        for _ in range(total_mb):
            os.write(fd, chunk)
    os.close(fd)
    path.unlink()
    return total_mb / t.wall, total_mb / t.cpu


def bench_put_dispatch(n: int, directory: Path, profile: bool = False, keep: list[bytes] | None = None
                       ) -> tuple[float, float]:
    root = directory / "a"
    store = MessageStore(root, config(ASYNC_FLUSH)).open()
    msgs = [make_msg(i) for i in range(n)]
    prof = None
    if profile:
        import cProfile

        prof = cProfile.Profile()
        prof.enable()
    with Timed() as t:
        for m in msgs:
            store.put_message(m)
    if prof is not None:
        import pstats

        prof.disable()
        pstats.Stats(prof, stream=sys.stderr).sort_stats("tottime").print_stats(25)
    assert sum(store.get_max_offset_in_queue(TOPIC, q) for q in range(8)) == n
    assert len(store.query_message(TOPIC, f"key{n - 1}")) == 1  # the index was really built
    if keep is not None:
        keep.extend(bytes(r) for r in _records_at(store.commit_log.file_queue.files[0].mv, (0, 1, n - 1)))
    store.shutdown()
    shutil.rmtree(root)
    return n / t.wall, n / t.cpu


def bench_batchcq(n_msgs: int, directory: Path, write_buffer: bool = False, profile: bool = False
                  ) -> tuple[float, float, float]:
    """(msg/s, MB/s of batch bodies, MB/s by CPU time); ``profile``: cProfile the timed section to stderr."""
    root = directory / "b"
    cfg = config(ASYNC_FLUSH)
    cfg.transient_store_pool_enable = write_buffer
    store = MessageStore(root, cfg).open()
    store.topic_table.put(TopicConfig(TOPIC, 8, 8, attributes={"queue.type": "BatchCQ"}), 0)
    body = encode_batch([BatchItem(BODY, {"TAGS": "TagA"}) for _ in range(64)])
    batches = max(1, n_msgs // 64)
    msgs = [make_msg(i, body) for i in range(batches)]
    prof = None
    if profile:
        import cProfile

        prof = cProfile.Profile()
        prof.enable()
    with Timed() as t:
        for m in msgs:
            store.put_inner_batch(m, 64)
        store.wait_for_dispatch()  # the write buffer's last records are committed and dispatched
    if prof is not None:
        import pstats

        prof.disable()
        print(f"--- batchcq, write buffer {'on' if write_buffer else 'off'}", file=sys.stderr)
        pstats.Stats(prof, stream=sys.stderr).sort_stats("tottime").print_stats(25)
    assert store.commit_log.write_buffer == write_buffer
    assert sum(store.get_max_offset_in_queue(TOPIC, q) for q in range(8)) == batches * 64
    store.shutdown()
    shutil.rmtree(root)
    mb = batches * len(body) / 1e6
    return batches * 64 / t.wall, mb / t.wall, mb / t.cpu


def bench_sync(n: int, directory: Path, threads: int = 16) -> tuple[float, float]:
    root = directory / "c"
    store = MessageStore(root, config(SYNC_FLUSH)).open()
    store.start()
    per = max(1, n // threads)
    failures = []

    def producer(t: int) -> None:
        for i in range(per):
            if not store.put_message(make_msg(t * per + i, BODY, t % 8)).ok:
                failures.append(i)

    ths = [threading.Thread(target=producer, args=(t,)) for t in range(threads)]
    f0 = store.commit_log.fsync_count
    t0 = time.perf_counter()
    for th in ths:
        th.start()
    for th in ths:
        th.join()
    dt = time.perf_counter() - t0
    fsyncs = store.commit_log.fsync_count - f0
    store.shutdown()
    shutil.rmtree(root)
    assert not failures
    return per * threads / dt, fsyncs / dt


def interleaved(reps: int, baseline, subject, warmup: bool = True) -> tuple[list, list]:
    """Run ``baseline()`` and ``subject()`` ``reps`` times each, alternating which goes first.

    One run of each is made first and discarded: the first repetition is always slow (page cache,
    allocator and CPU caches cold), which made single-run figures swing by 10x.
    """
    if warmup:
        baseline()
        subject()
    base_runs, subj_runs = [], []
    for r in range(reps):
        if r % 2 == 0:
            base_runs.append(baseline())
            subj_runs.append(subject())
        else:
            subj_runs.append(subject())
            base_runs.append(baseline())
    return base_runs, subj_runs


def interleaved3(reps: int, fns: tuple, warmup: bool = True) -> tuple[list, ...]:
    """``interleaved`` for three scenarios: one discarded warm-up run of each, then ``reps`` rounds
    in a rotating order (A B C, B C A, C A B, ...)."""
    for fn in fns if warmup else ():
        fn()
    runs: tuple[list, ...] = tuple([] for _ in fns)
    for r in range(reps):
        for k in range(len(fns)):
            i = (r + k) % len(fns)
            runs[i].append(fns[i]())
    return runs


def spread(values: list[float]) -> list[float]:
    """[min, max] of a figure's repetitions, rounded: how much the machine moved during the run."""
    return [round(min(values), 3), round(max(values), 3)]


def fallback_figures(args: argparse.Namespace) -> dict | None:
    """The put+dispatch scenario again in a child process on the pure-Python twin (RMQ_PURE_PYTHON=1).

    A child because the implementation is chosen at import; it runs right after this process's
    own repetitions, so the two sets of figures share the machine's conditions as far as possible.
    """
    env = dict(os.environ, RMQ_PURE_PYTHON="1")
    cmd = [sys.executable, __file__, "--only-put", "--messages", str(args.messages), "--reps", str(args.reps)]
    if args.dir:
        cmd += ["--dir", args.dir]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        print(proc.stderr, file=sys.stderr)
        return None
    return json.loads(proc.stdout.strip().splitlines()[-1])


def put_figures(n: int, reps: int, d: Path, profile: bool) -> dict:
    med = statistics.median
    bare_recs: list[bytes] = []
    store_recs: list[bytes] = []
    bare_encode_copy(min(n, 2000), d, bare_recs)
    bench_put_dispatch(min(n, 2000), d, keep=store_recs)
    bare_runs, put_runs = interleaved(reps, lambda: bare_encode_copy(n, d), lambda: bench_put_dispatch(n, d, profile),
                                      warmup=not profile)
    bare, put = med(r[0] for r in bare_runs), med(r[0] for r in put_runs)
    bare_cpu, put_cpu = med(r[1] for r in bare_runs), med(r[1] for r in put_runs)
    paired = [p[0] / b[0] for p, b in zip(put_runs, bare_runs, strict=True)]
    return {
        "implementation": hotpath.IMPLEMENTATION,
        "baseline_same_bytes": same_bytes_as_store(bare_recs, store_recs),
        "bare_encode_copy_msg_s": round(bare),
        "put_dispatch_msg_s": round(put),
        "put_dispatch_ratio": round(put / bare, 3),
        "put_dispatch_ratio_cpu": round(put_cpu / bare_cpu, 3),
        "put_dispatch_ratio_paired": round(med(paired), 3),
        "put_dispatch_ratio_paired_spread": spread(paired),
        "bare_encode_copy_msg_s_runs": [round(r[0]) for r in bare_runs],
        "put_dispatch_msg_s_runs": [round(r[0]) for r in put_runs],
        "cpu_msg_s": {"bare_encode_copy": round(bare_cpu), "put_dispatch": round(put_cpu)},
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--messages", type=int, default=50000, help="messages per scenario (default 50000)")
    ap.add_argument("--reps", type=int, default=7, help="repetitions of each scenario (default 7)")
    ap.add_argument("--profile", action="store_true",
                    help="cProfile the put+dispatch path (with --only-batchcq: the BatchCQ puts) to stderr (one rep)")
    ap.add_argument("--dir", default=None, help="work directory (default: a fresh temp dir)")
    ap.add_argument("--only-put", action="store_true", help="only the put+dispatch scenario (used for the fallback)")
    ap.add_argument("--only-batchcq", action="store_true",
                    help="only the BatchCQ scenarios (b) and their page-cache baseline")
    ap.add_argument("--no-fallback", action="store_true", help="skip the pure-Python twin's put+dispatch figures")
    args = ap.parse_args()
    n = args.messages
    reps = 1 if args.profile else max(1, args.reps)
    med = statistics.median
    load_before = [round(x, 2) for x in os.getloadavg()]
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        d = Path(tmp)
        put = {"implementation": hotpath.IMPLEMENTATION} if args.only_batchcq else put_figures(n, reps, d, args.profile)
        if args.only_put:
            print(json.dumps(put))
            return
        prof = args.profile and args.only_batchcq
        pc_runs, bcq_runs, wb_runs = interleaved3(reps, (lambda: page_cache_write_mb_s(d),
                                                         lambda: bench_batchcq(n * 4, d, profile=prof),
                                                         lambda: bench_batchcq(n * 4, d, True, prof)),
                                                  warmup=not args.profile)
        sync_n = max(n // 4, 16)
        if not args.only_batchcq:
            bench_sync(sync_n, d)  # warm-up, discarded
        sync_runs = [] if args.only_batchcq else [bench_sync(sync_n, d) for _ in range(reps)]
    fallback = None if args.no_fallback or args.profile or args.only_batchcq else fallback_figures(args)
    pc, pc_cpu = med(r[0] for r in pc_runs), med(r[1] for r in pc_runs)
    b_msgs, b_mb, b_mb_cpu = (med(r[i] for r in bcq_runs) for i in range(3))
    bcq_paired = [b[1] / p[0] for b, p in zip(bcq_runs, pc_runs, strict=True)]
    wb_mb, wb_mb_cpu = med(r[1] for r in wb_runs), med(r[2] for r in wb_runs)
    wb_paired = [b[1] / p[0] for b, p in zip(wb_runs, pc_runs, strict=True)]
    per_fsync = [p / f for p, f in sync_runs if f]
    out = {"messages": n, "reps": reps, "warmup_discarded": not args.profile, "cpus": os.cpu_count(),
           "loadavg_before": load_before, "loadavg_after": [round(x, 2) for x in os.getloadavg()]}
    out.update(put)
    if fallback is not None:
        out["fallback_put_dispatch_ratio"] = fallback["put_dispatch_ratio"]
        out["fallback_put_dispatch_ratio_cpu"] = fallback["put_dispatch_ratio_cpu"]
        out["fallback_put_dispatch_ratio_paired"] = fallback["put_dispatch_ratio_paired"]
        out["fallback_put_dispatch_ratio_paired_spread"] = fallback["put_dispatch_ratio_paired_spread"]
        out["fallback_put_dispatch_msg_s"] = fallback["put_dispatch_msg_s"]
    out.update({
        "page_cache_write_mb_s": round(pc, 1),
        "batchcq_msg_s": round(b_msgs),
        "batchcq_mb_s": round(b_mb, 1),
        "batchcq_ratio": round(b_mb / pc, 3),
        "batchcq_ratio_cpu": round(b_mb_cpu / pc_cpu, 3),
        "batchcq_ratio_paired": round(med(bcq_paired), 3),
        "batchcq_ratio_paired_spread": spread(bcq_paired),
        "page_cache_write_mb_s_runs": [round(r[0], 1) for r in pc_runs],
        "batchcq_mb_s_runs": [round(r[1], 1) for r in bcq_runs],
        "batchcq_write_buffer_mb_s": round(wb_mb, 1),
        "batchcq_write_buffer_ratio": round(wb_mb / pc, 3),
        "batchcq_write_buffer_ratio_cpu": round(wb_mb_cpu / pc_cpu, 3),
        "batchcq_write_buffer_ratio_paired": round(med(wb_paired), 3),
        "batchcq_write_buffer_ratio_paired_spread": spread(wb_paired),
        "batchcq_write_buffer_mb_s_runs": [round(r[1], 1) for r in wb_runs],
        "cpu_mb_s": {"page_cache_write": round(pc_cpu, 1), "batchcq": round(b_mb_cpu, 1),
                     "batchcq_write_buffer": round(wb_mb_cpu, 1)},
    })
    if sync_runs:
        out.update({
            "sync_producers": 16,
            "sync_puts_s": round(med(p for p, _ in sync_runs)),
            "sync_fsyncs_s": round(med(f for _, f in sync_runs), 1),
            "sync_puts_per_fsync": round(med(per_fsync), 2) if per_fsync else None,
            "sync_puts_per_fsync_runs": [round(x, 2) for x in per_fsync],
        })
    print(json.dumps(out))


if __name__ == "__main__":
    main()
