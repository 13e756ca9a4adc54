"""CHECK_CLIENT_CONFIG (46), the enablePropertyFilter switch and POP without an expression, over remoting.

As Apache RocketMQ's ClientManageProcessor.checkClientConfig: a TAG subscription always passes; a SQL92
one is SYSTEM_ERROR while enablePropertyFilter is false, else SUBSCRIPTION_PARSE_FAILED (the parser's
message) when it does not compile. PULL_MESSAGE refuses SQL92 alike (after the parse); POP does not
consult the switch (PopMessageProcessor never did), and a POP without an exp takes every message.
"""

from __future__ import annotations

import json
import time

import pytest

from broker_core.broker.broker_config import BrokerConfig
from broker_core.broker.errors import InvalidParameterError
from broker_core.client.connection import RemotingConnection
from broker_core.client.instance import MQClientInstance
from broker_core.client.message import Message, decode_records
from broker_core.client.producer import Producer
from broker_core.config_loader import ConfigError
from broker_core.remoting import RemotingCommand, RequestCode, ResponseCode
from tests.client.conftest import create_topic, wait_dispatched
from tests.net.harness import Servers
from tests.waiting import run_bounded

REFUSED = "The broker does not support consumer to filter message by SQL92"


def check_body(expression: str, expression_type: str = "SQL92") -> bytes:
    """CheckClientRequestBody as Java's MQClientAPIImpl.checkClientInBroker writes it."""
    return json.dumps({"clientId": "127.0.0.1@1", "group": "CG", "subscriptionData": {
        "classFilterMode": False, "codeSet": [], "expressionType": expression_type, "subString": expression,
        "subVersion": 1, "tagsSet": [], "topic": "T"}}).encode()


async def check(addr: str, body: bytes) -> RemotingCommand:
    conn = await RemotingConnection.open(addr)
    try:
        return await conn.invoke(RemotingCommand.request(RequestCode.CHECK_CLIENT_CONFIG, {}, body))
    finally:
        conn.close()


def test_check_client_config_answers_as_rocketmq(servers):
    _, _, on = servers.add_broker("broker-a")
    _, _, off = servers.add_broker("broker-b", {"enablePropertyFilter": "false"})

    async def go() -> None:
        r = await check(on, check_body("a > 1 AND TAGS = 'x'"))
        assert (r.code, r.remark) == (ResponseCode.SUCCESS, None)
        r = await check(on, check_body("a >"))
        assert r.code == ResponseCode.SUBSCRIPTION_PARSE_FAILED
        assert "end of expression" in r.remark and "'a >'" in r.remark
        r = await check(on, check_body(""))
        assert r.code == ResponseCode.SUBSCRIPTION_PARSE_FAILED and "empty" in r.remark
        r = await check(on, check_body("a > 1", "BOGUS"))
        assert r.code == ResponseCode.SUBSCRIPTION_PARSE_FAILED
        # TAG subscriptions and a body without a subscription always pass, as in RocketMQ
        assert (await check(on, check_body("TagA || TagB", "TAG"))).code == ResponseCode.SUCCESS
        assert (await check(on, json.dumps({"clientId": "c", "group": "g"}).encode())).code == ResponseCode.SUCCESS
        assert (await check(on, b"")).code == ResponseCode.SUCCESS
        # enablePropertyFilter=false: every SQL92 subscription is SYSTEM_ERROR (checked before compiling)
        for expr in ("a > 1", "a >"):
            r = await check(off, check_body(expr))
            assert (r.code, r.remark) == (ResponseCode.SYSTEM_ERROR, REFUSED)
        assert (await check(off, check_body("TagA", "TAG"))).code == ResponseCode.SUCCESS

    run_bounded(go())


def pull_fields(topic: str, expression_type: str, subscription: str) -> dict[str, str]:
    return {"consumerGroup": "PullG", "topic": topic, "queueId": "0", "queueOffset": "0", "maxMsgNums": "32",
            "sysFlag": "4", "commitOffset": "0", "suspendTimeoutMillis": "0", "subVersion": "1",
            "subscription": subscription, "expressionType": expression_type}


def pop_fields(group: str, topic: str, exp_type: str | None, exp: str | None) -> dict[str, str]:
    out = {"consumerGroup": group, "topic": topic, "queueId": "-1", "maxMsgNums": "32", "invisibleTime": "60000",
           "pollTime": "0", "bornTime": str(int(time.time() * 1000)), "initMode": "1", "order": "false"}
    if exp_type is not None:
        out["expType"] = exp_type
    if exp is not None:
        out["exp"] = exp
    return out


