"""TAG subscriptions on a BatchCQ topic through the broker's other readers: pop (what gRPC
ReceiveMessage and a 5.x SimpleConsumer use) and the tools' read (mqadmin consumeMessage/printMsg with
a subExpression). An inner batch's unit has the outer record's tagsCode (none for a producer's
batch); each of its messages must be matched by its own TAGS, not dropped with the unit and its
offset committed past them.
"""

from __future__ import annotations

from broker_core.broker.broker import Broker
from broker_core.store.codec.batch import BatchItem

G = "G_bcq_tags"
T = "BcqTags"


def _setup(make_broker) -> Broker:  # type: ignore[no-untyped-def]
    b = make_broker()
    b.create_or_update_topic(T, 1, 1, attributes="+queue.type=BatchCQ")
    b.create_or_update_subscription_group(G)
    # as Producer.send_batch sends it: a batch UNIQ_KEY (one inner-batch record), no batch TAGS
    b.send_batch(T, [BatchItem(b"a0", {"TAGS": "TagA"}), BatchItem(b"b1", {"TAGS": "TagB"}),
                     BatchItem(b"a2", {"TAGS": "TagA"}), BatchItem(b"c3", {"TAGS": "TagC"})],
                 {"UNIQ_KEY": "BATCHKEY1"}, queue_id=0)
    b.send_message(T, b"b4", {"TAGS": "TagB"}, queue_id=0)
    b.send_batch(T, [BatchItem(b"a5", {"TAGS": "TagA"})], {"UNIQ_KEY": "BATCHKEY2"}, queue_id=0)
    return b


def test_pop_with_a_tag_gets_the_inner_messages_with_that_tag(make_broker) -> None:  # type: ignore[no-untyped-def]
    b = _setup(make_broker)
    got = b.pop_message(G, T, 0, 32, 60_000, "TAG", "TagA || TagC")
    assert [m.body for m in got.messages] == [b"a0", b"a2", b"c3", b"a5"]
    assert [m.queue_offset for m in got.messages] == [0, 2, 3, 5]


def test_tool_read_with_a_sub_expression_gets_the_inner_messages(make_broker) -> None:  # type: ignore[no-untyped-def]
    b = _setup(make_broker)
    got = b.read_queue(T, 0, 0, 32, "TAG", "TagA")
    assert [m.body for m in got.messages] == [b"a0", b"a2", b"a5"] and got.next_begin_offset == 6
