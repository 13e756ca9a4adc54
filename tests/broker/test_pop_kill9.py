"""kill -9 loop for pop consumption: every sent message is consumed, none lost by a crash.

Why: a pop moves the consumer offset past the popped batch at once and keeps the batch in flight
through a checkpoint in the revive topic; an ack is another revive-log record; the offset table is
flushed on its own schedule. A crash between any of these must not lose a message (popped but never
acked, and no checkpoint left to revive it), only deliver one again. A process
(``pop_kill_writer.py``) sends, pops with a 300 ms invisible time and acks 80% of what it pops, and is
killed with SIGKILL at random moments, several times on one store; then a consumer pops and acks
until every sent message has been consumed. Consumption is at least once, as RocketMQ's pop:
messages consumed again are counted, not failed.
"""

from __future__ import annotations

import random
import time
from pathlib import Path

import kill_loop

from .pop_kill_writer import TOPIC, open_broker, pop_and_ack

HERE = Path(__file__).resolve().parent
CYCLES = 8


def run_and_kill(root: Path, seed: int, kill_after: float,
                 prewarm_next: bool) -> tuple[list[str], list[str], set[str]]:
    """Bodies sent and bodies consumed (acked OK) before the kill, ``kill_after`` s after the start, and
    those whose ack the kill interrupted (acked or not: unknown)."""
    sent, consumed, acking = [], [], set()
    for line in kill_loop.run_and_kill(HERE / "pop_kill_writer.py", [str(root), str(seed)], kill_after,
                                       prewarm_next=prewarm_next):
        parts = line.split()  # (a line cut by the kill is not an acknowledgement)
        if len(parts) == 2 and parts[0] == "sent":
            sent.append(parts[1])
        elif len(parts) == 2 and parts[0] == "acking":
            acking.add(parts[1])
        elif len(parts) == 2 and parts[0] == "consumed":
            consumed.append(parts[1])
            acking.discard(parts[1])
    return sent, consumed, acking


def test_pop_kill9_loop_consumes_every_sent_message(tmp_path: Path) -> None:
    seed = random.randrange(1 << 20)
    rnd = random.Random(seed)
    root = tmp_path / "store"
    sent: list[str] = []
    consumed: list[str] = []
    unknown: set[str] = set()  # acks a kill interrupted: the message may be consumed already
    t0 = time.monotonic()
    for cycle in range(CYCLES):
        s, c, acking = run_and_kill(root, seed * 100 + cycle, rnd.uniform(0.6, 2.0), cycle + 1 < CYCLES)
        sent += s
        consumed += c
        unknown |= acking
    assert len(sent) > 50, "the writer hardly ran"
    before = len(consumed)

    broker = open_broker(root)
    try:
        assert broker.store.recovery_report.abnormal
        deadline = time.monotonic() + 60
        while missing := set(sent) - set(consumed) - unknown:
            assert time.monotonic() < deadline, \
                f"{len(missing)} sent messages never consumed, e.g. {sorted(missing)[:5]}; in flight: " \
                f"{broker.pop_service.inflight('G_pop_kill')}"
            done = pop_and_ack(broker, rnd, 1.0)
            consumed += done
            if not done:
                time.sleep(0.05)  # the rest is in flight: revived when its invisible time is up
    finally:
        broker.shutdown()

    prefixes = tuple(f"P{seed * 100 + c}-" for c in range(CYCLES))
    assert all(body.startswith(prefixes) for body in consumed), "a message nobody sent was consumed"
    again = len(consumed) - len(set(consumed))
    print(f"pop kill -9 loop: {CYCLES} cycles, {len(sent)} messages sent to {TOPIC}, {before} consumptions by the "
          f"killed processes, every message consumed in the end; {again} consumed again, in "
          f"{time.monotonic() - t0:.1f}s (seed {seed})")
