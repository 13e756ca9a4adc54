"""The ACL 2.0 vocabulary: users, subjects, resources, actions, policies and ACLs.

Why this module exists: every other auth module (stores, evaluator, converter, migration, the
broker adapters) must agree on one set of immutable value objects and on RocketMQ's string forms
(`User:alice`, `Topic:abc*`, `Group:*`, `*`, `Pub`, `Allow`), including their case-insensitive
parsing. Numeric codes are kept because RocketMQ's own stored JSON uses them.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from enum import Enum

from broker_core.auth.errors import AuthMetadataError
from broker_core.common.response_code import ResponseCode

RETRY_GROUP_TOPIC_PREFIX = "%RETRY%"
DLQ_GROUP_TOPIC_PREFIX = "%DLQ%"


class _NamedEnum(Enum):
    """Enum whose value is RocketMQ's display name; ``code`` is RocketMQ's stored number."""

    @property
    def code(self) -> int:
        return _CODES[self]

    @classmethod
    def parse(cls, text: str):  # type: ignore[no-untyped-def]
        """Case-insensitive lookup by display name; raises ValueError naming the accepted values."""
        wanted = text.strip().lower()
        for member in cls:
            if member.value.lower() == wanted:
                return member
        names = ", ".join(m.value for m in cls)
        raise ValueError(f"unknown {cls.__name__} {text!r}; expected one of: {names}")

    def __str__(self) -> str:
        return self.value


class UserType(_NamedEnum):
    SUPER = "Super"
    NORMAL = "Normal"


class UserStatus(_NamedEnum):
    ENABLE = "enable"
    DISABLE = "disable"


class SubjectType(_NamedEnum):
    USER = "User"


class ResourceType(_NamedEnum):
    ANY = "Any"
    CLUSTER = "Cluster"
    NAMESPACE = "Namespace"
    TOPIC = "Topic"
    GROUP = "Group"


class ResourcePattern(_NamedEnum):
    ANY = "ANY"
    LITERAL = "LITERAL"
    PREFIXED = "PREFIXED"


class Action(_NamedEnum):
    ALL = "All"
    ANY = "Any"
    PUB = "Pub"
    SUB = "Sub"
    CREATE = "Create"
    UPDATE = "Update"
    DELETE = "Delete"
    GET = "Get"
    LIST = "List"


class Decision(_NamedEnum):
    ALLOW = "Allow"
    DENY = "Deny"


class PolicyType(_NamedEnum):
    CUSTOM = "Custom"
    DEFAULT = "Default"


_CODES: dict[Enum, int] = {
    UserType.SUPER: 1, UserType.NORMAL: 2,
    UserStatus.ENABLE: 1, UserStatus.DISABLE: 2,
    SubjectType.USER: 1,
    ResourceType.ANY: 1, ResourceType.CLUSTER: 2, ResourceType.NAMESPACE: 3, ResourceType.TOPIC: 4,
    ResourceType.GROUP: 5,
    ResourcePattern.ANY: 1, ResourcePattern.LITERAL: 2, ResourcePattern.PREFIXED: 3,
    Action.ALL: 1, Action.ANY: 2, Action.PUB: 3, Action.SUB: 4, Action.CREATE: 5, Action.UPDATE: 6,
    Action.DELETE: 7, Action.GET: 8, Action.LIST: 9,
    Decision.ALLOW: 1, Decision.DENY: 2,
    PolicyType.CUSTOM: 1, PolicyType.DEFAULT: 2,
}


@dataclass(frozen=True)
class User:
    """An ACL 2.0 user; ``password`` is the secret key used for HMAC and is kept out of repr()."""

    username: str
    password: str = field(repr=False)
    user_type: UserType = UserType.NORMAL
    user_status: UserStatus = UserStatus.ENABLE

    @property
    def subject(self) -> Subject:
        return Subject(self.username)

    @property
    def is_super(self) -> bool:
        return self.user_type is UserType.SUPER

    @property
    def is_enabled(self) -> bool:
        return self.user_status is UserStatus.ENABLE

    def with_changes(self, **changes: object) -> User:
        return replace(self, **changes)  # type: ignore[arg-type]


@dataclass(frozen=True)
class Subject:
    """Who a policy applies to. Only RocketMQ's ``User`` subject type exists."""

    name: str
    subject_type: SubjectType = SubjectType.USER

    @property
    def key(self) -> str:
        return f"{self.subject_type.value}:{self.name}"

    def __str__(self) -> str:
        return self.key

    @classmethod
    def parse(cls, key: str | Subject) -> Subject:
        """Parse ``User:name`` (type case-insensitive). Anything else is RocketMQ's system error."""
        if isinstance(key, Subject):
            return key
        type_text, sep, name = (key or "").partition(":")
        if not sep or type_text.strip().lower() != "user" or not name.strip():
            raise AuthMetadataError(
                f"invalid subject {key!r}: expected User:<username>",
                code=ResponseCode.SYSTEM_ERROR,
                remark="An system error occurred, please try again later.",
            )
        return cls(name.strip())


