"""Message filters for subscriptions: TAG (``TagA || TagB``) and SQL92 selectors, as RocketMQ has them."""

from broker_core.broker.filter.errors import FilterSyntaxError, UnsupportedExpressionTypeError
from broker_core.broker.filter.factory import SQL92, TAG, MessageFilter, build_filter, is_tag_type
from broker_core.broker.filter.sql92 import Sql92Filter, SqlEvaluationError, compile_sql92
from broker_core.broker.filter.tag import TagFilter, TagSubscription, parse_tag_expression

__all__ = [
    "SQL92",
    "TAG",
    "FilterSyntaxError",
    "MessageFilter",
    "Sql92Filter",
    "SqlEvaluationError",
    "TagFilter",
    "TagSubscription",
    "UnsupportedExpressionTypeError",
    "build_filter",
    "compile_sql92",
    "is_tag_type",
    "parse_tag_expression",
]
