"""Store append benchmark: put + dispatch throughput against same-run baselines (prints one JSON line).

Why: absolute msg/s depend on the machine; the ratios to what bare Python can do on the same machine
in the same run (an encode-and-copy loop into an mmap, sequential page-cache writes) tell whether
the store's hot path wastes time. Figures:

* (a) ``put_dispatch_*``: per-message ``put_message`` with synchronous dispatch to the consume queue
  and the index, 1 KiB bodies, ASYNC_FLUSH; ratio to the bare encode+copy loop (see "The put
  scenario" below for how it is made stable).
* (b) ``batchcq_*``: ``put_inner_batch`` of 64 x 1 KiB items on a BatchCQ topic; ratio of MiB/s to
  sequential page-cache write bandwidth (MiB/s too: see "Units" below). ``batchcq_write_buffer_*``: the same with the store's write
  buffer (``transientStorePoolEnable``: records committed to the file in ~1 MiB writes); its timed
  section ends with ``wait_for_dispatch`` (every record committed and in its queue), the default
  store's too (a no-op there: it dispatches each put at once). The three run interleaved.
* (c) ``sync_*``: SYNC_FLUSH with 16 producer threads: puts/s, fsyncs/s and puts per fsync.
* ``batchcq_write_buffer_started_*``: (b) with the write buffer on a started store, as a running
  broker has it (reput thread dispatching what each commit hands over, commit and flush services;
  the timed section ends with the last commit and every record dispatched). Its thread-CPU ratio is
  left out: dispatch runs on the reput thread. Measured (2 cores, load 0.3-1, runs alternated, MB/s
  medians): ~1,420 when a started store took the general path for every put and woke dispatch on
  each, ~1,780 with the one-call buffered put and wakes only on commits, 2,285 -> 2,546 (another
  machine moment) once its reput thread dispatched each commit's records in one compiled call too.
  A full run then (load 0.8-1.3): 0.632 (paired 0.640, best 0.635), beside 0.692 for the store
  that is not started.
* ``batchcq_record_writes_only_*``: (b)'s writes alone, one pwrite a record of its size
  (``batchcq_record_size``) into a file with blocks allocated ahead, as the default store writes
  them, interleaved with the three above: the ceiling of ``batchcq_ratio``. Measured (2 cores, load
  0.3): 0.78 of the baseline (3,268 against 4,174 MB/s) while the default store ran at 0.41, ~40 us a
  64 KiB batch: the write ~21 us, the compiled call ~8.5 us (CRC ~2.7, the copy into the record
  scratch ~1.5-3, encode, unit and index entries), ~9 us of Python. A 0.6 needs ~27 us a batch, so
  after the write and the CRC ~3.5 us would be left for everything else: only the write buffer,
  which writes ~1 MiB at a time, reaches it.
* ``implementation``: the hot path in use ("c" or "python"); ``fallback_put_dispatch_*`` are (a)
  again in a child process on the pure-Python twin (``RMQ_PURE_PYTHON=1``).
* ``hot_call_only_*`` (and ``fallback_hot_call_only_*``): the one hot call of (a) alone
  (``hotpath.put_fast``: record, CRC, unit, index entries and every check) on in-memory buffers, no
  store around it, against the bare loop in the same chunks: the ceiling of (a). Measured (2 cores,
  load 0.4-0.6): C 1.46 us a call (2.37x the bare loop's rate; the store around it ~2.8 us), the
  twin 9.65-10.55 us (0.344-0.359 in three runs; the store around it ~4.5-5.4 us), so the fallback's 0.35 is out of reach of
  any store code around the call: the twin's own bytecode (~900 instructions a put, ~10 ns each)
  is the bound. A flat loop of the same byte work without the checks (exact types, ranges,
  separators, hosts) or the store's state ran at ~0.50.

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
  commit one pwritev of ~1 MiB (16 records, 48 buffers), and the records a commit hands over one
  compiled call (``hotpath.dispatch_inner_batches``: each record's BatchCQ unit and index entries,
  the queue and index state moved on; Python keeps the index roll, the listeners and every record
  it leaves to the general path). Dispatch waits for the commit by design (RocketMQ's reput reads
  committed data only), so it cannot be folded into the put's call.
  Committing more than 1 MiB at a time was not faster here (2 and 4 MiB measured slower; 256 and
  512 KiB slower too), nor are 2 MiB-aligned commits (the drifting ~1 MiB commits already write at
  the aligned rate, ~5 GB/s of CPU into the fallocated file; only a fixed sub-page misalignment is slow).
  Earlier account (before the one-call dispatch; 7 reps a run, load 1.8-2.2): ratio 0.41-0.51, the
  store's CPU ~40 us a batch taken apart by switching parts off: pwritev ~19 us, dispatch ~6-9 us,
  put ~15 us (encode + CRC 4.3 us, Python ~10 us).
  Now (2 cores, load 0.7-1.1, thread CPU time in one process): interpreted bytecode a batch 656 ->
  380 (the per-record dispatch loop was 242 of them, the commit's length sum 27, the put's writable
  checks 15 more than put_message's sampled gate); dispatch's compiled call writes each record's
  unit and index entries without boxing its values (~3.3 -> ~2.5 us a record, the index's 20 MB
  slot table misses most of what is left). Old and new Python paths in one process on one warm
  store, blocks of 16 batches (one commit) interleaved, real writes: 22.1-22.4 -> 20.8-21.2 us a
  batch (p10; p50 23.5-24.0 -> 22.3-22.9), besides ~0.25 us of message field reads in the record
  encode (``msg_attr``). Where a batch's time goes: the commit's pwritev 12-16 us (timed around
  ``write_vectored``), everything else 14-27 us, moving with the machine's speed (a busy sibling
  vCPU slows this pointer-chasing work far more than the kernel copy). Without the write, queue
  files made beforehand (fast moments): ~10-12 us, of which BODYCRC ~2.8 us, the rest of the record
  encode ~1.75 us (``buffer_inner_batch``), dispatch ~2.5 us, the put's Python ~3.5 us (1-1.5 us
  ``MessageStore``'s checks: gate, index room; the rest the flat put's decisions and the result).
  A warm store (as in a running broker) takes ~23-25 us a batch of CPU here (~0.75-0.8 of the
  baseline); this scenario opens a fresh store each repetition, whose first 3,125 batches cost
  more and far more variably (25-50 us a batch, worse after much writing): ~22 files and
  directories created inside the timed loop (1-4 ms a run on this ext4), new index and queue pages,
  a new commitlog file. Before/after in the same minutes (8 runs a side alternating, each 7 reps):
  ``batchcq_write_buffer_ratio`` medians 0.543 -> 0.587, 0.524 -> 0.603 and (the last change in)
  0.601 -> 0.587 (paired 0.545 -> 0.595, 0.548 -> 0.589, 0.597 -> 0.588; load 0.7-1.1); single
  runs spread 0.43-0.71 on either side. So the ~1.5 us a batch saved (~5%) is below this
  scenario's run-to-run noise, and 0.6 is about its median, not a floor: a steady 0.6 needs ~31 us
  a batch at a ~3,600 MB/s baseline, and what is left above the kernel's copy is the fresh store's
  first-run costs, the CRC, the encode, dispatch's cache misses and ~4 us of Python put and
  dispatch bookkeeping. On a quiet machine (nothing else running, load 0.3-0.9) the same code gave
  0.671, 0.676 and 0.674 in three ``--only-batchcq`` runs (spreads 0.49-0.75) and 0.651 in a full
  run (paired 0.655, spread 0.50-0.78); the before/after figures above were taken at load 0.7-1.1.
  On a busy machine the page-cache baseline swings (150-3,400 MB/s within one run) and a longer
  run is preempted more than the 0.08 s baseline: read the ``*_runs`` lists and the load too.
  On a quiet machine it swings too, between two modes: ~4,000 MB/s and 330-1,250 MB/s, the slow
  one in 3 of 7 runs of one full run (by CPU time as well as wall time; the same pages allocated,
  no compaction or reclaim in /proc/vmstat; touching fresh anonymous memory shows two modes too,
  ~760 and ~1,250 MB/s): the VM's host backing the guest's freed memory again (this guest has
  virtio_balloon free page reporting), not the code. A median baseline taken from a run with
  several slow ones flatters every BatchCQ ratio (0.953 for the write buffer in such a run), so
  ``*_ratio_best`` divides each side's fastest run by the baseline's fastest: host effects only
  slow a run down, and the best run of each is its own cost. Read it beside the median.

Units: every bandwidth here (the page-cache baseline, the BatchCQ sides, the record writes) is MiB/s,
2**20 bytes a second (``mib_per_s``), reported as ``*_mib_s`` (``cpu_mib_s``), so each ratio divides
figures of one unit. Before that fix the baseline was MiB/s and the BatchCQ sides decimal MB/s, so
the ``batchcq*_ratio*`` figures (``_cpu``, ``_paired``, ``_best``; the record-writes-only ones too) and
the MB/s quoted in this docstring from before it were ~4.9% high (MB over MiB: 2**20 / 10**6 = 1.049).

Fairness: the bare loop writes the store's own record bytes (``baseline_same_bytes`` checks the first,
second and last of min(``--messages``, 2000) written by both, those that exist, the store time aside); the store does its consume queue unit and index entries on top.

Noise: the machines this runs on are small and shared, so a single run of each side says little.
One run of each side is made first and discarded (the first is always slow: cold page cache and
allocator). Each baseline and its subject then run ``--reps`` times, interleaved (A B, then B A,
...) so that load changes hit both sides alike; the SYNC_FLUSH scenario is repeated ``--reps``
times too. The load average before and after is printed: compare figures only between runs under
similar load. The JSON reports the median of each side, plus every repetition's figures
(``*_runs``). The ``*_cpu`` ratios use the same runs timed by this thread's CPU time instead of wall
time; the ``*_paired`` ratios are the median of each repetition's own ratio (its two runs are
adjacent, so a machine that changes speed between repetitions moves both sides of a pair together).

The put scenario (a), made stable. Measured before (2 vCPUs, 5-7 repetitions of 50,000 messages, a
fresh store and a fresh bare file per run, ~0.3 s each): the bare loop alone ran at 111k-208k msg/s
at load 0.2 and the per-repetition ratio spread over 0.47-0.98 (0.58-1.32 at load 1-2). Per run,
from the thread's schedstat and getrusage: (1) the time a run waits for a CPU (runqueue) was 10-50%
of its wall time under load 2-4, and it never blocked (no I/O wait, no dirty-page throttling);
(2) its CPU time moved too, 0.29-0.45 s for the identical bare loop (steal 0-6%, a busy sibling
vCPU): a machine that changes speed within seconds, which whole-run interleaving (A, then B, each
~0.3 s) cannot cancel; (3) page faults, costly in this VM (~4 us of CPU a 4 KiB page even for
anonymous memory, ~13 us a page when populating ahead): the bare loop took ~2,700 write faults
per run on its sparse file, the store populated its commitlog ahead in 1 MiB steps and, being
fresh each run, also created its commitlog, index (420 MB) and 8 consume queue files inside the
timed loop and faulted its 20 MB index hash-slot table in (~1,400 major faults a run): first-run
costs a running broker pays once per file, not per message; (4) the GC ran once per store run
(the 50,000 prepared messages), never in the bare loop. So now:

* One store and one bare file for all repetitions (a running broker, not a new one per run), one
  discarded warm-up repetition first (creates every file, faults the index slot table in), files
  of RocketMQ's default 1 GiB commitlog size or more, so no repetition rolls a file.
* Page faults of the record bytes cost both sides the same, outside the clock: before each
  repetition both files have the blocks and pages of its records allocated with the same call
  (``MappedFile.populate``, what the commitlog does ahead of its writes). The store's own consume
  queue and index pages still fault inside its loop (that work is the store's alone; see
  ``page_faults_per_rep``). With its file populated ahead the store also skips the one put per
  populated MiB that its one-call path leaves to the general path (~55 of 50,000, well under 1%). ``--in-loop-faults`` instead makes both sides populate inside the
  timed loop, the bare loop exactly where the commitlog does (slower and noisier on both sides).
* Within a repetition the two sides alternate in chunks of ``--chunk`` messages (2,500: ~15-30 ms),
  A B, B A, ..., and each side's time is summed over its chunks: a repetition's two figures come
  from the same second of the machine. ``put_dispatch_ratio`` is the median of these
  per-repetition ratios (``put_dispatch_ratio_paired``, the same figure); the ratio of the two
  sides' separate medians is kept as ``put_dispatch_ratio_of_medians`` (it mixes repetitions run
  at different machine speeds, so it moves more).
* GC collected before, and disabled during, each repetition, for both sides.

The bare loop still does the same byte work into the same kind of file (``baseline_same_bytes``).
After (same machine, shared with other jobs, 7 repetitions of 50,000): per-repetition ratios
0.66-0.77 and 0.71-0.77 in two runs at load 2.4-3.1 (medians 0.717, 0.719), while each side's own
rate still moved 1.5-2x between repetitions; the same code at load 4.5-4.8: 0.718 and 0.692.

Usage: ``python bench/store_append.py [--messages N] [--reps R] [--chunk C] [--in-loop-faults] [--profile]
[--only-put] [--only-batchcq] [--no-fallback] [--started [--general-path]] [--dir D]`` (runs in a temp dir
under D).

``--started``: the put scenario (a) on a started store, as a running broker has it (reput thread,
flush threads, the broker's deleted-topics dispatch filter); each chunk's time ends when its
messages are dispatched. ``--general-path`` runs it with the one-call put switched off, the figure
from before a started store could use it (only with ``--started``: alone it is a usage error, as it
would switch the main put scenario silently); run both, in turn, to compare. Measured (2 cores, 20,000
messages x 5 reps, runs alternated): at load 0.7-0.8 the general path only 0.345 and 0.338
(52k-53k msg/s), the one call 0.712 and 0.679 (109k-118k msg/s, about the not-started store's ~0.72);
at load 3.1-3.2 (the store test suite running beside) 0.354 and 0.336 against 0.642 and 0.809.
(The ``*_cpu`` ratio counts only the putting thread: the general path's dispatch runs on the reput
thread, so its CPU figure flatters it; read the wall-clock ratio.)
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import resource
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

from _args import positive_int, work_dir  # noqa: E402

from broker_core.store.codec import hotpath  # noqa: E402
from broker_core.store.codec.batch import BatchItem, encode_batch  # noqa: E402
from broker_core.store.codec.hashing import rmq_crc32  # noqa: E402
from broker_core.store.codec.message import MessageInner  # noqa: E402
from broker_core.store.commit_log import POPULATE_AHEAD  # noqa: E402
from broker_core.store.mapped_file import MappedFile  # noqa: E402
from broker_core.store.message_store import MessageStore  # noqa: E402
from broker_core.store.store_config import ASYNC_FLUSH, SYNC_FLUSH, StoreConfig  # noqa: E402
from broker_core.store.topic_config import TopicConfig  # noqa: E402

BODY = bytes(range(256)) * 4  # 1 KiB
TOPIC = "BenchTopic"
_HEAD = struct.Struct(">iiiiiqqiq8sq8siqi")
# This thread's resource usage (Linux); elsewhere the process's, the same here: one thread runs.
RUSAGE_THREAD = getattr(resource, "RUSAGE_THREAD", resource.RUSAGE_SELF)


class Timed:
    """Wall-clock and this thread's CPU time (user + system) of one timed section, and its page faults.

    CPU time is reported beside wall time because other processes on a small shared machine
    stretch wall time a lot and CPU time much less; every scenario here runs in the calling thread.
    The page faults (minor + major, this thread) are read outside the clocked interval.
    """

    wall: float
    cpu: float
    faults: int

    def __enter__(self) -> Timed:
        ru = resource.getrusage(RUSAGE_THREAD)
        self._f0 = ru.ru_minflt + ru.ru_majflt
        self._w0 = time.perf_counter()
        self._c0 = time.thread_time()
        return self

    def __exit__(self, *exc: object) -> None:
        self.wall = time.perf_counter() - self._w0
        self.cpu = time.thread_time() - self._c0
        ru = resource.getrusage(RUSAGE_THREAD)
        self.faults = ru.ru_minflt + ru.ru_majflt - self._f0


def config(flush: str, file_size: int = 256 * 1024 * 1024) -> StoreConfig:
    return StoreConfig(mapped_file_size_commit_log=file_size, flush_disk_type=flush)


def make_msg(i: int, body: bytes = BODY, queue_id: int | None = None) -> MessageInner:
    return MessageInner(topic=TOPIC, body=body, queue_id=i % 8 if queue_id is None else queue_id,
                        properties={"UNIQ_KEY": f"7F000001{i:024X}", "KEYS": f"key{i}", "TAGS": "TagA",
                                    "WAIT": "true"},
                        born_timestamp=1_700_000_000_000, born_host=("10.0.0.1", 40000),
                        store_host=("127.0.0.1", 10911))


# Bytes one make_msg record takes at most (1,197 for message 0; 1,203 from message 10,000,000 on).
RECORD_BOUND = 1300
_BORN_RAW = bytes([10, 0, 0, 1]) + (40000).to_bytes(4, "big")
_STORE_RAW = bytes([127, 0, 0, 1]) + (10911).to_bytes(4, "big")


class BareWriter:
    """The baseline of the put scenario: the minimum Python work per record (encode header and
    properties, CRC the body with the store's own CRC function, so a faster CRC helps both sides
    alike, copy the record into a mapping), into a ``MappedFile`` of the commitlog's own class and size.

    The records are byte for byte the store's records of ``make_msg`` (queue offset i // 8 in queue
    i % 8, the same commitlog offsets), the store timestamp aside: ``same_bytes_as_store`` checks it.
    Message numbers and the write position go on from run to run, as the store's do.
    """

    def __init__(self, directory: Path, file_size: int) -> None:
        (directory / "bare").mkdir()
        self.mf = MappedFile(directory / "bare" / f"{0:020d}", file_size)
        self.i = 0

    def prefault(self, count: int) -> None:
        """Disk blocks allocated and pages faulted in for the next ``count`` records, with the calls the
        commitlog makes (``MappedFile.populate``); ``StoreWriter.prefault`` does the same."""
        self.mf.populate(self.mf.wrote_position + count * RECORD_BOUND)

    def run(self, count: int, in_loop_faults: bool = False) -> Timed:
        """Write the next ``count`` records. ``in_loop_faults``: allocate blocks and fault pages in
        ahead of the writes, inside the timed loop, exactly when the commitlog does (``CommitLog._file_for``)."""
        mf = self.mf
        mv = mf.mv
        topic = TOPIC.encode()
        born, store = _BORN_RAW, _STORE_RAW
        pos, first = mf.wrote_position, self.i
        if pos + count * RECORD_BOUND > mf.file_size:
            raise SystemExit(f"the bare file is too small for {first + count} records")
        with Timed() as t:
            for i in range(first, first + count):
                props = f"UNIQ_KEY\x017F000001{i:024X}\x02KEYS\x01key{i}\x02TAGS\x01TagA\x02WAIT\x01true\x02".encode()
                total = _HEAD.size + len(BODY) + 1 + len(topic) + 2 + len(props)
                if in_loop_faults and pos + total > mf.populated_to:
                    mf.populate(pos + total + POPULATE_AHEAD)
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
                mv[pos:pos + total] = buf
                pos += total
        mf.wrote_position = pos
        self.i = first + count
        return t

    def records(self, indexes: tuple[int, ...]) -> list[bytes]:
        return [bytes(r) for r in _records_at(self.mf.mv, indexes)]

    def close(self) -> None:
        self.mf.destroy()
        (self.mf.path.parent).rmdir()

def _records_at(buf, indexes: tuple[int, ...]) -> list[memoryview]:
    """Records number ``indexes`` of a run of records starting at 0 (walking TOTALSIZE)."""
    out, pos, i, want = [], 0, 0, set(indexes)
    while len(out) < len(want):
        total = int.from_bytes(buf[pos:pos + 4], "big")
        if total <= 0:  # past the last record: asking for a record that was not written is a bug here
            raise ValueError(f"record {i} at offset {pos}: no record there (TOTALSIZE {total})")
        if i in want:
            out.append(memoryview(buf)[pos:pos + total])
        pos += total
        i += 1
    return out


STORE_TIMESTAMP_AT = 56  # IPv4 born host: 48 + 8


def fairness_indexes(written: int) -> tuple[int, ...]:
    """The records ``baseline_same_bytes`` compares: the first, the second and the last written, each once
    and only those that exist (``--messages`` 1 or 2 writes fewer than three)."""
    return tuple(sorted({0, 1, written - 1} & set(range(written))))


def same_bytes_as_store(bare: list[bytes], store: list[bytes], expected: int) -> bool:
    """The baseline is fair only if it writes what the store writes: equal records but the store time,
    ``expected`` of them on each side."""
    def masked(rec: bytes) -> bytes:
        return rec[:STORE_TIMESTAMP_AT] + rec[STORE_TIMESTAMP_AT + 8:]
    return (len(bare) == len(store) == expected > 0
            and all(masked(a) == masked(b) for a, b in zip(bare, store, strict=True)))


MIB = 1 << 20


def mib_per_s(nbytes: int, seconds: float) -> float:
    """Bandwidth in MiB/s (2**20 bytes a second): the one unit of every bandwidth and ratio here."""
    return nbytes / MIB / seconds


def page_cache_write_mib_s(directory: Path, total_mib: int = 256) -> tuple[float, float]:
    """Sequential buffered write bandwidth (MiB/s: wall, CPU), 1 MiB writes, no fsync: the page-cache
    ceiling."""
    path = directory / "seq.bin"
    chunk = os.urandom(MIB)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    with Timed() as t:
        for _ in range(total_mib):
            os.write(fd, chunk)
    os.close(fd)
    path.unlink()
    nbytes = total_mib * len(chunk)
    return mib_per_s(nbytes, t.wall), mib_per_s(nbytes, t.cpu)


class DeletedTopicsFilter:
    """The broker's dispatch filter (``TopicManager.dispatch_filter``): a record of a deleted topic
    written before its deletion is not dispatched. Here with one deleted topic the bench never puts."""

    def __init__(self, deleted: dict[str, int]) -> None:
        self.deleted = deleted

    def __call__(self, topic: str, commit_log_offset: int) -> bool:
        cut = self.deleted.get(topic)
        return cut is None or commit_log_offset >= cut


class StoreWriter:
    """The subject of the put scenario: ``put_message`` of ``make_msg`` messages (1 KiB bodies,
    ASYNC_FLUSH) into one store, with synchronous dispatch to the consume queue and the index.
    Message numbers go on from run to run; ``profile``: cProfile every ``run`` (printed by ``close``)."""

    def __init__(self, directory: Path, file_size: int, profile: bool = False, started: bool = False) -> None:
        self.root = directory / "a"
        self.store = MessageStore(self.root, config(ASYNC_FLUSH, file_size)).open()
        self.started = started
        if started:  # a running broker's store: reput thread, flush threads, the deleted-topics filter
            self.store.start()
            self.store.dispatch_filter = DeletedTopicsFilter({"GoneTopic": 0})
        self.i = 0
        self.msgs: list[MessageInner] = []
        self.prof = None
        if profile:
            import cProfile

            self.prof = cProfile.Profile()

    def prepare(self, count: int) -> list[MessageInner]:
        """The next ``count`` messages, built before any clock starts (decoding them is the broker's job)."""
        self.msgs = [make_msg(i) for i in range(self.i, self.i + count)]
        self.i += count
        return self.msgs

    def prefault(self, count: int) -> None:
        """``BareWriter.prefault`` for the commitlog's file (created here when the store has none yet)."""
        mf = self.store.commit_log.file_queue.get_last_mapped_file(0)
        if mf is not None:
            mf.populate(mf.wrote_position + count * RECORD_BOUND)

    def run(self, msgs: list[MessageInner]) -> Timed:
        store = self.store
        if self.prof is not None:
            self.prof.enable()
        with Timed() as t:
            for m in msgs:
                store.put_message(m)
            if self.started:  # the general path dispatches on the reput thread: that is part of the work
                store.wait_for_dispatch()
        if self.prof is not None:
            self.prof.disable()
        return t

    def records(self, indexes: tuple[int, ...]) -> list[bytes]:
        return [bytes(r) for r in _records_at(self.store.commit_log.file_queue.files[0].mv, indexes)]

    def close(self) -> None:
        store = self.store
        n = self.i
        assert sum(store.get_max_offset_in_queue(TOPIC, q) for q in range(8)) == n
        assert len(store.query_message(TOPIC, f"key{n - 1}")) == 1  # the index was really built
        if self.prof is not None:
            import pstats

            pstats.Stats(self.prof, stream=sys.stderr).sort_stats("tottime").print_stats(25)
        store.shutdown()
        shutil.rmtree(self.root)

def batchcq_body() -> bytes:
    """Scenario (b)'s batch body: 64 x 1 KiB items, one TAGS each."""
    return encode_batch([BatchItem(BODY, {"TAGS": "TagA"}) for _ in range(64)])


def bench_batchcq(n_msgs: int, directory: Path, write_buffer: bool = False, profile: bool = False,
                  started: bool = False) -> tuple[float, float, float]:
    """(msg/s, MiB/s of batch bodies, MiB/s by CPU time); ``profile``: cProfile the timed section to stderr.
    ``started``: a running broker's store (reput thread, commit and flush services); its timed section
    ends with the commit service's work done (``commit``) and every record dispatched."""
    root = directory / "b"
    cfg = config(ASYNC_FLUSH)
    cfg.transient_store_pool_enable = write_buffer
    store = MessageStore(root, cfg).open()
    store.topic_table.put(TopicConfig(TOPIC, 8, 8, attributes={"queue.type": "BatchCQ"}), 0)
    if started:
        store.start()
    body = batchcq_body()
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
        if started:  # what its commit service does within commitIntervalCommitLog
            store.commit_log.commit()
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
    nbytes = batches * len(body)
    return batches * 64 / t.wall, mib_per_s(nbytes, t.wall), mib_per_s(nbytes, t.cpu)


def batchcq_record_size(directory: Path) -> int:
    """Bytes of one commitlog record of scenario (b)'s batches (put once into a scratch store)."""
    root = directory / "size"
    store = MessageStore(root, config(ASYNC_FLUSH)).open()
    try:
        store.topic_table.put(TopicConfig(TOPIC, 8, 8, attributes={"queue.type": "BatchCQ"}), 0)
        result = store.put_inner_batch(make_msg(0, batchcq_body()), 64)
        assert result.ok, result
        return result.wrote_bytes
    finally:
        store.shutdown()
        shutil.rmtree(root)


def record_writes_mib_s(directory: Path, record_size: int, n_msgs: int) -> tuple[float, float]:
    """Scenario (b)'s writes alone: one record of ``record_size`` bytes a batch, back to back, with the
    calls the default store's put makes (``MappedFile.reserve`` ahead of the write, then
    ``write_vectored``), without the encode, the CRC, the unit and index entries or any other Python
    bookkeeping. MiB/s (wall, CPU) of batch bodies, as ``bench_batchcq`` counts them.

    Why: it is the ceiling of ``batchcq_ratio`` (the default store writes each record when it is put,
    so readers see it on return), measured against the same baseline in the same run."""
    body_len = len(batchcq_body())
    batches = max(1, n_msgs // 64)
    parts = (os.urandom(record_size),)
    (directory / "records").mkdir()
    mf = MappedFile(directory / "records" / f"{0:020d}",
                    max(1 << 28, -(-(batches * record_size + (8 << 20)) // (1 << 20)) * (1 << 20)))
    try:
        pos = 0
        with Timed() as t:
            for _ in range(batches):
                if pos + record_size > mf.reserved_to:
                    mf.reserve(pos + record_size)
                mf.write_vectored(pos, parts)
                pos += record_size
    finally:
        mf.destroy()
        (directory / "records").rmdir()
    nbytes = batches * body_len
    return mib_per_s(nbytes, t.wall), mib_per_s(nbytes, t.cpu)


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


def interleaved(reps: int, fns: tuple, warmup: bool = True) -> tuple[list, ...]:
    """Several scenarios: one discarded warm-up run of each, then ``reps`` rounds in a rotating
    order (A B C, B C A, C A B, ...)."""
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
    cmd = [sys.executable, __file__, "--only-put", "--messages", str(args.messages), "--reps", str(args.reps),
           "--chunk", str(args.chunk)]
    if args.in_loop_faults:
        cmd.append("--in-loop-faults")
    if args.dir:
        cmd += ["--dir", str(args.dir)]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        print(proc.stderr, file=sys.stderr)
        return None
    return json.loads(proc.stdout.strip().splitlines()[-1])


def put_rounds(n: int, reps: int, chunk: int, bare: BareWriter, subject: StoreWriter | HotCallWriter, in_loop_faults: bool,
               warmup: bool = True) -> list[tuple[Timed, Timed]]:
    """``reps`` repetitions of ``n`` messages on each side, after one discarded warm-up repetition:
    (baseline, subject) totals of each, summed over chunks of ``chunk`` messages that alternate
    between the two sides (A B, B A, A B, ...). GC is collected before and disabled during each
    repetition, for both sides."""
    out = []
    for r in range(reps + 1 if warmup else reps):
        msgs = subject.prepare(n)
        if not in_loop_faults:
            bare.prefault(n)
            subject.prefault(n)
        gc.collect()
        gc.disable()
        try:
            tb, ts = Timed(), Timed()
            tb.wall = tb.cpu = ts.wall = ts.cpu = 0.0
            tb.faults = ts.faults = 0
            for k, a in enumerate(range(0, n, chunk)):
                part = msgs[a:a + chunk]
                if (k + r) % 2 == 0:
                    b = bare.run(len(part), in_loop_faults)
                    s = subject.run(part)
                else:
                    s = subject.run(part)
                    b = bare.run(len(part), in_loop_faults)
                for total, one in ((tb, b), (ts, s)):
                    total.wall += one.wall
                    total.cpu += one.cpu
                    total.faults += one.faults
        finally:
            gc.enable()
        if r or not warmup:
            out.append((tb, ts))
    return out


class HotCallWriter:
    """The hot call alone (``hotpath.put_fast``: record, CRC, consume queue unit, two index entries,
    every check) on in-memory buffers: a ``put_rounds`` subject beside the bare loop.

    Why: it bounds what any store around the call can reach. For the pure-Python twin it shows that
    the call by itself costs ~0.36 of the bare loop's rate, so the fallback's whole put (the call
    plus the store's files, locks, offsets and result, ~5 us more) cannot reach 0.35 by tuning the
    Python around it. Buffers: a commitlog and a consume queue as bytearrays written at the same
    positions each repetition (no page faults after the warm-up), an index of the store's geometry
    (5,000,000 hash slots: the same cache misses), its entry area sized for one repetition.
    """

    def __init__(self, n: int) -> None:
        defaults = StoreConfig()
        self.slots = defaults.max_hash_slot_num
        self.max_size = defaults.max_message_size
        self.msgs = [make_msg(i) for i in range(n)]
        self.cl, self.cq = bytearray(n * RECORD_BOUND), bytearray(n * 20)
        self.entries = 2 * n + 2
        self.idx = bytearray(40 + self.slots * 4 + (self.entries + 1) * 20)
        self.state = [0, 0, 1, 0, 0, 0]  # message number, commitlog position, index count, header values

    def prepare(self, count: int) -> list[MessageInner]:
        """The same messages each repetition, written again from the buffers' start."""
        self.state = [0, 0, 1, 0, 0, 0]
        return self.msgs[:count]

    def prefault(self, count: int) -> None:
        """Nothing: the buffers are in memory (the discarded warm-up repetition faults them in)."""

    def run(self, msgs: list[MessageInner]) -> Timed:
        put, cl, cq, idx, slots, entries, max_size = (hotpath.put_fast, self.cl, self.cq, self.idx, self.slots,
                                                      self.entries, self.max_size)
        i, pos, n_entries, begin_ts, begin_phy, slot_count = self.state
        limit = len(cl)
        with Timed() as t:
            for m in msgs:
                r = put(m, max_size, cl, pos, limit, pos, i // 8, 1_700_000_000_000 + i, cq, i * 20, idx,
                        slots, entries, n_entries, begin_ts, begin_phy, slot_count)
                pos += r[0]
                begin_ts, begin_phy, slot_count, n_entries = r[4:]
                i += 1
        self.state = [i, pos, n_entries, begin_ts, begin_phy, slot_count]
        return t


def hot_call_figures(n: int, reps: int, d: Path, chunk: int) -> dict:
    """``HotCallWriter`` against the bare loop, in ``put_rounds``: the ceiling of the put scenario."""
    med = statistics.median
    (d / "hot_call").mkdir()
    bare = BareWriter(d / "hot_call", max(64 << 20, -(-((reps + 1) * n * RECORD_BOUND) // (1 << 20)) * (1 << 20)))
    try:
        runs = [(b.wall, s.wall) for b, s in put_rounds(n, reps, chunk, bare, HotCallWriter(n), False)]
    finally:
        bare.close()
        (d / "hot_call").rmdir()
    return {"hot_call_only_us": round(med(ts for _, ts in runs) / n * 1e6, 2),
            "hot_call_only_ratio": round(med(tb / ts for tb, ts in runs), 3),
            "hot_call_only_ratio_spread": spread([tb / ts for tb, ts in runs])}


def put_figures(n: int, reps: int, d: Path, profile: bool, chunk: int, in_loop_faults: bool,
                started: bool = False) -> dict:
    med = statistics.median
    check = d / "same_bytes"
    check.mkdir()
    bare, subject = BareWriter(check, 256 << 20), StoreWriter(check, 256 << 20, started=started)
    k = min(n, 2000)
    bare.run(k)
    subject.run(subject.prepare(k))
    at = fairness_indexes(k)
    same = same_bytes_as_store(bare.records(at), subject.records(at), len(at))
    bare.close()
    subject.close()
    check.rmdir()
    # One file each for every repetition (RocketMQ's default commitlog file size, or more): no roll.
    file_size = max(1 << 30, -(-((reps + 1) * n * RECORD_BOUND + (8 << 20)) // (1 << 20)) * (1 << 20))
    bare, subject = BareWriter(d, file_size), StoreWriter(d, file_size, profile, started)
    try:
        runs = put_rounds(n, reps, chunk, bare, subject, in_loop_faults, warmup=not profile)
    finally:
        bare.close()
        subject.close()
    bare_rate, put_rate = med(n / b.wall for b, _ in runs), med(n / s.wall for _, s in runs)
    bare_cpu, put_cpu = med(n / b.cpu for b, _ in runs), med(n / s.cpu for _, s in runs)
    paired = [b.wall / s.wall for b, s in runs]
    paired_cpu = [b.cpu / s.cpu for b, s in runs]
    return {
        "implementation": hotpath.IMPLEMENTATION,
        "baseline_same_bytes": same,
        "put_chunk": chunk,
        "put_page_faults": "in_loop" if in_loop_faults else "prefaulted",
        "bare_encode_copy_msg_s": round(bare_rate),
        "put_dispatch_msg_s": round(put_rate),
        "put_dispatch_ratio": round(med(paired), 3),
        "put_dispatch_ratio_cpu": round(med(paired_cpu), 3),
        "put_dispatch_ratio_paired": round(med(paired), 3),
        "put_dispatch_ratio_of_medians": round(put_rate / bare_rate, 3),
        "put_dispatch_ratio_paired_spread": spread(paired),
        "bare_encode_copy_msg_s_runs": [round(n / b.wall) for b, _ in runs],
        "put_dispatch_msg_s_runs": [round(n / s.wall) for _, s in runs],
        "cpu_msg_s": {"bare_encode_copy": round(bare_cpu), "put_dispatch": round(put_cpu)},
        "page_faults_per_rep": {"bare_encode_copy": round(med(b.faults for b, _ in runs)),
                                "put_dispatch": round(med(s.faults for _, s in runs))},
        **({} if profile else hot_call_figures(n, reps, d, chunk)),
    }


def started_figures(args: argparse.Namespace) -> None:
    """``--started``: the put scenario on a started store, its figures prefixed ``started_``."""
    reps = 1 if args.profile else max(1, args.reps)
    load_before = [round(x, 2) for x in os.getloadavg()]
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        put = put_figures(args.messages, reps, Path(tmp), args.profile, max(1, args.chunk), args.in_loop_faults,
                          started=True)
    out = {"messages": args.messages, "reps": reps, "warmup_discarded": not args.profile, "cpus": os.cpu_count(),
           "loadavg_before": load_before, "loadavg_after": [round(x, 2) for x in os.getloadavg()],
           "scenario": "started store" + (" (general path only)" if args.general_path else "")}
    out.update({(f"started_{k}" if "put_dispatch" in k else k): v for k, v in put.items()})
    print(json.dumps(out))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--messages", type=positive_int, default=50000, help="messages per scenario (default 50000)")
    ap.add_argument("--reps", type=positive_int, default=7, help="repetitions of each scenario (default 7)")
    ap.add_argument("--profile", action="store_true",
                    help="cProfile the put+dispatch path (with --only-batchcq: the BatchCQ puts) to stderr (one rep)")
    ap.add_argument("--dir", type=work_dir, default=None,
                    help="runs in a fresh temp dir under this directory, created if missing (default: the system's)")
    ap.add_argument("--only-put", action="store_true", help="only the put+dispatch scenario (used for the fallback)")
    ap.add_argument("--only-batchcq", action="store_true",
                    help="only the BatchCQ scenarios (b) and their page-cache baseline")
    ap.add_argument("--no-fallback", action="store_true", help="skip the pure-Python twin's put+dispatch figures")
    ap.add_argument("--chunk", type=positive_int, default=2500,
                    help="put scenario: messages per chunk, the sides alternating chunk by chunk (default 2500)")
    ap.add_argument("--in-loop-faults", action="store_true",
                    help="put scenario: fault the file pages in inside the timed loops (both sides) instead of "
                         "before them")
    ap.add_argument("--started", action="store_true",
                    help="only the put scenario, on a started store (reput thread running, a broker's dispatch "
                         "filter set; each chunk's time includes waiting for its dispatch); figures named started_*")
    ap.add_argument("--general-path", action="store_true",
                    help="only with --started: no one-call put (every put appended, dispatched by the reput "
                         "thread), as before the one call served started stores")
    args = ap.parse_args()
    if args.general_path and not args.started:
        # It would switch the main put scenario (and not its pure-Python fallback child) silently.
        ap.error("--general-path applies only with --started")
    if args.general_path:
        import broker_core.store.message_store as message_store

        message_store.put_fast = lambda store, msg: None  # type: ignore[assignment]
    if args.started:
        started_figures(args)
        return
    n = args.messages
    reps = 1 if args.profile else max(1, args.reps)
    med = statistics.median
    load_before = [round(x, 2) for x in os.getloadavg()]
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        d = Path(tmp)
        put = {"implementation": hotpath.IMPLEMENTATION} if args.only_batchcq else \
            put_figures(n, reps, d, args.profile, max(1, args.chunk), args.in_loop_faults)
        if args.only_put:
            print(json.dumps({"messages": n, "reps": reps, "warmup_discarded": not args.profile,
                              "cpus": os.cpu_count(), "loadavg_before": load_before,
                              "loadavg_after": [round(x, 2) for x in os.getloadavg()], **put}))
            return
        prof = args.profile and args.only_batchcq
        record_size = batchcq_record_size(d)
        pc_runs, bcq_runs, wb_runs, rw_runs, wbs_runs = interleaved(
            reps, (lambda: page_cache_write_mib_s(d), lambda: bench_batchcq(n * 4, d, profile=prof),
                   lambda: bench_batchcq(n * 4, d, True, prof), lambda: record_writes_mib_s(d, record_size, n * 4),
                   lambda: bench_batchcq(n * 4, d, True, prof, started=True)),
            warmup=not args.profile)
        sync_n = max(n // 4, 16)
        if not args.only_batchcq:
            bench_sync(sync_n, d)  # warm-up, discarded
        sync_runs = [] if args.only_batchcq else [bench_sync(sync_n, d) for _ in range(reps)]
    fallback = None if args.no_fallback or args.profile or args.only_batchcq else fallback_figures(args)
    pc, pc_cpu = med(r[0] for r in pc_runs), med(r[1] for r in pc_runs)
    pc_best = max(r[0] for r in pc_runs)

    def side(name: str, runs: list, mb_at: int, cpu_at: int | None) -> dict:
        """One BatchCQ-side scenario's figures against the page-cache baseline of the same rounds: MiB/s
        ``runs[k][mb_at]`` (CPU-time MiB/s at ``cpu_at``; None: not reported, another thread's work)."""
        mb = med(r[mb_at] for r in runs)
        paired = [r[mb_at] / p[0] for r, p in zip(runs, pc_runs, strict=True)]
        out = {f"{name}_mib_s": round(mb, 1), f"{name}_ratio": round(mb / pc, 3)}
        if cpu_at is not None:
            out[f"{name}_ratio_cpu"] = round(med(r[cpu_at] for r in runs) / pc_cpu, 3)
        out.update({f"{name}_ratio_paired": round(med(paired), 3), f"{name}_ratio_paired_spread": spread(paired),
                    f"{name}_ratio_best": round(max(r[mb_at] for r in runs) / pc_best, 3),
                    f"{name}_mib_s_runs": [round(r[mb_at], 1) for r in runs]})
        return out

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
        out["fallback_hot_call_only_ratio"] = fallback.get("hot_call_only_ratio")
        out["fallback_hot_call_only_us"] = fallback.get("hot_call_only_us")
    out.update({
        "page_cache_write_mib_s": round(pc, 1),
        "page_cache_write_mib_s_runs": [round(r[0], 1) for r in pc_runs],
        "batchcq_msg_s": round(med(r[0] for r in bcq_runs)),
        **side("batchcq", bcq_runs, 1, 2),
        **side("batchcq_write_buffer", wb_runs, 1, 2),
        **side("batchcq_write_buffer_started", wbs_runs, 1, None),
        "batchcq_record_size": record_size,
        **side("batchcq_record_writes_only", rw_runs, 0, 1),
        "cpu_mib_s": {"page_cache_write": round(pc_cpu, 1), "batchcq": round(med(r[2] for r in bcq_runs), 1),
                     "batchcq_write_buffer": round(med(r[2] for r in wb_runs), 1),
                     "record_writes_only": round(med(r[1] for r in rw_runs), 1)},
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
