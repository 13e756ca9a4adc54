"""A broker restarted under live gRPC clients: the official Python client re-sends its Settings only
every 300 s, so for minutes after a restart the broker serves a push consumer it has no Settings for.
Its messages must stay with it (renewed) while it heartbeats and receives; only a client that leaves
gives them back."""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from pathlib import Path

from tests.waiting import wait_all_dispatched, wait_for

from .conftest import run_scenario, start_grpc_broker, stop_grpc_broker

PORT = 40117  # fixed: the client reconnects to the address it was given


def _deliveries(log: Path) -> list[dict]:
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def test_a_live_push_consumer_is_not_handed_its_messages_twice_after_a_broker_restart(tmp_path: Path) -> None:
    store, home = tmp_path / "store", tmp_path / "home"
    home.mkdir()
    running = start_grpc_broker(store, home, port=PORT)
    running.broker.create_or_update_topic("Jobs", 1, 1)
    running.broker.create_or_update_subscription_group("Workers")
    stop_file, log = tmp_path / "stop", tmp_path / "deliveries.jsonl"
    out: dict = {}

    def consumer() -> None:  # one slow thread: a received batch waits in the client's cache for seconds
        out.update(run_scenario(running.address, home, "push_consume", topic="Jobs", group="Workers", threads=1,
                                consume_s=1.5, log_file=str(log), stop_file=str(stop_file), timeout=90, limit=120))

    t = threading.Thread(target=consumer)
    t.start()
    try:
        wait_for(lambda: running.broker.client_registry.consumer_group("Workers") is not None,
                 "the push consumer registered", 30)
        running.broker.send_message("Jobs", b"before-0")
        wait_for(lambda: _deliveries(log), "a message consumed before the restart", 30, 0.2)
        stop_grpc_broker(running)  # a clean restart (SIGTERM): the client keeps its id and reconnects
        running = start_grpc_broker(store, home, port=PORT)
        for i in range(5):
            running.broker.send_message("Jobs", f"after-{i}".encode())
        wait_all_dispatched(running.broker)
        # five messages at 1.5 s each: the last one waits ~6 s in the client's cache, renewed by the broker
        # (it was given back after ~1 s and delivered a second time, attempt 2)
        wait_for(lambda: {f"after-{i}" for i in range(5)} <= {m["body"] for m in _deliveries(log)},
                 "all five consumed", 60, 0.2)
        time.sleep(4)  # time for a message given back to come again
    finally:
        stop_file.touch()
        t.join(120)
        stop_grpc_broker(running)
    bodies = Counter(m["body"] for m in out["received"] if m["body"].startswith("after-"))
    attempts = {m["body"]: m["attempt"] for m in out["received"] if m["attempt"] != 1}
    assert (sorted(bodies.items()), attempts) == ([(f"after-{i}", 1) for i in range(5)], {}), json.dumps(out)
