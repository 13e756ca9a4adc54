"""A Normal ACL user allowed only some topics and groups (bob: Topic:AT, Group:GS, Group:GD2) saw no
consumer group at all: the groups-by-topic sweep (QUERY_TOPIC_CONSUME_BY_WHO per topic) was refused on
the first topic bob may not read ("User:bob has no permission to access Topic:BenchmarkTest") and that
refusal threw away every group, those of the subscription-group list too, while
``mqadmin consumerProgress --ak bob -g GS`` worked. Now a refused topic is skipped in the sweep (as the
topic reads skip it), the groups bob may read are shown, and one he may not is left out and named."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

import pytest
from tui_helpers import run_async

from broker_core.auth.model import Acl
from mqadmin.admin import Admin
from mqadmin.connect import open_remote_admin
from mqadmin.transport.base import TopicInfo
from mqadmin.transport.values import SubscriptionGroupInfo
from tests.net.harness import Servers
from tui.snapshot import GroupSweep, Snapshot, StuckBrokers, collect_snapshot

T = TypeVar("T")
ROOT = {"username": "rocketmq", "password": "12345678"}
BOB, BOB_SECRET = "bob", "bob-secret-1"


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Servers]:
    """ACL on; bob may Get/Update/Sub Topic:AT, Group:GS and Group:GD2 only. GS and GX hold offsets on
    AT; OtherTopic (which bob may not read) has GX's offsets too."""
    s = Servers(tmp_path)
    try:
        s.add_broker("broker-a", props={"authenticationEnabled": "true", "authorizationEnabled": "true",
                                        "initAuthenticationUser": json.dumps(ROOT)})
        admin = open_remote_admin(s.namesrv_addr, access_key=ROOT["username"], secret_key=ROOT["password"])
        try:
            (b,) = admin.brokers()
            admin.create_user(BOB, BOB_SECRET, broker_addrs=[b.broker_addr], read_back=False)
            admin.create_acl(Acl.of(f"User:{BOB}", ["Topic:AT", "Group:GS", "Group:GD2"], ["Get", "Update", "Sub"]),
                             [b.broker_addr], read_back=False)
            for topic in ("AT", "OtherTopic"):
                admin.update_topic(TopicInfo(topic, 2, 2, 6), [b])
            admin.send_message("AT", b"m", broker_name=b.broker_name, queue_id=0)
            for g in ("GS", "GX"):
                admin.client.update_and_create_subscription_group(b.broker_addr, SubscriptionGroupInfo(g))
                admin.client.commit_consumer_offset(b.broker_addr, g, "AT", 0, 0)
            admin.client.commit_consumer_offset(b.broker_addr, "GX", "OtherTopic", 0, 0)
        finally:
            admin.close()
        yield s
    finally:
        s.close()


def n_refused(line: str) -> int:
    return int(line.split(" ", 1)[0])


async def _refresh(admin: Admin, sweep: GroupSweep) -> Snapshot:
    async def call(fn: Callable[[Admin], T], who: str | None = None) -> T:
        return await asyncio.to_thread(fn, admin)

    return await collect_snapshot(call, 1, StuckBrokers(), sweep)


@run_async
async def test_groups_the_user_may_read_are_shown_despite_refused_topics(cluster: Servers) -> None:
    bob = open_remote_admin(cluster.namesrv_addr, access_key=BOB, secret_key=BOB_SECRET)
    try:
        sweep = GroupSweep()
        for _ in range(2):  # the first refresh (every topic swept) and a later one (a slice)
            snap = await _refresh(bob, sweep)
            gs = snap.group("GS")
            assert gs is not None, (snap.groups_error, [g.group for g in snap.groups])
            assert {(q.topic, q.queue_id, q.consumer_offset) for q in gs.queues} >= {("AT", 0, 0)}
            assert snap.group("GX") is None  # bob may not read it: left out, and named
            n = len(snap.groups)  # GS, and the system groups bob may not read (named first) with GX
            line = snap.groups_error
            assert line is not None and "\n" not in line and "Topic:" not in line, line
            assert line.startswith(f"{n_refused(line)} of {n + n_refused(line)} groups not shown: no permission "
                                   f"to read CID_"), line
            assert [g.group for g in snap.groups] == ["GS"]
    finally:
        bob.close()
