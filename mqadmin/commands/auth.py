"""ACL 2.0 commands (spec E.2/E.3): users and ACLs, copies between brokers, and ``explainAcl``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import typer

from broker_core.auth.converter import acl_to_info, user_to_info
from broker_core.auth.errors import AuthError
from broker_core.auth.model import Acl, User
from mqadmin.cli import Cmd, register, split_list
from mqadmin.errors import AdminError, NotFoundError, UsageProblem

if TYPE_CHECKING:
    from broker_core.auth.evaluator import Explanation
    from mqadmin.admin import BrokerExplanation

app = typer.Typer()

ClusterOpt = Annotated[str | None, typer.Option("-c", "--clusterName", help="cluster name")]
BrokerOpt = Annotated[str | None, typer.Option("-b", "--brokerAddr", help="broker address ip:port")]
USER_HEADERS = ("#UserName", "#Password", "#UserType", "#UserStatus")
ACL_HEADERS = ("#Subject", "#PolicyType", "#Resource", "#Actions", "#SourceIp", "#Decision")
USER_FORMAT = "%-16s  %-22s  %-22s  %-22s%n"
ACL_FORMAT = "%-16s  %-10s  %-22s  %-20s  %-24s  %-10s%n"


def _print_rows(cmd: Cmd, fmt: str, headers: tuple[str, ...], rows: list[list[str]]) -> None:
    """Apache's fixed-width printf layout (GetUserSubCommand / GetAclSubCommand FORMAT)."""
    cmd.printf(fmt, *headers)
    for row in rows:
        cmd.printf(fmt, *row)


def _targets(cmd: Cmd, cluster: str | None, broker: str | None) -> list[str]:
    """(-c | -b) is required and mutually exclusive, as in mqadmin; both are checked against the store."""
    if cluster is None and broker is None:
        raise UsageProblem("one of -c/--clusterName or -b/--brokerAddr is required")
    if cluster is not None and broker is not None:
        raise UsageProblem("-c/--clusterName and -b/--brokerAddr are mutually exclusive")
    return [b.broker_addr for b in cmd.admin().check_target(cluster_name=cluster, broker_addr=broker)]


def _build_acl(subject: str, resources: str, actions: str, decision: str, source_ip: str | None) -> Acl:
    try:
        return Acl.of(subject, split_list(resources) or [], split_list(actions) or [], decision.strip(),
                      split_list(source_ip) or [])
    except AuthError as e:
        raise AdminError(e.message) from None
    except ValueError as e:
        raise AdminError(str(e)) from None


def _user_row(u: User) -> list[str]:
    return [u.username, u.password, u.user_type.value, u.user_status.value]


def _java_list(items: Any) -> str:
    items = list(items)
    return "[" + ", ".join(str(i) for i in items) + "]" if items else "null"


def _acl_rows(acl: Acl) -> list[list[str]]:
    rows = []
    for policy in acl.policies:
        for e in policy.entries:
            rows.append([acl.subject.key, policy.policy_type.value, e.resource.key,
                         _java_list(a.value for a in e.actions), _java_list(e.source_ips), e.decision.value])
    return rows or [[acl.subject.key, "", "", "", "", ""]]


# ------------------------------------------------------------------------------------------ users

@register(app, "createUser", "Create an ACL 2.0 user.", writes=True)
def create_user(
    cmd: Cmd,
    username: Annotated[str, typer.Option("-u", "--username", help="user name")],
    password: Annotated[str, typer.Option("-p", "--password", help="password (the secret key)")],
    user_type: Annotated[str | None, typer.Option("-t", "--userType", help="Super or Normal")] = None,
    cluster: ClusterOpt = None,
    broker: BrokerOpt = None,
) -> None:
    addrs = _targets(cmd, cluster, broker)
    user = cmd.admin().create_user(username, password, user_type, addrs, read_back=cmd.structured)
    cmd.emit({"brokers": addrs, "user": user_to_info(user) if user is not None else None},
             lambda: [cmd.print(f"create user to {a} success.") for a in addrs])


