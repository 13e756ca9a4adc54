"""ACL 2.0 for rmqops: users, policies, request signatures, authorization and the audit log.

Callers use :class:`AuthManager` (one per broker / store) plus the context types; the remaining
modules are importable for adapters that need the pieces (signer, converter, request mapping).
"""

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

__all__ = [
    "Acl", "Action", "AuditLog", "AuthConfig", "AuthConfigError", "AuthError", "AuthManager",
    "AuthMetadataError", "AuthStoreError", "AuthenticationContext", "AuthenticationError",
    "AuthorizationContext", "AuthorizationError", "Decision", "Explanation", "Policy", "PolicyEntry",
    "PolicyType", "Resource", "ResourcePattern", "ResourceType", "Strategy", "Subject", "User",
    "UserStatus", "UserType", "checks_for_grpc", "checks_for_request", "source_ip_of",
]