async def _send_numbered(servers: Servers, addr: str, topic: str, n: int) -> None:
    inst = MQClientInstance(servers.namesrv_addr)
    try:
        await create_topic(inst, addr, topic, queues=1)
        p = Producer(topic + "P", inst)
        await p.start()
        for i in range(n):
            await p.send(Message(topic, b"m%d" % i, tags=f"T{i % 2}", properties={"n": str(i)}))
        await p.shutdown()
        await wait_dispatched(inst, topic, "broker-a", {0: n})
    finally:
        await inst.shutdown()


def test_pull_honours_enable_property_filter_and_pop_does_not(servers):
    broker, _, addr = servers.add_broker("broker-a", {"enablePropertyFilter": "false"})

    async def go() -> None:
        await _send_numbered(servers, addr, "SW", 4)
        conn = await RemotingConnection.open(addr)
        try:
            async def pull(typ: str, sub: str) -> RemotingCommand:
                return await conn.invoke(RemotingCommand.request(RequestCode.PULL_MESSAGE, pull_fields("SW", typ, sub)))

            r = await pull("SQL92", "n >= 2")
            assert (r.code, r.remark) == (ResponseCode.SYSTEM_ERROR, REFUSED)
            assert (await pull("SQL92", "n >=")).code == ResponseCode.SUBSCRIPTION_PARSE_FAILED  # parsed first
            r = await pull("TAG", "T1")
            assert r.code == ResponseCode.SUCCESS and [m.body for m in decode_records(r.body)] == [b"m1", b"m3"]
            # POP (and so gRPC ReceiveMessage) filters by SQL92 whatever the switch says, as Apache's does
            r = await conn.invoke(RemotingCommand.request(RequestCode.POP_MESSAGE,
                                                          pop_fields("PopG", "SW", "SQL92", "n >= 2")))
            assert r.code == ResponseCode.SUCCESS and [m.body for m in decode_records(r.body)] == [b"m2", b"m3"]
            # updateBrokerConfig turns it on in the running broker
            assert broker.update_broker_config({"enablePropertyFilter": "true"}) == ["enablePropertyFilter"]
            r = await pull("SQL92", "n >= 2")
            assert r.code == ResponseCode.SUCCESS and [m.body for m in decode_records(r.body)] == [b"m2", b"m3"]
        finally:
            conn.close()

    run_bounded(go())


def test_pop_without_an_expression_takes_every_message(servers):
    """PopMessageProcessor: a missing or empty exp is TAG "*", even with expType SQL92 (no parse error
    about a '*' the client never sent)."""
    _, _, addr = servers.add_broker("broker-a")

    async def go() -> None:
        await _send_numbered(servers, addr, "PE", 3)
        conn = await RemotingConnection.open(addr)
        try:
            for i, (typ, exp) in enumerate((("SQL92", None), ("SQL92", ""), (None, None))):
                r = await conn.invoke(RemotingCommand.request(RequestCode.POP_MESSAGE,
                                                              pop_fields(f"PE{i}", "PE", typ, exp)))
                assert r.code == ResponseCode.SUCCESS, r.remark
                assert [m.body for m in decode_records(r.body)] == [b"m0", b"m1", b"m2"]
        finally:
            conn.close()

    run_bounded(go())


def test_the_keys_are_listed_with_their_defaults_and_can_be_updated(servers):
    broker, _, _ = servers.add_broker("broker-a")
    assert BrokerConfig().enable_property_filter is True
    props = broker.broker_config_properties()
    assert props["enablePropertyFilter"] == "true"
    assert props["filterSupportRetry"] == "false"  # RocketMQ's default
    assert broker.update_broker_config({"filterSupportRetry": "true", "enablePropertyFilter": "false"}) == [
        "enablePropertyFilter", "filterSupportRetry"]
    props = broker.broker_config_properties()
    assert (props["enablePropertyFilter"], props["filterSupportRetry"]) == ("false", "true")
    assert broker.config.enable_property_filter is False


def test_a_bad_filter_support_retry_is_refused_like_every_boolean_key(servers):
    """filterSupportRetry was an untyped property: 'maybe' was accepted and getBrokerConfig showed it."""
    broker, _, _ = servers.add_broker("broker-a")
    with pytest.raises(InvalidParameterError, match="filterSupportRetry: expected true or false, got 'maybe'"):
        broker.update_broker_config({"filterSupportRetry": "maybe"})
    assert broker.broker_config_properties()["filterSupportRetry"] == "false"
    with pytest.raises(ConfigError, match="filterSupportRetry: expected true or false"):
        BrokerConfig.from_properties({"filterSupportRetry": "maybe"})
