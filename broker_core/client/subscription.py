"""Subscriptions: the expression a consumer registers (``*`` or ``TagA || TagB``) and its client-side check.

Why both sides: the broker filters by the tags' hash codes (Java ``String.hashCode``), which can
collide, so the client checks the tag itself again, as RocketMQ's PullAPIWrapper does.
"""

from __future__ import annotations

import time

from broker_core.remoting.bodies import SubscriptionData
from broker_core.store.codec.message import MessageExt

SUB_ALL = "*"


def java_string_hash(s: str) -> int:
    """``String.hashCode()`` over UTF-16 code units, as a signed 32-bit int."""
    h = 0
    data = s.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def build_subscription(topic: str, expression: str | None, expression_type: str = "TAG") -> SubscriptionData:
    """FilterAPI.build: a TAG expression's tags and hash codes, or a SQL92 selector (``MessageSelector.bySql``)
    kept as written; the broker evaluates SQL92 (and may skip by its dispatch-time bitmap)."""
    if expression_type and expression_type != "TAG":
        if not expression or not expression.strip():
            raise ValueError(f"a {expression_type} subscription of {topic} needs an expression")
        return SubscriptionData(topic=topic, sub_string=expression.strip(), expression_type=expression_type,
                                sub_version=int(time.time() * 1000))
    expr = (expression or "").strip()
    if not expr or expr == SUB_ALL:
        return SubscriptionData(topic=topic, sub_string=SUB_ALL, expression_type="TAG",
                                sub_version=int(time.time() * 1000))
    tags = [t.strip() for t in expr.split("||") if t.strip()]
    return SubscriptionData(topic=topic, sub_string=expr, expression_type="TAG", sub_version=int(time.time() * 1000),
                            tags_set=tags, code_set=[java_string_hash(t) for t in tags])


def matches(sub: SubscriptionData, msg: MessageExt) -> bool:
    if sub.expression_type not in (None, "", "TAG"):
        return True  # SQL92: the broker evaluated it
    if sub.sub_string == SUB_ALL or not sub.tags_set:
        return True
    tag = msg.tags
    return tag is not None and tag in sub.tags_set
