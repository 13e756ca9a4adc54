"""Several instances of one app, and instances that leave: the broker must not keep depending on one
client (transaction check-backs rotate over the live producers; a consumer that leaves gives its
auto-renewed messages back at once)."""

from __future__ import annotations

import threading
from pathlib import Path

from tests.waiting import wait_for

from .conftest import RunningGrpcBroker


def test_check_backs_rotate_so_the_instance_that_owns_the_transaction_is_asked(grpc_broker: RunningGrpcBroker,
                                                                               tmp_path: Path) -> None:
    grpc_broker.broker.create_or_update_topic("TxTopic", 2, 2, attributes={"+message.type": "TRANSACTION"})
    ready, stop = tmp_path / "ready", tmp_path / "stop"
    first: dict = {}

    def undecided_instance() -> None:  # started first: upstream would still ask the other instance
        first.update(grpc_broker.client("transaction_checker", topic="TxTopic", check="unknown",
                                        ready_file=str(ready), stop_file=str(stop), timeout=60, limit=90))

    t = threading.Thread(target=undecided_instance)
    t.start()
    try:
        wait_for(ready.exists, "the first producer started", 30)
        owner = grpc_broker.client("transaction", topic="TxTopic", mode="open", check="commit", prefix="owned",
                                   timeout=20)
    finally:
        stop.touch()
        t.join(90)
    assert owner["id"] in owner["checked"], (owner, first)
    got = grpc_broker.client("simple_consume", topic="TxTopic", group="TxG", expect=1, timeout=15)["received"]
    assert [m["body"] for m in got] == ["owned-0"]
