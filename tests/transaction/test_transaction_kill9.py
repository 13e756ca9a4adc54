"""kill -9 loop for transactional messages: a committed transaction is delivered, a rolled-back one never.

Why: a transaction's state is spread over the half message, its op marker (written in batches, so a
crash can lose queued ones), the check offsets and the producer's answer to check-backs. Whatever
the moment of the crash, the broker must end up doing what the producer decided: each committed
transaction's message delivered (at least once: a lost op marker means a check-back, and RocketMQ's
producer then commits again), each rolled-back one never. A process (``tx_kill_writer.py``) prepares
transactions, ends most at once and leaves the others to its check service, and is killed with
SIGKILL at random moments, several times on one store; then the broker reopens it and runs checks
until every transaction is resolved.
"""

from __future__ import annotations

import random
import time
from pathlib import Path

import kill_loop
from tx_kill_writer import QUEUES, TOPIC, body_of, decision, open_broker

from broker_core.broker.transaction import CID_RMQ_SYS_TRANS, RMQ_SYS_TRANS_HALF_TOPIC
from broker_core.store.codec.sys_flag import TRANSACTION_COMMIT_TYPE
from broker_core.store.message_store import MessageStore

HERE = Path(__file__).resolve().parent
CYCLES = 8


def run_and_kill(root: Path, seed: int, kill_after: float,
                 prewarm_next: bool) -> tuple[list[tuple[str, int]], set[str]]:
    """The transactions prepared (uniqKey, queueId) and ended before the kill, ``kill_after`` s after start."""
    prepared, ended = [], set()
    for line in kill_loop.run_and_kill(HERE / "tx_kill_writer.py", [str(root), str(seed)], kill_after,
                                       prewarm_next=prewarm_next):
        parts = line.split()  # (a line cut by the kill is not an acknowledgement)
        if len(parts) == 3 and parts[0] == "prep":
            prepared.append((parts[1], int(parts[2])))
        elif len(parts) == 2 and parts[0] == "end":
            ended.add(parts[1])
    return prepared, ended


def delivered(store: MessageStore) -> list[tuple[str | None, int, bytes, int]]:
    """(uniqKey, queueId, body, sysFlag) of every message in the real topic's queues."""
    return [(m.uniq_key, qid, m.body, m.sys_flag) for qid, m in kill_loop.topic_messages(store, TOPIC, range(QUEUES))]


def test_transaction_kill9_loop_does_what_the_producer_decided(tmp_path: Path) -> None:
    seed = random.randrange(1 << 20)
    rnd = random.Random(seed)
    root = tmp_path / "store"
    prepared: list[tuple[str, int]] = []
    ended: set[str] = set()
    t0 = time.monotonic()
    for cycle in range(CYCLES):
        p, e = run_and_kill(root, seed * 100 + cycle, rnd.uniform(0.6, 2.0), cycle + 1 < CYCLES)
        prepared += p
        ended |= e
    assert len(prepared) > 50, "the writer hardly ran"
    commit = {uniq: qid for uniq, qid in prepared if decision(uniq) == TRANSACTION_COMMIT_TYPE}
    rollback = {uniq for uniq, _ in prepared if decision(uniq) != TRANSACTION_COMMIT_TYPE}

    store, svc, checker = open_broker(root)
    try:
        assert store.recovery_report.abnormal
        deadline = time.monotonic() + 30

        def unchecked_halves() -> int:  # halves the check has not got past (re-put UNKNOWN ones included)
            return store.get_max_offset_in_queue(RMQ_SYS_TRANS_HALF_TOPIC, 0) \
                - svc.offsets.query_offset(CID_RMQ_SYS_TRANS, RMQ_SYS_TRANS_HALF_TOPIC, 0)

        while (missing := sorted(commit.keys() - {u for u, *_ in delivered(store)})) or unchecked_halves() > 0:
            assert time.monotonic() < deadline, \
                f"not resolved: {unchecked_halves()} halves unchecked, committed ones missing: {missing[:5]}"
            time.sleep(0.1)
        time.sleep(0.5)  # checks keep running: nothing more may appear
        got = delivered(store)
    finally:
        checker.shutdown()
        svc.close()
        store.shutdown()

    prefixes = tuple(f"X{seed * 100 + c}-" for c in range(CYCLES))
    counts: dict[str, int] = {}
    for uniq, qid, body, sys_flag in got:
        assert uniq is not None and uniq.startswith(prefixes), f"a message nobody sent: {uniq}"
        assert uniq not in rollback, f"{uniq} was rolled back, yet delivered"
        assert decision(uniq) == TRANSACTION_COMMIT_TYPE, f"{uniq}: delivered, but its producer rolls it back"
        assert body == body_of(uniq) and sys_flag & 0xC == TRANSACTION_COMMIT_TYPE, uniq
        if uniq in commit:
            assert qid == commit[uniq], f"{uniq} delivered to queue {qid}, sent to {commit[uniq]}"
        counts[uniq] = counts.get(uniq, 0) + 1
    assert commit.keys() <= counts.keys()
    again = sum(n - 1 for n in counts.values())
    print(f"transaction kill -9 loop: {CYCLES} cycles, {len(prepared)} transactions prepared ({len(ended)} ended at "
          f"once), {len(commit)} committed all delivered, {len(rollback)} rolled back none delivered; {again} "
          f"committed again after a crash, in {time.monotonic() - t0:.1f}s (seed {seed})")
