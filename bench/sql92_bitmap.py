"""Benchmark: SQL92 pull of 1-in-100 matching messages with and without the dispatch-time bitmap.

Two in-process Brokers on their own stores hold the same messages (one topic, one queue, ``--messages``
messages with a ``pick`` property, 1 in 100 matching ``pick = 'yes'``), one with enableConsumeQueueExt +
enableCalcFilterBitMap, one without; the consumer group registered its SQL92 subscription (heartbeat)
before the sends in both. Each round pulls the whole queue (32 per pull, as a push consumer would)
from each broker, alternating which goes first; medians over ``--rounds``. Also times the sends, since
the bitmap is computed at dispatch. Ends with one JSON line: ``pull_bitmap_vs_plain_ratio`` is the
plain pull time over the bitmap pull time (> 1: the bitmap is faster); ``put_bitmap_vs_plain_ratio``
is the put rate with the bitmap over the plain put rate. Not part of the test suite.
Example: ``.venv/bin/python bench/sql92_bitmap.py --messages 20000 --rounds 5``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from pathlib import Path

from _args import positive_int

from broker_core.broker.broker import Broker
from broker_core.broker.broker_config import BrokerConfig
from broker_core.broker.client_registry import ConsumerData, SubscriptionData

EXPR = "pick = 'yes'"


def _broker(root: Path, bitmap: bool) -> Broker:
    props = {"mappedFileSizeCommitLog": str(64 << 20), "flushDiskType": "ASYNC_FLUSH"}
    if bitmap:
        props.update(enableConsumeQueueExt="true", enableCalcFilterBitMap="true")
    b = Broker(root, BrokerConfig.from_properties(props, root)).start()
    b.create_or_update_topic("B", 1, 1)
    b.heartbeat("bench", "bench@client", consumers=[ConsumerData(
        "g", "CONSUME_PASSIVELY", subscriptions=(SubscriptionData("B", EXPR, "SQL92", 1),))])
    time.sleep(0.002)  # messages strictly after the filter's birth
    return b


def _fill(b: Broker, first: int, n: int) -> float:
    body = b"x" * 256
    t = time.perf_counter()
    for i in range(first, first + n):
        b.send_message("B", body, {"pick": "yes" if i % 100 == 0 else "no", "seq": str(i)}, queue_id=0)
    b.store.wait_for_dispatch(60)
    return time.perf_counter() - t


def _pull_all(b: Broker) -> tuple[float, int]:
    t = time.perf_counter()
    offset, got = 0, 0
    while True:
        r = b.pull_message("g", "B", 0, offset, 32, "SQL92", EXPR)
        got += len(r.messages)
        if r.next_begin_offset == offset:
            break
        offset = r.next_begin_offset
    return time.perf_counter() - t, got


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--messages", type=positive_int, default=20_000)
    ap.add_argument("--rounds", type=positive_int, default=5)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="sql92-bitmap-") as tmp:
        brokers = {"plain": _broker(Path(tmp) / "plain", False), "bitmap": _broker(Path(tmp) / "bitmap", True)}
        try:
            # chunks of 1000 alternate between the brokers (and which goes first), so load changes hit both
            put = {"plain": 0.0, "bitmap": 0.0}
            for k, first in enumerate(range(0, args.messages, 1000)):
                n = min(1000, args.messages - first)
                for name in (("plain", "bitmap") if k % 2 == 0 else ("bitmap", "plain")):
                    put[name] += _fill(brokers[name], first, n)
            times: dict[str, list[float]] = {"plain": [], "bitmap": []}
            for r in range(args.rounds):
                order = ("plain", "bitmap") if r % 2 == 0 else ("bitmap", "plain")
                for name in order:
                    secs, got = _pull_all(brokers[name])
                    assert got == -(-args.messages // 100), (name, got)
                    times[name].append(secs)
            stats = brokers["bitmap"].consumer_filter_manager.stats
            skipped = stats.skipped
        finally:
            for b in brokers.values():
                b.shutdown()
    plain, bitmap = statistics.median(times["plain"]), statistics.median(times["bitmap"])
    load = os.getloadavg()
    print(f"{args.messages} messages, 1 in 100 matching, {args.rounds} interleaved rounds, load average "
          f"{load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    print(f"SQL92 pull of the whole queue: plain {plain * 1000:.1f} ms, bitmap {bitmap * 1000:.1f} ms "
          f"({plain / bitmap:.2f}x); units skipped unread by the bitmap over all rounds: {skipped}")
    print(f"puts (send + dispatch): plain {args.messages / put['plain']:.0f}/s, "
          f"bitmap {args.messages / put['bitmap']:.0f}/s")
    print(json.dumps({"messages": args.messages, "pull_plain_ms": round(plain * 1000, 1),
                      "pull_bitmap_ms": round(bitmap * 1000, 1), "pull_bitmap_vs_plain_ratio": round(plain / bitmap, 2),
                      "put_bitmap_vs_plain_ratio": round(put["plain"] / put["bitmap"], 2),
                      "load_average_1m": round(load[0], 2)}))


if __name__ == "__main__":
    main()
