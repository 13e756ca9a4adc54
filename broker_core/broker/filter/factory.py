"""One entry point for the broker: a subscription's (expressionType, subString) in, a MessageFilter out."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol, runtime_checkable

from broker_core.broker.filter.errors import FilterSyntaxError, UnsupportedExpressionTypeError
from broker_core.broker.filter.tag import TagFilter, parse_tag_expression
from broker_core.store.codec.cq_ext import CqExtUnit

TAG = "TAG"
SQL92 = "SQL92"
EXPRESSION_TYPES = (TAG, SQL92)


@runtime_checkable
class MessageFilter(Protocol):
    """The two-step check the pull/pop path runs: cheaply on the CQ unit, then on the stored message."""

    @property
    def expression_type(self) -> str: ...

    @property
    def expression(self) -> str: ...

    def is_matched_by_consume_queue(self, tags_code: int | None, cq_ext_unit: CqExtUnit | None = None) -> bool: ...

    def is_matched_by_commit_log(self, properties: Mapping[str, str] | None) -> bool: ...


def is_tag_type(expression_type: str | None) -> bool:
    """RocketMQ's ``ExpressionType.isTagType``: a missing or empty type means TAG (old clients send none)."""
    return not expression_type or expression_type == TAG


def build_filter(expression_type: str | None, expression: str | None) -> MessageFilter:
    """Build the filter for a subscription, refusing bad expressions now rather than per message."""
    if is_tag_type(expression_type):
        return TagFilter(parse_tag_expression(expression))
    if expression_type == SQL92:
        if expression is None or not expression.strip():
            raise FilterSyntaxError("SQL92 expression is empty", expression=expression)
        from broker_core.broker.filter.sql92 import compile_sql92  # loaded with the first SQL92 subscription

        return compile_sql92(expression)
    raise UnsupportedExpressionTypeError(
        f"unsupported filter expression type {expression_type!r}; expected one of {', '.join(EXPRESSION_TYPES)}"
    )


def property_filter_disabled(expression_type: str | None) -> str:
    """The remark of a SQL92 subscription refused because enablePropertyFilter is false (RocketMQ's words)."""
    return f"The broker does not support consumer to filter message by {expression_type}"
