from __future__ import annotations

import pytest

from broker_core.broker.errors import (
    InvalidParameterError,
    MessageIllegalError,
    NoPermissionError,
    TopicNotExistError,
)
from broker_core.broker.queue_selector import consistent_hash, queue_for_message_group
from broker_core.broker.send import SendStatus
from broker_core.common.response_code import ResponseCode
from broker_core.store.codec.batch import BatchItem
from broker_core.store.codec.sys_flag import INNER_BATCH_FLAG, NEED_UNWRAP_FLAG


def test_guava_consistent_hash_golden_values():
    # Guava HashingTest golden values: Hashing.consistentHash(i, 100) for i in 0..19 and a few longs.
    golden100 = [0, 55, 62, 8, 45, 59, 86, 97, 82, 59, 73, 37, 17, 56, 86, 21, 90, 37, 38, 83]
    assert [consistent_hash(i, 100) for i in range(20)] == golden100
    assert consistent_hash(10863919174838991, 11) == 6
    assert consistent_hash(2016238256797177309, 11) == 3
    assert consistent_hash(1673758223894951030, 11) == 5
    assert consistent_hash(2, 100001) == 80343


def test_send_single_adds_uniq_key_and_cluster(make_broker):
    b = make_broker()
    b.create_or_update_topic("T", 4, 4)
    r = b.send_message("T", b"hello", {"TAGS": "A", "KEYS": "k1"}, queue_id=2)
    assert r.status is SendStatus.SEND_OK and r.response_code == 0
    assert r.queue_id == 2 and r.queue_offset == 0 and len(r.uniq_key) == 32 and r.transaction_id == r.uniq_key
    assert r.region_id == "DefaultRegion" and r.trace_on is True
    stored = b.view_message(r.commit_log_offset)
    assert stored.properties["UNIQ_KEY"] == r.uniq_key and stored.properties["CLUSTER"] == "DefaultCluster"
    assert stored.msg_id == r.msg_id
    r2 = b.send_message("T", b"x", {"UNIQ_KEY": "ABC"}, queue_id=2)
    assert r2.uniq_key == "ABC" and r2.queue_offset == 1


def test_round_robin_when_no_queue_given(make_broker):
    b = make_broker()
    b.create_or_update_topic("RR", 3, 3)
    assert sorted(b.send_message("RR", b"x").queue_id for _ in range(6)) == [0, 0, 1, 1, 2, 2]


def test_message_group_affinity(make_broker):
    b = make_broker()
    b.create_or_update_topic("Fifo", 8, 8)
    for group in ("order-1", "order-2", "customer-42"):
        qids = {b.send_message("Fifo", b"x", message_group=group).queue_id for _ in range(5)}
        qids |= {b.send_message("Fifo", b"x", {"__SHARDINGKEY": group}).queue_id for _ in range(5)}
        assert qids == {queue_for_message_group(group, 8)}


def test_auto_create_from_tbw102(make_broker):
    b = make_broker()
    r = b.send_message("Fresh", b"x", default_topic_queue_nums=4)
    tc = b.get_topic("Fresh")
    assert tc.write_queue_nums == 4 and tc.perm == 6 and r.queue_id < 4


def test_unknown_topic_without_auto_create(make_broker):
    b = make_broker(autoCreateTopicEnable="false")
    with pytest.raises(TopicNotExistError, match=r"topic\[Nope\] not exist") as ei:
        b.send_message("Nope", b"x")
    assert ei.value.code == ResponseCode.TOPIC_NOT_EXIST


def test_permission_and_queue_checks(make_broker):
    b = make_broker()
    b.create_or_update_topic("RO", 2, 2, perm=4)
    with pytest.raises(NoPermissionError, match="sending message is forbidden"):
        b.send_message("RO", b"x")
    with pytest.raises(NoPermissionError, match="forbidden"):
        b.send_message("SCHEDULE_TOPIC_XXXX", b"x")
    b.create_or_update_topic("Q2", 2, 2)
    with pytest.raises(InvalidParameterError, match="queueId"):
        b.send_message("Q2", b"x", queue_id=5)


def test_max_message_size(make_broker):
    b = make_broker(maxMessageSize="1024")
    b.create_or_update_topic("Big", 1, 1)
    with pytest.raises(MessageIllegalError, match="exceeds maxMessageSize 1024") as ei:
        b.send_message("Big", b"x" * 1025)
    assert ei.value.code == ResponseCode.MESSAGE_ILLEGAL
    assert b.get_max_offset("Big", 0) == 0 and b.store.get_max_phy_offset() == 0
    b.send_message("Big", b"x" * 900)


def test_batch_simple_cq_is_exploded(make_broker):
    b = make_broker()
    b.create_or_update_topic("S", 2, 2)
    items = [BatchItem(b"m%d" % i, {"TAGS": f"T{i}"}) for i in range(5)]
    r = b.send_batch("S", items, queue_id=1)
    assert r.msg_num == 5 and r.queue_offset == 0 and len(r.msg_ids) == 5 and len(set(r.uniq_keys)) == 5
    assert b.get_max_offset("S", 1) == 5
    got = b.pull_message("g", "S", 1, 0).messages
    assert [m.body for m in got] == [b"m%d" % i for i in range(5)]
    assert [m.uniq_key for m in got] == r.uniq_keys


