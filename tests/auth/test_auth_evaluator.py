"""Decision matrix for the ACL 2.0 evaluator: match modes, actions, IPs, priority, users, defaults."""

from __future__ import annotations

import pytest

from broker_core.auth import (
    Acl,
    Action,
    Decision,
    Policy,
    PolicyEntry,
    PolicyType,
    Resource,
    Subject,
    User,
    UserStatus,
    UserType,
)
from broker_core.auth.evaluator import evaluate

ALICE = Subject("alice")
NORMAL = User("alice", "secret-pw", UserType.NORMAL)


def acl(*entries: PolicyEntry, default: tuple[PolicyEntry, ...] = ()) -> Acl:
    policies = []
    if entries:
        policies.append(Policy(PolicyType.CUSTOM, entries))
    if default:
        policies.append(Policy(PolicyType.DEFAULT, default))
    return Acl(ALICE, tuple(policies))


def decide(a: Acl | None, resource: str, action: Action | tuple[Action, ...], ip: str | None = "10.0.0.5",
           user: User | None = NORMAL) -> Decision:
    actions = action if isinstance(action, tuple) else (action,)
    return evaluate(ALICE, user, a, Resource.parse(resource), actions, ip).decision


E = PolicyEntry.of
ALLOW, DENY = Decision.ALLOW, Decision.DENY


@pytest.mark.parametrize(
    ("entry_resource", "requested", "expected"),
    [
        ("Topic:orders", "Topic:orders", ALLOW),        # LITERAL exact
        ("Topic:orders", "Topic:orders2", DENY),        # LITERAL is not a prefix
        ("Topic:orders", "Group:orders", DENY),         # type must match
        ("Topic:ord*", "Topic:orders", ALLOW),          # PREFIXED
        ("Topic:ord*", "Topic:ord", ALLOW),             # prefix equal to the name
        ("Topic:ord*", "Topic:or", DENY),
        ("Topic:*", "Topic:anything", ALLOW),           # ANY of a type
        ("Topic:*", "Group:anything", DENY),
        ("*", "Group:g1", ALLOW),                       # any resource of any type
        ("*", "Cluster:DefaultCluster", ALLOW),
        ("Cluster:*", "Cluster:DefaultCluster", ALLOW),
        ("Cluster", "Cluster:DefaultCluster", DENY),    # bare Cluster = empty literal name (quirk)
        ("Group:g1", "Group:g1", ALLOW),
    ],
)
def test_match_modes(entry_resource: str, requested: str, expected: Decision) -> None:
    assert decide(acl(E(entry_resource, "All")), requested, Action.PUB) is expected


def test_retry_topic_is_authorized_as_its_group() -> None:
    assert Resource.of_group("%RETRY%g1") == Resource.parse("Group:g1")
    assert decide(acl(E("Group:g1", "Sub")), Resource.of_group("%RETRY%g1").key, Action.SUB) is ALLOW


@pytest.mark.parametrize("action", [a for a in Action if a is not Action.ANY and a is not Action.ALL])
def test_every_action_granted_alone_and_by_all(action: Action) -> None:
    only = acl(E("Topic:t", action))
    assert decide(only, "Topic:t", action) is ALLOW
    for other in Action:
        if other not in (action, Action.ANY, Action.ALL):
            assert decide(only, "Topic:t", other) is DENY, other
    assert decide(acl(E("Topic:t", "All")), "Topic:t", action) is ALLOW


def test_any_request_action_matches_any_entry_and_one_of_many_suffices() -> None:
    a = acl(E("Topic:t", "Get"))
    assert decide(a, "Topic:t", Action.ANY) is ALLOW
    assert decide(a, "Topic:t", (Action.SUB, Action.GET)) is ALLOW  # QUERY_MESSAGE demands Sub or Get
    assert decide(a, "Topic:t", (Action.SUB, Action.PUB)) is DENY


