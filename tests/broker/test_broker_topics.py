from __future__ import annotations

import pytest
from golden_helpers import golden_store_config

from broker_core.broker.errors import (
    BrokerSystemError,
    InvalidParameterError,
    ServiceNotAvailableError,
)
from broker_core.common.response_code import ResponseCode
from broker_core.store.codec.batch import BatchItem
from broker_core.store.config_file import read_config_json

from .conftest import small_config

# a batch's own UNIQ_KEY makes it one inner-batch record on a BatchCQ topic (what Java's producer sends)
_INNER = {"UNIQ_KEY": "AC10000100002A9F0000000000000001"}


def test_system_topics_created_at_start(make_broker):
    b = make_broker()
    names = {t.topic_name: t for t in b.list_topics()}
    assert names["TBW102"].perm == 7 and names["TBW102"].write_queue_nums == 8
    assert names["SCHEDULE_TOPIC_XXXX"].read_queue_nums == 18
    for t in ("RMQ_SYS_TRANS_HALF_TOPIC", "RMQ_SYS_TRANS_OP_HALF_TOPIC", "rmq_sys_wheel_timer", "SELF_TEST_TOPIC",
              "OFFSET_MOVED_EVENT", "BenchmarkTest", "DefaultCluster", "broker-a", "DefaultCluster_REPLY_TOPIC",
              "rmq_sys_SYNC_BROKER_MEMBER_broker-a"):
        assert t in names, t
    assert names["rmq_sys_REVIVE_LOG_DefaultCluster"].read_queue_nums == 8
    assert names["DefaultCluster"].perm == 7 and names["rmq_sys_SYNC_BROKER_MEMBER_broker-a"].perm == 1


def test_no_tbw102_when_auto_create_disabled(make_broker):
    b = make_broker(autoCreateTopicEnable="false")
    assert b.get_topic("TBW102") is None


def test_create_update_and_persist(make_broker, tmp_path):
    b = make_broker()
    tc = b.create_or_update_topic("OrderTopic", 4, 4, attributes="+message.type=FIFO", order=True)
    assert tc.attributes == {"message.type": "FIFO"} and tc.order
    tc = b.create_or_update_topic("OrderTopic", 6, 6, perm=4, attributes={"+message.type": "NORMAL"})
    assert tc.read_queue_nums == 6 and tc.perm == 4 and tc.attributes == {"message.type": "NORMAL"}
    obj = read_config_json(tmp_path / "store" / "config" / "topics.json")
    assert obj["topicConfigTable"]["OrderTopic"]["readQueueNums"] == 6
    b.shutdown()
    b2 = make_broker()
    assert b2.get_topic("OrderTopic").perm == 4


@pytest.mark.parametrize("name,fragment", [
    ("", "blank"),
    ("bad topic", "illegal characters"),
    ("a" * 128, "longer than topic max length: 127"),
    ("TBW102", "conflict with system topic"),
    ("rmq_sys_mine", "conflict with system topic"),
    ("SCHEDULE_TOPIC_XXXX", "conflict with system topic"),
])
def test_topic_validation(make_broker, name, fragment):
    b = make_broker()
    with pytest.raises(InvalidParameterError) as ei:
        b.create_or_update_topic(name)
    assert fragment in str(ei.value) and ei.value.code == ResponseCode.INVALID_PARAMETER


def test_retry_topic_may_be_255_long(make_broker):
    b = make_broker()
    b.create_or_update_topic("%RETRY%" + "g" * 200, 1, 1)


@pytest.mark.parametrize("attrs,fragment", [
    ("+foo=bar", "unsupported key: foo"),
    ("+queue.type=Fancy", "value is not in set"),
    ("-queue.type", "only add attribute is supported while creating topic"),
    ("+a=b,+a=c", "key duplication"),
    ("queue.type", "delete attribute format is wrong"),
])
def test_attribute_errors(make_broker, attrs, fragment):
    b = make_broker()
    with pytest.raises(BrokerSystemError, match=fragment):
        b.create_or_update_topic("AttrTopic", attributes=attrs)
    assert b.get_topic("AttrTopic") is None


def test_queue_type_immutable_once_topic_has_data(make_broker):
    b = make_broker()
    b.create_or_update_topic("QT", 2, 2)
    # No data yet: the queue type may still change.
    assert b.create_or_update_topic("QT", 2, 2, attributes="+queue.type=BatchCQ").queue_type == "BatchCQ"
    b.send_message("QT", b"x", queue_id=0)
    with pytest.raises(BrokerSystemError, match="unchangeable attribute. key: queue.type"):
        b.create_or_update_topic("QT", 2, 2, attributes="+queue.type=SimpleCQ")
    assert b.get_topic("QT").queue_type == "BatchCQ"
    # Re-stating the same type is fine (idempotent updateTopic).
    b.create_or_update_topic("QT", 4, 4, attributes="+queue.type=BatchCQ")
    with pytest.raises(BrokerSystemError, match="attempt to delete"):
        b.create_or_update_topic("QT", 4, 4, attributes="-cleanup.policy")


