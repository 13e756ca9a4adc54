"""The client's pure rules: queue allocation (as Java computes it), process-queue commit offsets, tags."""

from __future__ import annotations

from broker_core.client.allocate import allocate_averagely
from broker_core.client.process_queue import ProcessQueue
from broker_core.client.subscription import build_subscription, java_string_hash
from broker_core.remoting.bodies import MessageQueue
from broker_core.store.codec.message import MessageExt


def mqs(n: int, broker: str = "b") -> list[MessageQueue]:
    return [MessageQueue(topic="T", broker_name=broker, queue_id=i) for i in range(n)]


def msg(offset: int) -> MessageExt:
    return MessageExt(0, 0, 0, 0, 0, offset, 0, 0, 0, ("127.0.0.1", 1), 0, ("127.0.0.1", 2), 0, 0, b"", "T", "")


def test_allocation_matches_javas_averagely_and_covers_every_queue_once() -> None:
    cids = ["c3", "c1", "c2"]
    shares = {c: allocate_averagely(c, mqs(8), cids) for c in cids}
    # Java: sorted cids c1,c2,c3; 8 queues -> 3,3,2 contiguous
    assert [q.queue_id for q in shares["c1"]] == [0, 1, 2]
    assert [q.queue_id for q in shares["c2"]] == [3, 4, 5]
    assert [q.queue_id for q in shares["c3"]] == [6, 7]
    for n_mq in range(0, 10):
        for n_c in range(1, 6):
            ids = [f"c{i}" for i in range(n_c)]
            got = [q for c in ids for q in allocate_averagely(c, mqs(n_mq), ids)]
            assert sorted(got) == mqs(n_mq)
    assert allocate_averagely("stranger", mqs(4), cids) == []


def test_concurrent_commit_offset_is_the_lowest_in_flight() -> None:
    pq = ProcessQueue()
    pq.put([msg(5), msg(6), msg(7)])
    assert pq.remove([msg(6)]) == 5
    assert pq.remove([msg(5)]) == 7
    assert pq.remove([msg(7)]) == 8
    assert pq.count == 0


def test_orderly_take_commit_and_rollback_keep_offset_order() -> None:
    pq = ProcessQueue()
    pq.put([msg(2), msg(0), msg(1)])
    assert [m.queue_offset for m in pq.take(2)] == [0, 1]
    pq.rollback()
    assert [m.queue_offset for m in pq.take(1)] == [0]
    assert pq.commit() == 1
    assert [m.queue_offset for m in pq.take(5)] == [1, 2]
    assert pq.commit() == 3


def test_tag_subscription_codes_are_java_hash_codes() -> None:
    sub = build_subscription("T", "TagA || TagB")
    assert sub.tags_set == ["TagA", "TagB"]
    assert sub.code_set == [2598919, 2598920]  # "TagA".hashCode(), "TagB".hashCode()
    assert java_string_hash("") == 0 and java_string_hash("hello world, this overflows") == 161437415
    assert java_string_hash("polygenelubricants") == -2147483648  # Integer.MIN_VALUE, the classic


def test_round_robin_is_per_topic() -> None:
    """A producer alternating two 4-queue topics sent each to only two of its queues: one counter served
    every topic. Java keeps one per topic (TopicPublishInfo.sendWhichQueue)."""
    from broker_core.client.selector import RoundRobinSelector
    from broker_core.remoting.bodies import MessageQueue

    selector = RoundRobinSelector()
    queues = {t: [MessageQueue(topic=t, broker_name="broker-a", queue_id=q) for q in range(4)] for t in ("A", "B")}
    used: dict[str, list[int]] = {"A": [], "B": []}
    for _ in range(8):
        for topic in ("A", "B"):
            used[topic].append(selector.select(queues[topic]).queue_id)
    assert {t: sorted(set(q)) for t, q in used.items()} == {"A": [0, 1, 2, 3], "B": [0, 1, 2, 3]}