@pytest.mark.parametrize(
    ("source_ips", "peer", "expected"),
    [
        (["10.0.0.0/24"], "10.0.0.5", ALLOW),
        (["10.0.0.0/24"], "10.0.1.5", DENY),
        (["10.0.0.5"], "10.0.0.5", ALLOW),
        (["10.0.0.5"], "10.0.0.6", DENY),
        (["192.168.0.0/16", "10.0.0.5"], "10.0.0.5", ALLOW),
        (["0.0.0.0/0"], "203.0.113.9", ALLOW),
        (["2001:db8::/32"], "2001:db8:1::7", ALLOW),
        (["2001:db8::/32"], "2001:db9::7", DENY),
        (["::1"], "::1", ALLOW),
        (["::1"], "0:0:0:0:0:0:0:1", ALLOW),            # same address, other spelling
        (["10.0.0.0/8"], "::ffff:10.1.2.3", ALLOW),     # IPv4-mapped peer of a dual-stack socket
        (["10.0.0.0/8"], "2001:db8::1", DENY),          # other family never matches
        (["10.0.0.0/24"], None, DENY),                  # unknown peer cannot satisfy an IP rule
        ([], None, ALLOW),                              # no rule = any source
    ],
)
def test_source_ip_rules(source_ips: list[str], peer: str | None, expected: Decision) -> None:
    assert decide(acl(E("Topic:t", "Pub", "Allow", source_ips)), "Topic:t", Action.PUB, ip=peer) is expected


def test_precision_exact_before_prefix_before_any() -> None:
    a = acl(E("Topic:*", "Pub", "Deny"), E("Topic:ord*", "Pub", "Deny"), E("Topic:orders", "Pub", "Allow"))
    assert decide(a, "Topic:orders", Action.PUB) is ALLOW
    assert decide(a, "Topic:order-x", Action.PUB) is DENY
    b = acl(E("Topic:*", "Pub", "Allow"), E("Topic:ord*", "Pub", "Deny"))
    assert decide(b, "Topic:orders", Action.PUB) is DENY
    assert decide(b, "Topic:payments", Action.PUB) is ALLOW


def test_longer_prefix_wins() -> None:
    a = acl(E("Topic:a*", "Pub", "Deny"), E("Topic:abc*", "Pub", "Allow"), E("Topic:ab*", "Pub", "Deny"))
    assert decide(a, "Topic:abcd", Action.PUB) is ALLOW
    assert decide(a, "Topic:abx", Action.PUB) is DENY
    explanation = evaluate(ALICE, NORMAL, a, Resource.parse("Topic:abcd"), (Action.PUB,), "1.1.1.1")
    assert explanation.entry is not None and explanation.entry.resource.key == "Topic:abc*"
    assert [e.resource.key for e in explanation.candidates] == ["Topic:abc*", "Topic:ab*", "Topic:a*"]


def test_typed_resource_beats_any_type() -> None:
    a = acl(E("*", "All", "Deny"), E("Topic:*", "Pub", "Allow"))
    assert decide(a, "Topic:x", Action.PUB) is ALLOW
    assert decide(a, "Group:g", Action.SUB) is DENY


def test_deny_wins_at_equal_precision() -> None:
    # Identical resources are merged by the API; an ACL built by hand (or a 1.0 file) can hold both.
    for order in ((E("Topic:t", "Pub", "Allow"), E("Topic:t", "Pub", "Deny")),
                  (E("Topic:t", "Pub", "Deny"), E("Topic:t", "Pub", "Allow"))):
        assert decide(acl(*order), "Topic:t", Action.PUB) is DENY


def test_more_specific_entry_without_the_action_does_not_shadow() -> None:
    a = acl(E("Topic:t", "Sub", "Deny"), E("Topic:*", "Pub", "Allow"))
    assert decide(a, "Topic:t", Action.PUB) is ALLOW
    assert decide(a, "Topic:t", Action.SUB) is DENY


