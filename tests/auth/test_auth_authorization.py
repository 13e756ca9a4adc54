"""Authorization through AuthManager: errors, request mapping, admin, stateful cache invalidation."""

from __future__ import annotations

import pytest

from broker_core.auth import (
    Acl,
    Action,
    AuthConfig,
    AuthorizationContext,
    AuthorizationError,
    Resource,
    Strategy,
    checks_for_grpc,
    checks_for_request,
    source_ip_of,
)
from broker_core.common.response_code import ResponseCode


@pytest.fixture
def manager(make_manager):
    m = make_manager(AuthConfig(authentication_enabled=True, authorization_enabled=True, cluster_name="C1"))
    m.create_user("alice", "alice-pw-123")
    m.create_user("root", "root-pw-123", "Super")
    return m


def ctx(resource: str, action: str, ip: str = "10.0.0.5:51000", subject: str = "User:alice", channel: str | None = None):
    return AuthorizationContext(subject, resource, action, ip, request_code=10, channel_id=channel)


def test_denied_request_raises_rocketmq_error(manager) -> None:
    with pytest.raises(AuthorizationError) as info:
        manager.authorize(ctx("Topic:T", "Pub"))
    assert info.value.code == ResponseCode.NO_PERMISSION
    assert info.value.remark == "User:alice has no permission to access Topic:T from 10.0.0.5, no matched policies."
    with pytest.raises(AuthorizationError, match=r"^User:nobody not found\.$"):
        manager.authorize(ctx("Topic:T", "Pub", subject="User:nobody"))


def test_source_ip_restrictions_refuse_other_peers(manager) -> None:
    manager.create_acl(Acl.of("User:alice", ["Topic:T"], ["Pub"], "Allow", ["10.0.0.0/24", "2001:db8::/64"]))
    assert manager.authorize(ctx("Topic:T", "Pub", ip="10.0.0.7:1")).allowed
    assert manager.authorize(ctx("Topic:T", "Pub", ip="[2001:db8::5]:8081")).allowed
    with pytest.raises(AuthorizationError, match="from 10.0.1.7, no matched policies"):
        manager.authorize(ctx("Topic:T", "Pub", ip="10.0.1.7:1"))


def test_source_ip_of_strips_ports() -> None:
    assert source_ip_of("10.0.0.5:50001") == "10.0.0.5"
    assert source_ip_of("[::1]:8081") == "::1"
    assert source_ip_of("::1") == "::1"
    assert source_ip_of("10.0.0.5") == "10.0.0.5"


def test_super_user_passes_everything(manager) -> None:
    assert manager.authorize(ctx("Cluster:C1", "Update", subject="User:root")).allowed
    assert manager.authorize_admin("User:root", Action.UPDATE, "1.2.3.4") is not None


def test_admin_requires_super_or_cluster_policy(manager) -> None:
    with pytest.raises(AuthorizationError, match="access Cluster:C1"):
        manager.authorize_admin("User:alice", "Update", "10.0.0.5")
    manager.create_acl(Acl.of("User:alice", ["Cluster:C1"], ["Get"]))
    assert manager.authorize_admin("User:alice", "Get", "10.0.0.5").allowed
    with pytest.raises(AuthorizationError):
        manager.authorize_admin("User:alice", "Update", "10.0.0.5")


def test_authorize_request_uses_the_shared_mapping(manager) -> None:
    manager.create_acl(Acl.of("User:alice", ["Topic:T"], ["Sub"]))
    with pytest.raises(AuthorizationError, match="Group:G"):
        manager.authorize_request("User:alice", "10.0.0.5", "PULL_MESSAGE", topic="T", group="G")
    manager.create_acl(Acl.of("User:alice", ["Group:G"], ["Sub"]))
    manager.authorize_request("User:alice", "10.0.0.5", "PULL_MESSAGE", topic="T", group="G", request_code=11)
    with pytest.raises(AuthorizationError, match="Topic:T"):
        manager.authorize_request("User:alice", "10.0.0.5", "SEND_MESSAGE", topic="T")


