"""ACL 2.0 on every public Broker operation (authentication + authorization enabled).

Each operation in OPS names the (resource, action) entries the spec (remoting-and-mqadmin D.4)
demands of it. For every one of them, with signed requests: a normal user without policies is
refused (NoPermissionError, code 16) unless the operation is authentication-only; the exact policy
makes it pass; the same policy from a source IP outside its range is refused; a super user always
passes; bad credentials never pass. ``test_every_public_operation_is_classified`` makes a newly added
Broker method fail until it is put in OPS (with its check) or, for in-process plumbing, in EXEMPT.
"""

from __future__ import annotations

import asyncio
import inspect
import itertools
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from broker_core.auth.authentication import AuthenticationContext
from broker_core.auth.converter import acl_from_info
from broker_core.auth.model import User, UserStatus, UserType
from broker_core.auth.signer import sign_remoting
from broker_core.broker.broker import Broker
from broker_core.broker.client_registry import ConsumerData, SubscriptionData
from broker_core.broker.errors import BrokerError, NoPermissionError
from broker_core.broker.queue_lock import MessageQueue
from broker_core.broker.request_context import RequestContext
from broker_core.broker.wait_steps import drive_blocking
from broker_core.store.codec.batch import BatchItem
from broker_core.store.codec.sys_flag import TRANSACTION_COMMIT_TYPE
from broker_core.store.subscription_group_config import SubscriptionGroupConfig
from broker_core.store.topic_config import TopicConfig

from .conftest import FakeClock, small_config

T, G, G2, PG = "AclTopic", "AclGroup", "AclGroup2", "AclProducers"
ALLOWED_NET, INSIDE, OUTSIDE = "10.0.0.0/24", "10.0.0.5:40000", "192.168.7.7:40000"
ALICE, ALICE_PW = "alice", "alice-secret-1"
ROOT, ROOT_PW = "root", "root-secret-1"

Op = Callable[[Broker, RequestContext], Any]


def _fresh_topic(b: Broker, name: str) -> str:
    b.create_or_update_topic(name, 1, 1)
    return name


def _popped_handle(b: Broker) -> str:
    b.send_message(T, b"p", queue_id=0)
    res = b.pop_message(G, T, invisible_time_ms=60_000)
    return res.messages[0].properties["POP_CK"]


def _half(b: Broker):  # -> SendResult
    return b.send_message(T, b"tx", {"TRAN_MSG": "true", "PGROUP": PG}, queue_id=0, producer_group=PG)


def _end(b: Broker, a: RequestContext):  # -> EndTransactionResult
    h = _half(b)
    return b.end_transaction(PG, h.queue_offset, h.commit_log_offset, TRANSACTION_COMMIT_TYPE, auth=a)


def _send_back(b: Broker, a: RequestContext):  # -> SendBackResult
    offset = b.send_message(T, b"sb", queue_id=0).commit_log_offset
    return b.consumer_send_back(G, offset, auth=a)


_names = itertools.count()
CLUSTER = "Cluster:DefaultCluster"
BOB_ACL = {"subject": "User:bob", "policies": [{"entries": [
    {"resource": "Topic:BobT", "actions": ["Pub"], "decision": "Allow"}]}]}


def _user(b: Broker, name: str | None = None) -> str:
    """A user to administer (created without auth); a fresh name when none is given."""
    name = name or f"user{next(_names)}"
    if b.get_user(name) is None:
        b.create_user(name, "pw")
    return name


def _bob_acl(b: Broker) -> str:
    _user(b, "bob")
    b.create_acl(acl_from_info(BOB_ACL))
    return "User:bob"


