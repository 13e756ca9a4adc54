"""RocketMQ's SQL92 message selectors: lexer, parser, Java value semantics and a closure compiler."""

from broker_core.broker.filter.sql92.filter import Sql92Filter, compile_sql92
from broker_core.broker.filter.sql92.javalang import SqlEvaluationError

__all__ = ["Sql92Filter", "SqlEvaluationError", "compile_sql92"]