@register(app, "updateUser", "Update an ACL 2.0 user's password, type or status.", writes=True)
def update_user(
    cmd: Cmd,
    username: Annotated[str, typer.Option("-u", "--username", help="user name")],
    password: Annotated[str | None, typer.Option("-p", "--password", help="new password")] = None,
    user_type: Annotated[str | None, typer.Option("-t", "--userType", help="Super or Normal")] = None,
    user_status: Annotated[str | None, typer.Option("-s", "--userStatus", help="enable or disable")] = None,
    cluster: ClusterOpt = None,
    broker: BrokerOpt = None,
) -> None:
    given = [v for v in (password, user_type, user_status) if v is not None]
    if len(given) != 1:
        raise UsageProblem("exactly one of -p/--password, -t/--userType, -s/--userStatus is required")
    addrs = _targets(cmd, cluster, broker)
    user = cmd.admin().update_user(username, password, user_type, user_status, addrs,
                                   read_back=cmd.structured)
    cmd.emit({"brokers": addrs, "user": user_to_info(user) if user is not None else None},
             lambda: [cmd.print(f"update user to {a} success.") for a in addrs])


@register(app, "deleteUser", "Delete an ACL 2.0 user (and its ACL).", writes=True)
def delete_user(
    cmd: Cmd,
    username: Annotated[str, typer.Option("-u", "--username", help="user name")],
    cluster: ClusterOpt = None,
    broker: BrokerOpt = None,
) -> None:
    addrs = _targets(cmd, cluster, broker)
    cmd.admin().delete_user(username, addrs)
    cmd.emit({"brokers": addrs, "username": username},
             lambda: [cmd.print(f"delete user to {a} success.") for a in addrs])


@register(app, "getUser", "Show one ACL 2.0 user.")
def get_user(
    cmd: Cmd,
    username: Annotated[str | None, typer.Option("-u", "--username", help="user name")] = None,
    cluster: ClusterOpt = None,
    broker: BrokerOpt = None,
) -> None:
    addrs = _targets(cmd, cluster, broker)
    if not username:
        raise UsageProblem("-u/--username is required")
    user = cmd.admin().get_user(username, addrs[0])
    if user is None:
        raise NotFoundError(f"user {username} not found")
    cmd.emit(user_to_info(user), lambda: _print_rows(cmd, USER_FORMAT, USER_HEADERS, [_user_row(user)]))


@register(app, "listUser", "List ACL 2.0 users (optionally whose name contains -f).")
def list_user(
    cmd: Cmd,
    filter_text: Annotated[str | None, typer.Option("-f", "--filter", help="user name substring")] = None,
    cluster: ClusterOpt = None,
    broker: BrokerOpt = None,
) -> None:
    addrs = _targets(cmd, cluster, broker)
    users = cmd.admin().list_users(filter_text, addrs[0])

    def render() -> None:
        _print_rows(cmd, USER_FORMAT, USER_HEADERS, [_user_row(u) for u in users])
        if cluster is not None:
            cmd.print(f"get user from {addrs[0]} success.")

    cmd.emit([user_to_info(u) for u in users], render)


@register(app, "copyUser", "Copy users from one broker (or store directory) to another.", writes=True)
def copy_user(
    cmd: Cmd,
    from_broker: Annotated[str, typer.Option("-f", "--fromBroker", help="source broker address or store dir")],
    to_broker: Annotated[str, typer.Option("-t", "--toBroker", help="target broker address or store dir")],
    usernames: Annotated[str | None, typer.Option("-u", "--usernames", help="comma list (default all)")] = None,
) -> None:
    source, source_addr = cmd.open_target(from_broker, writes=False)
    target, target_addr = cmd.open_target(to_broker, writes=True)
    copied = source.copy_users_to(target, split_list(usernames), source_addr, target_addr)
    cmd.emit({"from": from_broker, "to": to_broker, "users": copied},
             lambda: [cmd.print(f"copy user of {u} from {from_broker} to {to_broker} success.") for u in copied])


# ------------------------------------------------------------------------------------------ ACLs

AclSubject = Annotated[str, typer.Option("-s", "--subject", help="subject, e.g. User:alice")]
AclResources = Annotated[str, typer.Option("-r", "--resources", help="comma list, e.g. Topic:T,Group:G,Topic:abc*")]
AclActions = Annotated[str, typer.Option("-a", "--actions", help="comma list: Pub,Sub,Create,Update,Delete,Get,List,All")]
AclDecision = Annotated[str, typer.Option("-d", "--decision", help="Allow or Deny")]
AclSourceIp = Annotated[str | None, typer.Option("-i", "--sourceIp", help="comma list of IPs or CIDRs")]