def test_request_mapping_table() -> None:
    t, g = Resource.of_topic("T"), Resource.of_group("G")
    pub, sub = (Action.PUB,), (Action.SUB,)
    assert checks_for_request("SEND_MESSAGE_V2", topic="T", group="PG") == [(t, pub)]
    assert checks_for_request("SEND_MESSAGE", topic="%RETRY%G", group="G") == [(g, sub)]
    assert checks_for_request("PULL_MESSAGE", topic="T", group="G") == [(t, sub), (g, sub)]
    assert checks_for_request("PULL_MESSAGE", topic="%RETRY%G", group="G") == [(g, sub)]
    assert checks_for_request("QUERY_MESSAGE", topic="T") == [(t, (Action.SUB, Action.GET))]
    assert checks_for_request("GET_MAX_OFFSET", topic="T") == [(t, (Action.GET,))]
    assert checks_for_request("QUERY_CONSUMER_OFFSET", topic="T", group="G") == [
        (t, (Action.SUB, Action.GET)), (g, (Action.SUB, Action.GET))]
    assert checks_for_request("UPDATE_CONSUMER_OFFSET", topic="T", group="G") == [
        (t, (Action.SUB, Action.UPDATE)), (g, (Action.SUB, Action.UPDATE))]
    assert checks_for_request("POP_MESSAGE", topic="T", group="G") == [(g, sub), (t, sub)]
    assert checks_for_request("ACK_MESSAGE", topic="T", group="G") == [(g, sub), (t, sub)]
    assert checks_for_request("HEART_BEAT", subscriptions={"G": ["T", "%RETRY%G"]}) == [(g, sub), (t, sub)]
    assert checks_for_request("UPDATE_AND_CREATE_TOPIC", topic="T") == [(t, (Action.CREATE,))]
    assert checks_for_request("DELETE_TOPIC_IN_BROKER", topic="T") == [(t, (Action.DELETE,))]
    assert checks_for_request("DELETE_SUBSCRIPTIONGROUP", group="G") == [(g, (Action.DELETE,))]
    assert checks_for_request("INVOKE_BROKER_TO_RESET_OFFSET", topic="T", group="G") == [
        (g, (Action.UPDATE,)), (t, (Action.UPDATE,))]
    # CloneGroupOffsetRequestHeader: Update on destGroup, then on topic (a retry topic: its group); the
    # source group is read, not annotated, and a blank topic (every topic of the source) names none
    assert checks_for_request("CLONE_GROUP_OFFSET", topic="T", group="G") == [
        (g, (Action.UPDATE,)), (t, (Action.UPDATE,))]
    assert checks_for_request("CLONE_GROUP_OFFSET", group="G") == [(g, (Action.UPDATE,))]
    assert checks_for_request("AUTH_CREATE_USER", cluster_name="C1") == [(Resource.of_cluster("C1"), (Action.UPDATE,))]
    assert checks_for_request("AUTH_LIST_ACL", cluster_name="C1") == [(Resource.of_cluster("C1"), (Action.GET,))]
    assert checks_for_request("END_TRANSACTION") == []
    assert checks_for_request("GET_BROKER_CONFIG") == []
    with pytest.raises(ValueError, match="no authorization mapping"):
        checks_for_request("SEND_MESAGE", topic="T")
    # a refusal (NO_PERMISSION on the wire), not a server error: a raw client can send an empty name
    with pytest.raises(AuthorizationError, match="needs a topic"):
        checks_for_request("SEND_MESSAGE")


