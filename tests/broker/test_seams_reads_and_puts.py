"""Broker-owned reads (query by key / unique key / id, read a queue without a group) and the one
put pipeline that single sends, exploded batches and BatchCQ inner batches all go through."""

from __future__ import annotations

import pytest

from broker_core.broker.errors import MessageIllegalError, QueryNotFoundError
from broker_core.store.codec.batch import BatchItem
from broker_core.store.message_store import GetMessageStatus


def test_queries_by_key_unique_key_and_id(make_broker) -> None:
    b = make_broker()
    b.create_or_update_topic("Q", 2, 2)
    b.create_or_update_topic("Other", 1, 1)
    r1 = b.send_message("Q", b"one", {"KEYS": "order-1 shared"}, queue_id=0)
    b.send_message("Q", b"two", {"KEYS": "order-10"}, queue_id=1)
    b.send_message("Other", b"three", {"KEYS": "order-1"}, queue_id=0)
    assert [m.body for m in b.query_message("Q", "order-1")] == [b"one"]  # exact token, own topic only
    assert [m.body for m in b.query_message("Q", "shared")] == [b"one"]
    assert [m.body for m in b.query_message("Q", r1.uniq_key, unique_key=True)] == [b"one"]
    assert b.query_message("Q", "order-1", unique_key=True) == []
    found = b.view_message_by_id(r1.msg_id)
    assert found is not None and found.body == b"one"
    assert b.view_message_by_id("not-an-id") is None
    assert b.view_message_by_id(r1.msg_id[:-4] + "FFFF") is None  # past the end / wrong record


def test_reading_a_queue_commits_nothing_and_creates_no_group(make_broker) -> None:
    b = make_broker()
    b.create_or_update_topic("R", 1, 1)
    for i in range(5):
        b.send_message("R", f"m{i}".encode(), {"TAGS": "A" if i % 2 else "B"}, queue_id=0)
    groups_before = [g.group_name for g in b.list_subscription_groups()]
    got = b.read_queue("R", 0, 0, 32, "TAG", "A", group="ReaderGroup")
    assert got.status is GetMessageStatus.FOUND and [m.body for m in got.messages] == [b"m1", b"m3"]
    assert [g.group_name for g in b.list_subscription_groups()] == groups_before
    assert b.query_offset("ReaderGroup", "R", 0) == -1
    assert b.query_offset("TOOLS_CONSUMER", "R", 0) == -1
    assert b.message_at("R", 0, 4).body == b"m4"
    with pytest.raises(QueryNotFoundError, match=r"no message at offset 9 of R/0.*\[0, 5\)"):
        b.message_at("R", 0, 9)


def test_every_send_path_goes_through_the_put_hooks(make_broker) -> None:
    b = make_broker()
    b.create_or_update_topic("Plain", 1, 1)
    b.create_or_update_topic("Batchy", 1, 1, attributes={"+queue.type": "BatchCQ"})
    seen: list[tuple[str, bytes]] = []

    def record(msg):  # noqa: ANN001, ANN202 - a put hook
        seen.append((msg.topic, bytes(msg.body[:2])))
        return None

    b.put_message_hooks.append(record)
    b.send_message("Plain", b"s1", queue_id=0)
    b.send_batch("Plain", [BatchItem(b"e1"), BatchItem(b"e2")], queue_id=0)
    b.send_batch("Batchy", [BatchItem(b"i1"), BatchItem(b"i2")], {"UNIQ_KEY": "AC10000100002A9F0000000000000001"}, queue_id=0)
    assert [t for t, _ in seen] == ["Plain", "Plain", "Plain", "Batchy"]  # 1 single, 2 exploded, 1 inner batch
    assert b.get_max_offset("Plain", 0) == 3 and b.get_max_offset("Batchy", 0) == 2

    def refuse_batches(msg):  # noqa: ANN001, ANN202
        if msg.body.startswith(b"bad"):
            raise ValueError("refused by hook")
        return None

    b.put_message_hooks.append(refuse_batches)
    with pytest.raises(MessageIllegalError, match="refused by hook"):
        b.send_batch("Plain", [BatchItem(b"ok"), BatchItem(b"bad")], queue_id=0)
    assert b.get_max_offset("Plain", 0) == 3  # all or nothing
