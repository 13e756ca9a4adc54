"""Subscriptions: the expression a consumer registers (``*`` or ``TagA || TagB``) and its client-side check.

Why both sides: the broker filters by the tags' hash codes (Java ``String.hashCode``), which can
collide, so the client checks the tag itself again, as RocketMQ's PullAPIWrapper does.
A subscription is checked before it is used, as the Java client does: a tag expression that names no
tag is refused at subscribe time, and a SQL92 one by the brokers at start (CHECK_CLIENT_CONFIG), so a
typo stops the consumer instead of only logging refused pulls.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterable

from broker_core.remoting import RequestCode
from broker_core.remoting.bodies import CheckClientRequestBody, SubscriptionData
from broker_core.store.codec.message import MessageExt

from .connection import RemotingError
from .instance import BrokerError, MQClientInstance
from .route import select_addr

SUB_ALL = "*"
EXPRESSION_TYPES = ("TAG", "SQL92")  # Java's ExpressionType: anything else no broker filters by


class InvalidSubscriptionError(ValueError):
    """A subscription refused before it is used (Java's MQClientException "subscription exception")."""


def java_string_hash(s: str) -> int:
    """``String.hashCode()`` over UTF-16 code units, as a signed 32-bit int."""
    h = 0
    data = s.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def build_subscription(topic: str, expression: str | None, expression_type: str = "TAG") -> SubscriptionData:
    """FilterAPI.build: a TAG expression's tags and hash codes, or a SQL92 selector (``MessageSelector.bySql``)
    kept as written; the broker evaluates SQL92 (and may skip by its dispatch-time bitmap). Any other type
    is refused here, for every consumer: every broker would refuse it at every pull or receive."""
    if expression_type and expression_type not in EXPRESSION_TYPES:
        raise InvalidSubscriptionError(f"expression type {expression_type!r} of {topic} is not supported: "
                                       f"use {' or '.join(EXPRESSION_TYPES)}")
    if expression_type and expression_type != "TAG":
        if not expression or not expression.strip():
            raise InvalidSubscriptionError(f"a {expression_type} subscription of {topic} needs an expression")
        return SubscriptionData(topic=topic, sub_string=expression.strip(), expression_type=expression_type,
                                sub_version=int(time.time() * 1000))
    expr = (expression or "").strip()
    if not expr or expr == SUB_ALL:
        return SubscriptionData(topic=topic, sub_string=SUB_ALL, expression_type="TAG",
                                sub_version=int(time.time() * 1000))
    tags = [t.strip() for t in expr.split("||") if t.strip()]
    if not tags:
        # FilterAPI.buildSubscriptionData refuses "||" ("subString split error"); " || " too is refused here,
        # as the broker refuses it at every pull (an expression of separators only matches nothing)
        raise InvalidSubscriptionError(f"the tag expression {expression!r} of {topic} names no tag "
                                       f"(write TagA || TagB, or * for all)")
    return SubscriptionData(topic=topic, sub_string=expr, expression_type="TAG", sub_version=int(time.time() * 1000),
                            tags_set=tags, code_set=[java_string_hash(t) for t in tags])


def matches(sub: SubscriptionData, msg: MessageExt) -> bool:
    if sub.expression_type not in (None, "", "TAG"):
        return True  # SQL92: the broker evaluated it
    if sub.sub_string == SUB_ALL or not sub.tags_set:
        return True
    tag = msg.tags
    return tag is not None and tag in sub.tags_set


async def check_client_in_broker(instance: MQClientInstance, group: str,
                                 subscriptions: Iterable[SubscriptionData]) -> None:
    """MQClientInstance.checkClientInBroker, run by a push consumer's start: each SQL92 (non-TAG)
    subscription is sent to the brokers of its topic (CHECK_CLIENT_CONFIG); an answer other than SUCCESS
    (SUBSCRIPTION_PARSE_FAILED with the parser's message, SYSTEM_ERROR when the broker's
    enablePropertyFilter is off) raises BrokerError. A topic without a route is not checked."""
    for sub in subscriptions:
        if sub.expression_type in (None, "", "TAG"):
            continue
        route = None
        with contextlib.suppress(RemotingError, BrokerError):
            route = await instance.get_route(sub.topic)
        if route is None:
            continue
        body = CheckClientRequestBody(client_id=instance.client_id, group=group, subscription_data=sub).to_json()
        for addr in sorted({a for b in route.data.broker_datas if (a := select_addr(b))}):
            resp = await instance.invoke(addr, RequestCode.CHECK_CLIENT_CONFIG, None, body)
            instance.check(resp, addr=addr)
