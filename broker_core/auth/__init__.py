"""ACL 2.0 for rmqops: users, policies, request signatures, authorization and the audit log.

Callers use :class:`AuthManager` (one per broker / store) plus the context types; the remaining
modules are importable for adapters that need the pieces (signer, converter, request mapping).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from broker_core.common.lazy_exports import lazy_exports

if TYPE_CHECKING:
    from broker_core.auth.audit import AuditLog
    from broker_core.auth.authentication import AuthenticationContext
    from broker_core.auth.authorization import (
        AuthorizationContext,
        checks_for_grpc,
        checks_for_request,
        source_ip_of,
    )
    from broker_core.auth.config import AuthConfig, Strategy
    from broker_core.auth.errors import (
        AuthConfigError,
        AuthenticationError,
        AuthError,
        AuthMetadataError,
        AuthorizationError,
        AuthStoreError,
    )
    from broker_core.auth.evaluator import Explanation
    from broker_core.auth.manager import AuthManager
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
        UserStatus,
        UserType,
    )

# The names below load lazily (PEP 562): a tool that needs only ``broker_core.auth.model`` (mqadmin's
# start-up) must not pay for the manager, the signer and YAML.
_EXPORTS = {
    "AuditLog": "broker_core.auth.audit",
    "AuthenticationContext": "broker_core.auth.authentication",
    "AuthorizationContext": "broker_core.auth.authorization",
    "checks_for_grpc": "broker_core.auth.authorization",
    "checks_for_request": "broker_core.auth.authorization",
    "source_ip_of": "broker_core.auth.authorization",
    "AuthConfig": "broker_core.auth.config",
    "Strategy": "broker_core.auth.config",
    "AuthConfigError": "broker_core.auth.errors",
    "AuthenticationError": "broker_core.auth.errors",
    "AuthError": "broker_core.auth.errors",
    "AuthMetadataError": "broker_core.auth.errors",
    "AuthorizationError": "broker_core.auth.errors",
    "AuthStoreError": "broker_core.auth.errors",
    "Explanation": "broker_core.auth.evaluator",
    "AuthManager": "broker_core.auth.manager",
    "Acl": "broker_core.auth.model",
    "Action": "broker_core.auth.model",
    "Decision": "broker_core.auth.model",
    "Policy": "broker_core.auth.model",
    "PolicyEntry": "broker_core.auth.model",
    "PolicyType": "broker_core.auth.model",
    "Resource": "broker_core.auth.model",
    "ResourcePattern": "broker_core.auth.model",
    "ResourceType": "broker_core.auth.model",
    "Subject": "broker_core.auth.model",
    "User": "broker_core.auth.model",
    "UserStatus": "broker_core.auth.model",
    "UserType": "broker_core.auth.model",
}


__getattr__ = lazy_exports(__name__, _EXPORTS, globals())


__all__ = [
    "Acl", "Action", "AuditLog", "AuthConfig", "AuthConfigError", "AuthError", "AuthManager",
    "AuthMetadataError", "AuthStoreError", "AuthenticationContext", "AuthenticationError",
    "AuthorizationContext", "AuthorizationError", "Decision", "Explanation", "Policy", "PolicyEntry",
    "PolicyType", "Resource", "ResourcePattern", "ResourceType", "Strategy", "Subject", "User",
    "UserStatus", "UserType", "checks_for_grpc", "checks_for_request", "source_ip_of",
]
