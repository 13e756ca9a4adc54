"""Timer-message throughput (issue 4): put, enqueue into TimerLog + wheel, dequeue to the real topic.

Why it is built like this: the timer service is driven by ``tick()`` and an injected clock, so the
benchmark can hold fake time still while it measures the enqueue (nothing is due, every unit goes
into the wheel) and then sweep fake time across the spread to measure the dequeue, without waiting
an hour of real time. Messages are put the way the broker parks them (``convert_to_timer_message``
into ``rmq_sys_wheel_timer`` queue 0) into a temporary store with RocketMQ's default file sizes,
ASYNC_FLUSH and the store not started, so consume-queue dispatch is synchronous and every figure is
pure CPU + page-cache work of this process.

The peer figure is a bare loop in the same run: the very messages the dequeue produces (real topic,
TIMER_ENQUEUE_MS / TIMER_DEQUEUE_MS added), built beforehand and put with ``put_message`` into a
fresh store of the same configuration. ``dequeue_vs_bare_put_ratio`` is the share of the store's own
put rate that the timer dequeue keeps after walking slots, reading units and commitlog records and
rebuilding the message.

Run: ``.venv/bin/python bench/timers.py [--messages N] [--seconds S] [--step-ms MS] [--profile PHASE]``.
The last line of output is one JSON object.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import itertools
import json
import pstats
import random
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from _args import positive_int, work_dir  # noqa: E402

from broker_core.store.codec.message import MessageInner  # noqa: E402
from broker_core.store.codec.properties import (  # noqa: E402
    PROPERTY_TIMER_DELIVER_MS,
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
)
from broker_core.store.message_store import MessageStore  # noqa: E402
from broker_core.store.store_config import StoreConfig  # noqa: E402
from broker_core.store.timer import TIMER_TOPIC, convert_to_timer_message  # noqa: E402
from broker_core.store.timer.timer_message_store import TimerMessageStore  # noqa: E402

T0 = 1_800_000_000_000  # a fixed fake epoch: the run is reproducible
REAL_TOPIC = "BenchTimerTopic"
REAL_QUEUES = 8
BODY_SIZE = 64
PHASES = ("put", "enqueue", "dequeue", "bare")
PUT_CHUNK = 65_536


class FakeClock:
    """Injected ms clock shared by the message store and the timer service."""

    __slots__ = ("now",)

    def __init__(self, now: int) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


def store_config(message_index_enable: bool) -> StoreConfig:
    """RocketMQ defaults (1 GiB sparse commitlog files, 300k-unit CQ files, 100 MiB TimerLog files)."""
    return StoreConfig(flush_disk_type="ASYNC_FLUSH", message_index_enable=message_index_enable)


def source_messages(count: int, seconds: int, seed: int) -> Iterator[MessageInner]:
    """Timer messages with TIMER_DELIVER_MS uniform over (t0, t0 + seconds]."""
    rng = random.Random(seed)
    body = bytes(range(BODY_SIZE))
    span = seconds * 1000
    host = ("10.0.0.7", 40000)
    for i in range(count):
        deliver = T0 + 1 + rng.randrange(span)
        props = {PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX: f"7F00000100002A9F0000{i:012X}", "TAGS": "bench",
                 PROPERTY_TIMER_DELIVER_MS: str(deliver)}
        yield MessageInner(topic=REAL_TOPIC, body=body, properties=props, queue_id=i % REAL_QUEUES,
                           born_timestamp=T0, born_host=host)


CPU_S: dict[str, float] = {}


def timed(profile: cProfile.Profile | None, fn: Callable[[], int], name: str = "") -> tuple[int, float]:
    """Run ``fn`` (optionally under the profiler) with the GC paused; ``(its result, wall seconds)``.

    The process CPU time goes to ``CPU_S[name]``: on a shared machine it is the steadier figure for
    comparing two versions of the code (wall time also counts msync waits and other tenants)."""
    gc.collect()
    gc.disable()
    try:
        start = time.perf_counter()
        cpu = time.process_time()
        if profile is not None:
            profile.enable()
        try:
            out = fn()
        finally:
            if profile is not None:
                profile.disable()
        if name:
            CPU_S[name] = time.process_time() - cpu
        return out, time.perf_counter() - start
    finally:
        gc.enable()


def run(messages: int, seconds: int, step_ms: int, seed: int, work: Path, index: bool,
        profile_phase: str | None, profile_lines: int) -> dict[str, float | int]:
    wall_start = time.perf_counter()
    clock = FakeClock(T0)
    profiles = {p: cProfile.Profile() for p in PHASES if p == profile_phase}
    out: dict[str, float | int] = {"messages": messages, "spread_s": seconds, "step_ms": step_ms}

    ms = MessageStore(work / "store", store_config(index), clock=clock).open()
    timer = TimerMessageStore(ms, clock=clock)
    # The periodic flush (TimerLog, wheel, msync of config/timercheck, every timerFlushIntervalMs of
    # the clock) is timed on its own: fake time makes it happen once per step, not once per second.
    flush_s = [0.0]
    timer_flush = timer.flush

    def counted_flush() -> None:
        t = time.perf_counter()
        timer_flush()
        flush_s[0] += time.perf_counter() - t

    timer.flush = counted_flush  # type: ignore[method-assign]
    try:
        # ---- put: convert (as the broker's send path does) and append to the timer topic -----------
        # The client-side messages are built outside the timed loop, a chunk at a time.
        put_n, put_s, put_cpu = 0, 0.0, 0.0
        source = source_messages(messages, seconds, seed)
        while put_n < messages:
            chunk = list(itertools.islice(source, PUT_CHUNK))

            def put_chunk(chunk: list[MessageInner] = chunk) -> int:
                put = ms.put_message
                for msg in chunk:
                    converted = convert_to_timer_message(msg, T0)
                    if converted is None or not put(converted).ok:
                        raise RuntimeError(f"put of {msg.properties} failed")
                return len(chunk)

            n, secs = timed(profiles.get("put"), put_chunk, "put")
            put_n += n
            put_s += secs
            put_cpu += CPU_S["put"]
        CPU_S["put"] = put_cpu
        out["put_msgs_per_s"] = put_n / put_s
        out["put_s"] = put_s
        if ms.get_max_offset_in_queue(TIMER_TOPIC, 0) != messages:
            raise RuntimeError(f"timer topic holds {ms.get_max_offset_in_queue(TIMER_TOPIC, 0)} of {messages}")

        # ---- enqueue: clock held at t0, every message goes into TimerLog + wheel --------------------
        def enqueue_all() -> int:
            enq = 0
            while enq < messages:
                r = timer.tick()
                if r.delivered or r.blocked or (r.enqueued == 0 and r.dropped == 0 and r.missing == 0):
                    raise RuntimeError(f"enqueue stalled at {enq}: {r}")
                enq += r.enqueued
            return enq

        enq_n, enq_s = timed(profiles.get("enqueue"), enqueue_all, "enqueue")
        out["enqueue_msgs_per_s"] = enq_n / enq_s
        out["enqueue_s"] = enq_s
        def flush_once() -> int:
            timer.flush()
            return 0

        _, enqueue_flush_s = timed(None, flush_once)
        out["enqueue_flush_s"] = enqueue_flush_s
        backlog = timer.backlog()
        if backlog.pending != messages:
            raise RuntimeError(f"wheel holds {backlog.pending} of {messages}")
        out["timer_log_bytes"] = timer.timer_log.max_offset

        # ---- dequeue: sweep fake time across the spread -------------------------------------------
        end = T0 + seconds * 1000 + 2 * timer.precision_ms
        ticks = 0

        def dequeue_all() -> int:
            nonlocal ticks
            delivered = 0
            while clock.now < end:
                clock.now = min(clock.now + step_ms, end)
                r = timer.tick()
                ticks += 1
                if r.blocked or r.dropped or r.missing or r.cancelled:
                    raise RuntimeError(f"dequeue trouble at {clock.now}: {r}")
                delivered += r.delivered
            return delivered

        flush_s[0] = 0.0
        deq_n, deq_s = timed(profiles.get("dequeue"), dequeue_all, "dequeue")
        if deq_n != messages:
            raise RuntimeError(f"delivered {deq_n} of {messages}")
        out["dequeue_msgs_per_s"] = deq_n / deq_s
        out["dequeue_s"] = deq_s
        out["dequeue_flush_s"] = flush_s[0]
        out["dequeue_excl_flush_msgs_per_s"] = deq_n / (deq_s - flush_s[0])
        out["dequeue_ticks"] = ticks
        got = sum(ms.get_max_offset_in_queue(REAL_TOPIC, q) for q in range(REAL_QUEUES))
        if got != messages:
            raise RuntimeError(f"real topic holds {got} of {messages}")
        # the re-put messages, exactly as stored, are the bare loop's input
        bare_src: list[MessageInner] = []
        for q in range(REAL_QUEUES):
            offset = 0
            while True:
                res = ms.get_messages(REAL_TOPIC, q, offset, 4096)
                if not res.messages:
                    break
                for m in res.messages:
                    bare_src.append(MessageInner(
                        topic=m.topic, body=m.body, properties=dict(m.properties), queue_id=m.queue_id,
                        flag=m.flag, sys_flag=m.sys_flag, born_timestamp=m.born_timestamp,
                        born_host=m.born_host, store_host=m.store_host, reconsume_times=m.reconsume_times))
                offset = res.next_begin_offset
        bare_src.sort(key=lambda m: int(m.properties["TIMER_DEQUEUE_MS"]))
    finally:
        timer.shutdown()
        ms.shutdown()
    shutil.rmtree(work / "store", ignore_errors=True)

    # ---- bare: the same puts straight into a fresh store -------------------------------------------
    bare_clock = FakeClock(end)
    bare = MessageStore(work / "bare", store_config(index), clock=bare_clock).open()
    try:
        def bare_all() -> int:
            put = bare.put_message
            for m in bare_src:
                if not put(m).ok:
                    raise RuntimeError("bare put failed")
            return len(bare_src)

        bare_n, bare_s = timed(profiles.get("bare"), bare_all, "bare")
    finally:
        bare.shutdown()
    shutil.rmtree(work / "bare", ignore_errors=True)
    out["bare_put_msgs_per_s"] = bare_n / bare_s
    out["dequeue_vs_bare_put_ratio"] = out["dequeue_msgs_per_s"] / out["bare_put_msgs_per_s"]
    out["enqueue_vs_bare_put_ratio"] = out["enqueue_msgs_per_s"] / out["bare_put_msgs_per_s"]
    # the same comparison in CPU seconds, which other tenants of the machine disturb far less
    out["dequeue_vs_bare_put_cpu_ratio"] = CPU_S["bare"] / CPU_S["dequeue"]
    for phase, cpu_s in CPU_S.items():
        out[f"{phase}_cpu_s"] = cpu_s
    out["wall_s"] = time.perf_counter() - wall_start
    for phase, prof in profiles.items():
        print(f"--- profile: {phase} ---", file=sys.stderr)
        pstats.Stats(prof, stream=sys.stderr).sort_stats("tottime").print_stats(profile_lines)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--messages", type=positive_int, default=1_000_000, help="timer messages (default 1,000,000)")
    ap.add_argument("--seconds", type=positive_int, default=3600, help="delivery spread in fake seconds (default 3600)")
    ap.add_argument("--step-ms", type=positive_int, default=1000,
                    help="fake-clock step per dequeue tick (default 1000)")
    ap.add_argument("--seed", type=int, default=4)
    ap.add_argument("--index", action=argparse.BooleanOptionalAction, default=True,
                    help="build the IndexFile on every put (RocketMQ default: on)")
    ap.add_argument("--dir", type=work_dir, default=None,
                    help="runs in a fresh temp dir under this directory, created if missing (default: the system's)")
    ap.add_argument("--profile", choices=PHASES, default=None, help="cProfile one phase (to stderr)")
    ap.add_argument("--profile-lines", type=positive_int, default=30)
    args = ap.parse_args(argv)
    if args.seconds > 2 * 86_400:
        ap.error("--seconds beyond the roll window (172,800) would measure rolling, not delivery")
    work = Path(tempfile.mkdtemp(prefix="bench-timers-", dir=args.dir))
    try:
        out = run(args.messages, args.seconds, args.step_ms, args.seed, work, args.index, args.profile,
                  args.profile_lines)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    n = out["messages"]
    print(f"timer bench: {n:,} messages of {BODY_SIZE} B, TIMER_DELIVER_MS spread over {out['spread_s']} s, "
          f"fake clock step {out['step_ms']} ms")
    print(f"  put (convert + put into {TIMER_TOPIC}): {out['put_msgs_per_s']:>10,.0f} msg/s  ({out['put_s']:.1f} s)")
    print(f"  enqueue (CQ -> TimerLog + wheel):       {out['enqueue_msgs_per_s']:>10,.0f} msg/s  "
          f"({out['enqueue_s']:.1f} s, flush {out['enqueue_flush_s']:.2f} s)")
    print(f"  dequeue (wheel -> real topic):          {out['dequeue_msgs_per_s']:>10,.0f} msg/s  "
          f"({out['dequeue_s']:.1f} s, {out['dequeue_ticks']} ticks, of which periodic flush "
          f"{out['dequeue_flush_s']:.1f} s)")
    print(f"  dequeue without the periodic flush:     {out['dequeue_excl_flush_msgs_per_s']:>10,.0f} msg/s")
    print(f"  bare put of the same records:           {out['bare_put_msgs_per_s']:>10,.0f} msg/s")
    print(f"  dequeue / bare put: {out['dequeue_vs_bare_put_ratio']:.2f}   "
          f"enqueue / bare put: {out['enqueue_vs_bare_put_ratio']:.2f}   wall {out['wall_s']:.1f} s")
    print("  CPU s: " + "  ".join(f"{p} {out[p + '_cpu_s']:.2f}" for p in PHASES if p + "_cpu_s" in out))
    print(json.dumps({k: (round(v, 3) if isinstance(v, float) else v) for k, v in out.items()}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
