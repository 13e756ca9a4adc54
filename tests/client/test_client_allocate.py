"""Allocation strategies against Java's results for the same inputs.

The consistent-hash vectors come from running Java's algorithm (``ConsistentHashRouter`` with its
default MD5Hash, 10 virtual nodes ``<cid>-<i>``, a TreeMap ring, routing ``MessageQueue.toString()``)
on OpenJDK 17 for these exact client ids and queues.
"""

from __future__ import annotations

import pytest

from broker_core.client.allocate import (
    AllocateByConfig,
    AllocateConsistentHash,
    allocate_averagely,
    allocate_averagely_by_circle,
    java_mq_string,
)
from broker_core.client.consistent_hash import md5_hash
from broker_core.remoting.bodies import MessageQueue


def mqs(n: int, broker: str = "broker-a", topic: str = "TopicTest") -> list[MessageQueue]:
    return [MessageQueue(topic=topic, broker_name=broker, queue_id=i) for i in range(n)]


CIDS = ["127.0.0.1@c3", "127.0.0.1@c1", "127.0.0.1@c2"]


def test_consistent_hash_matches_javas_ring() -> None:
    assert md5_hash("127.0.0.1@c1-0") == 1425490763
    assert md5_hash(java_mq_string(MessageQueue(topic="TopicTest", broker_name="broker-a", queue_id=0))) == 1987926524
    strategy = AllocateConsistentHash()
    owners = {q.queue_id: cid for cid in CIDS for q in strategy(cid, mqs(8), CIDS)}
    java = {0: "c3", 1: "c1", 2: "c3", 3: "c1", 4: "c2", 5: "c3", 6: "c3", 7: "c3"}
    assert owners == {q: "127.0.0.1@" + c for q, c in java.items()}


def test_averagely_by_circle_deals_queues_round_robin() -> None:
    shares = {c: [q.queue_id for q in allocate_averagely_by_circle(c, mqs(8), CIDS)] for c in CIDS}
    assert shares == {"127.0.0.1@c1": [0, 3, 6], "127.0.0.1@c2": [1, 4, 7], "127.0.0.1@c3": [2, 5]}
    assert allocate_averagely_by_circle("stranger", mqs(4), CIDS) == []


@pytest.mark.parametrize("strategy", [allocate_averagely, allocate_averagely_by_circle, AllocateConsistentHash()])
def test_every_queue_has_exactly_one_owner(strategy) -> None:  # type: ignore[no-untyped-def]
    for n_mq in range(0, 12):
        for n_c in range(1, 6):
            ids = [f"10.0.0.{i}@{i}" for i in range(n_c)]
            queues = mqs(n_mq // 2, "broker-a") + mqs(n_mq - n_mq // 2, "broker-b")
            got = [q for c in ids for q in strategy(c, queues, ids)]
            assert sorted(got) == sorted(queues)


def test_consistent_hash_moves_only_the_leavers_queues() -> None:
    queues = mqs(16, "broker-a") + mqs(16, "broker-b")
    strategy = AllocateConsistentHash()
    before = {q: c for c in CIDS for q in strategy(c, queues, CIDS)}
    remaining = [c for c in CIDS if c != "127.0.0.1@c2"]
    after = {q: c for c in remaining for q in strategy(c, queues, remaining)}
    assert set(after) == set(queues)
    moved = {q for q in queues if before[q] != after[q]}
    assert moved == {q for q in queues if before[q] == "127.0.0.1@c2"}


def test_by_config_pins_the_configured_queues_that_exist() -> None:
    pinned = [MessageQueue(topic="TopicTest", broker_name="broker-a", queue_id=1), MessageQueue(topic="TopicTest", broker_name="broker-a", queue_id=9)]
    assert AllocateByConfig(pinned)("anyone", mqs(4), CIDS) == pinned[:1]
    with pytest.raises(ValueError, match="virtualNodeCnt"):
        AllocateConsistentHash(-1)