# name -> (call, [(resource, action)] the spec demands; [] = authentication only)
OPS: dict[str, tuple[Op, list[tuple[str, str]]]] = {
    "create_or_update_topic": (lambda b, a: b.create_or_update_topic("AclNew", 1, 1, auth=a), [("Topic:AclNew", "Create")]),
    "delete_topic": (lambda b, a: b.delete_topic(_fresh_topic(b, "AclDel"), auth=a), [("Topic:AclDel", "Delete")]),
    "get_topic": (lambda b, a: b.get_topic(T, auth=a), [(f"Topic:{T}", "Get")]),
    "list_topics": (lambda b, a: b.list_topics(auth=a), []),
    "create_or_update_subscription_group": (lambda b, a: b.create_or_update_subscription_group(G2, auth=a), []),
    "create_or_update_subscription_group_list": (
        lambda b, a: b.create_or_update_subscription_group_list([SubscriptionGroupConfig(G2)], auth=a), []),
    "create_or_update_topic_list": (
        lambda b, a: b.create_or_update_topic_list([TopicConfig("AclNewA", 1, 1), TopicConfig("AclNewB", 1, 1)], auth=a),
        [("Topic:AclNewA", "Create"), ("Topic:AclNewB", "Create")]),
    "delete_subscription_group": (
        lambda b, a: (b.create_or_update_subscription_group(G2), b.delete_subscription_group(G2, auth=a)),
        [(f"Group:{G2}", "Delete")]),
    "get_subscription_group": (lambda b, a: b.get_subscription_group(G, auth=a), [(f"Group:{G}", "Get")]),
    "list_subscription_groups": (lambda b, a: b.list_subscription_groups(auth=a), []),
    "send_message": (lambda b, a: b.send_message(T, b"x", queue_id=0, auth=a), [(f"Topic:{T}", "Pub")]),
    "send_batch": (lambda b, a: b.send_batch(T, [BatchItem(b"1"), BatchItem(b"2")], queue_id=0, auth=a),
                   [(f"Topic:{T}", "Pub")]),
    "pull_message": (lambda b, a: b.pull_message(G, T, 0, 0, auth=a), [(f"Topic:{T}", "Sub"), (f"Group:{G}", "Sub")]),
    "lock_batch_mq": (lambda b, a: b.lock_batch_mq(G, "client-1", [MessageQueue(T, "broker-a", 0)], auth=a),
                      [(f"Group:{G}", "Sub"), (f"Topic:{T}", "Sub")]),
    "unlock_batch_mq": (lambda b, a: b.unlock_batch_mq(G, "client-1", [(T, 0)], auth=a),
                        [(f"Group:{G}", "Sub"), (f"Topic:{T}", "Sub")]),
    "commit_offset": (lambda b, a: b.commit_offset(G, T, 0, 0, auth=a), [(f"Topic:{T}", "Update"), (f"Group:{G}", "Update")]),
    "query_offset": (lambda b, a: b.query_offset(G, T, 0, auth=a), [(f"Topic:{T}", "Get"), (f"Group:{G}", "Get")]),
    "plan_reset_offset": (lambda b, a: b.plan_reset_offset(G, T, offset=0, auth=a),
                          [(f"Group:{G}", "Update"), (f"Topic:{T}", "Update")]),
    "apply_reset_offset": (lambda b, a: b.apply_reset_offset(G, b.plan_reset_offset(G, T, offset=0), auth=a),
                           [(f"Group:{G}", "Update"), (f"Topic:{T}", "Update")]),
    "reset_offset": (lambda b, a: b.reset_offset(G, T, offset=0, auth=a), [(f"Group:{G}", "Update"), (f"Topic:{T}", "Update")]),
    "plan_skip_accumulated_message": (lambda b, a: b.plan_skip_accumulated_message(G, T, auth=a),
                                      [(f"Group:{G}", "Update"), (f"Topic:{T}", "Update")]),
    "skip_accumulated_message": (lambda b, a: b.skip_accumulated_message(G, T, auth=a),
                                 [(f"Group:{G}", "Update"), (f"Topic:{T}", "Update")]),
    "clone_group_offset": (lambda b, a: b.clone_group_offset(G, G2, T, auth=a),
                           [(f"Group:{G2}", "Update"), (f"Topic:{T}", "Update")]),
    "which_group_by_topic": (lambda b, a: b.which_group_by_topic(T, auth=a), [(f"Topic:{T}", "Get")]),
    "which_topic_by_consumer": (lambda b, a: b.which_topic_by_consumer(G, auth=a), [(f"Group:{G}", "Get")]),
    "get_min_offset": (lambda b, a: b.get_min_offset(T, 0, auth=a), [(f"Topic:{T}", "Get")]),
    "get_max_offset": (lambda b, a: b.get_max_offset(T, 0, auth=a), [(f"Topic:{T}", "Get")]),
    "search_offset_by_timestamp": (lambda b, a: b.search_offset_by_timestamp(T, 0, 0, auth=a), [(f"Topic:{T}", "Get")]),
    "view_message": (lambda b, a: b.view_message(b.send_message(T, b"v", queue_id=0).commit_log_offset, auth=a),
                     [(f"Topic:{T}", "Get")]),
    "topic_stats": (lambda b, a: b.topic_stats(T, auth=a), [(f"Topic:{T}", "Get")]),
    "consume_stats": (lambda b, a: b.consume_stats(G, T, auth=a), [(f"Group:{G}", "Get"), (f"Topic:{T}", "Get")]),
    "broker_runtime_info": (lambda b, a: b.broker_runtime_info(auth=a), []),
    "broker_config_properties": (lambda b, a: b.broker_config_properties(auth=a), []),
    "timer_backlog": (lambda b, a: b.timer_backlog(auth=a), []),
    "schedule_stats": (lambda b, a: b.schedule_stats(auth=a), []),
    "transaction_metrics": (lambda b, a: b.transaction_metrics(auth=a), []),
    "store_positions": (lambda b, a: b.store_positions(auth=a), []),
    "transaction_backlog": (lambda b, a: b.transaction_backlog(auth=a), []),
    "pop_message": (lambda b, a: b.pop_message(G, T, invisible_time_ms=60_000, auth=a),
                    [(f"Group:{G}", "Sub"), (f"Topic:{T}", "Sub")]),
    "ack_message": (lambda b, a: b.ack_message(G, T, _popped_handle(b), auth=a), [(f"Group:{G}", "Sub"), (f"Topic:{T}", "Sub")]),
    "batch_ack": (lambda b, a: b.batch_ack(G, T, [_popped_handle(b)], auth=a), [(f"Group:{G}", "Sub"), (f"Topic:{T}", "Sub")]),
    "change_invisible_time": (lambda b, a: b.change_invisible_time(G, T, _popped_handle(b), 5_000, auth=a),
                              [(f"Group:{G}", "Sub"), (f"Topic:{T}", "Sub")]),
    "consumer_send_back": (_send_back, [(f"Group:{G}", "Sub")]),
    "end_transaction": (_end, [(f"Topic:{T}", "Pub")]),
    "pull_message_async": (lambda b, a: asyncio.run(b.pull_message_async(G, T, 0, 0, auth=a)),
                           [(f"Topic:{T}", "Sub"), (f"Group:{G}", "Sub")]),
    "pop_message_async": (lambda b, a: asyncio.run(b.pop_message_async(G, T, invisible_time_ms=60_000, auth=a)),
                          [(f"Group:{G}", "Sub"), (f"Topic:{T}", "Sub")]),
    # checked when called, before a server drives the steps on its workers
    "pull_message_steps": (lambda b, a: drive_blocking(b.pull_message_steps(G, T, 0, 0, auth=a)),
                           [(f"Topic:{T}", "Sub"), (f"Group:{G}", "Sub")]),
    "pop_message_steps": (lambda b, a: drive_blocking(b.pop_message_steps(G, T, invisible_time_ms=60_000, auth=a)),
                          [(f"Group:{G}", "Sub"), (f"Topic:{T}", "Sub")]),
    "query_message": (lambda b, a: b.query_message(T, "k", auth=a), [(f"Topic:{T}", "Get")]),
    "view_message_by_id": (lambda b, a: b.view_message_by_id(b.send_message(T, b"v", queue_id=0).msg_id, auth=a),
                           [(f"Topic:{T}", "Get")]),
    "read_queue": (lambda b, a: b.read_queue(T, 0, 0, group=G, auth=a), [(f"Topic:{T}", "Sub"), (f"Group:{G}", "Sub")]),
    "message_at": (lambda b, a: b.message_at(T, 0, 0, group=G, auth=a), [(f"Topic:{T}", "Sub"), (f"Group:{G}", "Sub")]),
    "heartbeat": (lambda b, a: b.heartbeat("chan-1", "client-1", consumers=[
        ConsumerData(G, subscriptions=(SubscriptionData(T),))], auth=a), [(f"Group:{G}", "Sub"), (f"Topic:{T}", "Sub")]),
    "unregister_client": (lambda b, a: b.unregister_client("chan-1", consumer_group=G, auth=a), [(f"Group:{G}", "Sub")]),
    # authentication only, as RocketMQ's checkClientConfig (a consumer's start-up check of its SQL92)
    "check_client_config": (lambda b, a: b.check_client_config("SQL92", "a > 1", auth=a), []),
    "consumer_ids": (lambda b, a: b.consumer_ids(G, auth=a), [(f"Group:{G}", "Get")]),
    "consumer_connection": (lambda b, a: b.consumer_connection(G, auth=a), [(f"Group:{G}", "Get")]),
    "producer_connection": (lambda b, a: b.producer_connection(PG, auth=a), [(CLUSTER, "Get")]),
    "consumer_running_info_client": (lambda b, a: b.consumer_running_info_client(G, "client-1", auth=a),
                                     [(f"Group:{G}", "Get")]),
    "consumer_status_clients": (lambda b, a: b.consumer_status_clients(G, T, auth=a),
                                [(f"Topic:{T}", "Get"), (f"Group:{G}", "Get")]),
    "message_to_consume_directly": (
        lambda b, a: b.message_to_consume_directly(G, T, b.send_message(T, b"d", queue_id=0).commit_log_offset, auth=a),
        [(f"Group:{G}", "Sub"), (f"Topic:{T}", "Sub")]),
    "authenticate": (lambda b, a: b.authenticate(a), []),
    "authorize_grpc": (lambda b, a: b.authorize_grpc(a, "ReceiveMessage", topic=T, group=G),
                       [(f"Topic:{T}", "Sub"), (f"Group:{G}", "Sub")]),
    "earliest_msg_store_time": (lambda b, a: b.earliest_msg_store_time(T, 0, auth=a), [(f"Topic:{T}", "Get")]),
    "query_consume_queue": (lambda b, a: b.query_consume_queue(T, 0, 0, 1, auth=a, group=G),
                            [(f"Topic:{T}", "Get"), (f"Group:{G}", "Get")]),
    "update_broker_config": (lambda b, a: b.update_broker_config({"brokerPermission": "6"}, auth=a), []),
    "clean_expired_consume_queues": (lambda b, a: b.clean_expired_consume_queues(auth=a), []),
    "delete_expired_commit_log": (lambda b, a: b.delete_expired_commit_log(auth=a), []),
    "clean_unused_topics": (lambda b, a: b.clean_unused_topics(auth=a), []),
    "set_message_request_mode": (lambda b, a: b.set_message_request_mode(T, G, "POP", auth=a), []),
    "view_broker_stats_data": (lambda b, a: b.view_broker_stats_data("TOPIC_PUT_NUMS", T, auth=a), [(CLUSTER, "Get")]),
    "broker_consume_stats": (lambda b, a: b.broker_consume_stats(auth=a), [(CLUSTER, "Get")]),
    "create_user": (lambda b, a: b.create_user(f"new{next(_names)}", "pw", auth=a), [(CLUSTER, "Update")]),
    "update_user": (lambda b, a: b.update_user(_user(b, "bob"), "pw2", auth=a), [(CLUSTER, "Update")]),
    "delete_user": (lambda b, a: b.delete_user(_user(b), auth=a), [(CLUSTER, "Update")]),
    "get_user": (lambda b, a: b.get_user(ALICE, auth=a), [(CLUSTER, "Get")]),
    "list_users": (lambda b, a: b.list_users(auth=a), [(CLUSTER, "Get")]),
    "create_acl": (lambda b, a: b.create_acl(acl_from_info(BOB_ACL), auth=a) if _user(b, "bob") else None,
                   [(CLUSTER, "Update")]),
    "update_acl": (lambda b, a: b.update_acl(acl_from_info(BOB_ACL), auth=a) if _user(b, "bob") else None,
                   [(CLUSTER, "Update")]),
    "delete_acl": (lambda b, a: b.delete_acl(_bob_acl(b), auth=a), [(CLUSTER, "Update")]),
    "get_acl": (lambda b, a: b.get_acl(f"User:{ALICE}", auth=a), [(CLUSTER, "Get")]),
    "list_acls": (lambda b, a: b.list_acls(auth=a), [(CLUSTER, "Get")]),
}

