"""acl.absent / user.absent on a cluster target, and --check agreeing with the run that follows.

Why a real two-broker cluster: each broker keeps its own users and ACLs. ``acl.absent`` and
``user.absent`` read the first broker only, so an entry only ``bb`` held was "nothing to change" (and
rotate-user.yml said the rotation holds while ``bb`` still granted the broad topic), and an entry only
``ba`` held was deleted on every broker, ``bb`` refusing "The acl is not exist.". And --check must
promise what the run then does: an offset reset on a topic no step creates fails in both, and a
``topic.perm`` glob covers the topics an earlier step creates.
"""

from __future__ import annotations

from broker_core.auth.model import Acl
from mqadmin.admin import Admin

from .conftest import EXAMPLES, Playbooks, Run
from .test_cluster import remote_admin
from .test_two_brokers import TwoBrokers, book, create_topic, summary
from .test_two_brokers import pytestmark as pytestmark  # the same timeout and remote-broker marks
from .test_two_brokers import two_brokers as two_brokers  # the fixture


def steps(r: Run) -> list[tuple[str, list[str]]]:
    """Each step's status and what it names, as --check and the run report them."""
    return [(s["status"], sorted({ch["what"] for ch in s["changes"]})) for s in r.doc["steps"]]


def acl_keys(admin: Admin, subject: str, addr: str) -> list[str]:
    acl = admin.get_acl(subject, addr)
    return [] if acl is None else sorted(e.resource.key for p in acl.policies for e in p.entries)


def add_user(c: TwoBrokers, name: str, on: list[str], acls: dict[str, list[str]] | None = None) -> None:
    """``name`` on the brokers ``on``; ``acls``: broker name -> the topic resources it grants Pub, Sub."""
    with remote_admin(c.namesrv) as admin:
        for broker in on:
            admin.create_user(name, "Pw-Secret-1", None, [c.addrs[broker]])
        for broker, resources in (acls or {}).items():
            admin.create_acl(Acl.of(f"User:{name}", resources, ["Pub", "Sub"], "Allow", []), [c.addrs[broker]])


def test_acl_absent_plans_and_deletes_on_each_broker_that_holds_the_entry(pb: Playbooks, two_brokers: TwoBrokers
                                                                            ) -> None:
    """Before: the entry only bb held was 'nothing to change' (bb kept it); the entry and the ACL only
    ba held were deleted on both brokers, and bb refused: 'The acl is not exist.'."""
    c = two_brokers
    add_user(c, "u2", ["ba", "bb"], {"ba": ["Topic:T2"], "bb": ["Topic:T1", "Topic:T2"]})
    add_user(c, "u3", ["ba", "bb"], {"ba": ["Topic:T1"]})
    path = book(pb, '''  - acl.absent: {target: c, subject: "User:u2", resources: ["Topic:T1"]}
  - acl.absent: {target: c, subject: "User:u3", resources: ["Topic:T1", "Topic:T9"]}
  - acl.absent: {target: c, subject: "User:u2"}
''')
    want = [("changed", ["acl User:u2 Topic:T1 on broker bb"]), ("changed", ["acl User:u3 Topic:T1 on broker ba"]),
            ("changed", ["acl User:u2 on broker ba", "acl User:u2 on broker bb"])]
    check = pb.run(path, *c.target(), "--check")
    assert (check.code, steps(check)) == (0, want), summary(check)
    run = pb.run(path, *c.target())
    assert (run.code, steps(run)) == (0, want), summary(run)
    with remote_admin(c.namesrv) as admin:
        assert [acl_keys(admin, s, c.addrs[b]) for s in ("User:u2", "User:u3") for b in ("ba", "bb")] == [[]] * 4
    assert pb.run(path, *c.target()).doc["changed"] == 0

    add_user(c, "u4", ["ba", "bb"], {"bb": ["Topic:T1"]})
    whole = pb.run(book(pb, '  - acl.absent: {target: c, subject: "User:u4"}\n'), *c.target())
    assert (whole.code, steps(whole)) == (0, [("changed", ["acl User:u4 on broker bb"])]), summary(whole)


