"""Tag subscriptions on a BatchCQ queue holding inner batches (``Producer.send_batch`` on a
``queue.type=BatchCQ`` topic): each inner message is matched by its own TAGS.

Why: an inner batch is one commitlog record and one BatchCQ unit, and that unit's tagsCode is the
outer record's (0 for the batches Java's producer and ours send: the batch carries no TAGS), while
every inner message has its own TAGS. Judging the unit by its tagsCode dropped every message of
such batches for a ``TagA`` consumer (and moved its offset past them), where the same consumer with
SQL92 ``TAGS = 'TagA'`` got them. Java's consumer re-filters by tag per message, so delivering the
inner messages that match, each by its own tag, is what a user expects. Plain records on the same
queue keep the unit-level skip.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from store_util import FakeClock, make_msg, small_config

from broker_core.broker.filter import build_filter
from broker_core.store.codec.batch import BatchItem, encode_batch
from broker_core.store.message_store import GetMessageStatus, MessageStore
from broker_core.store.topic_config import TopicConfig

TOPIC = "BcqTags"


def _items(tags: list[str | None], first: int) -> list[BatchItem]:
    return [BatchItem(b"m%d" % (first + i), {"TAGS": t} if t else {}) for i, t in enumerate(tags)]


@pytest.fixture
def store(tmp_path: Path) -> MessageStore:
    s = MessageStore(tmp_path, small_config(), clock=FakeClock(step=1)).open()
    s.topic_table.put(TopicConfig(TOPIC, 1, 1, attributes={"queue.type": "BatchCQ"}), 0)
    yield s
    s.shutdown()


def fill(store: MessageStore) -> list[str | None]:
    """A queue mixing inner batches (outer record untagged, or tagged otherwise) and plain records;
    returns the tag of each queue offset."""
    layout: list[tuple[str, list[str | None], str | None]] = [
        ("batch", ["TagA", "TagB", "TagA", "TagC"], None),  # as send_batch stores it: no outer TAGS
        ("plain", ["TagA"], None),
        ("plain", ["TagB"], None),
        ("batch", ["TagB", "TagB"], None),  # nothing for TagA
        ("batch", ["TagA"], None),  # a one-message inner batch: batchSize 1, like a plain unit
        ("plain", [None], None),  # untagged plain record: tagsCode 0, as an untagged batch's
        ("batch", ["TagC", None, "TagA"], "TagB"),  # an outer TAGS that is none of its messages'
        ("batch", ["TagB"], None),
    ]
    tags: list[str | None] = []
    for n, (kind, ts, outer) in enumerate(layout):
        if kind == "batch":
            msg = make_msg(TOPIC, 0, encode_batch(_items(ts, len(tags))), tags=outer, uniq=f"U{n}")
            r = store.put_inner_batch(msg, len(ts))
        else:
            r = store.put_message(make_msg(TOPIC, 0, b"m%d" % len(tags), tags=ts[0]))
        assert r.ok and r.queue_offset == len(tags)
        tags.extend(ts)
    assert store.get_max_offset_in_queue(TOPIC, 0) == len(tags)
    return tags


@pytest.mark.parametrize("expression, wanted", [("TagA", {"TagA"}), ("TagA || TagC", {"TagA", "TagC"}),
                                                ("TagB", {"TagB"})])
def test_tag_filter_matches_each_inner_message_by_its_own_tag(store: MessageStore, expression: str,
                                                              wanted: set[str]) -> None:
    tags = fill(store)
    expected = [off for off, t in enumerate(tags) if t in wanted]
    f = build_filter("TAG", expression)
    r = store.get_messages(TOPIC, 0, 0, 100, f)
    assert r.status is GetMessageStatus.FOUND
    assert [m.queue_offset for m in r.messages] == expected
    assert [m.body for m in r.messages] == [b"m%d" % off for off in expected]
    assert all(m.tags in wanted for m in r.messages)
    assert r.next_begin_offset == len(tags)


def test_tag_filter_pulls_one_at_a_time_without_skipping_a_match(store: MessageStore) -> None:
    """A consumer pulling one message per request commits next_begin_offset each time: no TagA message
    may be passed over, inside a batch or at its edges."""
    tags = fill(store)
    f = build_filter("TAG", "TagA")
    got, offset = [], 0
    while offset < len(tags):
        r = store.get_messages(TOPIC, 0, offset, 1, f)
        if r.status is GetMessageStatus.FOUND:
            got.extend(m.queue_offset for m in r.messages)
        else:
            assert r.status is GetMessageStatus.NO_MATCHED_MESSAGE, r.status
        assert r.next_begin_offset > offset
        offset = r.next_begin_offset
    assert got == [off for off, t in enumerate(tags) if t == "TagA"]


def test_no_match_in_a_batch_moves_past_it(store: MessageStore) -> None:
    tags = fill(store)
    r = store.get_messages(TOPIC, 0, 0, 100, build_filter("TAG", "TagZ"))
    assert r.status is GetMessageStatus.NO_MATCHED_MESSAGE and not r.messages
    assert r.next_begin_offset == len(tags)
