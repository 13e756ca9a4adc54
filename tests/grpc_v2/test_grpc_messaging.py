"""The official rocketmq-python-client against our gRPC v2 endpoint: every message type of the seeds."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from broker_core.store.codec.properties import PROPERTY_TAGS
from tests.waiting import wait_all_dispatched, wait_for

from .conftest import RunningGrpcBroker, grpc_broker_running

# A consumer group's retry ladder of 1 s steps (customizedRetryPolicy, in ms; the official client reads
# whole seconds, so 1 s is its shortest step): the retry tests are about how many attempts come and where
# the message ends, not about the default ladder's 1 s, 5 s, 10 s, ... waits.
ONE_SECOND_STEPS = {"type": "CUSTOMIZED", "customizedRetryPolicy": {"next": [1000, 1000, 1000]}}


@pytest.fixture
def fast_revive(tmp_path: Path) -> Iterator[RunningGrpcBroker]:
    """A broker whose pop revive runs every 0.2 s (reviveInterval, 1 s by default): a message whose
    invisible time ran out is back in its retry queue sooner, so a retry test waits its backoff, not
    the revive round after it."""
    with grpc_broker_running(tmp_path, {"reviveInterval": "200"}) as running:
        yield running


@pytest.fixture
def short_polls(tmp_path: Path) -> Iterator[RunningGrpcBroker]:
    """A broker whose empty receives long-poll 1 s, not the 5 s default minimum
    (grpcClientConsumerMinLongPollingTimeoutMillis): with the client's await of 1 s, a consumer waiting
    for a message to come back asks again every second instead of parking 5 s."""
    with grpc_broker_running(tmp_path, {"grpcClientConsumerMinLongPollingTimeoutMillis": "1000"}) as running:
        yield running


def test_normal_messages_keys_properties_and_queue_offsets(grpc_broker):
    grpc_broker.broker.create_or_update_topic("Orders", 4, 4)
    sent = grpc_broker.client("produce", topic="Orders", count=8, tag="TagA", keys="order", props={"region": "eu"})
    assert len(sent["sent"]) == 8 and not sent["errors"]
    got = grpc_broker.client("simple_consume", topic="Orders", group="G1", expect=8)["received"]
    assert {m["id"] for m in got} == set(sent["sent"])
    one = next(m for m in got if m["body"] == "m-3")
    assert one["keys"] == ["order-3"] and one["properties"] == {"region": "eu"}
    # Stored exactly as a remoting producer's message: findable by key, tag in TAGS, UNIQ_KEY = message id.
    wait_all_dispatched(grpc_broker.broker)  # a record's index entries follow its queue unit on the reput thread
    found = grpc_broker.broker.store.query_message("Orders", "order-3", 10)
    assert [m.uniq_key for m in found] == [one["id"]] and found[0].get_property(PROPERTY_TAGS) == "TagA"


def test_message_type_must_match_the_topic(grpc_broker):
    grpc_broker.broker.create_or_update_topic("Plain", 2, 2)
    out = grpc_broker.client("produce", topic="Plain", count=1, groups=["g1"])
    assert out["sent"] == [] and "type" in out["errors"][0].lower()


def test_delay_message_is_delivered_at_its_time(grpc_broker):
    grpc_broker.broker.create_or_update_topic("Later", 2, 2, attributes={"+message.type": "DELAY"})
    t0 = time.time()
    sent = grpc_broker.client("produce", topic="Later", count=1, delay_s=3)
    assert len(sent["sent"]) == 1, sent
    got = grpc_broker.client("simple_consume", topic="Later", group="G", expect=1, timeout=20)["received"]
    assert [m["id"] for m in got] == sent["sent"]
    # The client sends whole seconds (int(now) + 3), so delivery is at least 2 s after t0.
    assert time.time() - t0 >= 1.95


def test_fifo_order_per_message_group_with_two_consumers(grpc_broker, tmp_path):
    b = grpc_broker.broker
    b.create_or_update_topic("Fifo", 4, 4, attributes={"+message.type": "FIFO"})
    b.create_or_update_subscription_group("FG", consume_message_orderly=True)
    groups = [f"order-{i}" for i in range(6)]
    sent = grpc_broker.client("produce", topic="Fifo", count=60, groups=groups)
    assert len(sent["sent"]) == 60, sent
    import concurrent.futures as cf
    stop = tmp_path / "stop"
    with cf.ThreadPoolExecutor(2) as pool:
        # each consumer gets its share only, so neither can count to 60: both stop once the group's
        # offsets show all 60 consumed and acked (then linger 1 s, so a redelivery would still be seen)
        runs = [pool.submit(grpc_broker.client, "push_consume", topic="Fifo", group="FG", timeout=15,
                            linger=1.0, stop_file=str(stop)) for _ in range(2)]
        try:
            wait_for(lambda: sum(max(b.query_offset("FG", "Fifo", q), 0) for q in range(4)) >= 60,
                     "all 60 FIFO messages acked by group FG", 15, 0.1)
        finally:
            stop.touch()
        results = [r.result() for r in runs]
    received = [m for r in results for m in r["received"]]
    assert sorted(int(m["body"].split("-")[1]) for m in received) == list(range(60))
    for g in groups:
        mine = sorted((m["at"], int(m["body"].split("-")[1])) for m in received if m["group"] == g)
        assert [n for _, n in mine] == sorted(n for _, n in mine), f"group {g} out of order: {mine}"


def test_transaction_commit_rollback_and_check_back(grpc_broker):
    b = grpc_broker.broker
    b.create_or_update_topic("Tx", 2, 2, attributes={"+message.type": "TRANSACTION"})
    committed = grpc_broker.client("transaction", topic="Tx", mode="commit", prefix="commit")
    rolled = grpc_broker.client("transaction", topic="Tx", mode="rollback", prefix="rollback")
    checked = grpc_broker.client("transaction", topic="Tx", mode="open", check="commit", prefix="checked",
                                 timeout=25)
    # The broker asked over telemetry (a slow machine may also ask about an older half of the topic:
    # producers of a topic form its producer group, as on the proxy).
    assert checked["id"] in checked["checked"], checked
    got = grpc_broker.client("simple_consume", topic="Tx", group="TG", expect=2, timeout=15)["received"]
    assert sorted(m["body"] for m in got) == ["checked-0", "commit-0"]
    assert rolled["id"] not in {m["id"] for m in got} and committed["id"] in {m["id"] for m in got}


def test_change_invisible_duration_and_redelivery_after_invisible_time(short_polls):
    grpc_broker = short_polls
    grpc_broker.broker.create_or_update_topic("Slow", 1, 1)
    grpc_broker.client("produce", topic="Slow", count=1)
    first = grpc_broker.client("simple_consume", topic="Slow", group="SG", expect=1, ack=False,
                               change_invisible=2)["received"]
    assert [m["attempt"] for m in first] == [1]
    again = grpc_broker.client("simple_consume", topic="Slow", group="SG", expect=1, timeout=25,
                               **{"await": 1})["received"]
    assert [(m["id"], m["attempt"]) for m in again] == [(first[0]["id"], 2)]


def test_push_consumer_retries_then_dead_letter_queue(fast_revive, tmp_path):
    import threading
    grpc_broker = fast_revive
    b = grpc_broker.broker
    b.create_or_update_topic("Flaky", 1, 1)
    b.create_or_update_subscription_group("PG", retry_max_times=2, group_retry_policy=ONE_SECOND_STEPS)
    grpc_broker.client("produce", topic="Flaky", count=2)
    stop = tmp_path / "stop"
    out: dict = {}

    def consume() -> None:
        out.update(grpc_broker.client("push_consume", topic="Flaky", group="PG", fail_bodies=["m-0"],
                                      timeout=60, linger=0, stop_file=str(stop)))

    t = threading.Thread(target=consume)
    t.start()
    try:
        # 3 deliveries (backoff 1 s each), then the broker dead-letters it instead of a 4th.
        wait_for(lambda: b.get_max_offset("%DLQ%PG", 0) >= 1, "m-0 in %DLQ%PG", 45)
    finally:
        stop.touch()
        t.join(60)
    attempts = sorted(m["attempt"] for m in out["received"] if m["body"] == "m-0")
    assert attempts == [1, 2, 3], out["received"]
    assert [m["body"] for m in out["received"] if m["body"] == "m-1"] == ["m-1"]
    dlq = b.pull_message("DLQ-reader", "%DLQ%PG", 0, 0, 32)
    assert [m.body for m in dlq.messages] == [b"m-0"]


def test_tag_and_sql92_filters(grpc_broker):
    b = grpc_broker.broker
    b.create_or_update_topic("Mixed", 2, 2)
    grpc_broker.client("produce", topic="Mixed", count=10, tag=["refund", "pay"], props={"amount": [500, 1500]})
    by_tag = grpc_broker.client("simple_consume", topic="Mixed", group="TagG", tag_filter="refund", expect=5)
    assert sorted(m["body"] for m in by_tag["received"]) == [f"m-{i}" for i in (0, 2, 4, 6, 8)]
    by_sql = grpc_broker.client("simple_consume", topic="Mixed", group="SqlG", sql="amount > 1000", expect=5)
    assert sorted(m["body"] for m in by_sql["received"]) == [f"m-{i}" for i in (1, 3, 5, 7, 9)]


def test_body_over_the_broker_limit_is_refused(tmp_path):
    with grpc_broker_running(tmp_path, {"maxMessageSize": "1024"}) as running:
        running.broker.create_or_update_topic("Small", 1, 1)
        out = running.client("produce", topic="Small", count=1, prefix="x" * 2000)
        assert out["sent"] == [] and "exceeds" in out["errors"][0]
        assert running.broker.get_max_offset("Small", 0) == 0


def test_grpc_clients_appear_in_the_client_registry(grpc_broker, tmp_path):
    import threading
    b = grpc_broker.broker
    b.create_or_update_topic("Seen", 1, 1)
    seen: list = []
    stop = tmp_path / "stop"

    def consume() -> None:  # runs until seen (stop file), at most 6 s
        grpc_broker.client("push_consume", topic="Seen", group="SeenG", timeout=6, linger=0, stop_file=str(stop))

    t = threading.Thread(target=consume)
    t.start()
    try:
        deadline = time.time() + 15
        while time.time() < deadline and not seen:
            info = b.consumer_connection("SeenG")
            if info is not None and info.channels:
                seen.extend(info.channels.values())
            time.sleep(0.2)
    finally:
        stop.touch()
        t.join(30)
    assert seen and seen[0].language == "PYTHON" and "@" in seen[0].client_id
    assert b.consumer_connection("SeenG") is None or not b.consumer_connection("SeenG").channels  # gone at shutdown


def test_fifo_failing_message_blocks_its_group_until_dead_lettered(grpc_broker, tmp_path):
    """Seed 000: N+1 of a message group only after N is done; N is retried, then sent to the DLQ."""
    import threading
    b = grpc_broker.broker
    b.create_or_update_topic("FifoFail", 1, 1, attributes={"+message.type": "FIFO"})
    b.create_or_update_subscription_group("FFG", consume_message_orderly=True, retry_max_times=2,
                                          group_retry_policy=ONE_SECOND_STEPS)
    grpc_broker.client("produce", topic="FifoFail", count=3, groups=["only"])
    stop = tmp_path / "stop"
    out: dict = {}

    def consume() -> None:
        out.update(grpc_broker.client("push_consume", topic="FifoFail", group="FFG", fail_bodies=["m-1"],
                                      timeout=60, linger=0, stop_file=str(stop)))

    t = threading.Thread(target=consume)
    t.start()
    try:
        wait_for(lambda: b.get_max_offset("%DLQ%FFG", 0) >= 1, "m-1 in %DLQ%FFG", 45)
        # m-2 is released once m-1 is forwarded: its ack moves the group's offset past it
        wait_for(lambda: b.query_offset("FFG", "FifoFail", 0) >= 3, "m-2 consumed and acked", 20)
    finally:
        stop.touch()
        t.join(60)
    seq = [m["body"] for m in sorted(out["received"], key=lambda m: m["at"])]
    assert seq[0] == "m-0" and seq[-1] == "m-2" and set(seq[1:-1]) == {"m-1"} and len(seq) >= 3, seq
    dlq = b.pull_message("DLQ-reader", "%DLQ%FFG", 0, 0, 32)
    assert [m.body for m in dlq.messages] == [b"m-1"]