# In-process plumbing a network caller never reaches directly, and pure name helpers.
EXEMPT = {
    "start": "lifecycle", "shutdown": "lifecycle", "persist": "lifecycle", "tick": "lifecycle (service rounds)",
    "put_message_internal": "the broker's own writers", "set_transaction_check_listener": "network-layer wiring",
    "add_transaction_check_listener": "network-layer wiring",
    "add_topic_change_listener": "network-layer wiring",
    "verify_store": "in-process store maintenance (mqadmin verifyStore on a store directory)",
    "lost_found_records": "in-process store maintenance (mqadmin verifyStore --lostFound on a store directory)",
    "registration": "name-server registration (broker to namesrv, not a client request)",
    "topic_config_data_version": "name-server registration (broker to namesrv, not a client request)",
    "announce_namesrv": "mqbroker's start-up wiring (the name servers noted beside the store lock)",
    "message_request_mode": "in-process lookup of what setConsumeMode stored (QUERY_ASSIGNMENT is not served)",
    "retry_topic_of": "name helper", "dlq_topic_of": "name helper", "is_retry_topic": "name helper",
}


def _public_methods() -> set[str]:
    return {n for n, f in inspect.getmembers(Broker, predicate=inspect.isfunction) if not n.startswith("_")}


def test_every_public_operation_is_classified() -> None:
    public = _public_methods()
    assert public - set(OPS) - set(EXEMPT) == set(), "new Broker operation: add it to OPS with its ACL check"
    assert set(OPS) | set(EXEMPT) <= public, "OPS/EXEMPT names a method the Broker no longer has"
    for name in OPS:
        assert "auth" in inspect.signature(getattr(Broker, name)).parameters, f"{name} takes no auth context"


