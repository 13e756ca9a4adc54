"""Exceptions of the auth layer, each carrying the response code RocketMQ answers with.

Why one module: the remoting adapter, the gRPC adapter and the admin handlers all turn these into
wire responses, so the code (remoting) and the status (gRPC) travel with the exception instead of
being guessed again by every caller. Messages never contain passwords or secret keys.
"""

from __future__ import annotations

from broker_core.common.response_code import ResponseCode

# gRPC status: upstream maps both authentication and authorization failures to UNAUTHORIZED.
GRPC_UNAUTHORIZED = 40100

GENERIC_SYSTEM_ERROR_REMARK = "An system error occurred, please try again later."


class AuthError(Exception):
    """Base class: ``message`` is precise, ``remark`` is what RocketMQ puts on the wire."""

    def __init__(self, message: str, code: int = ResponseCode.NO_PERMISSION, remark: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.code = code
        self.remark = message if remark is None else remark
        self.grpc_code = GRPC_UNAUTHORIZED


class AuthenticationError(AuthError):
    """The caller could not be identified (no user, disabled user, bad or missing signature)."""


class AuthorizationError(AuthError):
    """The identified caller may not perform the action on the resource."""


class AuthMetadataError(AuthError):
    """A user/ACL administration request is invalid (blank names, unknown subject, bad entry...)."""


class AuthStoreError(AuthError):
    """The durable users/ACLs files cannot be read; nothing has been written."""

    def __init__(self, message: str) -> None:
        super().__init__(message, code=ResponseCode.SYSTEM_ERROR, remark=GENERIC_SYSTEM_ERROR_REMARK)


class AuthStoreWriteError(AuthError):
    """The users/ACLs file could not be written (a full disk); the change did not happen. The remark
    is the precise text: only an administrator changes users and ACLs, and "disk full: cannot write
    <store>/config/users.json" is what they must act on."""

    def __init__(self, message: str) -> None:
        super().__init__(message, code=ResponseCode.SYSTEM_ERROR, remark=message)


class AuthConfigError(ValueError):
    """A broker auth property has a value that cannot be used."""
