"""kill -9 loop for a broker under concurrent traffic and admin commands: nothing acknowledged lost or misplaced.

Why: ``test_concurrent_admin_and_traffic`` checks the mix of ``traffic_mix`` (sends, pulls, pops,
deleteTopic and recreate, resets, cleanExpiredCQ from several threads) in one process that shuts
down cleanly. Here a process runs it and is killed with SIGKILL at a random moment, several times on
one store, so recovery meets what a crash leaves mid-way: a topic's tombstone written but its queues
not yet removed, queues of a recreated topic, pending dispatch, a half-written config file. After
the loop: every message acknowledged on a topic nobody deletes is at its queue offset with its body,
and ``verifyStore`` finds nothing wrong.
"""

from __future__ import annotations

import random
import time
from pathlib import Path

import kill_loop
import pytest

from broker_core.broker.broker import Broker

from .traffic_mix import assert_in_place_and_verified, broker_config, still_stored

HERE = Path(__file__).resolve().parent
CYCLES = 5


@pytest.mark.parametrize("write_buffer", [False, True], ids=["default", "write-buffer"])
def test_traffic_kill9_loop_loses_and_misplaces_nothing(tmp_path: Path, write_buffer: bool) -> None:
    seed = random.randrange(1 << 20)
    rnd = random.Random(seed)
    root = tmp_path / "store"
    acked = []
    t0 = time.monotonic()
    for cycle in range(CYCLES):
        retention = cycle < CYCLES - 1  # the last cycle's messages stay for the check
        lines = kill_loop.run_and_kill(HERE / "traffic_kill_writer.py",
                                       [str(root), str(seed * 100 + cycle), "1" if write_buffer else "0",
                                        "1" if retention else "0"], rnd.uniform(0.8, 2.0),
                                       prewarm_next=retention)
        for line in lines:
            parts = line.split()
            if len(parts) == 6 and parts[0] == "ack":  # (a line cut by the kill is not an ack)
                acked.append((parts[1], int(parts[2]), int(parts[3]), parts[4].encode(), int(parts[5])))
    assert len(acked) > 100, "the writer hardly ran"

    broker = Broker(root, broker_config(write_buffer))
    try:
        assert broker.store.recovery_report.abnormal
        checked = len(still_stored(broker, acked))
        assert checked > 50, "retention left too few acknowledged messages to check"
        print(f"seed {seed}")  # (shown with a failure)
        assert_in_place_and_verified(broker, acked)
    finally:
        broker.shutdown()
    print(f"traffic kill -9 loop: {CYCLES} cycles, {len(acked)} acknowledged sends, the {checked} retention kept "
          f"all in place, store verified, "
          f"in {time.monotonic() - t0:.1f}s (seed {seed})")
