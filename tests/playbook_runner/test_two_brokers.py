"""Resource steps on a cluster target of two brokers (one name server, brokers ``ba`` and ``bb``).

Why a real two-broker cluster: each broker has its own topic, group, user and ACL config. A step on a
cluster target must plan and apply against every broker's own config: not copy the first broker's
queue numbers to the others, and not take "the first broker has it" for "every broker has it".
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.remoting_broker import running_broker
from tests.waiting import wait_for

from .conftest import Playbooks
from .test_cluster import needs_remote, remote_admin

pytestmark = [pytest.mark.timeout(300), needs_remote]


class TwoBrokers:
    def __init__(self, namesrv: str, addrs: dict[str, str]) -> None:
        self.namesrv = namesrv
        self.addrs = addrs  # broker name -> address

    def target(self) -> list[str]:
        return ["-e", f"namesrv={self.namesrv}"]


@pytest.fixture
def two_brokers(tmp_path: Path) -> Iterator[TwoBrokers]:
    """Broker ``ba`` with the name server, ``bb`` registered with it; both of cluster C1."""
    fast = ("--registerNameServerPeriod", "200")
    with running_broker(tmp_path / "ba", broker_name="ba", cluster="C1", extra_args=fast) as ba, \
            running_broker(tmp_path / "bb", broker_name="bb", cluster="C1", namesrv=ba.namesrv_addr,
                           extra_args=fast) as bb:

        def registered() -> bool:
            with remote_admin(ba.namesrv_addr) as admin:
                return sorted(b.broker_name for b in admin.brokers()) == ["ba", "bb"]

        wait_for(registered, "both brokers registered", 20, 0.2)
        yield TwoBrokers(ba.namesrv_addr, {"ba": ba.broker_addr, "bb": bb.broker_addr})


def book(pb: Playbooks, steps: str) -> Path:
    return pb.write("p.yml", 'name: p\ntargets:\n  c: {namesrv: "{{ namesrv }}"}\nsteps:\n' + steps)


def queues(c: TwoBrokers, topic: str) -> dict[str, tuple[int, int, int]]:
    """broker name -> (read queues, write queues, perm), as each broker stores the topic."""
    with remote_admin(c.namesrv) as admin:
        out = {}
        for b in admin.brokers():
            info = admin.topic_info(topic, among=[b])
            out[b.broker_name] = (info.read_queue_nums, info.write_queue_nums, info.perm)
        return out


def create_topic(c: TwoBrokers, topic: str, per_broker: dict[str, int]) -> None:
    from mqadmin.admin import TopicInfo

    with remote_admin(c.namesrv) as admin:
        for b in admin.brokers():
            if b.broker_name in per_broker:
                n = per_broker[b.broker_name]
                admin.update_topic(TopicInfo(topic, n, n, 6, "SINGLE_TAG", 0, False, {}), targets=[b])


def summary(r) -> list:  # noqa: ANN001 - a conftest Run
    return [(s["name"], s["status"], s["message"]) for s in r.doc["steps"]]


# -- each broker keeps its own queue numbers ------------------------------------------------------------

def test_topic_perm_keeps_each_brokers_queue_numbers(pb: Playbooks, two_brokers: TwoBrokers) -> None:
    """Before: the first broker's config (4 queues) was sent to both, cutting bb from 8 queues to 4."""
    create_topic(two_brokers, "orders", {"ba": 4, "bb": 8})
    path = book(pb, "  - topic.perm: {topic: orders, write: false}\n")
    r = pb.run(path, *two_brokers.target())
    assert r.code == 0, summary(r)
    assert queues(two_brokers, "orders") == {"ba": (4, 4, 4), "bb": (8, 8, 4)}
    assert pb.run(path, *two_brokers.target()).doc["changed"] == 0


