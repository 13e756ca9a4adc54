"""kill -9 loop for delayed messages: every acknowledged one is delivered, to its queue, never early.

Why: a timer message goes through four files before a consumer sees it (commitlog, the timer topic's
queue, TimerLog, the wheel), and the timer service's checkpoint says how far it got; a crash between
any two of them must neither lose an acknowledged message nor deliver one before its time. A writer
process (``timer_kill_writer.py``) puts messages due 20-1,500 ms later while its timer thread enqueues
and delivers earlier ones, and is killed with SIGKILL at a random moment, several times on one store.
Then a writer reopens it, runs the timer past the last due time and every message is checked.
Delivery is at least once, as RocketMQ's: a crash may deliver a message again (counted, not failed).
"""

from __future__ import annotations

import random
import time
from pathlib import Path

import kill_loop
from timer_kill_writer import PRECISION_MS, QUEUES, TOPIC, body_of, config

from broker_core.store.message_store import MessageStore
from broker_core.store.timer.timer_message_store import TimerMessageStore

HERE = Path(__file__).resolve().parent
CYCLES = 8


def run_and_kill(root: Path, seed: int, kill_after: float, prewarm_next: bool) -> list[tuple[str, int, int]]:
    """(uniqKey, queueId, deliverMs) of each put acknowledged before the kill, ``kill_after`` s after start."""
    acks = []
    for line in kill_loop.run_and_kill(HERE / "timer_kill_writer.py", [str(root), str(seed)], kill_after,
                                       prewarm_next=prewarm_next):
        parts = line.split()
        if len(parts) == 4 and parts[0] == "ack":  # (a line cut by the kill is not an ack)
            acks.append((parts[1], int(parts[2]), int(parts[3])))
    return acks


def delivered(store: MessageStore) -> list[tuple[str | None, int, int, bytes]]:
    """(uniqKey, queueId, storeTimestamp, body) of every message in the real topic's queues."""
    return [(m.uniq_key, qid, m.store_timestamp, m.body) for qid, m in kill_loop.topic_messages(store, TOPIC, range(QUEUES))]


def test_timer_kill9_loop_delivers_every_acknowledged_message_on_time(tmp_path: Path) -> None:
    seed = random.randrange(1 << 20)
    rnd = random.Random(seed)
    root = tmp_path / "store"
    acks: list[tuple[str, int, int]] = []
    t0 = time.monotonic()
    for cycle in range(CYCLES):
        acks += run_and_kill(root, seed * 100 + cycle, rnd.uniform(0.6, 2.5), cycle + 1 < CYCLES)
    assert len(acks) > 50, "the writer hardly ran"
    last_due = max(deliver for _, _, deliver in acks)

    store = MessageStore(root, config()).open().start()
    timer = TimerMessageStore(store).start(interval_s=0.01)
    try:
        assert store.recovery_report.abnormal
        want = {uniq: (qid, deliver) for uniq, qid, deliver in acks}
        deadline = time.monotonic() + 30
        while True:
            got = delivered(store)
            if want.keys() <= {u for u, *_ in got} and time.time() * 1000 > last_due + 3 * PRECISION_MS:
                break
            assert time.monotonic() < deadline, f"not delivered: {sorted(want.keys() - {u for u, *_ in got})[:5]}"
            time.sleep(0.1)
        assert store.wait_for_dispatch()
        got = delivered(store)
    finally:
        timer.shutdown()
        store.shutdown()

    prefixes = tuple(f"T{seed * 100 + c}-" for c in range(CYCLES))
    for uniq, qid, stored, body in got:
        assert uniq is not None and uniq.startswith(prefixes), f"a message nobody put: {uniq}"
        assert body == body_of(uniq), f"{uniq}: body {body!r}"
        if uniq in want:
            want_qid, deliver = want[uniq]
            assert qid == want_qid, f"{uniq} delivered to queue {qid}, put to {want_qid}"
            assert stored >= deliver - PRECISION_MS, f"{uniq} delivered {deliver - stored} ms early"
    counts: dict[str, int] = {}
    for uniq, *_ in got:
        counts[uniq] = counts.get(uniq, 0) + 1
    again = sum(n - 1 for n in counts.values())
    print(f"timer kill -9 loop: {CYCLES} cycles, {len(acks)} acknowledged delayed messages, all delivered on time; "
          f"{again} delivered again after a crash, {len(counts) - len(want.keys() & counts.keys())} unacknowledged "
          f"ones delivered, in {time.monotonic() - t0:.1f}s (seed {seed})")