@register(app, "createAcl", "Grant or deny actions on resources to a subject.", writes=True)
def create_acl(cmd: Cmd, subject: AclSubject, resources: AclResources, actions: AclActions, decision: AclDecision,
               source_ip: AclSourceIp = None, cluster: ClusterOpt = None, broker: BrokerOpt = None) -> None:
    addrs = _targets(cmd, cluster, broker)
    acl = cmd.admin().create_acl(_build_acl(subject, resources, actions, decision, source_ip), addrs,
                                 read_back=cmd.structured)
    cmd.emit({"brokers": addrs, "acl": acl_to_info(acl) if acl is not None else None},
             lambda: [cmd.print(f"create acl to {a} success.") for a in addrs])


@register(app, "updateAcl", "Update a subject's ACL entries.", writes=True)
def update_acl(cmd: Cmd, subject: AclSubject, resources: AclResources, actions: AclActions, decision: AclDecision,
               source_ip: AclSourceIp = None, cluster: ClusterOpt = None, broker: BrokerOpt = None) -> None:
    addrs = _targets(cmd, cluster, broker)
    acl = cmd.admin().update_acl(_build_acl(subject, resources, actions, decision, source_ip), addrs,
                                 read_back=cmd.structured)
    cmd.emit({"brokers": addrs, "acl": acl_to_info(acl) if acl is not None else None},
             lambda: [cmd.print(f"update acl to {a} success.") for a in addrs])


@register(app, "deleteAcl", "Delete a subject's ACL, or one resource's entry.", writes=True)
def delete_acl(
    cmd: Cmd,
    subject: AclSubject,
    resource: Annotated[str | None, typer.Option("-r", "--resources", help="one resource key (default: all)")] = None,
    cluster: ClusterOpt = None,
    broker: BrokerOpt = None,
) -> None:
    addrs = _targets(cmd, cluster, broker)
    cmd.admin().delete_acl(subject, resource, addrs)
    cmd.emit({"brokers": addrs, "subject": subject, "resource": resource},
             lambda: [cmd.print(f"delete acl to {a} success.") for a in addrs])


@register(app, "getAcl", "Show a subject's ACL.")
def get_acl(
    cmd: Cmd,
    subject: Annotated[str | None, typer.Option("-s", "--subject", help="subject, e.g. User:alice")] = None,
    cluster: ClusterOpt = None,
    broker: BrokerOpt = None,
) -> None:
    addrs = _targets(cmd, cluster, broker)
    if not subject:
        raise UsageProblem("-s/--subject is required")
    acl = cmd.admin().get_acl(subject, addrs[0])
    if acl is None:
        raise NotFoundError(f"no ACL for {subject}")
    cmd.emit(acl_to_info(acl), lambda: _print_rows(cmd, ACL_FORMAT, ACL_HEADERS, _acl_rows(acl)))


@register(app, "listAcl", "List ACLs (filters: subject and resource substrings).")
def list_acl(
    cmd: Cmd,
    subject: Annotated[str | None, typer.Option("-s", "--subject", help="subject filter")] = None,
    resource: Annotated[str | None, typer.Option("-r", "--resource", help="resource filter")] = None,
    cluster: ClusterOpt = None,
    broker: BrokerOpt = None,
) -> None:
    addrs = _targets(cmd, cluster, broker)
    acls = cmd.admin().list_acls(subject, resource, addrs[0])
    cmd.emit([acl_to_info(a) for a in acls],
             lambda: _print_rows(cmd, ACL_FORMAT, ACL_HEADERS, [row for a in acls for row in _acl_rows(a)]))


@register(app, "copyAcl", "Copy ACLs from one broker (or store directory) to another.", writes=True)
def copy_acl(
    cmd: Cmd,
    from_broker: Annotated[str, typer.Option("-f", "--fromBroker", help="source broker address or store dir")],
    to_broker: Annotated[str, typer.Option("-t", "--toBroker", help="target broker address or store dir")],
    subjects: Annotated[str | None, typer.Option("-s", "--subjects", help="comma list (default all)")] = None,
) -> None:
    source, source_addr = cmd.open_target(from_broker, writes=False)
    target, target_addr = cmd.open_target(to_broker, writes=True)
    with cmd.progress("copyAcl") as update:
        copied = source.copy_acls_to(target, split_list(subjects), update, source_addr, target_addr)
    cmd.emit({"from": from_broker, "to": to_broker, "subjects": copied},
             lambda: [cmd.print(f"copy acl of {s} from {from_broker} to {to_broker} success.") for s in copied])