def _signed(user: str, secret: str, source: str) -> RequestContext:
    fields = sign_remoting({"topic": T, "queueId": "0"}, None, user, secret)
    return RequestContext(source_ip=source, authentication=AuthenticationContext.from_remoting(
        fields, None, request_code=10, version=479))


def _grant(b: Broker, entries: list[tuple[str, str]]) -> None:
    b.auth_manager.create_acl(acl_from_info({"subject": f"User:{ALICE}", "policies": [{
        "policyType": "Custom",
        "entries": [{"resource": r, "actions": [act], "sourceIps": [ALLOWED_NET], "decision": "Allow"}
                    for r, act in entries]}]}))


def _assert_refused(op: Op, b: Broker, ctx: RequestContext) -> None:
    with pytest.raises(NoPermissionError) as info:
        op(b, ctx)
    assert info.value.code == 16


def _assert_allowed(op: Op, b: Broker, ctx: RequestContext) -> None:
    try:
        op(b, ctx)
    except BrokerError as e:  # a refusal for another reason still proves authorization passed
        assert not isinstance(e, NoPermissionError), f"refused: {e.message}"


@pytest.fixture
def acl_broker(tmp_path: Path, clock: FakeClock, monkeypatch: pytest.MonkeyPatch):  # -> Iterator[Broker]
    monkeypatch.setenv("ROCKETMQ_LOG_HOME", str(tmp_path / "logs"))
    cfg = small_config(authenticationEnabled="true", authorizationEnabled="true", transactionTimeOut="1000")
    b = Broker(tmp_path / "store", cfg, clock=clock)
    b.create_or_update_topic(T, 1, 1)
    b.create_or_update_subscription_group(G)
    b.create_or_update_subscription_group(G2)
    b.auth_manager.create_user(ALICE, ALICE_PW)
    b.auth_manager.put_user(User(ROOT, ROOT_PW, UserType.SUPER, UserStatus.ENABLE))
    yield b
    b.shutdown()