def test_queue_type_change_counts_a_message_not_yet_dispatched(make_broker):
    """A batch still in the write buffer is a message: the queue type change is refused. Before, the
    queues were judged empty from their files alone, the change went through, and the buffered batch
    was dispatched into a queue of the old type the new config does not describe."""
    b = make_broker(transientStorePoolEnable="true", commitIntervalCommitLog="600000")
    b.create_or_update_topic("QB", 1, 1, attributes="+queue.type=BatchCQ")
    b.send_batch("QB", [BatchItem(b"a%d" % i) for i in range(3)], _INNER, queue_id=0)
    assert b.store.commit_log.buffered_bytes and not b.store.has_data("QB")  # acknowledged, not dispatched
    with pytest.raises(BrokerSystemError, match="unchangeable attribute. key: queue.type"):
        b.create_or_update_topic("QB", 1, 1, attributes="+queue.type=SimpleCQ")
    assert b.get_topic("QB").queue_type == "BatchCQ"
    assert [m.body for m in b.pull_message("g", "QB", 0, 0).messages] == [b"a0", b"a1", b"a2"]


def test_delete_topic_stays_deleted_after_restart(make_broker, tmp_path):
    b = make_broker()
    b.create_or_update_topic("Keep", 1, 1)
    b.create_or_update_topic("Gone", 2, 2)
    b.send_message("Keep", b"k", queue_id=0)
    for i in range(3):
        b.send_message("Gone", b"g%d" % i, queue_id=i % 2)
    b.pull_message("grp", "Gone", 0, 0, max_msgs=1)  # the consumer's pull creates its group
    b.commit_offset("grp", "Gone", 0, 1)
    assert b.delete_topic("Gone")
    assert b.get_topic("Gone") is None and b.query_offset("grp", "Gone", 0) == -1
    assert not (tmp_path / "store" / "consumequeue" / "Gone").exists()
    b.shutdown()
    b2 = make_broker()
    assert b2.get_topic("Gone") is None
    assert "Gone" not in {t for t, _ in b2.store.consume_queues}
    assert b2.query_offset("grp", "Gone", 0) == -1
    # Recreating it starts empty; the old records never come back.
    b2.create_or_update_topic("Gone", 2, 2)
    assert b2.get_max_offset("Gone", 0) == 0
    r = b2.send_message("Gone", b"new", queue_id=0)
    assert r.queue_offset == 0
    b2.shutdown()
    b3 = make_broker()
    msgs = b3.pull_message("grp2", "Gone", 0, 0).messages
    assert [m.body for m in msgs] == [b"new"]


def test_delete_system_topic_refused(make_broker):
    b = make_broker()
    with pytest.raises(InvalidParameterError, match="conflict with system topic"):
        b.delete_topic("TBW102")


def test_golden_store_topics_inferred_and_read_only_writes_nothing(golden_copy, make_broker):
    root = golden_copy("store-batchcq")
    before = sorted(p.relative_to(root).as_posix() for p in root.rglob("*"))
    b = make_broker(root=root, read_only=True, config=small_config(**golden_store_config("store-batchcq")))
    topics = {t.topic_name: t for t in b.list_topics()}
    bcq = [t for t in topics.values() if t.queue_type == "BatchCQ"]
    assert bcq, "the BatchCQ topic of the golden store is inferred from batchconsumequeue/"
    with pytest.raises(ServiceNotAvailableError):
        b.create_or_update_topic("X")
    b.shutdown()
    after = sorted(p.relative_to(root).as_posix() for p in root.rglob("*"))
    assert after == before


@pytest.mark.parametrize("started", [False, True])
def test_delete_topic_with_a_buffered_batch_keeps_it_out_of_the_new_topic(make_broker, tmp_path, started):
    """A BatchCQ batch still in the write buffer when its topic is deleted belongs to the old topic.
    Before, the tombstone's cut was taken below it and the buffer committed after the deletion: the
    old batch was dispatched into the recreated topic's queue at offset 0, and the new topic's first
    batch, at offset 0 too, was taken for one already dispatched and lost."""
    b = make_broker(transientStorePoolEnable="true", commitIntervalCommitLog="600000")
    if started:
        b.start()
    b.create_or_update_topic("Gone", 1, 1, attributes="+queue.type=BatchCQ")
    b.send_batch("Gone", [BatchItem(b"old%d" % i) for i in range(3)], _INNER, queue_id=0)
    assert b.store.commit_log.buffered_bytes  # acknowledged, not yet in the file
    assert b.delete_topic("Gone")
    b.create_or_update_topic("Gone", 1, 1, attributes="+queue.type=BatchCQ")
    r = b.send_batch("Gone", [BatchItem(b"new%d" % i) for i in range(2)], {"UNIQ_KEY": "AC10000100002A9F0000000000000002"},
                     queue_id=0)
    assert r.queue_offset == 0
    b.send_message("Keep", b"k", queue_id=0, default_topic_queue_nums=1)  # commits the buffer behind it
    assert b.store.wait_for_dispatch()
    assert [m.body for m in b.pull_message("g", "Gone", 0, 0).messages] == [b"new0", b"new1"]
    b.shutdown()
    b2 = make_broker()  # and what recovery dispatches agrees
    assert [m.body for m in b2.pull_message("g", "Gone", 0, 0).messages] == [b"new0", b"new1"]
    assert not b2.verify_store().issues
