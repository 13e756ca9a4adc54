"""Tag subscriptions (``TagA || TagB``): the cheap tagsCode check on the consume queue, then the exact one.

The consume queue stores only the Java hash of a message's TAGS, so two different tags can share a
code ("Aa" and "BB" both hash to 2112). The CQ step therefore may let a foreign tag through; the
commit-log step compares the real tag string and removes it. This mirrors RocketMQ's FilterAPI and
ExpressionMessageFilter, except that the exact step runs here on the broker rather than in the client.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from broker_core.broker.filter.errors import FilterSyntaxError
from broker_core.store.codec.cq_ext import CqExtUnit
from broker_core.store.codec.hashing import java_string_hash

SUB_ALL = "*"
TAG_SEPARATOR = "||"
TAGS_PROPERTY = "TAGS"


def _as_java_int(code: int) -> int:
    """CQ units hold tagsCode as a long; RocketMQ compares its ``intValue()`` (low 32 bits, signed)."""
    code &= 0xFFFFFFFF
    return code - 0x100000000 if code & 0x80000000 else code


@dataclass(frozen=True, slots=True)
class TagSubscription:
    """What RocketMQ's ``SubscriptionData`` keeps for a TAG expression: the tags and their hash codes."""

    sub_string: str
    tags_set: frozenset[str]
    code_set: frozenset[int]

    @property
    def is_sub_all(self) -> bool:
        return self.sub_string == SUB_ALL

    def is_matched_by_consume_queue(self, tags_code: int | None) -> bool:
        """Cheap pre-check on the CQ unit; ``None`` (code unknown) passes, as in RocketMQ."""
        if self.is_sub_all or tags_code is None:
            return True
        return _as_java_int(tags_code) in self.code_set

    def is_matched_by_commit_log(self, tags: str | None) -> bool:
        """Exact check on the message's TAGS; untagged messages only match ``*``."""
        if self.is_sub_all:
            return True
        return tags is not None and tags in self.tags_set


_ALL = TagSubscription(SUB_ALL, frozenset(), frozenset())


def parse_tag_expression(expression: str | None) -> TagSubscription:
    """Parse ``*``, empty/``None`` (all) or ``TagA || TagB``; blanks around tags are ignored.

    RocketMQ treats only the exact string ``*`` as "all"; here surrounding blanks are tolerated too.
    A ``*`` inside a list (``TagA || *``) stays a literal tag, as in RocketMQ. An expression made only
    of separators is refused: RocketMQ would accept it and then match nothing, which is never meant.
    """
    if expression is None:
        return _ALL
    stripped = expression.strip()
    if not stripped or stripped == SUB_ALL:
        return _ALL
    tags = [t.strip() for t in stripped.split(TAG_SEPARATOR)]
    tags = [t for t in tags if t]
    if not tags:
        raise FilterSyntaxError("tag expression names no tag", expression=expression, expected=("a tag", "*"))
    tag_set = frozenset(tags)
    return TagSubscription(
        sub_string=expression,
        tags_set=tag_set,
        code_set=frozenset(java_string_hash(t) for t in tag_set),
    )


class TagFilter:
    """The TAG ``MessageFilter``: consume-queue step on tagsCode, commit-log step on the TAGS property."""

    __slots__ = ("subscription",)

    expression_type = "TAG"

    def __init__(self, subscription: TagSubscription) -> None:
        self.subscription = subscription

    @property
    def expression(self) -> str:
        return self.subscription.sub_string

    def is_matched_by_consume_queue(self, tags_code: int | None, cq_ext_unit: CqExtUnit | None = None) -> bool:
        return self.subscription.is_matched_by_consume_queue(tags_code)

    def is_matched_by_commit_log(self, properties: Mapping[str, str] | None) -> bool:
        tags = properties.get(TAGS_PROPERTY) if properties else None
        return self.subscription.is_matched_by_commit_log(tags)

    def __repr__(self) -> str:
        return f"TagFilter({self.subscription.sub_string!r})"