@pytest.mark.parametrize("name", sorted(OPS))
def test_operation_is_enforced(acl_broker: Broker, name: str) -> None:
    b = acl_broker
    op, needs = OPS[name]
    inside, outside = _signed(ALICE, ALICE_PW, INSIDE), _signed(ALICE, ALICE_PW, OUTSIDE)

    _assert_refused(op, b, _signed(ALICE, "wrong-secret", INSIDE))  # authentication runs for every operation
    _assert_refused(op, b, _signed("mallory", "whatever", INSIDE))
    if needs:
        _assert_refused(op, b, inside)  # no policies at all
        if len(needs) > 1:  # every demanded entry is needed: all but one is still refused
            for i in range(len(needs)):
                _grant(b, needs[:i] + needs[i + 1:])
                _assert_refused(op, b, inside)
                b.auth_manager.delete_acl(f"User:{ALICE}")
        _grant(b, needs)
        _assert_allowed(op, b, inside)
        _assert_refused(op, b, outside)
    else:
        _assert_allowed(op, b, inside)
        _assert_allowed(op, b, outside)
    _assert_allowed(op, b, _signed(ROOT, ROOT_PW, OUTSIDE))


def test_a_disabled_user_is_refused_on_its_next_request(acl_broker: Broker) -> None:
    b = acl_broker
    _grant(b, [(f"Topic:{T}", "Pub")])
    ctx = _signed(ALICE, ALICE_PW, INSIDE)
    assert b.send_message(T, b"ok", queue_id=0, auth=ctx).queue_offset == 0
    b.auth_manager.update_user(ALICE, user_status=UserStatus.DISABLE)
    with pytest.raises(NoPermissionError, match=r"User:alice is disabled") as info:
        b.send_message(T, b"no", queue_id=0, auth=ctx)
    assert info.value.code == 16
    with pytest.raises(NoPermissionError):
        b.list_topics(auth=ctx)  # authentication-only operations too
    assert b.get_max_offset(T, 0) == 1


def test_a_deny_entry_beats_a_broader_allow(acl_broker: Broker) -> None:
    b = acl_broker
    b.auth_manager.create_acl(acl_from_info({"subject": f"User:{ALICE}", "policies": [{
        "policyType": "Custom", "entries": [
            {"resource": "Topic:*", "actions": ["Pub"], "sourceIps": [], "decision": "Allow"},
            {"resource": f"Topic:{T}", "actions": ["Pub"], "sourceIps": [], "decision": "Deny"}]}]}))
    ctx = _signed(ALICE, ALICE_PW, INSIDE)
    b.create_or_update_topic("AclOther", 1, 1)
    assert b.send_message("AclOther", b"x", queue_id=0, auth=ctx).queue_offset == 0
    _assert_refused(lambda br, a: br.send_message(T, b"x", queue_id=0, auth=a), b, ctx)
