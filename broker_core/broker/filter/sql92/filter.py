"""The SQL92 ``MessageFilter``: a selector compiled once at subscription time, evaluated per message."""

from __future__ import annotations

from collections.abc import Mapping
from functools import lru_cache

from broker_core.broker.filter.sql92.compiler import Evaluator, compile_tree
from broker_core.broker.filter.sql92.javalang import SqlEvaluationError
from broker_core.broker.filter.sql92.nodes import Node
from broker_core.broker.filter.sql92.parser import parse
from broker_core.store.codec.cq_ext import CqExtUnit

_NO_PROPERTIES: Mapping[str, str] = {}


class Sql92Filter:
    """A compiled selector. Immutable, so one instance can serve every consumer using the same text."""

    __slots__ = ("expression", "tree", "_evaluate")

    expression_type = "SQL92"

    def __init__(self, expression: str, tree: Node, evaluator: Evaluator) -> None:
        self.expression = expression
        self.tree = tree
        self._evaluate = evaluator

    def evaluate(self, properties: Mapping[str, str] | None) -> bool | None:
        """Three-valued result; raises :class:`SqlEvaluationError` where RocketMQ's evaluation throws."""
        result = self._evaluate(properties or _NO_PROPERTIES)
        return result if result is None else bool(result)

    def is_matched_by_consume_queue(self, tags_code: int | None, cq_ext_unit: CqExtUnit | None = None) -> bool:
        """Always true: SQL needs the properties. The bitmap check needs the consumer's registered filter
        data (its bloom bits, since when they are set): ``ExpressionMessageFilter`` wraps this filter for it."""
        return True

    def is_matched_by_commit_log(self, properties: Mapping[str, str] | None) -> bool:
        """Only TRUE matches; unknown and evaluation errors are non-matches, as RocketMQ's broker decides."""
        try:
            return self._evaluate(properties or _NO_PROPERTIES) is True
        except SqlEvaluationError:
            return False

    def __str__(self) -> str:
        return str(self.tree)

    def __repr__(self) -> str:
        return f"Sql92Filter({self.expression!r})"


@lru_cache(maxsize=256)
def compile_sql92(expression: str) -> Sql92Filter:
    """Parse and compile a selector (cached like RocketMQ's parse cache); raises ``FilterSyntaxError``."""
    tree = parse(expression)
    return Sql92Filter(expression, tree, compile_tree(tree, expression))
