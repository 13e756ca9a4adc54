"""The Python client refuses a subscription it cannot use, as the Java client does: a tag expression that
names no tag at subscribe time (FilterAPI.buildSubscriptionData), a SQL92 expression the brokers of its
topic refuse at start (checkClientInBroker: CHECK_CLIENT_CONFIG), instead of starting and then only
logging refused pulls."""

from __future__ import annotations

import pytest

from broker_core.client.instance import BrokerError, MQClientInstance
from broker_core.client.pull_consumer import PullConsumer
from broker_core.client.push_consumer import ConsumeConcurrentlyStatus, PushConsumer
from broker_core.client.subscription import InvalidSubscriptionError, build_subscription
from broker_core.remoting import ResponseCode
from tests.client.conftest import create_topic
from tests.net.harness import Servers
from tests.waiting import run_bounded


@pytest.mark.parametrize("expression", ["||", "||||", " || ", "|| ||"])
def test_a_tag_expression_naming_no_tag_is_refused_at_subscribe(expression):
    with pytest.raises(InvalidSubscriptionError, match="names no tag"):
        build_subscription("T", expression)
    c = PushConsumer("G", MQClientInstance("127.0.0.1:1"))
    with pytest.raises(InvalidSubscriptionError):
        c.subscribe("T", expression)
    with pytest.raises(InvalidSubscriptionError):
        PullConsumer("G", MQClientInstance("127.0.0.1:1")).subscribe("T", expression)


@pytest.mark.parametrize(("expression", "tags"), [("*", []), ("", []), (None, []), ("TagA ||", ["TagA"]),
                                                  ("|| TagA || TagB", ["TagA", "TagB"])])
def test_tag_expressions_with_a_tag_or_all_are_accepted(expression, tags):
    assert build_subscription("T", expression).tags_set == tags


@pytest.mark.parametrize("expression_type", ["SQL", "sql92", "tag", "BITMAP"])
def test_an_expression_type_other_than_tag_or_sql92_is_refused_by_every_consumer(expression_type):
    """Java's ExpressionType has TAG and SQL92 only, and every broker refuses anything else at every pull:
    the push and pull consumers took it and started, then only logged refused pulls."""
    with pytest.raises(InvalidSubscriptionError, match="use TAG or SQL92"):
        build_subscription("T", "a = 1", expression_type)
    with pytest.raises(InvalidSubscriptionError, match="use TAG or SQL92"):
        PushConsumer("G", MQClientInstance("127.0.0.1:1")).subscribe("T", "a = 1", expression_type)
    pull = PullConsumer("G", MQClientInstance("127.0.0.1:1"))
    with pytest.raises(InvalidSubscriptionError, match="use TAG or SQL92"):
        pull.subscribe("T", "a = 1", expression_type)


def test_an_empty_sql92_expression_is_refused_at_subscribe():
    with pytest.raises(InvalidSubscriptionError, match="needs an expression"):
        build_subscription("T", "  ", "SQL92")


async def _start(servers: Servers, group: str, topic: str, expression: str) -> tuple[PushConsumer, MQClientInstance]:
    inst = MQClientInstance(servers.namesrv_addr)
    c = PushConsumer(group, inst)
    c.subscribe(topic, expression, "SQL92")
    c.register_concurrently(lambda msgs: ConsumeConcurrentlyStatus.CONSUME_SUCCESS)
    try:
        await c.start()
    except BaseException:
        await inst.shutdown()
        raise
    return c, inst


def test_start_raises_for_a_sql92_expression_the_broker_refuses(servers):
    broker, _, addr = servers.add_broker("broker-a")

    async def go() -> None:
        setup = MQClientInstance(servers.namesrv_addr)
        await create_topic(setup, addr, "CT", queues=1)
        await setup.shutdown()
        with pytest.raises(BrokerError) as err:
            await _start(servers, "BadSql", "CT", "n >")
        assert err.value.code == ResponseCode.SUBSCRIPTION_PARSE_FAILED
        assert "'n >'" in str(err.value) and "end of expression" in str(err.value)
        assert broker.consumer_ids("BadSql") == []  # never registered: no heartbeat carried it
        c, inst = await _start(servers, "GoodSql", "CT", "n > 1")  # a good one starts
        try:
            assert c._running
        finally:
            await c.shutdown()
            await inst.shutdown()

    run_bounded(go())


def test_start_raises_when_the_broker_does_not_filter_by_sql92(servers):
    _, _, addr = servers.add_broker("broker-a", {"enablePropertyFilter": "false"})

    async def go() -> None:
        setup = MQClientInstance(servers.namesrv_addr)
        await create_topic(setup, addr, "OT", queues=1)
        await setup.shutdown()
        with pytest.raises(BrokerError) as err:
            await _start(servers, "Off", "OT", "n > 1")
        assert err.value.code == ResponseCode.SYSTEM_ERROR
        assert "does not support consumer to filter message by SQL92" in str(err.value)

    run_bounded(go())
