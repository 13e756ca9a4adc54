"""Admin scenarios every transport must answer the same way (see conftest.TRANSPORTS).

Each test runs on a fresh single-broker cluster. Reads that depend on dispatch (index queries)
are retried briefly: a running broker dispatches asynchronously, the in-process one at once.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

import pytest

from broker_core.auth.model import Acl
from broker_core.broker.broker_config import BrokerConfig
from broker_core.store.codec.bloom_filter import BloomFilter
from mqadmin.admin import Admin, TopicInfo
from mqadmin.errors import AdminError, NotFoundError, WrongTargetError
from mqadmin.transport.base import SubscriptionGroupInfo

from .conftest import Target

T = TypeVar("T")


def eventually(fetch: Callable[[], T], ok: Callable[[T], bool], timeout: float = 5.0) -> T:
    deadline = time.monotonic() + timeout
    while True:
        value = fetch()
        if ok(value) or time.monotonic() > deadline:
            return value
        time.sleep(0.05)


def _topic(admin: Admin, name: str, queues: int = 4, **attrs: str) -> TopicInfo:
    return admin.update_topic(TopicInfo(name, queues, queues, 6, attributes=attrs))


def _send(admin: Admin, topic: str, n: int, queue_id: int = 0, tags: str | None = None) -> None:
    for i in range(n):
        admin.send_message(topic, f"m{i}".encode(), keys=f"k{i}", tags=tags, queue_id=queue_id,
                           broker_name=admin.identity().broker_name)


# ---------------------------------------------------------------------------------------- cluster

def test_cluster_identity_and_targets(admin: Admin, transport: Target) -> None:
    (me,) = admin.brokers()
    assert (me.cluster_name, me.broker_name, me.broker_addr) == (transport.cluster_name, transport.broker_name,
                                                                 transport.broker_addr)
    assert admin.check_target(cluster_name=transport.cluster_name) == [me]
    assert admin.check_target(broker_name=transport.broker_name) == [me]
    with pytest.raises(WrongTargetError, match="NoSuchCluster"):
        admin.check_target(cluster_name="NoSuchCluster")
    with pytest.raises(WrongTargetError, match="broker-zz"):
        admin.check_target(broker_name="broker-zz")
    status = admin.broker_status()
    assert status["brokerName"] == transport.broker_name and "commitLogMaxOffset" in status
    config = admin.get_broker_config()
    assert config["brokerName"] == transport.broker_name
    # the value the broker runs with (its bloom filter's bit count), not the default of a config file
    defaults = BrokerConfig()
    bloom = BloomFilter(defaults.max_error_rate_of_bloom_filter, defaults.expect_consumer_num_use_filter)
    assert config["bitMapLengthConsumeQueueExt"] == str(bloom.m) != str(defaults.store.bit_map_length_consume_queue_ext)
    rows = admin.cluster_list()
    assert [(r["clusterName"], r["brokerName"], r["brokerAddr"]) for r in rows] == [
        (transport.cluster_name, transport.broker_name, transport.broker_addr)]


# ---------------------------------------------------------------------------------------- topics

def test_topic_lifecycle(admin: Admin, transport: Target) -> None:
    created = _topic(admin, "ContractTopic", 4, **{"+queue.type": "BatchCQ"})
    assert (created.read_queue_nums, created.write_queue_nums, created.queue_type) == (4, 4, "BatchCQ")
    assert "ContractTopic" in admin.list_topics()
    assert admin.topic_info("ContractTopic").perm == 6
    route = admin.topic_route("ContractTopic")
    assert route["queueDatas"] == [{"brokerName": transport.broker_name, "perm": 6, "readQueueNums": 4,
                                    "topicSysFlag": 0, "writeQueueNums": 4}]
    assert [b["brokerName"] for b in route["brokerDatas"]] == [transport.broker_name]
    _send(admin, "ContractTopic", 3, queue_id=1)
    status = {q.queue_id: q for q in admin.topic_status("ContractTopic")}
    assert sorted(status) == [0, 1, 2, 3] and status[1].max_offset == 3 and status[0].max_offset == 0

    dry = admin.delete_topic("ContractTopic", transport.cluster_name, dry_run=True)
    assert (dry.applied, dry.queues, dry.messages) == (False, 1, 3)
    assert admin.topic_info("ContractTopic").topic_name == "ContractTopic"  # a dry run changes nothing
    done = admin.delete_topic("ContractTopic", transport.cluster_name)
    assert done.applied
    with pytest.raises(NotFoundError):
        admin.topic_info("ContractTopic")
    with pytest.raises(NotFoundError):
        admin.topic_route("ContractTopic")
    with pytest.raises(NotFoundError):
        admin.topic_status("ContractTopic")


# ---------------------------------------------------------------------------------------- groups

def test_subscription_group_lifecycle(admin: Admin) -> None:
    # the broker applies the signed attribute changes to its stored ones: nothing is read first
    sent = admin.update_sub_group(SubscriptionGroupInfo("ContractGroup", retry_max_times=3,
                                                        attributes={"+team": "ops"}))
    assert sent.attributes == {"+team": "ops"}  # what was sent, as Apache's updateSubGroup prints it
    made = admin.get_sub_group("ContractGroup")
    assert made is not None and made.retry_max_times == 3 and made.attributes == {"team": "ops"}
    admin.update_sub_group(SubscriptionGroupInfo("ContractGroup", retry_max_times=5))
    kept = admin.get_sub_group("ContractGroup")
    assert kept is not None and kept.retry_max_times == 5 and kept.attributes == {"team": "ops"}  # no change given
    admin.update_sub_group(SubscriptionGroupInfo("ContractGroup", attributes={"-team": ""}))
    dropped = admin.get_sub_group("ContractGroup")
    assert dropped is not None and dropped.attributes == {}
    with pytest.raises(AdminError, match="nonexistent key: team"):  # refused whole: nothing changes
        admin.update_sub_group(SubscriptionGroupInfo("ContractGroup", retry_max_times=7, attributes={"-team": ""}))
    unchanged = admin.get_sub_group("ContractGroup")
    assert unchanged is not None and unchanged.retry_max_times == 16  # the default the last update sent
    assert "ContractGroup" in admin.list_groups()
    admin.delete_sub_group("ContractGroup")
    with pytest.raises(NotFoundError):
        admin.delete_sub_group("ContractGroup")


def test_broker_wide_reads_give_what_the_per_item_reads_give(admin: Admin) -> None:
    """The dashboard's one-request-a-broker reads (GET_ALL_TOPIC_CONFIG, GET_ALL_SUBSCRIPTIONGROUP_CONFIG,
    GET_BROKER_CONSUME_STATS) against the reads of one topic or group each, on both transports."""
    _topic(admin, "WideTopic", 2)
    _send(admin, "WideTopic", 3, queue_id=0)
    admin.update_sub_group(SubscriptionGroupInfo("WideGroup"))
    b = admin.identity()
    admin.client.commit_consumer_offset(b.broker_addr, "WideGroup", "WideTopic", 0, 1)
    configs = admin.topic_configs(b)
    assert configs["WideTopic"] == admin.topic_info("WideTopic")
    assert "WideGroup" in admin.subscription_groups(b)
    assert admin.topic_groups("WideTopic", [b]) == ["WideGroup"]
    stats = admin.broker_group_stats(b)
    lag = admin.group_lags_from(b, {"WideGroup": stats["WideGroup"]})["WideGroup"]
    assert lag == admin.group_lag("WideGroup", [b])  # never committed on queue 1: -1 on both
    assert [(q.queue_id, q.consumer_offset, q.diff) for q in lag.queues] == [(0, 1, 2), (1, -1, 0)]


# ---------------------------------------------------------------------------------------- offsets

def test_reset_plans_progress_and_clone(admin: Admin) -> None:
    _topic(admin, "OffsetTopic", 2)
    _send(admin, "OffsetTopic", 5, queue_id=0)
    _send(admin, "OffsetTopic", 2, queue_id=1)
    admin.update_sub_group(SubscriptionGroupInfo("OG1"))
    admin.update_sub_group(SubscriptionGroupInfo("OG2"))

    plan = admin.reset_offset_by_time("OG1", "OffsetTopic", 0, dry_run=True)
    assert not plan.applied
    assert [(c.queue_id, c.broker_offset, c.consumer_offset, c.reset_offset) for c in plan.changes] == [
        (0, 5, -1, 0), (1, 2, -1, 0)]
    with pytest.raises(NotFoundError):  # a dry run applied nothing: no offsets yet
        admin.consumer_progress("OG1")

    skipped = admin.skip_accumulated_message("OG1", "OffsetTopic")
    assert skipped.applied and [c.reset_offset for c in skipped.changes] == [5, 2]
    rows = {r.queue_id: r for r in admin.consumer_progress("OG1", "OffsetTopic").rows}
    assert (rows[0].consumer_offset, rows[0].diff, rows[1].consumer_offset) == (5, 0, 2)

    one = admin.reset_offset_by_time("OG1", "OffsetTopic", 0, queue_id=0, offset=3)
    assert [(c.queue_id, c.reset_offset) for c in one.changes] == [(0, 3)]
    assert {r.queue_id: r.consumer_offset for r in admin.consumer_progress("OG1").rows}[0] == 3

    # force=False moves the group forward too (queue 0: 3 -> 5), as Apache 5.3's server-side reset does
    cautious = admin.reset_offset_by_time("OG1", "OffsetTopic", -1, force=False, dry_run=True)
    assert [(c.timestamp_offset, c.reset_offset) for c in cautious.changes] == [(5, 5), (2, 2)]

    clone = admin.clone_group_offset("OG1", "OG2", "OffsetTopic")
    assert [(c.queue_id, c.reset_offset) for c in clone.changes] == [(0, 3), (1, 2)]
    assert [r.consumer_offset for r in admin.consumer_progress("OG2").rows] == [3, 2]
    assert "OG1" in admin.topic_groups("OffsetTopic")
    assert "OG1" not in {s.group for s in admin.group_summaries()}  # as Apache: only groups with a %RETRY% topic
    _topic(admin, "%RETRY%OG1", 1)
    summary = {s.group: s for s in admin.group_summaries()}
    assert summary["OG1"].diff_total == 2 and summary["OG1"].version == "OFFLINE"
    assert "OG2" not in summary

    with pytest.raises(NotFoundError, match="Group NoGroup does not exist"):
        admin.reset_offset_by_time("NoGroup", "OffsetTopic", 0)
    with pytest.raises(NotFoundError):
        admin.reset_offset_by_time("OG1", "NoTopic", 0)
    with pytest.raises(AdminError, match="99"):
        admin.reset_offset_by_time("OG1", "OffsetTopic", 0, queue_id=0, offset=99)


def test_clone_reports_what_the_destination_group_holds(admin: Admin, transport: Target) -> None:
    """cloneGroupOffset read back the SOURCE group's offsets and called them applied. A destination with
    a pending server-side reset (resetOffsetByTime, no consumer online) keeps it: the broker's offset
    manager answers the reset first (Apache's queryOffset), so its consumers start there, not at the
    source's offsets. The report says what the destination holds, per queue, on both transports."""
    _topic(admin, "CloneTopic", 2)
    _send(admin, "CloneTopic", 5, queue_id=0)
    _send(admin, "CloneTopic", 2, queue_id=1)
    for g in ("CLSRC", "CLDST", "CLFREE"):
        admin.update_sub_group(SubscriptionGroupInfo(g))
    admin.skip_accumulated_message("CLSRC", "CloneTopic")           # source at the ends: 5, 2
    admin.reset_offset_by_time("CLDST", "CloneTopic", 0)            # pending reset to 0 (nobody online)

    held = admin.clone_group_offset("CLSRC", "CLDST", "CloneTopic")
    assert [(c.queue_id, c.timestamp_offset, c.reset_offset, c.status) for c in held.changes] == [
        (0, 5, 0, "notApplied"), (1, 2, 0, "notApplied")]
    assert not held.applied
    assert held.to_dict()["queues"][0]["offset"] == 0
    assert [r.consumer_offset for r in admin.consumer_progress("CLDST", "CloneTopic").rows] == [0, 0]

    free = admin.clone_group_offset("CLSRC", "CLFREE", "CloneTopic")
    assert [(c.queue_id, c.consumer_offset, c.reset_offset, c.status) for c in free.changes] == [
        (0, -1, 5, "applied"), (1, -1, 2, "applied")]
    assert free.applied
    assert [r.consumer_offset for r in admin.consumer_progress("CLFREE", "CloneTopic").rows] == [5, 2]
    if transport.name == "remoting":  # served by the broker itself (Apache's AdminBrokerProcessor), not emulated
        from broker_core.remoting import RequestCode, ResponseCode

        ext = {"srcGroup": "CLSRC", "destGroup": "CLFREE", "topic": "CloneTopic", "offline": "false"}
        resp = admin.client._call(transport.broker_addr, RequestCode.CLONE_GROUP_OFFSET, None,  # type: ignore[attr-defined]
                                  ext=ext)
        assert (resp.code, resp.remark) == (ResponseCode.SUCCESS, None)


# ---------------------------------------------------------------------------------------- messages

def test_send_then_query_by_key_unique_key_id_and_offset(admin: Admin, transport: Target) -> None:
    _topic(admin, "MsgTopic", 2)
    sent = admin.send_message("MsgTopic", b'{"order": 7}', keys="order-7 vip", tags="TagA",
                              broker_name=transport.broker_name, queue_id=1)
    assert (sent.send_status, sent.broker_name, sent.queue_id, sent.queue_offset) == (
        "SEND_OK", transport.broker_name, 1, 0)

    by_key = eventually(lambda: admin.query_msg_by_key("MsgTopic", "vip"), bool)
    assert [r.body for r in by_key] == [b'{"order": 7}'] and by_key[0].tags == "TagA"
    assert admin.query_msg_by_key("MsgTopic", "order") == []  # whole tokens only
    by_uniq = eventually(lambda: admin.query_msg_by_unique_key("MsgTopic", sent.msg_id), bool)
    assert [r.uniq_key for r in by_uniq] == [sent.msg_id]
    by_id = admin.query_msg_by_id("MsgTopic", sent.offset_msg_id)
    assert [r.msg_id for r in by_id] == [sent.offset_msg_id]
    assert [r.uniq_key for r in admin.query_msg_by_id("MsgTopic", sent.msg_id)] == [sent.msg_id]
    at = admin.query_msg_by_offset("MsgTopic", transport.broker_name, 1, 0)
    assert (at.keys, at.queue_id, at.properties["KEYS"]) == ("order-7 vip", 1, "order-7 vip")
    with pytest.raises(NotFoundError, match=r"no message at offset 5 of MsgTopic/1"):
        admin.query_msg_by_offset("MsgTopic", transport.broker_name, 1, 5)
    with pytest.raises(NotFoundError, match=r"queue 9 of topic \[MsgTopic\] does not exist"):  # both transports
        admin.query_msg_by_offset("MsgTopic", transport.broker_name, 9, 0)
    with pytest.raises(NotFoundError):
        admin.query_msg_by_key("NoTopic", "vip")
    tracks = admin.message_tracks(at)
    assert tracks == []  # nobody holds offsets on the topic yet


def test_print_by_queue_filters_and_consume_reads_without_committing(admin: Admin, transport: Target) -> None:
    _topic(admin, "PrintTopic", 2)
    for i in range(6):
        admin.send_message("PrintTopic", f"b{i}".encode(), tags="A" if i % 2 else "B",
                           broker_name=transport.broker_name, queue_id=0)
    scan = admin.print_msg_by_queue("PrintTopic", transport.broker_name, 0, "A")
    assert (scan.min_offset, scan.max_offset, scan.begin_offset, scan.end_offset) == (0, 6, 0, 6)
    assert [r.body for r in scan.messages] == [b"b1", b"b3", b"b5"]
    every = list(admin.iter_print_msg("PrintTopic", "A || B"))
    assert [(s.queue_id, len(s.messages)) for s in every] == [(0, 6), (1, 0)]
    with pytest.raises(AdminError, match="invalid subExpression"):
        admin.print_msg_by_queue("PrintTopic", transport.broker_name, 0, " || ")
    with pytest.raises(NotFoundError):
        admin.print_msg_by_queue("PrintTopic", transport.broker_name, 7)

    scans = admin.consume_message("PrintTopic", "ReaderGroup", max_num=4)
    assert sum(len(s.messages) for s in scans) == 4
    later = admin.consume_message("PrintTopic", "ReaderGroup", transport.broker_name, 0, offset=4)
    assert [r.body for s in later for r in s.messages] == [b"b4", b"b5"]
    with pytest.raises(NotFoundError):
        admin.consumer_progress("ReaderGroup")  # reading committed nothing


# ---------------------------------------------------------------------------------------- ACL 2.0

def test_acl_users_and_policies(admin: Admin) -> None:
    user = admin.create_user("carol", "carol-secret", "Normal")
    assert (user.username, user.user_type.value, user.user_status.value) == ("carol", "Normal", "enable")
    with pytest.raises(AdminError, match="existed"):
        admin.create_user("carol", "again")
    assert admin.update_user("carol", user_status="disable").user_status.value == "disable"
    admin.update_user("carol", user_status="enable")
    assert [u.username for u in admin.list_users("car")] == ["carol"]

    acl = admin.create_acl(Acl.of("User:carol", ["Topic:orders", "Group:billing*"], ["Pub", "Sub"], "Allow",
                                  ["10.0.0.0/24"]))
    assert acl.subject.key == "User:carol"
    merged = admin.update_acl(Acl.of("User:carol", ["Topic:audit"], ["Pub"], "Deny", []))
    assert {e.resource.key for p in merged.policies for e in p.entries} == {"Topic:orders", "Group:billing*",
                                                                            "Topic:audit"}
    stored = admin.get_acl("User:carol")
    assert stored is not None and stored == merged
    assert [a.subject.key for a in admin.list_acls("carol")] == ["User:carol"]

    allowed = admin.explain_acl("User:carol", "Topic:orders", ["Pub"], "10.0.0.5")
    assert allowed.allowed
    denied = admin.explain_acl("User:carol", "Topic:audit", ["Pub"], "10.0.0.5")
    assert not denied.allowed and denied.entry is not None
    elsewhere = admin.explain_acl("User:carol", "Topic:orders", ["Pub"], "192.168.1.1")
    assert not elsewhere.allowed

    admin.delete_acl("User:carol", "Topic:audit")
    after = admin.get_acl("User:carol")
    assert after is not None and "Topic:audit" not in {e.resource.key for p in after.policies for e in p.entries}
    admin.delete_user("carol")
    assert admin.get_user("carol") is None