def test_grpc_mapping_table() -> None:
    t, g = Resource.of_topic("T"), Resource.of_group("G")
    assert checks_for_grpc("SendMessage", topic="T") == [(t, (Action.PUB,))]
    assert checks_for_grpc("QueryRoute", topic="T") == [(t, (Action.PUB, Action.SUB))]
    assert checks_for_grpc("ReceiveMessage", group="G", topic="T") == [(g, (Action.SUB,)), (t, (Action.SUB,))]
    assert checks_for_grpc("Heartbeat", group="G") == []
    assert checks_for_grpc("Heartbeat", group="G", is_consumer=True) == [(g, (Action.SUB,))]
    assert checks_for_grpc("NotifyClientTermination", group="") == []
    assert checks_for_grpc("Telemetry", publishing_topics=["T"]) == [(t, (Action.PUB,))]
    assert checks_for_grpc("Telemetry", group="G", subscription_topics=["T"]) == [(g, (Action.SUB,)), (t, (Action.SUB,))]


def test_stateful_cache_is_invalidated_when_acl_or_user_changes(make_manager, clock) -> None:
    config = AuthConfig(authorization_enabled=True, authorization_strategy=Strategy.STATEFUL)
    m = make_manager(config)
    m.create_user("alice", "alice-pw-123")
    calls: list[tuple[str, str]] = []
    m.add_change_listener(lambda kind, key: calls.append((kind, key)))
    with pytest.raises(AuthorizationError):
        m.authorize(ctx("Topic:T", "Pub", channel="ch-1"))
    m.create_acl(Acl.of("User:alice", ["Topic:T"], ["Pub"]))
    assert m.authorize(ctx("Topic:T", "Pub", channel="ch-1")).allowed
    assert calls == [("acl", "User:alice")]
    # Cached per (channel, subject, resource, actions, ip): a change behind the cache's back is not seen...
    m.authorizer.get_acl = lambda subject: None  # type: ignore[method-assign]
    assert m.authorize(ctx("Topic:T", "Pub", channel="ch-1")).allowed
    with pytest.raises(AuthorizationError):
        m.authorize(ctx("Topic:T", "Pub", channel="ch-2"))
    m.authorizer.get_acl = m._acls.get  # type: ignore[method-assign]
    # ... but every real change through the manager is.
    m.delete_acl("User:alice", "Topic:T")
    with pytest.raises(AuthorizationError):
        m.authorize(ctx("Topic:T", "Pub", channel="ch-1"))
    m.create_acl(Acl.of("User:alice", ["Topic:T"], ["Pub"]))
    assert m.authorize(ctx("Topic:T", "Pub", channel="ch-1")).allowed
    m.update_user("alice", user_status="disable")
    with pytest.raises(AuthorizationError, match="is disabled"):
        m.authorize(ctx("Topic:T", "Pub", channel="ch-1"))
    # Entries also expire (statefulAuthorizationCacheExpiredSecond = 60).
    m.update_user("alice", user_status="enable")
    assert m.authorize(ctx("Topic:T", "Pub", channel="ch-1")).allowed
    m.authorizer.get_acl = lambda subject: None  # type: ignore[method-assign]
    clock.advance(60_000)
    with pytest.raises(AuthorizationError):
        m.authorize(ctx("Topic:T", "Pub", channel="ch-1"))


def test_authorization_off_allows_without_checks(make_manager) -> None:
    m = make_manager(AuthConfig(authentication_enabled=True), store="off")
    assert m.authorize(ctx("Topic:T", "Pub", subject="User:ghost")) is None
    assert m.authorize_admin(None, "Update", "1.1.1.1") is None


def test_explain_says_which_entry_decides(manager) -> None:
    manager.create_acl(Acl.of("User:alice", ["Topic:*"], ["Pub"], "Deny"))
    manager.create_acl(Acl.of("User:alice", ["Topic:ord*"], ["Pub"], "Allow"))
    ex = manager.explain("User:alice", "Topic:orders", "Pub", "10.0.0.5")
    assert ex.allowed and ex.entry is not None and ex.entry.resource.key == "Topic:ord*"
    assert "1 less specific candidate(s) ignored" in str(ex)
    none = manager.explain("User:alice", "Group:g", "Sub", "10.0.0.5")
    assert not none.allowed and none.entry is None and "no entry matches" in str(none)
    root = manager.explain("User:root", "Group:g", "Sub", "10.0.0.5")
    assert root.allowed and "Super user" in root.reason
