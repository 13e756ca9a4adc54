"""A dashboard refresh on a cluster with ~1,500 topics and ~300 groups took 10-23 s (the figures were
that old even with --refresh 1): it read each topic's config (GET_TOPIC_CONFIG) and stats
(GET_TOPIC_STATS_INFO) one request each, listed the groups with a QUERY_TOPIC_CONSUME_BY_WHO per topic,
and read each group's consume stats and DLQ stats apart. Now a broker's topic configs come in one
GET_ALL_TOPIC_CONFIG, the groups holding offsets are swept a slice of topics a refresh, every group's lag
comes from one GET_BROKER_CONSUME_STATS (each group read alone when that answer would differ, or is
refused), and a group's DLQ depth from the topics already read: a refresh asks one request per topic and
broker (its stats) and none per group.

The requests are counted at the remoting transport over a real broker, with 5 and then 25 topics."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest
from tui_helpers import run_async

from broker_core.auth.model import Acl
from broker_core.remoting.codes import RequestCode
from mqadmin.admin import Admin
from mqadmin.connect import open_remote_admin
from mqadmin.transport.base import TopicInfo
from mqadmin.transport.remoting import RemotingBrokerClient
from tests.net.harness import Servers
from tui.snapshot import GroupSweep, Snapshot, StuckBrokers, collect_snapshot

T = TypeVar("T")
GROUPS = ("g-one", "g-two", "g-three")


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Servers]:
    s = Servers(tmp_path)
    try:
        s.add_broker("broker-a")
        yield s
    finally:
        s.close()


def _create_topics(admin: Admin, names: list[str]) -> None:
    (b,) = admin.brokers()
    admin.update_topic_list([TopicInfo(n, 2, 2, 6) for n in names], [b])


def _seed(admin: Admin, first: int, last: int) -> None:
    (b,) = admin.brokers()
    _create_topics(admin, [f"CountTopic{i}" for i in range(first, last)])
    for g in GROUPS:
        admin.client.update_and_create_subscription_group(b.broker_addr, _group(g))
    admin.client.commit_consumer_offset(b.broker_addr, "g-one", "CountTopic0", 0, 0)


def _group(name: str) -> Any:
    from mqadmin.transport.values import SubscriptionGroupInfo

    return SubscriptionGroupInfo(name)


async def _refresh(admin: Admin, codes: Counter[int], sweep: GroupSweep | None = None) -> Snapshot:
    """One refresh through ``admin``, its requests counted by code into ``codes``."""
    async def call(fn: Callable[[Admin], T], who: str | None = None) -> T:
        return await asyncio.to_thread(fn, admin)

    original = RemotingBrokerClient._call

    def counting(self: RemotingBrokerClient, addr: str | None, code: int, *a: Any, **kw: Any) -> Any:
        codes[code] += 1
        return original(self, addr, code, *a, **kw)

    RemotingBrokerClient._call = counting  # type: ignore[method-assign]
    try:
        return await collect_snapshot(call, 1, StuckBrokers(), sweep)
    finally:
        RemotingBrokerClient._call = original  # type: ignore[method-assign]


@run_async
async def test_a_refresh_asks_at_most_one_request_per_topic_and_broker(cluster: Servers) -> None:
    admin = open_remote_admin(cluster.namesrv_addr)
    try:
        _seed(admin, 0, 5)
        await asyncio.sleep(0)
        sweep = GroupSweep(per_refresh=4)  # the poller's keeps its answers between refreshes
        await _refresh(admin, Counter(), sweep)  # the first sweeps every topic, as the first refresh did
        small: Counter[int] = Counter()
        snap = await _refresh(admin, small, sweep)
        assert {"CountTopic0", "CountTopic4"} <= {t.name for t in snap.topics}
        assert {g.group for g in snap.groups} >= set(GROUPS)
        _create_topics(admin, [f"CountTopic{i}" for i in range(5, 25)])
        await _refresh(admin, Counter(), sweep)  # the new topics' groups are asked once, in the refresh that sees them
        large: Counter[int] = Counter()
        snap = await _refresh(admin, large, sweep)
        assert {f"CountTopic{i}" for i in range(25)} <= {t.name for t in snap.topics}
        grown = {code: large[code] - small[code] for code in large if large[code] != small[code]}
        # 20 more topics: 20 more GET_TOPIC_STATS_INFO, and nothing else grows with them (the groups'
        # lag: one GET_BROKER_CONSUME_STATS, not a GET_CONSUME_STATS each)
        assert grown == {RequestCode.GET_TOPIC_STATS_INFO: 20}, grown
        assert large[RequestCode.GET_TOPIC_CONFIG] == large[RequestCode.GET_CONSUME_STATS] == 0, large
        # the DLQ depth of a group comes from the topics read, not from a request per group
        assert large[RequestCode.GET_TOPIC_STATS_INFO] == len(snap.topics), large
    finally:
        admin.close()


@run_async
async def test_groups_holding_offsets_only_are_found_by_the_sweep(cluster: Servers) -> None:
    """A group with offsets but no subscription config (its config deleted without -r, its offsets kept)
    is listed as before, once the rolling sweep of QUERY_TOPIC_CONSUME_BY_WHO has reached its topic."""
    admin = open_remote_admin(cluster.namesrv_addr)
    try:
        _seed(admin, 0, 5)
        (b,) = admin.brokers()
        admin.client.update_and_create_subscription_group(b.broker_addr, _group("orphan"))
        admin.client.commit_consumer_offset(b.broker_addr, "orphan", "CountTopic3", 1, 1)
        admin.client.delete_subscription_group(b.broker_addr, "orphan", clean_offset=False)
        assert "orphan" not in admin.subscription_groups(b)
        sweep = GroupSweep()
        snap = await _refresh(admin, Counter(), sweep)
        assert "orphan" in {g.group for g in snap.groups}
        lag = snap.group("orphan")
        assert lag is not None and [(q.topic, q.queue_id, q.consumer_offset) for q in lag.queues
                                    if q.consumer_offset >= 0] == [("CountTopic3", 1, 1)]
    finally:
        admin.close()


@run_async
async def test_a_normal_user_still_sees_only_the_topics_it_may_read(tmp_path: Path) -> None:
    """GET_ALL_TOPIC_CONFIG lists every topic to any user it authenticates; a topic the user may not read
    is still left out and named, by the refusal of its stats."""
    import json

    root = {"username": "rocketmq", "password": "12345678"}
    s = Servers(tmp_path)
    try:
        s.add_broker("broker-a", props={"authenticationEnabled": "true", "authorizationEnabled": "true",
                                        "initAuthenticationUser": json.dumps(root)})
        admin = open_remote_admin(s.namesrv_addr, access_key=root["username"], secret_key=root["password"])
        try:
            (b,) = admin.brokers()
            admin.create_user("alice", "alice-secret-1", broker_addrs=[b.broker_addr], read_back=False)
            admin.create_acl(Acl.of("User:alice", ["Topic:AliceTopic"], ["Get"]), [b.broker_addr], read_back=False)
            _create_topics(admin, ["AliceTopic", "SecretTopic"])
        finally:
            admin.close()
        alice = open_remote_admin(s.namesrv_addr, access_key="alice", secret_key="alice-secret-1")
        try:
            codes: Counter[int] = Counter()
            snap = await _refresh(alice, codes)
            assert [t.name for t in snap.topics] == ["AliceTopic"]
            assert "SecretTopic" in snap.topics_refused
            assert codes[RequestCode.GET_TOPIC_CONFIG] == 0
        finally:
            alice.close()
    finally:
        s.close()


@run_async
async def test_group_lag_from_one_broker_request_is_what_each_group_read_says(cluster: Servers) -> None:
    """Every group's lag from the broker's one GET_BROKER_CONSUME_STATS, the same figures (never
    committed: -1; a %RETRY% topic's lag apart; the %DLQ% depth) as its own GET_CONSUME_STATS."""
    admin = open_remote_admin(cluster.namesrv_addr)
    try:
        _seed(admin, 0, 5)
        (b,) = admin.brokers()
        _create_topics(admin, ["%RETRY%g-two", "%DLQ%g-two"])
        admin.send_message("CountTopic1", b"m", broker_name=b.broker_name, queue_id=0)
        admin.send_message("%DLQ%g-two", b"dead", broker_name=b.broker_name, queue_id=1)
        admin.send_message("%RETRY%g-two", b"again", broker_name=b.broker_name, queue_id=0)
        for topic, qid, offset in (("CountTopic1", 1, 0), ("CountTopic1", 0, 1), ("%RETRY%g-two", 1, 0)):
            admin.client.commit_consumer_offset(b.broker_addr, "g-two", topic, qid, offset)
        codes: Counter[int] = Counter()
        snap = await _refresh(admin, codes)
        assert codes[RequestCode.GET_BROKER_CONSUME_STATS] == 1
        assert codes[RequestCode.GET_CONSUME_STATS] == 0, codes
        for g in snap.groups:
            assert g == admin.group_lag(g.group), g.group
        two = snap.group("g-two")
        assert two is not None and two.dlq_depth == 1 and two.retry_depth == 1  # %RETRY% queue 0: 1 not consumed
        assert {(q.topic, q.queue_id, q.consumer_offset) for q in two.queues} == {
            ("CountTopic1", 0, 1), ("CountTopic1", 1, 0)}
        one = snap.group("g-one")
        assert one is not None and ("CountTopic0", 1, -1) in {(q.topic, q.queue_id, q.consumer_offset)
                                                             for q in one.queues}
    finally:
        admin.close()


@run_async
async def test_a_user_refused_the_broker_wide_read_gets_each_group_read(tmp_path: Path) -> None:
    """GET_BROKER_CONSUME_STATS needs Cluster [Get]; a Normal user without it is shown the groups it may
    read, each read as before, not a blank Consumers screen."""
    import json

    root = {"username": "rocketmq", "password": "12345678"}
    s = Servers(tmp_path)
    try:
        s.add_broker("broker-a", props={"authenticationEnabled": "true", "authorizationEnabled": "true",
                                        "initAuthenticationUser": json.dumps(root)})
        admin = open_remote_admin(s.namesrv_addr, access_key=root["username"], secret_key=root["password"])
        try:
            (b,) = admin.brokers()
            admin.create_user("alice", "alice-secret-1", broker_addrs=[b.broker_addr], read_back=False)
            admin.create_acl(Acl.of("User:alice", ["Topic:*", "Group:g-one"], ["Get"]), [b.broker_addr],
                             read_back=False)
            _seed(admin, 0, 3)
            expected = admin.group_lag("g-one")
        finally:
            admin.close()
        alice = open_remote_admin(s.namesrv_addr, access_key="alice", secret_key="alice-secret-1")
        try:
            codes: Counter[int] = Counter()
            snap = await _refresh(alice, codes)
            assert codes[RequestCode.GET_BROKER_CONSUME_STATS] == 1
            assert snap.group("g-one") == expected
            assert snap.groups_error is not None and "groups not shown: no permission to read " \
                in snap.groups_error, snap.groups_error
        finally:
            alice.close()
    finally:
        s.close()