def explanation_to_dict(x: Explanation) -> dict[str, Any]:
    from broker_core.auth.evaluator import describe_entry

    return {
        "decision": x.decision.value, "allowed": x.allowed, "reason": x.reason,
        "subject": x.subject.key if x.subject else None, "resource": x.resource.key,
        "actions": [a.value for a in x.actions], "sourceIp": x.source_ip,
        "policyType": x.policy_type.value if x.policy_type else None,
        "entry": describe_entry(x.entry) if x.entry else None,
        "candidates": [describe_entry(e) for e in x.candidates],
        "nearMisses": [{"entry": describe_entry(e), "why": why} for e, why in x.near_misses],
        "failureMessage": None if x.allowed else x.failure_message(),
    }


@register(app, "explainAcl", "Explain whether a subject may do actions on a resource, and why, on each broker.")
def explain_acl(
    cmd: Cmd,
    subject: Annotated[str, typer.Option("-s", "--subject", help="subject, e.g. User:alice")],
    resource: Annotated[str, typer.Option("-r", "--resource", help="resource, e.g. Topic:T or Group:G")],
    actions: Annotated[str, typer.Option("-a", "--actions", help="comma list, e.g. Pub or Sub,Get")],
    source_ip: Annotated[str | None, typer.Option("-i", "--sourceIp", help="client IP")] = None,
    cluster: Annotated[str | None, typer.Option("-c", "--clusterName",
                                                help="cluster name (default: every broker)")] = None,
    broker: Annotated[str | None, typer.Option("-b", "--brokerAddr",
                                               help="broker address ip:port (default: every broker)")] = None,
) -> None:
    """Each broker answers for itself (its own users, ACLs and authorizationEnabled). One broker: the
    explanation as an object, as before; several: a list of them, each naming its broker. A broker that
    cannot be asked is named on stderr (exit 1) after the others' answers."""
    if cluster is not None and broker is not None:
        raise UsageProblem("-c/--clusterName and -b/--brokerAddr are mutually exclusive")
    admin = cmd.admin()
    chosen = admin.check_target(cluster_name=cluster, broker_addr=broker) if cluster or broker else None
    answers = admin.explain_acl_each(subject, resource, split_list(actions) or [], source_ip, chosen)
    answered = [a for a in answers if a.explanation is not None]
    failed = [a for a in answers if a.explanation is None]
    many = len(answers) > 1
    if answered:
        data = [broker_explanation_to_dict(a) for a in answered]
        cmd.emit(data if many else data[0],
                 lambda: [_print_explanation(cmd, a, many, first=i == 0) for i, a in enumerate(answered)])
    if failed:
        raise AdminError("; ".join(f"cannot explain on {a.name} ({a.broker.broker_addr}): {a.error}"
                                   for a in failed))


def broker_explanation_to_dict(a: BrokerExplanation) -> dict[str, Any]:
    """The policies' explanation (``decision``: what they decide) and what the broker does now
    (``brokerDecision``: Allow when its authorization is off)."""
    assert a.explanation is not None
    return {"broker": a.name, "brokerAddr": a.broker.broker_addr,
            "authorizationEnabled": a.authorization_enabled, "brokerDecision": "Allow" if a.broker_allows else "Deny", "brokerReason": a.broker_reason,
            **explanation_to_dict(a.explanation)}


def _print_explanation(cmd: Cmd, a: BrokerExplanation, many: bool, first: bool) -> None:
    from broker_core.auth.evaluator import describe_entry

    x = a.explanation
    assert x is not None
    if many and not first:
        cmd.print()
    cmd.print(f"{'Broker:':<20} {a.name} ({a.broker.broker_addr})")
    if a.authorization_enabled is False:  # the policies still shown: they decide once it is turned on
        cmd.print(f"{'Authorization:':<20} {a.broker_reason}")
        cmd.print("With authorization on, the policies would decide:")
    cmd.print(f"{'Decision:':<20} {x.decision.value}")
    cmd.print(f"{'Reason:':<20} {x.reason}")
    if x.entry is not None:
        cmd.print(f"{'Decided by:':<20} {x.policy_type.value if x.policy_type else ''} {describe_entry(x.entry)}")
    for e in x.candidates[1:]:
        cmd.print(f"{'Also matched:':<20} {describe_entry(e)}")
    for e, why in x.near_misses:
        cmd.print(f"{'Not applicable:':<20} {describe_entry(e)} ({why})")
    if not x.allowed:
        cmd.print(f"{'Broker would say:' if a.authorization_enabled is not False else 'It would say:':<20} "
                  f"{x.failure_message()}")