def test_batch_batch_cq_is_one_inner_batch_unit(make_broker):
    b = make_broker()
    b.create_or_update_topic("BQ", 1, 1, attributes="+queue.type=BatchCQ")
    b.send_message("BQ", b"single", queue_id=0)
    r = b.send_batch("BQ", [BatchItem(b"a%d" % i) for i in range(4)], {"UNIQ_KEY": "BATCHKEY"}, queue_id=0)
    assert r.queue_offset == 1 and r.msg_num == 4 and r.batch_uniq_id == "BATCHKEY"
    units = b.store.get_units("BQ", 0, 0, 10)
    assert [(u.queue_offset, u.batch_num) for u in units] == [(0, 1), (1, 4)]
    record = b.view_message(units[1].phy_offset)
    assert record.sys_flag & (INNER_BATCH_FLAG | NEED_UNWRAP_FLAG) == INNER_BATCH_FLAG | NEED_UNWRAP_FLAG
    assert record.properties["UNIQ_KEY"] == "BATCHKEY" and record.properties["INNER_NUM"] == "4"
    assert record.properties["INNER_BASE"] == "1"
    assert b.get_max_offset("BQ", 0) == 5


def test_batch_cq_batch_without_its_own_uniq_key_is_stored_message_by_message(make_broker):
    """Apache's sendBatchMessage makes an inner batch only when the batch carries a UNIQ_KEY. Without one
    every batch on a BatchCQ topic became one record whose tagsCode came from the batch (no TAGS: 0),
    so a tag subscriber got none of its messages and none of their keys could be queried."""
    b = make_broker()
    b.create_or_update_topic("BQ", 1, 1, attributes="+queue.type=BatchCQ")
    items = [BatchItem(b"m%d" % i, {"TAGS": "TagA" if i % 2 == 0 else "TagB", "KEYS": f"key{i}"}) for i in range(3)]
    r = b.send_batch("BQ", items, {"WAIT": "true"}, queue_id=0)
    assert r.queue_offset == 0 and len(r.msg_ids) == 3
    units = b.store.get_units("BQ", 0, 0, 10)
    assert [(u.queue_offset, u.batch_num) for u in units] == [(0, 1), (1, 1), (2, 1)]
    assert b.store.wait_for_dispatch()
    tagged = b.pull_message("g", "BQ", 0, 0, subscription="TagA").messages
    assert [m.body for m in tagged] == [b"m0", b"m2"]
    assert [m.body for m in b.query_message("BQ", "key1")] == [b"m1"]


@pytest.mark.parametrize("topic,items,props,fragment", [
    ("%RETRY%g", [BatchItem(b"a")], None, "retry group"),
    ("BV", [BatchItem(b"a", {"DELAY": "3"})], None, "delay"),
    ("BV", [BatchItem(b"a", {"TIMER_DELIVER_MS": "123"})], None, "timer"),
    ("BV", [BatchItem(b"a")], {"DELAY": "2"}, "delay"),
    ("BV", [BatchItem(b"a", {"WAIT": "true"}), BatchItem(b"b", {"WAIT": "false"})], None, "WAIT"),
    ("BV", [BatchItem(b"a", {"TRAN_MSG": "true"})], None, "transaction"),
    ("BV", [], None, "no messages"),
])
def test_batch_violations_store_nothing(make_broker, topic, items, props, fragment):
    b = make_broker()
    b.create_or_update_topic("BV", 1, 1)
    with pytest.raises(MessageIllegalError, match=fragment):
        b.send_batch(topic, items, props)
    assert b.store.get_max_phy_offset() == 0


def test_batch_over_max_size_stores_nothing(make_broker):
    b = make_broker(maxMessageSize="1000")
    b.create_or_update_topic("BV", 1, 1)
    with pytest.raises(MessageIllegalError, match="maxMessageSize"):
        b.send_batch("BV", [BatchItem(b"x" * 400) for _ in range(3)])
    assert b.store.get_max_phy_offset() == 0


def test_put_message_hooks_reroute_and_refuse(make_broker):
    b = make_broker()
    b.create_or_update_topic("Src", 1, 1)
    b.create_or_update_topic("Dst", 1, 1)
    seen = []

    def reroute(msg):  # registered after the broker's own DELAY/TIMER hook; a marker of its own
        seen.append(msg.topic)
        if msg.properties.get("REROUTE"):
            msg.properties["REAL_TOPIC"] = msg.topic
            msg.topic = "Dst"
            return msg
        return None

    b.put_message_hooks.append(reroute)
    b.send_message("Src", b"now", queue_id=0)
    b.send_message("Src", b"later", {"REROUTE": "1"}, queue_id=0)
    assert seen == ["Src", "Src"]
    assert b.get_max_offset("Src", 0) == 1 and b.get_max_offset("Dst", 0) == 1

    def refuse(msg):
        raise ValueError("timer too far")

    b.put_message_hooks.append(refuse)
    with pytest.raises(MessageIllegalError, match="timer too far"):
        b.send_message("Src", b"x", queue_id=0)
    assert b.get_max_offset("Src", 0) == 1


def test_batch_cq_with_the_write_buffer_is_served_once_committed(make_broker):
    """transientStorePoolEnable in the broker config: a BatchCQ batch is acknowledged from the write
    buffer and served to consumers once committed (here by the next put of another kind)."""
    b = make_broker(transientStorePoolEnable="true")
    assert b.store.commit_log.write_buffer
    b.create_or_update_topic("BQ", 1, 1, attributes="+queue.type=BatchCQ")
    r = b.send_batch("BQ", [BatchItem(b"a%d" % i) for i in range(4)], {"UNIQ_KEY": "WBKEY"}, queue_id=0)
    assert r.queue_offset == 0 and r.msg_num == 4
    assert b.get_max_offset("BQ", 0) == 0 and not b.pull_message("g", "BQ", 0, 0).messages
    b.send_message("BQ", b"single", queue_id=0)  # written behind the batch: the batch is committed first
    assert b.get_max_offset("BQ", 0) == 5
    got = b.pull_message("g", "BQ", 0, 0).messages
    assert [m.body for m in got] == [b"a0", b"a1", b"a2", b"a3", b"single"]
