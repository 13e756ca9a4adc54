"""A subscription group's switches (updateSubGroup) as a consumer sees them on the wire, with raw
frames against a real broker on 127.0.0.1 (in-process, free ports): consumeEnable on a pull or pop
already parked, consumeBroadcastEnable, notifyConsumerIdsChangedEnable and brokerId."""

from __future__ import annotations

import json
import time

import pytest
from net_util import RawClient
from test_server_codes import create_topic, pull, send

from broker_core.remoting import RemotingCommand, RequestCode, ResponseCode
from broker_core.remoting.bodies import ConsumerData, HeartbeatData, SubscriptionData

RC = RequestCode
OK = ResponseCode.SUCCESS


def update_group(bc: RawClient, group: str, **fields: object) -> None:
    """UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, as ``mqadmin updateSubGroup`` sends it."""
    r = bc.call(RC.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, {}, json.dumps({"groupName": group, **fields}).encode())
    assert r.code == OK, r.remark


def heartbeat(client: RawClient, client_id: str, group: str, topic: str, model: str = "CLUSTERING") -> None:
    hb = HeartbeatData(client_id=client_id, consumer_data_set=[ConsumerData(
        group_name=group, message_model=model, subscription_data_set=[SubscriptionData(topic=topic)])])
    assert client.call(RC.HEART_BEAT, {}, hb.to_json()).code == OK


def notices(client: RawClient, wait: float) -> list[RemotingCommand]:
    """NOTIFY_CONSUMER_IDS_CHANGED requests the broker sent this client, waiting ``wait`` seconds."""
    got: list[RemotingCommand] = []
    deadline = time.monotonic() + wait
    while (left := deadline - time.monotonic()) > 0:
        try:
            frame = client.recv(left)
        except TimeoutError:
            break
        assert frame is not None, "the broker closed the connection"
        if frame.code == RC.NOTIFY_CONSUMER_IDS_CHANGED and not frame.is_response:
            got.append(frame)
    return got


# -- 1. consumeEnable=false stops a request already parked ----------------------------------------
def test_parked_pull_is_refused_once_the_group_is_disabled(broker_setup):
    """A long-polling pull parked before ``updateSubGroup -s false`` wakes on the next message and is
    answered NO_PERMISSION, as a new pull is (Apache re-runs processRequest on wake-up); it returned
    that message."""
    broker, bc = broker_setup[1], broker_setup[3]
    other = RawClient(broker.config.broker_addr)
    try:
        create_topic(bc, "HP", 1)
        update_group(bc, "GH")
        start = time.monotonic()
        bc.send(RemotingCommand.request(RC.PULL_MESSAGE, {
            "consumerGroup": "GH", "topic": "HP", "queueId": "0", "queueOffset": "0", "maxMsgNums": "32",
            "sysFlag": "6", "commitOffset": "0", "suspendTimeoutMillis": "20000", "subVersion": "0",
            "subscription": "*", "expressionType": "TAG"}, opaque=777))
        time.sleep(0.5)
        assert not bc.inbox  # parked
        update_group(other, "GH", consumeEnable=False)
        assert send(other, "HP", b"after-disable").code == OK
        r = bc.recv(15)
        assert r.opaque == 777
        assert (r.code, r.remark, r.body) == (ResponseCode.NO_PERMISSION, "subscription group no permission, GH", b"")
        assert time.monotonic() - start < 10  # answered at the wake-up, not at the timeout
        # the same answer as a pull sent now
        r = pull(other, "HP", group="GH")
        assert (r.code, r.remark) == (ResponseCode.NO_PERMISSION, "subscription group no permission, GH")
    finally:
        other.close()


def test_parked_pop_is_refused_once_the_group_is_disabled(broker_setup):
    """The same for POP_MESSAGE (what gRPC SimpleConsumer.receive and Java's pop consumers send): a pop
    long-polling when the group is disabled is refused at its wake-up; it popped the new message."""
    broker, bc = broker_setup[1], broker_setup[3]
    other = RawClient(broker.config.broker_addr)
    try:
        create_topic(bc, "HQ", 1)
        update_group(bc, "GQ")
        start = time.monotonic()
        bc.send(RemotingCommand.request(RC.POP_MESSAGE, {
            "consumerGroup": "GQ", "topic": "HQ", "queueId": "-1", "maxMsgNums": "8", "invisibleTime": "60000",
            "pollTime": "20000", "bornTime": str(int(time.time() * 1000)), "initMode": "0",
            "expType": "TAG", "exp": "*"}, opaque=778))
        time.sleep(0.5)
        assert not bc.inbox  # parked
        update_group(other, "GQ", consumeEnable=False)
        assert send(other, "HQ", b"after-disable").code == OK
        r = bc.recv(15)
        assert r.opaque == 778
        assert (r.code, r.remark, r.body) == (ResponseCode.NO_PERMISSION, "subscription group no permission, GQ", b"")
        assert time.monotonic() - start < 10
        # the message is still there for the group once it is enabled again
        update_group(other, "GQ", consumeEnable=True)
        assert broker.pop_message("GQ", "HQ", init_mode=0).messages[0].body == b"after-disable"
    finally:
        other.close()