@dataclass(frozen=True)
class Resource:
    """A resource key: ``*`` (any type), ``Type:*`` (ANY), ``Type:abc*`` (PREFIXED), ``Type:x`` (LITERAL).

    ``resource_name`` is None for ANY and holds the prefix (without ``*``) for PREFIXED.
    """

    resource_type: ResourceType
    resource_name: str | None
    resource_pattern: ResourcePattern

    @classmethod
    def of_topic(cls, name: str) -> Resource:
        return cls(ResourceType.TOPIC, name, ResourcePattern.LITERAL)

    @classmethod
    def of_group(cls, name: str) -> Resource:
        """Retry topics name their group: ``%RETRY%G`` is checked as ``Group:G``."""
        return cls(ResourceType.GROUP, group_name_of(name), ResourcePattern.LITERAL)

    @classmethod
    def of_cluster(cls, name: str) -> Resource:
        return cls(ResourceType.CLUSTER, name, ResourcePattern.LITERAL)

    @classmethod
    def any(cls) -> Resource:
        return cls(ResourceType.ANY, None, ResourcePattern.ANY)

    @classmethod
    def parse(cls, key: str | Resource) -> Resource:
        """Parse RocketMQ's resource key; raises AuthMetadataError for an unknown type."""
        if isinstance(key, Resource):
            return key
        text = (key or "").strip()
        if text == "*":
            return cls.any()
        type_text, _, name = text.partition(":")
        try:
            rtype = ResourceType.parse(type_text)
        except ValueError:
            raise AuthMetadataError(
                f"invalid resource {key!r}: type must be one of Cluster, Namespace, Topic, Group (or '*')"
            ) from None
        if rtype is ResourceType.ANY:
            raise AuthMetadataError(f"invalid resource {key!r}: write '*' for any resource of any type")
        if name == "*":
            return cls(rtype, None, ResourcePattern.ANY)
        if name.endswith("*"):
            return cls(rtype, name[: name.index("*")], ResourcePattern.PREFIXED)
        return cls(rtype, name, ResourcePattern.LITERAL)

    @property
    def key(self) -> str:
        if self.resource_type is ResourceType.ANY:
            return "*"
        if self.resource_pattern is ResourcePattern.ANY:
            return f"{self.resource_type.value}:*"
        if self.resource_pattern is ResourcePattern.PREFIXED:
            return f"{self.resource_type.value}:{self.resource_name}*"
        return f"{self.resource_type.value}:{self.resource_name}"

    def __str__(self) -> str:
        return self.key

    def matches(self, requested: Resource) -> bool:
        """Whether this (policy-side) resource covers the concrete requested resource."""
        if self.resource_type is ResourceType.ANY:
            return True
        if self.resource_type is not requested.resource_type:
            return False
        if self.resource_pattern is ResourcePattern.ANY:
            return True
        name = requested.resource_name or ""
        if self.resource_pattern is ResourcePattern.PREFIXED:
            return name.startswith(self.resource_name or "")
        return name == (self.resource_name or "")


def group_name_of(name: str) -> str:
    """Strip RocketMQ's retry (and DLQ) prefix so retry topics are authorized as their group."""
    if name.startswith(RETRY_GROUP_TOPIC_PREFIX):
        name = name[len(RETRY_GROUP_TOPIC_PREFIX):]
        if name.startswith(DLQ_GROUP_TOPIC_PREFIX):
            name = name[len(DLQ_GROUP_TOPIC_PREFIX):]
    return name


def is_retry_topic(name: str | None) -> bool:
    return bool(name) and name.startswith(RETRY_GROUP_TOPIC_PREFIX)  # type: ignore[union-attr]


def is_valid_ip_or_cidr(text: str) -> bool:
    """RocketMQ accepts a plain IPv4/IPv6 address or a CIDR whose prefix fits the address family."""
    try:
        if "/" in text:
            address, _, prefix = text.partition("/")
            ip = ipaddress.ip_address(address)
            bits = int(prefix)
            return 0 <= bits <= ip.max_prefixlen and prefix.strip().isdigit()
        ipaddress.ip_address(text)
        return True
    except ValueError:
        return False


