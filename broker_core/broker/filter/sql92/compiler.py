"""Turns a node tree into nested closures, once per subscription, so matching a message does no parsing.

Each closure takes the message properties and returns ``True``, ``False`` or ``None`` (SQL's unknown)
for conditions, or a Java-typed value for operands, following RocketMQ's evaluation step by step,
including which side is evaluated first and when evaluation stops early: that order decides whether
a conversion error (which makes the whole message a non-match) happens at all. AND/OR chains are
flattened into one loop, which gives the same answers as RocketMQ's left-nested pairs without a
Python frame per term.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from broker_core.broker.filter.errors import FilterSyntaxError
from broker_core.broker.filter.sql92.javalang import (
    JavaValue,
    compare_doubles,
    java_compare,
    negate,
    parse_java_double,
)
from broker_core.broker.filter.sql92.nodes import (
    And,
    BooleanCast,
    Compare,
    Constant,
    Equal,
    InList,
    Negate,
    Node,
    Not,
    Or,
    Property,
    StringMatch,
)

Properties = Mapping[str, str]
Evaluator = Callable[[Properties], JavaValue]

MAX_DEPTH = 100

_ORDER_TESTS: dict[str, Callable[[int], bool]] = {
    ">": lambda c: c > 0,
    ">=": lambda c: c >= 0,
    "<": lambda c: c < 0,
    "<=": lambda c: c <= 0,
}
_STRING_TESTS: dict[str, Callable[[str, str], bool]] = {
    "CONTAINS": lambda v, s: s in v,
    "STARTSWITH": str.startswith,
    "ENDSWITH": str.endswith,
}


def compile_tree(node: Node, source: str) -> Evaluator:
    """Compile ``node`` (parsed from ``source``); refuses trees too deep to evaluate safely."""
    try:
        evaluator, depth = _compile(node)
    except RecursionError:
        depth = MAX_DEPTH + 1
    if depth > MAX_DEPTH:
        raise FilterSyntaxError(f"expression is nested more than {MAX_DEPTH} levels deep", expression=source)
    return evaluator


def _chain(node: Node, kind: type[And] | type[Or]) -> list[Node]:
    """Operands of an AND (or OR) chain in evaluation order, however it is parenthesised."""
    out: list[Node] = []
    stack: list[Node] = [node]
    while stack:
        n = stack.pop()
        if isinstance(n, kind):
            stack.append(n.right)
            stack.append(n.left)
        else:
            out.append(n)
    return out


def _compile(node: Node) -> tuple[Evaluator, int]:
    if isinstance(node, Property):
        name = node.name
        return (lambda p: p.get(name)), 1
    if isinstance(node, Constant):
        value = node.value
        return (lambda p: value), 1
    if isinstance(node, And | Or):
        return _compile_chain(node)
    if isinstance(node, Equal):
        return _compile_equal(node)
    if isinstance(node, Compare):
        return _compile_compare(node)
    if isinstance(node, InList):
        return _compile_in(node)
    if isinstance(node, StringMatch):
        return _compile_string_match(node)
    operand, depth = _compile(node.operand)
    if isinstance(node, Negate):
        if isinstance(node.operand, Constant | Negate) and depth == 1:
            folded = negate(operand({}))
            return (lambda p: folded), 1
        return (lambda p: negate(operand(p))), depth + 1
    if isinstance(node, Not):

        def not_(p: Properties) -> bool | None:
            v = operand(p)
            return None if v is None else not v

        return not_, depth + 1
    assert isinstance(node, BooleanCast)

    def cast(p: Properties) -> bool | None:
        v = operand(p)
        if v is None:
            return None
        return v if type(v) is bool else False

    return cast, depth + 1


def _compile_chain(node: And | Or) -> tuple[Evaluator, int]:
    compiled = [_compile(n) for n in _chain(node, type(node))]
    parts = tuple(ev for ev, _ in compiled)
    depth = 1 + max(d for _, d in compiled)
    # AND stops at the first FALSE, OR at the first TRUE; otherwise any unknown makes it unknown.
    decisive = isinstance(node, Or)

    def chain(p: Properties) -> bool | None:
        unknown = False
        for part in parts:
            v = part(p)
            if v is None:
                unknown = True
            elif v is decisive:
                return decisive
        return None if unknown else not decisive

    return chain, depth


def _compile_equal(node: Equal) -> tuple[Evaluator, int]:
    left, ld = _compile(node.left)
    if isinstance(node.right, Constant) and node.right.value is None:
        return (lambda p: left(p) is None), ld + 1
    right, rd = _compile(node.right)

    def equal(p: Properties) -> bool | None:
        lv = left(p)
        rv = right(p)
        if lv is None:
            return True if rv is None else None
        if rv is None:
            return False
        return java_compare(lv, rv) == 0

    return equal, max(ld, rd) + 1


def _compile_compare(node: Compare) -> tuple[Evaluator, int]:
    left, ld = _compile(node.left)
    right, rd = _compile(node.right)
    test = _ORDER_TESTS[node.op]

    def compare(p: Properties) -> bool | None:
        lv = left(p)
        if lv is None:
            return None
        rv = right(p)
        if rv is None:
            return None
        if type(lv) is str and type(rv) is str:
            # Two strings are never ordered as text: both must read as doubles.
            return test(compare_doubles(parse_java_double(lv), parse_java_double(rv)))
        return test(java_compare(lv, rv))

    return compare, max(ld, rd) + 1


def _compile_in(node: InList) -> tuple[Evaluator, int]:
    operand, depth = _compile(node.operand)
    values, negated = node.values, node.negated

    def in_(p: Properties) -> bool | None:
        v = operand(p)
        if type(v) is not str:
            return None
        return (v in values) is not negated

    return in_, depth + 1


def _compile_string_match(node: StringMatch) -> tuple[Evaluator, int]:
    operand, depth = _compile(node.operand)
    search, negated, test = node.search, node.negated, _STRING_TESTS[node.op]
    if not search:
        # RocketMQ answers FALSE for an empty search string without looking at the operand.
        return (lambda p: False), 1

    def match(p: Properties) -> bool:
        v = operand(p)
        if type(v) is not str:
            return False
        return test(v, search) is not negated

    return match, depth + 1
