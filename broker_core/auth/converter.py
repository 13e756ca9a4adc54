"""UserInfo / AclInfo JSON shapes, as the AUTH_* request codes carry them (spec B.8).

Why this module exists: the remoting adapter, mqadmin and our own durable files all speak these
shapes, so the conversion (and RocketMQ's leniency: case-insensitive enums, unknown actions dropped,
absent policyType = Custom) lives in one place.
"""

from __future__ import annotations

from typing import Any

from broker_core.auth.errors import AuthMetadataError
from broker_core.auth.model import (
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


def user_to_info(user: User, include_password: bool = True) -> dict[str, Any]:
    """UserInfo as AUTH_GET_USER answers it (RocketMQ does return the password there)."""
    info: dict[str, Any] = {"username": user.username}
    if include_password:
        info["password"] = user.password
    info["userType"] = user.user_type.value
    info["userStatus"] = user.user_status.value
    return info


def user_from_info(info: dict[str, Any]) -> User:
    """A complete user from UserInfo; absent type/status take RocketMQ's defaults."""
    if not isinstance(info, dict):
        raise AuthMetadataError("The user info must be a JSON object.")
    username = str(info.get("username") or "").strip()
    if not username:
        raise AuthMetadataError("The username is blank")
    password = info.get("password")
    if not isinstance(password, str) or not password.strip():
        raise AuthMetadataError("password can not be blank")
    return User(
        username,
        password,
        _parse_enum(UserType, info.get("userType"), UserType.NORMAL, "userType"),
        _parse_enum(UserStatus, info.get("userStatus"), UserStatus.ENABLE, "userStatus"),
    )


def acl_to_info(acl: Acl) -> dict[str, Any]:
    return {
        "subject": acl.subject.key,
        "policies": [
            {
                "policyType": policy.policy_type.value,
                "entries": [_entry_to_info(e) for e in policy.entries],
            }
            for policy in acl.policies
        ],
    }


def _entry_to_info(entry: PolicyEntry) -> dict[str, Any]:
    info: dict[str, Any] = {
        "resource": entry.resource.key,
        "actions": [a.value for a in entry.actions],
    }
    if entry.source_ips:
        info["sourceIps"] = list(entry.source_ips)
    info["decision"] = entry.decision.value
    return info


def acl_from_info(info: dict[str, Any], subject: str | None = None) -> Acl:
    """Parse AclInfo with RocketMQ's validation messages; ``subject`` (a header) wins when given."""
    if not isinstance(info, dict):
        raise AuthMetadataError("The body of acl is null")
    subj = Subject.parse(subject or info.get("subject") or "")
    raw_policies = info.get("policies")
    if not raw_policies:
        raise AuthMetadataError("The policies is empty.")
    policies: list[Policy] = []
    for raw in raw_policies:
        if not isinstance(raw, dict):
            raise AuthMetadataError("The policy must be a JSON object.")
        ptype = _parse_enum(PolicyType, raw.get("policyType"), PolicyType.CUSTOM, "policyType")
        raw_entries = raw.get("entries")
        if not raw_entries:
            raise AuthMetadataError("The policy entries is empty.")
        policies.append(Policy(ptype, tuple(_entry_from_info(e) for e in raw_entries)))
    acl = Acl(subj, tuple(_merge_same_type(policies)))
    acl.validate()
    return acl


def _merge_same_type(policies: list[Policy]) -> list[Policy]:
    """An ACL holds at most one policy of each type; later duplicates merge into the first."""
    if len({p.policy_type for p in policies}) == len(policies):
        return policies
    first = policies[0]
    merged = Acl(Subject("_"), (first,)).merged_with(policies[1:])
    return list(merged.policies)


def _entry_from_info(raw: Any) -> PolicyEntry:
    if not isinstance(raw, dict):
        raise AuthMetadataError("The policy entry must be a JSON object.")
    resource_key = raw.get("resource")
    if not isinstance(resource_key, str) or not resource_key.strip():
        raise AuthMetadataError("The resource is null.")
    try:
        resource = Resource.parse(resource_key)
    except AuthMetadataError:
        raise AuthMetadataError("The resource is null.") from None
    actions: list[Action] = []
    for name in raw.get("actions") or []:
        try:
            action = Action.parse(str(name))
        except ValueError:
            continue  # RocketMQ drops action names it does not know.
        if action not in actions:
            actions.append(action)
    decision_text = raw.get("decision")
    try:
        decision = Decision.parse(str(decision_text)) if decision_text is not None else None
    except ValueError:
        decision = None
    source_ips = tuple(str(ip).strip() for ip in (raw.get("sourceIps") or []))
    entry = PolicyEntry(resource, tuple(actions), decision or Decision.ALLOW, source_ips)
    entry.validate()
    if decision is None:
        raise AuthMetadataError("The decision is null or illegal.")
    return entry


def _parse_enum(enum_type: Any, value: Any, default: Any, field_name: str) -> Any:
    if value is None or (isinstance(value, str) and not value.strip()):
        return default
    try:
        return enum_type.parse(str(value))
    except ValueError as e:
        raise AuthMetadataError(f"invalid {field_name}: {e}") from None
