"""Authentication: who is calling, proven by a signature made with the user's password.

Why this module exists: both protocol adapters turn their request into one AuthenticationContext
(remoting: AccessKey + Signature over sorted extFields + body; gRPC: the authorization header over
x-mq-date-time) and hand it to one Authenticator, which applies RocketMQ's checks in RocketMQ's order
with RocketMQ's messages, writes the audit line, and — in the stateful strategy — remembers a result
per connection until users change.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from broker_core.auth.audit import AuditLog
from broker_core.auth.cache import CachedDecisions, DecisionCache, stateful_cache
from broker_core.auth.config import Strategy
from broker_core.auth.errors import AuthenticationError
from broker_core.auth.model import User
from broker_core.auth.signer import (
    ACCESS_KEY,
    GRPC_AUTHORIZATION,
    GRPC_DATE_TIME,
    SIGNATURE,
    GrpcAuthorizationFormatError,
    parse_grpc_authorization,
    remoting_content,
    remoting_signature,
    signatures_equal,
)

USERNAME_NULL = "username cannot be null."
CHECK_SIGNATURE_FAILED = "check signature failed."
DATETIME_NULL = "datetime is null"  # (upstream's text, no full stop) a signature without the x-mq-date-time header it signs


@dataclass(frozen=True)
class AuthenticationContext:
    """What a request claims: the username, its Base64 signature and the exact signed bytes."""

    username: str | None
    signature: str | None
    content: bytes
    request_code: str | None = None
    channel_id: str | None = None
    # Set when the request was malformed before a username could be read (gRPC header errors).
    format_error: str | None = None

    @classmethod
    def from_remoting(
        cls,
        ext_fields: Mapping[str, str | None],
        body: bytes | None,
        request_code: int | str | None = None,
        version: int | None = None,
        channel_id: str | None = None,
    ) -> AuthenticationContext:
        return cls(
            username=ext_fields.get(ACCESS_KEY) or None,
            signature=ext_fields.get(SIGNATURE),
            content=remoting_content(ext_fields, body, version=version),
            request_code=None if request_code is None else str(request_code),
            channel_id=channel_id,
        )

    @classmethod
    def from_grpc(
        cls,
        metadata: Mapping[str, str],
        rpc_name: str | None = None,
        channel_id: str | None = None,
    ) -> AuthenticationContext:
        """Header names are matched case-insensitively (gRPC lower-cases them anyway)."""
        headers = {k.lower(): v for k, v in metadata.items()}
        header = headers.get(GRPC_AUTHORIZATION, "")
        date_time = headers.get(GRPC_DATE_TIME, "")
        if not header:
            return cls(None, None, b"", rpc_name, channel_id)
        try:
            credential = parse_grpc_authorization(header)
        except GrpcAuthorizationFormatError as e:
            return cls(None, None, b"", rpc_name, channel_id, format_error=str(e))
        if not date_time:
            return cls(credential.access_key or None, None, b"", rpc_name, channel_id, format_error=DATETIME_NULL)
        return cls(
            username=credential.access_key or None,
            signature=credential.signature_base64(),
            content=date_time.encode("utf-8"),
            request_code=rpc_name,
            channel_id=channel_id,
        )


class Authenticator(CachedDecisions):
    """Applies RocketMQ's authentication checks; ``get_user`` reads the current user table."""

    def __init__(
        self,
        get_user: Callable[[str], User | None],
        audit: AuditLog,
        strategy: Strategy = Strategy.STATELESS,
        clock: Callable[[], int] | None = None,
        cache_max_entries: int = 10000,
        cache_ttl_ms: int = 60_000,
    ) -> None:
        self._get_user = get_user
        self._audit = audit
        self.strategy = strategy
        self._cache: DecisionCache[AuthenticationError | bool] | None = stateful_cache(
            strategy, cache_max_entries, cache_ttl_ms, clock)

    def authenticate(self, context: AuthenticationContext) -> User:
        """Return the authenticated user or raise AuthenticationError (code 16 NO_PERMISSION)."""
        if self._cache is None or not context.channel_id:
            return self._evaluate(context)
        key = (context.channel_id, context.username or "")
        cached = self._cache.get(key)
        if isinstance(cached, AuthenticationError):
            self._audit.authentication(context.username, context.signature, success=False)
            raise cached
        if cached is True:
            user = self._get_user(context.username or "")
            if user is not None:
                self._audit.authentication(context.username, context.signature, success=True)
                return user
        try:
            user = self._evaluate(context)
        except AuthenticationError as e:
            self._cache.put(key, e)
            raise
        self._cache.put(key, True)
        return user

    def _evaluate(self, context: AuthenticationContext) -> User:
        try:
            user = self._check(context)
        except AuthenticationError:
            self._audit.authentication(context.username, context.signature, success=False)
            raise
        self._audit.authentication(context.username, context.signature, success=True)
        return user

    def _check(self, context: AuthenticationContext) -> User:
        if not context.username:
            raise AuthenticationError(context.format_error or USERNAME_NULL)
        if context.format_error == DATETIME_NULL:
            # upstream refuses it while building the context, before it looks the user up
            raise AuthenticationError(DATETIME_NULL)
        user = self._get_user(context.username)
        if user is None:
            raise AuthenticationError(f"User:{context.username} is not found.")
        if not user.is_enabled:
            raise AuthenticationError(f"User:{context.username} is disabled.")
        if context.format_error is not None or context.signature is None:
            raise AuthenticationError(CHECK_SIGNATURE_FAILED)
        expected = remoting_signature(user.password, context.content)
        if not signatures_equal(expected, context.signature):
            raise AuthenticationError(CHECK_SIGNATURE_FAILED)
        return user
