"""``mqadmin cloneGroupOffset --ak bob`` failed for a user with Update on the destination group but not
Get: the clone read the destination's offsets before and after (to report what it holds, 6f693e5d) and
that refused read failed the whole command before anything was cloned. Apache's tool needs only the
source's consume stats and Update on the destination. Now the clone is sent; the report says the
destination's offsets could not be read back (no permission) in one warning line, exit 0."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from harness import Servers
from net_util import REPO

from broker_core.auth.model import Acl
from mqadmin.connect import open_remote_admin
from mqadmin.transport.base import TopicInfo
from mqadmin.transport.values import SubscriptionGroupInfo

ROOT = {"username": "rocketmq", "password": "12345678"}


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[tuple[Servers, str]]:
    """ACL on; bob may read GS and AT, and only Update GD2 (no Get). GS holds offsets 1 and 2 on AT."""
    s = Servers(tmp_path)
    try:
        s.add_broker("broker-a", props={"authenticationEnabled": "true", "authorizationEnabled": "true",
                                        "initAuthenticationUser": json.dumps(ROOT)})
        admin = open_remote_admin(s.namesrv_addr, access_key=ROOT["username"], secret_key=ROOT["password"])
        try:
            (b,) = admin.brokers()
            admin.create_user("bob", "bob-secret-1", broker_addrs=[b.broker_addr], read_back=False)
            admin.create_acl(Acl.of("User:bob", ["Topic:AT", "Group:GS"], ["Get", "Sub", "Update"]), [b.broker_addr],
                             read_back=False)
            admin.create_acl(Acl.of("User:bob", ["Group:GD2"], ["Update"]), [b.broker_addr], read_back=False)
            admin.update_topic(TopicInfo("AT", 2, 2, 6), [b])
            for i in range(3):
                admin.send_message("AT", f"m{i}".encode(), broker_name=b.broker_name, queue_id=i % 2)
            for g in ("GS", "GD2"):
                admin.client.update_and_create_subscription_group(b.broker_addr, SubscriptionGroupInfo(g))
            admin.client.commit_consumer_offset(b.broker_addr, "GS", "AT", 0, 1)
            admin.client.commit_consumer_offset(b.broker_addr, "GS", "AT", 1, 1)
        finally:
            admin.close()
        yield s, b.broker_addr
    finally:
        s.close()


def _mqadmin(ns: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    env.pop("NAMESRV_ADDR", None)
    return subprocess.run([sys.executable, "-m", "mqadmin.app", *args, "-n", ns], capture_output=True, text=True,
                          env=env, cwd=REPO, timeout=120)


def test_clone_without_get_on_the_destination_is_sent_and_says_it_was_not_read_back(cluster) -> None:
    s, addr = cluster
    r = _mqadmin(s.namesrv_addr, "cloneGroupOffset", "-s", "GS", "-d", "GD2", "-t", "AT",
                 "--ak", "bob", "--sk", "bob-secret-1")
    assert r.returncode == 0, r.stdout + r.stderr
    warnings = [x for x in r.stderr.splitlines() if x.strip()]
    assert len(warnings) == 1 and "could not be read back" in warnings[0] and "no permission" in warnings[0], warnings
    assert "GD2" in warnings[0] and "Traceback" not in r.stderr
    admin = open_remote_admin(s.namesrv_addr, access_key=ROOT["username"], secret_key=ROOT["password"])
    try:  # the clone happened
        assert [admin.client.query_consumer_offset(addr, "GD2", "AT", q) for q in (0, 1)] == [1, 1]
    finally:
        admin.close()
    r = _mqadmin(s.namesrv_addr, "cloneGroupOffset", "-s", "GS", "-d", "GD2", "-t", "AT",
                 "--ak", "bob", "--sk", "bob-secret-1", "--output", "json")
    assert r.returncode == 0, r.stdout + r.stderr
    queues = json.loads(r.stdout)["queues"]
    assert {(q["queueId"], q["timestampOffset"], q["status"]) for q in queues} == {(0, 1, "notReadBack"),
                                                                                 (1, 1, "notReadBack")}


def test_clone_with_get_on_the_destination_still_confirms_each_queue(cluster) -> None:
    s, _ = cluster
    r = _mqadmin(s.namesrv_addr, "cloneGroupOffset", "-s", "GS", "-d", "GD2", "-t", "AT",
                 "--ak", ROOT["username"], "--sk", ROOT["password"])
    assert r.returncode == 0 and "clone group offset success" in r.stdout and not r.stderr.strip(), r.stdout + r.stderr
