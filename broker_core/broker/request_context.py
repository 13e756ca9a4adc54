"""Who is asking: what every Broker operation may carry for ACL 2.0 checks.

Why: the remoting and gRPC adapters authenticate a request from its signature and then need every
operation to authorize the same subject and source address; in-process callers (mqadmin's LocalBrokerClient on a
local store) pass no context and are trusted, like a shell on the broker host.
"""

from __future__ import annotations

from dataclasses import dataclass

from broker_core.auth.authentication import AuthenticationContext


@dataclass(frozen=True, slots=True)
class RequestContext:
    subject: str | None = None  # username ("alice" or "User:alice"); filled from authentication if absent
    source_ip: str | None = None  # peer address, with or without port
    channel_id: str | None = None
    request_code: int | str | None = None
    authentication: AuthenticationContext | None = None
