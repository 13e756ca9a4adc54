"""Authentication through AuthManager: RocketMQ's rejections, both protocols, stateful caching."""

from __future__ import annotations

import pytest

from broker_core.auth import (
    AuthConfig,
    AuthenticationContext,
    AuthenticationError,
    Strategy,
    UserStatus,
)
from broker_core.auth.errors import GRPC_UNAUTHORIZED
from broker_core.auth.signer import sign_grpc_metadata, sign_remoting
from broker_core.common.response_code import ResponseCode


def remoting_ctx(fields: dict[str, str], body: bytes | None = None, channel: str | None = None) -> AuthenticationContext:
    return AuthenticationContext.from_remoting(fields, body, request_code=10, version=479, channel_id=channel)


@pytest.fixture
def manager(make_manager):
    m = make_manager()
    m.create_user("alice", "alice-secret-1")
    return m


def test_valid_remoting_signature_authenticates(manager) -> None:
    fields = sign_remoting({"topic": "T", "queueId": "0"}, b"hello", "alice", "alice-secret-1")
    user = manager.authenticate(remoting_ctx(fields, b"hello"))
    assert user is not None and user.username == "alice"


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"topic": "T"}, "username cannot be null."),
        (sign_remoting({"topic": "T"}, None, "bob", "whatever"), "User:bob is not found."),
        (sign_remoting({"topic": "T"}, None, "alice", "wrong-key"), "check signature failed."),
        ({"topic": "T", "AccessKey": "alice"}, "check signature failed."),
    ],
)
def test_rejections_carry_rocketmq_code_and_message(manager, fields: dict[str, str], message: str) -> None:
    with pytest.raises(AuthenticationError) as info:
        manager.authenticate(remoting_ctx(fields))
    assert info.value.code == ResponseCode.NO_PERMISSION
    assert info.value.remark == message
    assert info.value.grpc_code == GRPC_UNAUTHORIZED
    assert "alice-secret-1" not in str(info.value)


def test_disabled_user_rejected_on_next_request(manager) -> None:
    fields = sign_remoting({"topic": "T"}, None, "alice", "alice-secret-1")
    assert manager.authenticate(remoting_ctx(fields)) is not None
    manager.update_user("alice", user_status=UserStatus.DISABLE)
    with pytest.raises(AuthenticationError, match=r"^User:alice is disabled\.$"):
        manager.authenticate(remoting_ctx(fields))


def test_authentication_off_or_whitelisted_skips_checks(make_manager) -> None:
    off = make_manager(AuthConfig(), store="off")
    assert off.authenticate(remoting_ctx({"topic": "T"})) is None
    wl = make_manager(AuthConfig(authentication_enabled=True, authentication_whitelist="10, 11"), store="wl")
    assert wl.authenticate(remoting_ctx({"topic": "T"})) is None


def test_grpc_header_authenticates_and_rejects(manager) -> None:
    md = sign_grpc_metadata("alice", "alice-secret-1", "20250101T120000Z")
    md["x-mq-client-id"] = "host@1@0@abc"
    assert manager.authenticate(AuthenticationContext.from_grpc(md, "SendMessage")).username == "alice"
    bad = sign_grpc_metadata("alice", "nope", "20250101T120000Z")
    with pytest.raises(AuthenticationError, match="check signature failed"):
        manager.authenticate(AuthenticationContext.from_grpc(bad, "SendMessage"))
    with pytest.raises(AuthenticationError, match=r"username cannot be null\."):
        manager.authenticate(AuthenticationContext.from_grpc({}, "SendMessage"))
    with pytest.raises(AuthenticationError, match=r"username cannot be null\."):
        empty = sign_grpc_metadata("", "", "20250101T120000Z")
        manager.authenticate(AuthenticationContext.from_grpc(empty, "SendMessage"))
    no_date = {"authorization": md["authorization"]}
    with pytest.raises(AuthenticationError, match=r"^datetime is null$"):  # upstream's builder refuses it first
        manager.authenticate(AuthenticationContext.from_grpc(no_date, "SendMessage"))
    unknown_no_date = {"authorization": sign_grpc_metadata("bob", "x", "20250101T120000Z")["authorization"]}
    with pytest.raises(AuthenticationError, match=r"^datetime is null$"):
        manager.authenticate(AuthenticationContext.from_grpc(unknown_no_date, "SendMessage"))


def test_stateful_authentication_caches_per_channel_and_invalidates_on_user_change(make_manager, clock) -> None:
    config = AuthConfig(authentication_enabled=True, authentication_strategy=Strategy.STATEFUL)
    m = make_manager(config)
    m.create_user("alice", "alice-secret-1")
    good = sign_remoting({"topic": "T"}, None, "alice", "alice-secret-1")
    assert m.authenticate(remoting_ctx(good, channel="ch-1")) is not None
    # Same connection: the first result stands (RocketMQ's stateful trade-off) ...
    stale = sign_remoting({"topic": "T"}, None, "alice", "old-secret")
    assert m.authenticate(remoting_ctx(stale, channel="ch-1")) is not None
    # ... but never on another connection,
    with pytest.raises(AuthenticationError):
        m.authenticate(remoting_ctx(stale, channel="ch-2"))
    # and a user change drops every cached result.
    m.update_user("alice", user_status="disable")
    with pytest.raises(AuthenticationError, match="is disabled"):
        m.authenticate(remoting_ctx(good, channel="ch-1"))
    m.update_user("alice", user_status="enable")
    assert m.authenticate(remoting_ctx(good, channel="ch-1")) is not None
    # Cached entries expire after statefulAuthenticationCacheExpiredSecond.
    assert m.authenticate(remoting_ctx(stale, channel="ch-1")) is not None
    clock.advance(60_000)
    with pytest.raises(AuthenticationError):
        m.authenticate(remoting_ctx(stale, channel="ch-1"))