def normalize_actions(actions: Action | str | Iterable[Action | str]) -> tuple[Action, ...]:
    """Accept one action or many, as enums or RocketMQ names; de-duplicated, order kept."""
    items: Iterable[Action | str] = [actions] if isinstance(actions, Action | str) else actions
    out: list[Action] = []
    for item in items:
        action = item if isinstance(item, Action) else Action.parse(item)
        if action not in out:
            out.append(action)
    return tuple(out)


@dataclass(frozen=True)
class PolicyEntry:
    """One grant or denial: resource + actions + optional source IPs/CIDRs + decision."""

    resource: Resource
    actions: tuple[Action, ...]
    decision: Decision
    source_ips: tuple[str, ...] = ()

    @classmethod
    def of(
        cls,
        resource: str | Resource,
        actions: Action | str | Iterable[Action | str],
        decision: Decision | str = Decision.ALLOW,
        source_ips: Iterable[str] = (),
    ) -> PolicyEntry:
        entry = cls(
            Resource.parse(resource),
            normalize_actions(actions),
            decision if isinstance(decision, Decision) else Decision.parse(decision),
            tuple(s.strip() for s in source_ips),
        )
        entry.validate()
        return entry

    def validate(self) -> None:
        """RocketMQ's checks on a stored entry, with its exact messages."""
        if not self.actions:
            raise AuthMetadataError("The actions is empty.")
        if Action.ANY in self.actions:
            raise AuthMetadataError("The actions can not be Any.")
        for ip in self.source_ips:
            if not ip:
                raise AuthMetadataError("The source ip is empty.")
            if not is_valid_ip_or_cidr(ip):
                raise AuthMetadataError("The source ip is invalid.")


@dataclass(frozen=True)
class Policy:
    policy_type: PolicyType
    entries: tuple[PolicyEntry, ...]

    def entry_for(self, resource: Resource) -> PolicyEntry | None:
        for entry in self.entries:
            if entry.resource == resource:
                return entry
        return None


@dataclass(frozen=True)
class Acl:
    """All policies of one subject: at most one Custom and one Default policy."""

    subject: Subject
    policies: tuple[Policy, ...]

    @classmethod
    def of(
        cls,
        subject: str | Subject,
        resources: Iterable[str | Resource] | str | Resource,
        actions: Action | str | Iterable[Action | str],
        decision: Decision | str = Decision.ALLOW,
        source_ips: Iterable[str] = (),
        policy_type: PolicyType = PolicyType.CUSTOM,
    ) -> Acl:
        """The shape mqadmin createAcl sends: one policy, one entry per resource, shared settings."""
        if isinstance(resources, str | Resource):
            resources = [resources]
        ips = tuple(source_ips)
        entries = tuple(PolicyEntry.of(r, actions, decision, ips) for r in resources)
        return cls(Subject.parse(subject), (Policy(policy_type, entries),))

    def policy(self, policy_type: PolicyType) -> Policy | None:
        for policy in self.policies:
            if policy.policy_type is policy_type:
                return policy
        return None

    def validate(self) -> None:
        if not self.policies:
            raise AuthMetadataError("The policies is empty.")
        for policy in self.policies:
            if not policy.entries:
                raise AuthMetadataError("The policy entries is empty.")
            for entry in policy.entries:
                entry.validate()

    def merged_with(self, policies: Iterable[Policy]) -> Acl:
        """RocketMQ's create/update merge: same type + same resource replaces, new resources append."""
        by_type: dict[PolicyType, list[PolicyEntry]] = {p.policy_type: list(p.entries) for p in self.policies}
        order = [p.policy_type for p in self.policies]
        for policy in policies:
            if policy.policy_type not in by_type:
                by_type[policy.policy_type] = []
                order.append(policy.policy_type)
            entries = by_type[policy.policy_type]
            for new in policy.entries:
                for i, old in enumerate(entries):
                    if old.resource == new.resource:
                        entries[i] = new
                        break
                else:
                    entries.append(new)
        return Acl(self.subject, tuple(Policy(t, tuple(by_type[t])) for t in order))

    def without(self, policy_type: PolicyType, resource: Resource) -> Acl:
        """Remove one entry; a policy left empty disappears."""
        policies: list[Policy] = []
        for policy in self.policies:
            if policy.policy_type is policy_type:
                kept = tuple(e for e in policy.entries if e.resource != resource)
                if kept:
                    policies.append(Policy(policy.policy_type, kept))
            else:
                policies.append(policy)
        return Acl(self.subject, tuple(policies))