def test_topic_ensure_keeps_each_brokers_queue_numbers(pb: Playbooks, two_brokers: TwoBrokers) -> None:
    create_topic(two_brokers, "orders", {"ba": 4, "bb": 8})
    path = book(pb, "  - topic.ensure: {topic: orders, perm: R}\n")
    r = pb.run(path, *two_brokers.target())
    assert r.code == 0, summary(r)
    assert queues(two_brokers, "orders") == {"ba": (4, 4, 4), "bb": (8, 8, 4)}
    assert pb.run(path, *two_brokers.target()).doc["changed"] == 0


# -- a broker that lacks the resource is repaired -------------------------------------------------------

def test_ensure_steps_repair_the_broker_that_lacks_the_resource(pb: Playbooks, two_brokers: TwoBrokers) -> None:
    """A broker that joined later (or missed a partly failed run) lacks what the other has. Before: the
    plan read the first broker only, so the re-run said changed: 0 and bb stayed without them."""
    from broker_core.auth.model import Acl
    from mqadmin.transport.values import SubscriptionGroupInfo

    c = two_brokers
    create_topic(c, "orders", {"ba": 4})
    ba = [c.addrs["ba"]]
    with remote_admin(c.namesrv) as admin:
        (first,) = [b for b in admin.brokers() if b.broker_name == "ba"]
        admin.update_sub_group(SubscriptionGroupInfo("billing"), targets=[first])
        admin.create_user("app", "App-Pw-1", None, ba)
        admin.create_acl(Acl.of("User:app", ["Topic:orders"], ["Pub"], "Allow", []), ba)
    path = book(pb, '''  - topic.ensure: {topic: orders, read_queues: 4, write_queues: 4}
  - group.ensure: {group: billing}
  - user.ensure: {username: app, password: App-Pw-1}
  - acl.ensure: {subject: "User:app", resources: ["Topic:orders"], actions: [Pub]}
''')
    check = pb.run(path, *c.target(), "--check")
    assert check.code == 0, summary(check)
    assert [sorted({ch["what"] for ch in s["changes"]}) for s in check.doc["steps"]] == [
        ["topic orders on broker bb"], ["group billing on broker bb"], ["user app on broker bb"],
        ["acl User:app Topic:orders on broker bb"]]
    r = pb.run(path, *c.target())
    assert r.code == 0, summary(r)
    assert r.doc["changed"] == 4
    assert queues(c, "orders") == {"ba": (4, 4, 6), "bb": (4, 4, 6)}
    with remote_admin(c.namesrv) as admin:
        assert [b.broker_name for b, _ in admin.consumer_configs("billing")] == ["ba", "bb"]
        assert admin.get_user("app", c.addrs["bb"]) is not None
        acl = admin.get_acl("User:app", c.addrs["bb"])
        assert acl is not None and [r.key for p in acl.policies for e in p.entries for r in [e.resource]] == \
            ["Topic:orders"]
    assert pb.run(path, *c.target()).doc["changed"] == 0


def test_acl_on_a_broker_without_the_user_names_that_broker(pb: Playbooks, two_brokers: TwoBrokers) -> None:
    c = two_brokers
    with remote_admin(c.namesrv) as admin:
        admin.create_user("app", "App-Pw-1", None, [c.addrs["ba"]])
    path = book(pb, '  - acl.ensure: {subject: "User:app", resources: ["Topic:orders"], actions: [Pub]}\n')
    r = pb.run(path, *c.target())
    assert r.code == 1
    assert r.doc["steps"][0]["message"].startswith("user app on broker bb does not exist; create it first")
    with remote_admin(c.namesrv) as admin:  # refused before any broker was changed
        assert admin.get_acl("User:app", c.addrs["ba"]) is None


