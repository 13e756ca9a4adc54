"""The parsed form of a selector: an immutable tree that the compiler turns into closures.

Node classes follow RocketMQ's expression classes closely enough that its parse-time checks can be
stated in their terms ("a constant", "a boolean expression", "a property"). ``str()`` gives a fully
parenthesised rendering, handy in logs and error messages; it walks the tree with an explicit stack,
because a left-nested OR chain from a query builder is a thousand levels deep (see parser.py).
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


class _Rendered:
    """``str()`` for every node: the pieces of each node are expanded with a stack, not by recursion."""

    __slots__ = ()

    def _pieces(self) -> _Pieces:
        raise NotImplementedError

    def __str__(self) -> str:
        out: list[str] = []
        todo: list[str | _Rendered] = [self]
        while todo:
            item = todo.pop()
            if isinstance(item, str):
                out.append(item)
            else:
                todo.extend(reversed(item._pieces()))
        return "".join(out)


@dataclass(frozen=True, slots=True)
class Property(_Rendered):
    """A message property, looked up by its exact (case-sensitive) name."""

    name: str

    def _pieces(self) -> _Pieces:
        return (self.name,)


@dataclass(frozen=True, slots=True)
class Constant(_Rendered):
    """A literal; TRUE, FALSE and NULL are also boolean expressions, as in RocketMQ."""

    value: JavaValue

    def _pieces(self) -> _Pieces:
        return (_literal(self.value),)


@dataclass(frozen=True, slots=True)
class Negate(_Rendered):
    """Unary minus. Deliberately not a ``Constant`` even over a literal: RocketMQ's checks skip it."""

    operand: Node

    def _pieces(self) -> _Pieces:
        return ("(-", self.operand, ")")


@dataclass(frozen=True, slots=True)
class Not(_Rendered):
    operand: Node

    def _pieces(self) -> _Pieces:
        return ("(NOT ", self.operand, ")")


@dataclass(frozen=True, slots=True)
class BooleanCast(_Rendered):
    """A bare property used as a condition; true only for a Boolean value, so never for a String."""

    operand: Node

    def _pieces(self) -> _Pieces:
        return (self.operand,)


@dataclass(frozen=True, slots=True)
class And(_Rendered):
    left: Node
    right: Node

    def _pieces(self) -> _Pieces:
        return ("(", self.left, " AND ", self.right, ")")


@dataclass(frozen=True, slots=True)
class Or(_Rendered):
    left: Node
    right: Node

    def _pieces(self) -> _Pieces:
        return ("(", self.left, " OR ", self.right, ")")


@dataclass(frozen=True, slots=True)
class Equal(_Rendered):
    """``=`` (``<>`` is ``NOT (=)``, ``IS NULL`` is ``= NULL`` without the parse-time NULL check)."""

    left: Node
    right: Node

    def _pieces(self) -> _Pieces:
        if isinstance(self.right, Constant) and self.right.value is None:
            return ("(", self.left, " IS NULL)")
        return ("(", self.left, " = ", self.right, ")")


@dataclass(frozen=True, slots=True)
class Compare(_Rendered):
    """``>``, ``>=``, ``<`` or ``<=``; BETWEEN is built from these."""

    op: str
    left: Node
    right: Node

    def _pieces(self) -> _Pieces:
        return ("(", self.left, f" {self.op} ", self.right, ")")


@dataclass(frozen=True, slots=True)
class InList(_Rendered):
    operand: Property
    values: frozenset[str]
    negated: bool

    def _pieces(self) -> _Pieces:
        items = ", ".join(_literal(v) for v in sorted(self.values))
        return (f"({self.operand} {'NOT IN' if self.negated else 'IN'} ({items}))",)


@dataclass(frozen=True, slots=True)
class StringMatch(_Rendered):
    """CONTAINS / STARTSWITH / ENDSWITH and their NOT forms."""

    op: str
    operand: Node
    search: str
    negated: bool

    def _pieces(self) -> _Pieces:
        return ("(", self.operand, f" {'NOT ' if self.negated else ''}{self.op} {_literal(self.search)})")


_Pieces = tuple["str | Node", ...]

Node = Property | Constant | Negate | Not | BooleanCast | And | Or | Equal | Compare | InList | StringMatch

_BOOLEAN_NODES = (Not, BooleanCast, And, Or, Equal, Compare, InList, StringMatch)


def is_boolean_expression(node: Node) -> bool:
    """RocketMQ's ``instanceof BooleanExpression``: the node yields TRUE/FALSE/null."""
    if isinstance(node, Constant):
        return node.value is None or isinstance(node.value, bool)
    return isinstance(node, _BOOLEAN_NODES)
