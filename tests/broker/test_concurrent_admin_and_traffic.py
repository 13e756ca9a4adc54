"""One started broker under sends, pulls, pops and admin commands from many threads at once.

Why: the remoting and gRPC servers call the broker from a pool of threads, so an admin's
deleteTopic, resetOffsetByTime, cleanExpiredCQ or deleteExpiredCommitLog runs while producers and consumers keep going,
and beside the broker's own flush, commit, reput and revive threads. Each other test runs one
operation at a time; this one runs the mix of ``traffic_mix`` for a few seconds. It found two bugs: a
resetOffsetByTime failing with FileNotFoundError (two threads writing consumerOffset.json through
one temp file) and a deleteTopic whose tombstone was taken before records put a moment earlier
(after the deletion they were dispatched into the topic's new queue, or misaddressed its units).

Checked: no operation fails with anything but a broker error (a refusal with a response code); every
message acknowledged on a topic nobody deletes, and still in the commitlog, is at its queue offset
with its body, in the running
broker and after a reopen; and ``verifyStore`` finds nothing wrong with the store.
"""

from __future__ import annotations

import random
import threading
import time
from pathlib import Path

import pytest

from broker_core.broker.broker import Broker

from .traffic_mix import (
    Run,
    assert_in_place_and_verified,
    broker_config,
    create_resources,
    misplaced,
    run_threads,
    still_stored,
)

THREADS = 6
SECONDS = 2.5


@pytest.mark.parametrize("write_buffer", [False, True], ids=["default", "write-buffer"])
def test_concurrent_admin_and_traffic_lose_and_misplace_nothing(tmp_path: Path, write_buffer: bool) -> None:
    config = broker_config(write_buffer)
    broker = Broker(tmp_path / "store", config).start()  # the real clock: invisible times run out
    try:
        create_resources(broker)
        run = Run(broker)
        seed = random.randrange(1 << 20)
        run_threads(run, seed, THREADS, SECONDS)
        run.retention = False  # a last second whose messages all stay for the check
        run_threads(run, seed + 1, THREADS, 1.0)

        assert not run.failures, f"{len(run.failures)} operations failed (seed {seed}); the first:\n{run.failures[0]}"
        assert len(run.acked) > 100, "the threads hardly sent"
        assert broker.store.wait_for_dispatch()
        assert len(still_stored(broker, run.acked)) > 50, "retention left too few acknowledged messages to check"
        lost = misplaced(broker, run.acked)
        assert not lost, f"{len(lost)} acknowledged messages not at their queue offset, e.g. {lost[:3]}"
    finally:
        broker.shutdown()

    reopened = Broker(tmp_path / "store", config)
    try:
        assert_in_place_and_verified(reopened, run.acked)
    finally:
        reopened.shutdown()


@pytest.mark.parametrize("write_buffer", [False, True], ids=["default", "write-buffer"])
def test_shutdown_under_traffic_damages_nothing(tmp_path: Path, write_buffer: bool) -> None:
    """The broker shut down while the mix still runs (requests a server had not finished). A put that
    had passed the open check before the commitlog closed used to make its first file again and
    write at offset 0, over the oldest records: the next open cut the log there and moved the rest
    to lost+found (2 runs in 5). Calls that race the shutdown may be refused; every message
    acknowledged must be where it was put after a reopen, and the store must verify clean."""
    config = broker_config(write_buffer)
    broker = Broker(tmp_path / "store", config).start()
    create_resources(broker)
    run = Run(broker)
    workers = threading.Thread(target=run_threads, args=(run, random.randrange(1 << 20), THREADS, 1.5))
    workers.start()
    time.sleep(0.7)
    before_shutdown = len(run.failures)
    broker.shutdown()
    workers.join()
    assert before_shutdown == 0, run.failures[0]

    reopened = Broker(tmp_path / "store", config)
    try:
        assert not reopened.lost_found_records(), "recovery set records aside"
        assert_in_place_and_verified(reopened, run.acked)
    finally:
        reopened.shutdown()