def test_ip_restricted_entry_falls_through_to_broader_one() -> None:
    a = acl(E("Topic:t", "Pub", "Allow", ["10.0.0.0/24"]), E("Topic:*", "Pub", "Deny"))
    assert decide(a, "Topic:t", Action.PUB, ip="10.0.0.9") is ALLOW
    assert decide(a, "Topic:t", Action.PUB, ip="172.16.0.1") is DENY


def test_super_user_passes_without_acl_and_despite_deny() -> None:
    root = User("alice", "pw", UserType.SUPER)
    assert decide(None, "Topic:t", Action.DELETE, user=root) is ALLOW
    assert decide(acl(E("*", "All", "Deny")), "Cluster:c", Action.UPDATE, user=root) is ALLOW


def test_unknown_and_disabled_users_are_denied() -> None:
    ex = evaluate(ALICE, None, None, Resource.parse("Topic:t"), (Action.PUB,), "1.1.1.1")
    assert ex.decision is DENY and ex.failure_message() == "User:alice not found."
    off = User("alice", "pw", UserType.SUPER, UserStatus.DISABLE)
    ex = evaluate(ALICE, off, acl(E("*", "All")), Resource.parse("Topic:t"), (Action.PUB,), "1.1.1.1")
    assert ex.decision is DENY and ex.failure_message() == "User:alice is disabled."


def test_no_match_is_deny_with_rocketmq_message() -> None:
    ex = evaluate(ALICE, NORMAL, acl(E("Topic:other", "Pub")), Resource.parse("Topic:T"), (Action.PUB,), "10.0.0.5")
    assert ex.decision is DENY
    assert ex.failure_message() == "User:alice has no permission to access Topic:T from 10.0.0.5, no matched policies."
    ex = evaluate(ALICE, NORMAL, None, Resource.parse("Topic:T"), (Action.PUB,), "10.0.0.5")
    assert ex.failure_message().endswith("no matched policies.")
    ex = evaluate(ALICE, NORMAL, acl(E("Topic:T", "Pub", "Deny")), Resource.parse("Topic:T"), (Action.PUB,), "10.0.0.5")
    assert ex.failure_message() == "User:alice has no permission to access Topic:T from 10.0.0.5, the decision is deny."


def test_default_policy_only_when_no_custom_entry_matches() -> None:
    # The ACL 1.0-compatible Default policy (defaultTopicPerm/defaultGroupPerm) answers unmatched requests.
    a = acl(E("Topic:secret", "All", "Deny"), default=(E("Topic:*", "Pub|Sub".split("|"), "Allow"),))
    assert decide(a, "Topic:other", Action.PUB) is ALLOW
    assert decide(a, "Topic:secret", Action.PUB) is DENY          # Custom matched: Default ignored
    assert decide(a, "Group:g", Action.SUB) is DENY               # neither matches
    deny_default = acl(default=(E("Topic:*", "All", "Deny"),))
    assert decide(deny_default, "Topic:x", Action.SUB) is DENY
    ex = evaluate(ALICE, NORMAL, a, Resource.parse("Topic:other"), (Action.PUB,), "1.1.1.1")
    assert ex.policy_type is PolicyType.DEFAULT


def test_explanation_names_the_deciding_entry_and_near_misses() -> None:
    a = acl(E("Topic:ord*", "Pub", "Allow", ["10.0.0.0/24"]), E("Topic:orders", "Sub", "Allow"))
    ex = evaluate(ALICE, NORMAL, a, Resource.parse("Topic:orders"), (Action.PUB,), "192.168.1.1")
    assert ex.decision is DENY and ex.entry is None
    text = str(ex)
    assert "no entry matches" in text
    assert "Topic:ord* [Pub] from 10.0.0.0/24 Allow (source ip 192.168.1.1 not in 10.0.0.0/24)" in text
    assert "Topic:orders [Sub] Allow (action not granted by this entry)" in text
    ok = evaluate(ALICE, NORMAL, a, Resource.parse("Topic:orders"), (Action.PUB,), "10.0.0.1")
    assert ok.allowed and "Custom entry Topic:ord* [Pub]" in ok.reason and "prefix match" in ok.reason
