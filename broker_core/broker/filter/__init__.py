"""Message filters for subscriptions: TAG (``TagA || TagB``) and SQL92 selectors, as RocketMQ has them."""

from broker_core.broker.filter.errors import FilterSyntaxError, UnsupportedExpressionTypeError
from broker_core.broker.filter.factory import SQL92, TAG, MessageFilter, build_filter, is_tag_type
from broker_core.broker.filter.tag import TagFilter, TagSubscription, parse_tag_expression

_SQL92_NAMES = ("Sql92Filter", "SqlEvaluationError", "compile_sql92")


def __getattr__(name: str) -> object:
    """The SQL92 names load on first use: its lexer, parser and compiler cost more than a key query."""
    if name in _SQL92_NAMES:
        from broker_core.broker.filter import sql92

        return getattr(sql92, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


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