def test_user_absent_deletes_the_user_on_each_broker_that_has_it(pb: Playbooks, two_brokers: TwoBrokers) -> None:
    """Before: a user only bb had was 'nothing to change' and stayed; one only ba had was deleted on
    both brokers, bb refusing."""
    c = two_brokers
    add_user(c, "onlybb", ["bb"])
    add_user(c, "onlyba", ["ba"])
    path = book(pb, '''  - user.absent: {target: c, username: onlybb}
  - user.absent: {target: c, username: onlyba}
''')
    want = [("changed", ["user onlybb on broker bb"]), ("changed", ["user onlyba on broker ba"])]
    check = pb.run(path, *c.target(), "--check")
    assert (check.code, steps(check)) == (0, want), summary(check)
    run = pb.run(path, *c.target())
    assert (run.code, steps(run)) == (0, want), summary(run)
    with remote_admin(c.namesrv) as admin:
        assert [admin.get_user(u, c.addrs[b]) for u in ("onlybb", "onlyba") for b in ("ba", "bb")] == [None] * 4
    assert pb.run(path, *c.target()).doc["changed"] == 0


def test_rotate_user_example_drops_the_broad_grant_on_every_broker(pb: Playbooks, two_brokers: TwoBrokers) -> None:
    """Before: the example said 'the rotation holds' while bb still granted Topic:orders-* [Pub, Sub]."""
    c = two_brokers
    add_user(c, "orders-app", ["ba", "bb"], {"bb": ["Topic:orders-*"]})
    r = pb.run(EXAMPLES / "rotate-user.yml", *c.target(), env={"ORDERS_APP_PASSWORD": "New-Password-2"})
    assert r.code == 0, summary(r)
    assert steps(r)[1] == ("changed", ["acl User:orders-app Topic:orders-* on broker bb"])
    with remote_admin(c.namesrv) as admin:
        for b in ("ba", "bb"):
            assert acl_keys(admin, "User:orders-app", c.addrs[b]) == ["Group:orders-*", "Topic:orders-events"], b


def test_offset_reset_on_a_topic_no_step_creates_fails_in_check_too(pb: Playbooks, two_brokers: TwoBrokers) -> None:
    """Before: --check excused the missing topic because an earlier step created the group, said
    changed, and the run then failed 'Topic NOPE does not exist'."""
    c = two_brokers
    create_topic(c, "orders", {"ba": 1, "bb": 1})
    path = book(pb, '''  - group.ensure: {target: c, group: gNew}
  - offset.reset: {target: c, group: gNew, topic: NOPE, timestamp: now}
''')
    for r in (pb.run(path, *c.target(), "--check"), pb.run(path, *c.target())):
        assert r.code == 1
        assert [s["status"] for s in r.doc["steps"]] == ["changed", "failed"]
        assert r.doc["steps"][1]["message"] == "Topic NOPE does not exist"

    # the group created by an earlier step on a topic that exists is still planned under --check
    ok = book(pb, '''  - group.ensure: {target: c, group: gNew2}
  - offset.reset: {target: c, group: gNew2, topic: orders, timestamp: now}
''')
    check = pb.run(ok, *c.target(), "--check")
    assert check.code == 0 and [s["status"] for s in check.doc["steps"]] == ["changed", "changed"], summary(check)
    run = pb.run(ok, *c.target())
    assert run.code == 0 and [s["status"] for s in run.doc["steps"]] == ["changed", "changed"], summary(run)


def test_topic_perm_glob_covers_topics_an_earlier_step_creates(pb: Playbooks, two_brokers: TwoBrokers) -> None:
    """Before: --check said ok (the glob matched no existing topic), and the run made NEWT1 read-only."""
    c = two_brokers
    path = book(pb, '''  - topic.ensure: {target: c, topic: NEWT1}
  - topic.perm: {target: c, topic: "NEWT*", write: false}
''')
    want = [("changed", ["topic NEWT1 on broker ba", "topic NEWT1 on broker bb"])] * 2
    check = pb.run(path, *c.target(), "--check")
    assert (check.code, steps(check)) == (0, want), summary(check)
    run = pb.run(path, *c.target())
    assert (run.code, steps(run)) == (0, want), summary(run)
    assert pb.run(path, *c.target()).doc["changed"] == 0
