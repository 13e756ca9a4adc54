"""The parsed form of a selector: an immutable tree that the compiler turns into closures.

Node classes follow RocketMQ's expression classes closely enough that its parse-time checks can be
stated in their terms ("a constant", "a boolean expression", "a property"). ``str()`` gives a fully
parenthesised rendering, handy in logs and error messages.
"""

from __future__ import annotations

from dataclasses import dataclass

from broker_core.broker.filter.sql92.javalang import JavaLong, JavaValue


def _literal(value: JavaValue) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, str):
        return "'" + value.replace("'", "''") + "'"
    if isinstance(value, JavaLong):
        return f"{int(value)}L"
    return repr(value)


@dataclass(frozen=True, slots=True)
class Property:
    """A message property, looked up by its exact (case-sensitive) name."""

    name: str

    def __str__(self) -> str:
        return self.name


@dataclass(frozen=True, slots=True)
class Constant:
    """A literal; TRUE, FALSE and NULL are also boolean expressions, as in RocketMQ."""

    value: JavaValue

    def __str__(self) -> str:
        return _literal(self.value)


@dataclass(frozen=True, slots=True)
class Negate:
    """Unary minus. Deliberately not a ``Constant`` even over a literal: RocketMQ's checks skip it."""

    operand: Node

    def __str__(self) -> str:
        return f"(-{self.operand})"


@dataclass(frozen=True, slots=True)
class Not:
    operand: Node

    def __str__(self) -> str:
        return f"(NOT {self.operand})"


@dataclass(frozen=True, slots=True)
class BooleanCast:
    """A bare property used as a condition; true only for a Boolean value, so never for a String."""

    operand: Node

    def __str__(self) -> str:
        return str(self.operand)


@dataclass(frozen=True, slots=True)
class And:
    left: Node
    right: Node

    def __str__(self) -> str:
        return f"({self.left} AND {self.right})"


@dataclass(frozen=True, slots=True)
class Or:
    left: Node
    right: Node

    def __str__(self) -> str:
        return f"({self.left} OR {self.right})"


@dataclass(frozen=True, slots=True)
class Equal:
    """``=`` (``<>`` is ``NOT (=)``, ``IS NULL`` is ``= NULL`` without the parse-time NULL check)."""

    left: Node
    right: Node

    def __str__(self) -> str:
        if isinstance(self.right, Constant) and self.right.value is None:
            return f"({self.left} IS NULL)"
        return f"({self.left} = {self.right})"


@dataclass(frozen=True, slots=True)
class Compare:
    """``>``, ``>=``, ``<`` or ``<=``; BETWEEN is built from these."""

    op: str
    left: Node
    right: Node

    def __str__(self) -> str:
        return f"({self.left} {self.op} {self.right})"


@dataclass(frozen=True, slots=True)
class InList:
    operand: Property
    values: frozenset[str]
    negated: bool

    def __str__(self) -> str:
        items = ", ".join(_literal(v) for v in sorted(self.values))
        return f"({self.operand} {'NOT IN' if self.negated else 'IN'} ({items}))"


@dataclass(frozen=True, slots=True)
class StringMatch:
    """CONTAINS / STARTSWITH / ENDSWITH and their NOT forms."""

    op: str
    operand: Node
    search: str
    negated: bool

    def __str__(self) -> str:
        return f"({self.operand} {'NOT ' if self.negated else ''}{self.op} {_literal(self.search)})"


Node = Property | Constant | Negate | Not | BooleanCast | And | Or | Equal | Compare | InList | StringMatch

_BOOLEAN_NODES = (Not, BooleanCast, And, Or, Equal, Compare, InList, StringMatch)


def is_boolean_expression(node: Node) -> bool:
    """RocketMQ's ``instanceof BooleanExpression``: the node yields TRUE/FALSE/null."""
    if isinstance(node, Constant):
        return node.value is None or isinstance(node.value, bool)
    return isinstance(node, _BOOLEAN_NODES)