# -- 2. consumeBroadcastEnable=false -------------------------------------------------------------
@pytest.mark.parametrize("broadcast_enable", [False, True])
def test_broadcasting_group_without_consume_broadcast_enable_is_refused(broker_setup, broadcast_enable):
    """A BROADCASTING consumer's pull without its own subscription (Java push consumers' default) is
    refused NO_PERMISSION when the group's consumeBroadcastEnable is false, as PullMessageProcessor
    does; it was served."""
    bc = broker_setup[3]
    create_topic(bc, "BT", 1)
    update_group(bc, "GB", consumeBroadcastEnable=broadcast_enable)
    heartbeat(bc, "b1", "GB", "BT", model="BROADCASTING")
    assert send(bc, "BT", b"m").code == OK
    r = pull(bc, "BT", group="GB", sub=None, suspend_ms=2000, sys_flag=2)
    if broadcast_enable:
        assert r.code == OK, r.remark
    else:
        assert (r.code, r.remark) == (ResponseCode.NO_PERMISSION, "the consumer group[GB] can not consume by broadcast way")
    # Apache checks it only for a pull that relies on the registered subscription
    assert pull(bc, "BT", group="GB", suspend_ms=2000, sys_flag=2).code == OK
    # a CLUSTERING group is not concerned by the switch
    update_group(bc, "GC", consumeBroadcastEnable=False)
    heartbeat(bc, "c1", "GC", "BT")
    assert pull(bc, "BT", group="GC", sub=None).code == OK


# -- 3. notifyConsumerIdsChangedEnable=false -------------------------------------------------------
@pytest.mark.parametrize("notify, model, told", [
    (True, "CLUSTERING", True), (False, "CLUSTERING", False), (True, "BROADCASTING", False)],
    ids=["notify", "notify-off", "broadcasting"])
def test_consumer_ids_changed_notice_follows_the_group_switch(broker_setup, notify, model, told):
    """``updateSubGroup -a false``: the group's clients are not sent NOTIFY_CONSUMER_IDS_CHANGED when a
    client joins or leaves (Apache ConsumerManager registerConsumer/unregisterConsumer), nor ever a
    BROADCASTING group's; they were told regardless."""
    broker, bc = broker_setup[1], broker_setup[3]
    create_topic(bc, "NT", 2)
    update_group(bc, "GN", notifyConsumerIdsChangedEnable=notify)
    a, b = RawClient(broker.config.broker_addr), RawClient(broker.config.broker_addr)
    try:
        heartbeat(a, "a", "GN", "NT", model)
        notices(a, 0.5)  # a may be told about itself joining
        heartbeat(b, "b", "GN", "NT", model)
        assert bool(notices(a, 1.0)) is told
        r = b.call(RC.UNREGISTER_CLIENT, {"clientID": "b", "consumerGroup": "GN"})
        assert r.code == OK
        assert bool(notices(a, 1.0)) is told
        assert broker.consumer_ids("GN") == ["a"]
    finally:
        a.close()
        b.close()


# -- 4. suggestWhichBrokerId ---------------------------------------------------------------------
def test_pull_suggests_the_master_whatever_the_group_broker_id(broker_setup):
    """``updateSubGroup -i 1``: pulls still answer suggestWhichBrokerId=0 (Apache suggests the group's
    brokerId only with slaveReadEnable; this broker has no slaves); it answered 1, which sent a Java
    client's next pulls to a slave no route names."""
    bc = broker_setup[3]
    create_topic(bc, "ST", 1)
    update_group(bc, "GS", brokerId=1, whichBrokerWhenConsumeSlowly=1)
    assert send(bc, "ST", b"m").code == OK
    for offset in (0, 1):  # FOUND and (with the queue read) PULL_NOT_FOUND
        r = pull(bc, "ST", group="GS", offset=offset, suspend_ms=2000 if offset == 0 else 0, sys_flag=2)
        assert r.code in (OK, ResponseCode.PULL_NOT_FOUND), r.remark
        assert r.ext_fields["suggestWhichBrokerId"] == "0"
