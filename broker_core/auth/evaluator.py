"""ACL 2.0 decision procedure (spec D.4), as a pure function that also explains itself.

Why this module exists: the broker's authorization path and the operator's ``explain`` must use the
very same ordering, so both call :func:`evaluate`. Order: a Super user passes; an unknown or disabled
user is refused; otherwise the Custom policy's matching entries (Default policy's only when no Custom
entry matches) are ranked — a typed resource before ``*``, LITERAL before PREFIXED before ANY, a
longer prefix before a shorter one, and Deny before Allow at equal precision — and the first decides.
No matching entry is a deny.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from dataclasses import dataclass, field

from broker_core.auth.model import (
    Acl,
    Action,
    Decision,
    PolicyEntry,
    PolicyType,
    Resource,
    ResourcePattern,
    ResourceType,
    Subject,
    User,
)

NO_MATCHED_POLICIES = "no matched policies."
DECISION_IS_DENY = "the decision is deny."


@dataclass(frozen=True)
class Explanation:
    """The outcome of one evaluation and the reason, in words an operator can act on."""

    decision: Decision
    reason: str
    subject: Subject | None
    resource: Resource
    actions: tuple[Action, ...]
    source_ip: str | None
    entry: PolicyEntry | None = None
    policy_type: PolicyType | None = None
    candidates: tuple[PolicyEntry, ...] = ()
    # Entries on the same resource that did not apply, with why (only filled when nothing matched).
    near_misses: tuple[tuple[PolicyEntry, str], ...] = field(default=())
    # RocketMQ's detail text for the failure message ("no matched policies." / "the decision is deny.").
    detail: str = ""

    @property
    def allowed(self) -> bool:
        return self.decision is Decision.ALLOW

    def failure_message(self) -> str:
        """RocketMQ's NO_PERMISSION remark for a denied request."""
        if self.detail.startswith("User:"):
            return self.detail
        subject = self.subject.key if self.subject else "User:null"
        origin = f" from {self.source_ip}" if self.source_ip is not None else ""
        return f"{subject} has no permission to access {self.resource.key}{origin}, {self.detail}"

    def __str__(self) -> str:
        actions = ",".join(a.value for a in self.actions)
        head = f"{self.decision.value}: {self.subject or 'User:null'} {actions} on {self.resource.key} from {self.source_ip}"
        text = f"{head} — {self.reason}"
        for entry, why in self.near_misses:
            text += f"; not applicable: {describe_entry(entry)} ({why})"
        return text


def describe_entry(entry: PolicyEntry) -> str:
    ips = f" from {','.join(entry.source_ips)}" if entry.source_ips else ""
    actions = ",".join(a.value for a in entry.actions)
    return f"{entry.resource.key} [{actions}]{ips} {entry.decision.value}"


def evaluate(
    subject: Subject | None,
    user: User | None,
    acl: Acl | None,
    resource: Resource,
    actions: Iterable[Action],
    source_ip: str | None,
) -> Explanation:
    acts = tuple(actions)

    def result(decision: Decision, reason: str, detail: str = "", **kw: object) -> Explanation:
        return Explanation(decision, reason, subject, resource, acts, source_ip, detail=detail, **kw)  # type: ignore[arg-type]

    if subject is None or user is None:
        name = subject.name if subject else "null"
        return result(Decision.DENY, f"user {name} does not exist", detail=f"User:{name} not found.")
    if not user.is_enabled:
        return result(Decision.DENY, f"user {user.username} is disabled", detail=f"User:{user.username} is disabled.")
    if user.is_super:
        return result(Decision.ALLOW, f"user {user.username} is a Super user (no ACL lookup)")
    if acl is None:
        return result(Decision.DENY, f"{subject.key} has no ACL", detail=NO_MATCHED_POLICIES)

    for policy_type in (PolicyType.CUSTOM, PolicyType.DEFAULT):
        policy = acl.policy(policy_type)
        if policy is None:
            continue
        candidates = [e for e in policy.entries if _applies(e, resource, acts, source_ip) is None]
        if not candidates:
            continue
        ranked = tuple(sorted(candidates, key=_precision_key))
        winner = ranked[0]
        how = _match_kind(winner.resource)
        others = f"; {len(ranked) - 1} less specific candidate(s) ignored" if len(ranked) > 1 else ""
        reason = f"decided by {policy_type.value} entry {describe_entry(winner)} ({how}){others}"
        detail = "" if winner.decision is Decision.ALLOW else DECISION_IS_DENY
        return result(winner.decision, reason, detail, entry=winner, policy_type=policy_type, candidates=ranked)

    misses = tuple(
        (e, why)
        for p in acl.policies
        for e in p.entries
        if (why := _applies(e, resource, acts, source_ip)) is not None and e.resource.matches(resource)
    )
    return result(Decision.DENY, "no entry matches (no matched policies)", NO_MATCHED_POLICIES, near_misses=misses)


