"""The official client's SimpleConsumer.receive long-polling while an admin disables the group
(``updateSubGroup -s false``): it gets nothing, as a receive sent after the switch."""

from __future__ import annotations

import threading
import time

from tests.grpc_v2.conftest import RunningGrpcBroker


def test_receive_parked_before_the_group_is_disabled_returns_no_message(grpc_broker: RunningGrpcBroker):
    """The receive parked before the switch woke on the next message and returned it (the pop reused
    the group config it read before parking); Apache re-runs the pop's checks on wake-up."""
    broker = grpc_broker.broker
    broker.create_or_update_topic("Parked", 1, 1)
    broker.create_or_update_subscription_group("GP")
    out: dict = {}

    def consume() -> None:  # timeout: receives start until then; the parked one runs to its answer anyway
        out.update(grpc_broker.client("simple_consume", topic="Parked", group="GP", expect=1, timeout=3,
                                      **{"await": 20}))

    consumer = threading.Thread(target=consume)
    consumer.start()
    deadline = time.monotonic() + 60
    while broker.pop_service.long_polling.waiting("Parked") == 0:  # the receive is parked
        assert consumer.is_alive() and time.monotonic() < deadline, out
        time.sleep(0.05)
    broker.create_or_update_subscription_group("GP", consume_enable=False)
    broker.send_message("Parked", b"after-disable")
    consumer.join(90)
    assert out["received"] == [], out
    assert out["errors"] and all("subscription group no permission, GP" in e for e in out["errors"]), out
