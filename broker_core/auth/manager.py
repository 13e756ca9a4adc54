"""AuthManager: the one object the Broker, the protocol adapters and mqadmin's LocalBrokerClient use for ACL 2.0.

Why this module exists: user/ACL administration (with RocketMQ's validation messages and Super-user
guards), per-request authentication and authorization, audit logging, first-start users, the ACL 1.0
migration and stateful-cache invalidation must all act on the same tables; this facade owns them and
keeps the caches honest by notifying listeners on every change.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import TypeVar

from broker_core.auth.acl_store import AclStore
from broker_core.auth.audit import AUDIT_FILE_NAME, AuditLog
from broker_core.auth.authentication import AuthenticationContext, Authenticator
from broker_core.auth.authorization import AuthorizationContext, Authorizer, checks_for_request
from broker_core.auth.config import AuthConfig
from broker_core.auth.errors import AuthMetadataError
from broker_core.auth.evaluator import Explanation
from broker_core.auth.migration import MigrationReport, migrate_plain_acl, plain_acl_files
from broker_core.auth.model import (
    Acl,
    Action,
    PolicyType,
    Resource,
    Subject,
    User,
    UserStatus,
    UserType,
    normalize_actions,
)
from broker_core.auth.user_store import UserStore
from broker_core.common.response_code import ResponseCode

ChangeListener = Callable[[str, str], None]


def _system_clock() -> int:
    return int(time.time() * 1000)


def default_audit_log_path() -> Path:
    """Where RocketMQ writes auth_audit.log: ``$ROCKETMQ_LOG_HOME`` or ``~/logs/rocketmqlogs``."""
    home = os.environ.get("ROCKETMQ_LOG_HOME")
    return (Path(home) if home else Path.home() / "logs" / "rocketmqlogs") / AUDIT_FILE_NAME


class AuthManager:
    """Users, ACLs, authentication, authorization and audit over ``<store>/config``."""

    def __init__(
        self,
        config_dir: Path,
        config: AuthConfig | None = None,
        clock: Callable[[], int] = _system_clock,
        audit_log_path: Path | None = None,
        audit: AuditLog | None = None,
        rocketmq_home: Path | None = None,
    ) -> None:
        self.config_dir = Path(config_dir)
        self.config = config or AuthConfig()
        self.clock = clock
        self._lock = threading.RLock()
        self._users = UserStore(self.config_dir)
        self._acls = AclStore(self.config_dir)
        self.audit = audit or AuditLog(audit_log_path or default_audit_log_path())
        self._listeners: list[ChangeListener] = []
        cfg = self.config
        self.authenticator = Authenticator(
            self._users.get, self.audit, cfg.authentication_strategy, clock,
            cfg.stateful_authentication_cache_max_num, cfg.stateful_authentication_cache_expired_second * 1000,
        )
        self.authorizer = Authorizer(
            self._users.get, self._acls.get, self.audit, cfg.authorization_strategy, clock,
            cfg.stateful_authorization_cache_max_num, cfg.stateful_authorization_cache_expired_second * 1000,
        )
        self._init_users()
        self.migration_report: MigrationReport | None = None
        if cfg.migrate_auth_from_v1_enabled:
            home = rocketmq_home or (Path(os.environ["ROCKETMQ_HOME"]) if os.environ.get("ROCKETMQ_HOME") else None)
            if home is not None:
                self.migration_report = migrate_plain_acl(self, plain_acl_files(home))

    # -- lifecycle ---------------------------------------------------------------------------

    def _init_users(self) -> None:
        """initAuthenticationUser and innerClientAuthenticationCredentials become Super users once."""
        for creds in (self.config.init_user(), self.config.inner_client_user()):
            if creds is not None and self._users.get(creds.username) is None:
                self.put_user(User(creds.username, creds.password, UserType.SUPER))

    def close(self) -> None:
        self.audit.close()

    def add_change_listener(self, listener: ChangeListener) -> None:
        """``listener(kind, key)`` runs after every change; kind is "user" or "acl"."""
        self._listeners.append(listener)

    def _changed(self, kind: str, key: str) -> None:
        if kind == "user":
            self.authenticator.invalidate()
        self.authorizer.invalidate()
        for listener in list(self._listeners):
            listener(kind, key)

    def forget_channel(self, channel_id: str) -> None:
        """Drop stateful decisions of a closed connection."""
        self.authenticator.forget_channel(channel_id)
        self.authorizer.forget_channel(channel_id)

    # -- users -------------------------------------------------------------------------------

    def get_user(self, username: str) -> User | None:
        return self._users.get(username)

    def list_users(self, filter: str | None = None) -> list[User]:  # noqa: A002 - RocketMQ's option name
        return self._users.list(filter)

    def put_user(self, user: User) -> None:
        """Create or replace without the admin guards (first-start users, migration, copies)."""
        with self._lock:
            self._users.put(user)
        self._changed("user", user.username)

    def create_user(
        self,
        username: str,
        password: str,
        user_type: UserType | str | None = None,
        user_status: UserStatus | str | None = None,
        *,
        caller: str | None = None,
    ) -> User:
        """AUTH_CREATE_USER. ``caller`` is the request's AccessKey (None when authentication is off)."""
        name = _username(username)
        utype = _enum(UserType, user_type) or UserType.NORMAL
        ustatus = _enum(UserStatus, user_status) or UserStatus.ENABLE
        with self._lock:
            if self._users.get(name) is not None:
                raise AuthMetadataError("The user is existed")
            if not password or not password.strip():
                raise AuthMetadataError("password can not be blank")
            if utype is UserType.SUPER and not self._caller_is_super(caller):
                raise AuthMetadataError("The super user can only be create by super user", code=ResponseCode.SYSTEM_ERROR)
            user = User(name, password, utype, ustatus)
            self._users.put(user)
        self._changed("user", name)
        return user

    def update_user(
        self,
        username: str,
        password: str | None = None,
        user_type: UserType | str | None = None,
        user_status: UserStatus | str | None = None,
        *,
        caller: str | None = None,
    ) -> User:
        """AUTH_UPDATE_USER: only a non-blank password and given type/status change."""
        name = _username(username)
        utype = _enum(UserType, user_type)
        ustatus = _enum(UserStatus, user_status)
        with self._lock:
            old = self._users.get(name)
            if old is None:
                raise AuthMetadataError("The user is not exist")
            if (old.is_super or utype is UserType.SUPER) and not self._caller_is_super(caller):
                raise AuthMetadataError("The super user can only be update by super user", code=ResponseCode.SYSTEM_ERROR)
            user = User(
                name,
                password if password and password.strip() else old.password,
                utype or old.user_type,
                ustatus or old.user_status,
            )
            self._users.put(user)
        self._changed("user", name)
        return user

    def delete_user(self, username: str, *, caller: str | None = None) -> None:
        """AUTH_DELETE_USER: succeeds when absent; the user's ACL goes too."""
        name = _username(username)
        with self._lock:
            old = self._users.get(name)
            if old is None:
                return
            if old.is_super and not self._caller_is_super(caller):
                raise AuthMetadataError("The super user can only be delete by super user", code=ResponseCode.SYSTEM_ERROR)
            self._acls.delete(Subject(name))
            self._users.delete(name)
        self._changed("user", name)

    def _caller_is_super(self, caller: str | None) -> bool:
        if caller is None:
            return True  # no AccessKey: authentication is off, RocketMQ skips the guard
        user = self._users.get(caller)
        return user is not None and user.is_super

    # -- ACLs --------------------------------------------------------------------------------

    def create_acl(self, acl: Acl) -> Acl:
        """AUTH_CREATE_ACL: create, or merge into the subject's ACL (same resource replaced)."""
        acl.validate()
        with self._lock:
            if self._users.get(acl.subject.name) is None:
                raise AuthMetadataError(f"The subject of {acl.subject.key} is not exist.")
            old = self._acls.get(acl.subject) or Acl(acl.subject, ())
            merged = old.merged_with(acl.policies)
            self._acls.put(merged)
        self._changed("acl", acl.subject.key)
        return merged

    def update_acl(self, acl: Acl) -> Acl:
        """AUTH_UPDATE_ACL behaves exactly like create (create-or-merge)."""
        return self.create_acl(acl)

    def delete_acl(
        self,
        subject: Subject | str,
        resource: Resource | str | None = None,
        policy_type: PolicyType = PolicyType.CUSTOM,
    ) -> None:
        """AUTH_DELETE_ACL: the whole ACL, or one resource's entry of one policy type."""
        subj = Subject.parse(subject)
        with self._lock:
            if self._users.get(subj.name) is None:
                raise AuthMetadataError("The subject is not exist.")
            old = self._acls.get(subj)
            if old is None:
                raise AuthMetadataError("The acl is not exist.")
            if resource is None:
                self._acls.delete(subj)
            else:
                remaining = old.without(policy_type, Resource.parse(resource))
                if remaining.policies:
                    self._acls.put(remaining)
                else:
                    self._acls.delete(subj)
        self._changed("acl", subj.key)

    def get_acl(self, subject: Subject | str) -> Acl | None:
        subj = Subject.parse(subject)
        if self._users.get(subj.name) is None:
            raise AuthMetadataError("The subject is not exist.")
        return self._acls.get(subj)

    def list_acls(self, subject_filter: str | None = None, resource_filter: str | None = None) -> list[Acl]:
        return self._acls.list(subject_filter, resource_filter)

    # -- copy (copyUser / copyAcl) -----------------------------------------------------------

    def copy_users_to(self, other: AuthManager, usernames: Iterable[str] | None = None) -> list[str]:
        """For each user: create on the target, or update every field when it already exists."""
        names = [u.username for u in self.list_users()] if usernames is None else [n.strip() for n in usernames]
        copied: list[str] = []
        for name in names:
            user = self.get_user(name)
            if user is None:
                raise AuthMetadataError(f"The user {name} is not exist")
            if other.get_user(name) is None:
                other.create_user(name, user.password, user.user_type, user.user_status)
            else:
                other.update_user(name, user.password, user.user_type, user.user_status)
            copied.append(name)
        return copied

    def copy_acls_to(self, other: AuthManager, subjects: Iterable[Subject | str] | None = None) -> list[str]:
        """Merge each subject's ACL into the target (whose user must exist there): all or nothing, so a
        missing user is refused before any ACL is written."""
        if subjects is None:
            acls = self.list_acls()
        else:
            acls = []
            for s in subjects:
                acl = self.get_acl(s)
                if acl is not None:
                    acls.append(acl)
        missing = [acl.subject.key for acl in acls if other.get_user(acl.subject.name) is None]
        if missing:
            raise AuthMetadataError(f"The subject of {', '.join(missing)} is not exist.")
        for acl in acls:
            other.create_acl(acl)
        return [a.subject.key for a in acls]

    # -- per request -------------------------------------------------------------------------

    def authenticate(self, context: AuthenticationContext) -> User | None:
        """None when authentication is off or the request code is whitelisted; raises on failure."""
        if not self.config.authentication_enabled:
            return None
        if context.request_code and context.request_code in self.config.authentication_whitelist_codes():
            return None
        return self.authenticator.authenticate(context)

    def authorize(self, context: AuthorizationContext) -> Explanation | None:
        """None when authorization is off or whitelisted; raises AuthorizationError when denied."""
        if not self.config.authorization_enabled:
            return None
        if context.request_code and context.request_code in self.config.authorization_whitelist_codes():
            return None
        return self.authorizer.authorize(context)

    def authorize_request(
        self,
        subject: Subject | str | None,
        source_ip: str | None,
        request: str,
        *,
        request_code: int | str | None = None,
        channel_id: str | None = None,
        topic: str | None = None,
        group: str | None = None,
        topics: Iterable[str] = (),
        subscriptions: Mapping[str, Iterable[str]] | None = None,
    ) -> None:
        """Every permission a named remoting request demands (see authorization.checks_for_request)."""
        if not self.config.authorization_enabled:
            return
        checks = checks_for_request(
            request, topic=topic, group=group, topics=topics, subscriptions=subscriptions,
            cluster_name=self.config.cluster_name,
        )
        for resource, actions in checks:
            self.authorize(AuthorizationContext(
                subject, resource, actions, source_ip, request_code if request_code is not None else request, channel_id,
            ))

    def authorize_admin(
        self,
        subject: Subject | str | None,
        action: Action | str,
        source_ip: str | None,
        request_code: int | str | None = None,
        channel_id: str | None = None,
    ) -> Explanation | None:
        """User/ACL administration: a Super user, or a policy granting ``action`` on Cluster:<name>."""
        resource = Resource.of_cluster(self.config.cluster_name)
        return self.authorize(AuthorizationContext(subject, resource, action, source_ip, request_code, channel_id))

    def explain(
        self,
        subject: Subject | str,
        resource: Resource | str,
        action: Action | str | Iterable[Action | str],
        source_ip: str | None,
    ) -> Explanation:
        """Which entry decides (and why), or that none matches — from the current tables."""
        return self.authorizer.explain(
            AuthorizationContext(Subject.parse(subject), resource, normalize_actions(action), source_ip)
        )


E = TypeVar("E", UserType, UserStatus)


def _username(username: str | None) -> str:
    """The request's username, trimmed; a blank one is INVALID_PARAMETER, as AuthenticationMetadataManager answers."""
    name = (username or "").strip()
    if not name:
        raise AuthMetadataError("The username is blank", code=ResponseCode.INVALID_PARAMETER)
    return name


def _enum(enum_type: type[E], value: E | str | None) -> E | None:
    if value is None or isinstance(value, enum_type):
        return value
    try:
        return enum_type.parse(str(value))
    except ValueError as e:
        raise AuthMetadataError(str(e)) from None
