"""One-shot migration of ACL 1.0 ``plain_acl.yml`` accounts into ACL 2.0 users and policies.

Why this module exists: a broker started with ``migrateAuthFromV1Enabled=true`` must keep admitting
its 1.0 clients. Mapping as RocketMQ's AuthMigrator does it: accessKey/secretKey -> user (``admin:
true`` -> Super, else Normal); ``topicPerms``/``groupPerms`` ``name=PERM`` -> Custom-policy entries;
``defaultTopicPerm``/``defaultGroupPerm`` -> Default-policy entries on ``Topic:*``/``Group:*``; PERM
``PUB``->[Pub], ``SUB``->[Sub], ``PUB|SUB``/``SUB|PUB``->[Pub,Sub], anything else (``DENY`` too)->[All];
the decision is Deny only for ``DENY`` (or a blank perm). Existing users are never touched (their
account is skipped whole) and existing policy entries are never overwritten. IP whitelists
(``whiteRemoteAddress``, ``globalWhiteRemoteAddresses``) bypassed authentication in 1.0 and have no
2.0 meaning, so they are reported and dropped.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from broker_core.auth.errors import AuthError
from broker_core.auth.model import (
    Acl,
    Action,
    Decision,
    Policy,
    PolicyEntry,
    PolicyType,
    Resource,
    ResourcePattern,
    ResourceType,
    Subject,
    User,
    UserType,
)

if TYPE_CHECKING:
    from broker_core.auth.manager import AuthManager

PLAIN_ACL_FILE = "plain_acl.yml"
TOOLS_FILE = "tools.yml"


@dataclass
class MigrationReport:
    users_created: list[str] = field(default_factory=list)
    users_skipped: list[str] = field(default_factory=list)
    acls_written: list[str] = field(default_factory=list)
    whitelists_not_migrated: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


def plain_acl_files(rocketmq_home: Path) -> list[Path]:
    """``conf/plain_acl.yml`` plus every ``conf/acl/*.yml`` except tools.yml, as RocketMQ reads them."""
    conf = Path(rocketmq_home) / "conf"
    files: list[Path] = []
    if (conf / PLAIN_ACL_FILE).is_file():
        files.append(conf / PLAIN_ACL_FILE)
    acl_dir = conf / "acl"
    if acl_dir.is_dir():
        files.extend(p for p in sorted(acl_dir.glob("*.yml")) if p.name != TOOLS_FILE and p.is_file())
    return files


def parse_perm_actions(perm: str) -> tuple[Action, ...]:
    text = perm.strip()
    if text == "PUB":
        return (Action.PUB,)
    if text == "SUB":
        return (Action.SUB,)
    if text in ("PUB|SUB", "SUB|PUB"):
        return (Action.PUB, Action.SUB)
    return (Action.ALL,)


def parse_perm_decision(perm: str) -> Decision:
    text = perm.strip()
    return Decision.DENY if not text or text == "DENY" else Decision.ALLOW


def _perm_entries(perms: Any, kind: str) -> list[PolicyEntry]:
    entries: list[PolicyEntry] = []
    for item in perms or []:
        parts = [p for p in str(item).split("=") if p]
        if len(parts) != 2:
            continue  # RocketMQ skips malformed name=PERM items.
        name, perm = parts[0].strip(), parts[1].strip()
        resource = Resource.of_topic(name) if kind == "topic" else Resource.of_group(name)
        entries.append(PolicyEntry(resource, parse_perm_actions(perm), parse_perm_decision(perm)))
    return entries


def account_to_user_and_acl(account: dict[str, Any]) -> tuple[User, Acl | None]:
    """Translate one plain_acl.yml account; raises ValueError naming the problem (never the secret)."""
    access_key = str(account.get("accessKey") or "").strip()
    secret_key = account.get("secretKey")
    if not access_key:
        raise ValueError("account without accessKey")
    if secret_key is None or not str(secret_key).strip():
        raise ValueError(f"account {access_key!r} has no secretKey")
    admin = account.get("admin") is True or str(account.get("admin")).lower() == "true"
    user = User(access_key, str(secret_key), UserType.SUPER if admin else UserType.NORMAL)

    policies: list[Policy] = []
    custom = _perm_entries(account.get("topicPerms"), "topic")
    custom += _perm_entries(account.get("groupPerms"), "group")
    if custom:
        policies.append(Policy(PolicyType.CUSTOM, tuple(custom)))
    defaults: list[PolicyEntry] = []
    for key, rtype in (("defaultTopicPerm", ResourceType.TOPIC), ("defaultGroupPerm", ResourceType.GROUP)):
        perm = account.get(key)
        if perm is not None and str(perm).strip():
            resource = Resource(rtype, None, ResourcePattern.ANY)
            defaults.append(PolicyEntry(resource, parse_perm_actions(str(perm)), parse_perm_decision(str(perm))))
    if defaults:
        policies.append(Policy(PolicyType.DEFAULT, tuple(defaults)))
    acl = Acl(Subject(access_key), tuple(policies)) if policies else None
    return user, acl


def load_accounts(paths: Iterable[Path], report: MigrationReport) -> list[dict[str, Any]]:
    import yaml  # only a migration reads YAML: every broker start would pay for it otherwise

    accounts: list[dict[str, Any]] = []
    for path in paths:
        try:
            data = yaml.safe_load(Path(path).read_text(encoding="utf-8")) or {}
        except (OSError, yaml.YAMLError) as e:
            report.errors.append(f"{path}: cannot read ACL 1.0 file: {e}")
            continue
        if not isinstance(data, dict):
            report.errors.append(f"{path}: expected a mapping at the top level")
            continue
        if data.get("globalWhiteRemoteAddresses"):
            report.whitelists_not_migrated.append(f"{path}: globalWhiteRemoteAddresses")
        for account in data.get("accounts") or []:
            if not isinstance(account, dict):
                report.errors.append(f"{path}: an account entry is not a mapping")
                continue
            if account.get("whiteRemoteAddress"):
                report.whitelists_not_migrated.append(f"{path}: whiteRemoteAddress of {account.get('accessKey')}")
            accounts.append(account)
    return accounts


def migrate_plain_acl(manager: AuthManager, paths: Iterable[Path]) -> MigrationReport:
    """Create missing users and add missing policy entries; everything existing is left untouched."""
    report = MigrationReport()
    for account in load_accounts(paths, report):
        try:
            user, acl = account_to_user_and_acl(account)
        except ValueError as e:
            report.errors.append(str(e))
            continue
        if manager.get_user(user.username) is not None:
            report.users_skipped.append(user.username)
            continue
        try:
            manager.put_user(user)
            report.users_created.append(user.username)
            if acl is not None and _add_missing_entries(manager, acl):
                report.acls_written.append(acl.subject.key)
        except AuthError as e:
            report.errors.append(f"account {user.username!r}: {e.message}")
    return report


def _add_missing_entries(manager: AuthManager, acl: Acl) -> bool:
    existing = manager.get_acl(acl.subject)
    if existing is None:
        manager.create_acl(acl)
        return True
    fresh: list[Policy] = []
    for policy in acl.policies:
        old = existing.policy(policy.policy_type)
        entries = tuple(e for e in policy.entries if old is None or old.entry_for(e.resource) is None)
        if entries:
            fresh.append(Policy(policy.policy_type, entries))
    if not fresh:
        return False
    manager.create_acl(Acl(acl.subject, tuple(fresh)))
    return True