def _applies(entry: PolicyEntry, resource: Resource, actions: tuple[Action, ...], source_ip: str | None) -> str | None:
    """None when the entry applies to the request, else a short reason why not."""
    if not entry.resource.matches(resource):
        return "resource does not match"
    if not actions_match(entry.actions, actions):
        return "action not granted by this entry"
    if not source_ip_matches(entry.source_ips, source_ip):
        return _source_ip_reason(entry.source_ips, source_ip)
    return None


def _source_ip_reason(allowed: Iterable[str], source_ip: str | None) -> str:
    """Why an entry limited to ``allowed`` IPs does not apply. Without an IP (explainAcl given no -i)
    the operator must read that none was given, not a Python ``None`` posing as an address."""
    where = ",".join(allowed)
    if not source_ip:
        return f"no source IP given (-i); the entry applies only from {where}"
    return f"source ip {source_ip} not in {where}"


def actions_match(granted: Iterable[Action], requested: Iterable[Action]) -> bool:
    """An entry applies when it shares one requested action or holds All; a request for Any takes any entry."""
    granted_set = set(granted)
    if not granted_set:
        return False
    requested_set = set(requested)
    if Action.ANY in requested_set:
        return True
    return Action.ALL in granted_set or bool(granted_set & requested_set)


def source_ip_matches(allowed: Iterable[str], source_ip: str | None) -> bool:
    """Empty list = any source. A CIDR matches by range, a plain address by (normalized) equality."""
    allowed = tuple(allowed)
    if not allowed:
        return True
    if not source_ip:
        return False
    peer = _parse_ip(source_ip)
    for rule in allowed:
        if "/" in rule:
            if peer is None:
                continue
            try:
                network = ipaddress.ip_network(rule, strict=False)
            except ValueError:
                continue
            if peer.version == network.version and peer in network:
                return True
        else:
            target = _parse_ip(rule)
            if (target is not None and peer is not None and target == peer) or rule == source_ip:
                return True
    return False


def _parse_ip(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    """Peer addresses may arrive bracketed, with a zone, or IPv4-mapped; reduce to the plain address."""
    text = text.strip().strip("[]").split("%", 1)[0]
    try:
        ip = ipaddress.ip_address(text)
    except ValueError:
        return None
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    return ip


_PATTERN_RANK = {ResourcePattern.LITERAL: 0, ResourcePattern.PREFIXED: 1, ResourcePattern.ANY: 2}


def _precision_key(entry: PolicyEntry) -> tuple[int, int, int, int]:
    r = entry.resource
    type_rank = 1 if r.resource_type is ResourceType.ANY else 0
    prefix_len = len(r.resource_name or "") if r.resource_pattern is ResourcePattern.PREFIXED else 0
    decision_rank = 0 if entry.decision is Decision.DENY else 1
    return (type_rank, _PATTERN_RANK[r.resource_pattern], -prefix_len, decision_rank)


def _match_kind(resource: Resource) -> str:
    if resource.resource_type is ResourceType.ANY:
        return "any resource of any type"
    if resource.resource_pattern is ResourcePattern.LITERAL:
        return "exact match"
    if resource.resource_pattern is ResourcePattern.PREFIXED:
        return f"prefix match, prefix length {len(resource.resource_name or '')}"
    return f"any {resource.resource_type.value}"