def test_offset_reset_plan_names_the_broker_of_each_queue(pb: Playbooks, two_brokers: TwoBrokers) -> None:
    """Before: queue 0 of ba and queue 0 of bb were both listed as `offset billing@orders/0`."""
    c = two_brokers
    create_topic(c, "orders", {"ba": 1, "bb": 1})
    with remote_admin(c.namesrv) as admin:
        for b in admin.brokers():
            admin.send_message("orders", b"m", broker_name=b.broker_name, queue_id=0)
    path = book(pb, '''  - group.ensure: {group: billing}
  - offset.reset: {group: billing, topic: orders, timestamp: now}
''')
    r = pb.run(path, *c.target())
    assert r.code == 0, summary(r)
    assert sorted(ch["what"] for ch in r.doc["steps"][1]["changes"]) == [
        "offset billing@orders/0 on broker ba", "offset billing@orders/0 on broker bb"]


# -- one broker's write permission at the name servers (wipeWritePerm / addWritePerm) ----------------------

def route_perms(c: TwoBrokers, topic: str) -> dict[str, int]:
    """broker name -> the perm of the topic's route of that broker, as the name server gives it."""
    with remote_admin(c.namesrv) as admin:
        return {q["brokerName"]: q["perm"] for q in admin.topic_route(topic)["queueDatas"]}


def test_wipe_write_perm_drains_only_the_broker_named(pb: Playbooks, two_brokers: TwoBrokers) -> None:
    """The drain example used topic.perm on the cluster target: every broker's topic became R--, the
    whole cluster read-only. broker.wipe_write_perm drains one broker at the name servers, as Apache's
    wipeWritePerm -b: only its routes lose the write bit; broker.add_write_perm gives it back."""
    create_topic(two_brokers, "t1", {"ba": 2, "bb": 2})
    create_topic(two_brokers, "t2", {"bb": 2})
    wait_for(lambda: route_perms(two_brokers, "t1") == {"ba": 6, "bb": 6} and route_perms(two_brokers, "t2") == {"bb": 6},
             "routes of t1, t2 registered", 20, 0.2)
    wipe = book(pb, "  - broker.wipe_write_perm: {broker: bb}\n")
    r = pb.run(wipe, *two_brokers.target())
    assert r.code == 0, r.stdout
    changes = {(c["what"], c["old"], c["new"]) for c in r.doc["steps"][0]["changes"]}
    assert {("topic t1 route of broker bb", "RW-", "R--"), ("topic t2 route of broker bb", "RW-", "R--")} <= changes
    assert not any("broker ba" in what for what, _, _ in changes)
    assert route_perms(two_brokers, "t1") == {"ba": 6, "bb": 4} and route_perms(two_brokers, "t2") == {"bb": 4}
    assert queues(two_brokers, "t1") == {"ba": (2, 2, 6), "bb": (2, 2, 6)}  # the brokers' own configs stay
    again = pb.run(wipe, *two_brokers.target())
    assert (again.code, again.doc["steps"][0]["status"]) == (0, "ok")

    add = book(pb, "  - broker.add_write_perm: {broker: bb}\n")
    assert pb.run(add, *two_brokers.target()).doc["steps"][0]["status"] == "changed"
    assert route_perms(two_brokers, "t1") == {"ba": 6, "bb": 6} and route_perms(two_brokers, "t2") == {"bb": 6}
    assert pb.run(add, *two_brokers.target()).doc["steps"][0]["status"] == "ok"

    unknown = pb.run(book(pb, "  - broker.wipe_write_perm: {broker: bx}\n"), *two_brokers.target())
    assert unknown.code == 1
    assert unknown.doc["steps"][0]["message"] == "broker 'bx' is not in the cluster (brokers: ba, bb)"


def test_wipe_write_perm_on_a_store_target_is_refused_by_check(pb: Playbooks, tmp_path: Path) -> None:
    play = pb.write("s.yml", f"name: s\ntargets:\n  s: {{store: {tmp_path / 's'}}}\nsteps:\n"
                             "  - broker.wipe_write_perm: {broker: b}\n")
    r = pb.check(play)
    assert r.code == 2
    assert r.stderr.strip().endswith("broker.wipe_write_perm needs a namesrv: target (a broker's write permission "
                                     "is in the name servers' routes), not 's'")
