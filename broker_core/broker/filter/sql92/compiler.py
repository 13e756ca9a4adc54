"""Turns a node tree into nested closures, once per subscription, so matching a message does no parsing.

Each closure takes the message properties and returns ``True``, ``False`` or ``None`` (SQL's unknown)
for conditions, or a Java-typed value for operands, following RocketMQ's evaluation step by step,
including which side is evaluated first and when evaluation stops early: that order decides whether
a conversion error (which makes the whole message a non-match) happens at all. AND/OR chains are
flattened into one loop, which gives the same answers as RocketMQ's left-nested pairs without a
Python frame per term.

What is left nests one closure per level, so the depth of the flattened tree is limited to
:data:`MAX_DEPTH` (NOT chains, alternating AND/OR groups, operators over groups): that bounds the
stack a match needs for every message, and is checked by counting, before compiling, so the answer
never depends on the caller's stack. It is separate from the parser's ``MAX_PARENTHESES``, which
bounds only how deep parentheses nest in the text: ``((a = '0') OR a = '1') OR ...`` nested a
thousand deep is one OR loop here (depth 2), while ``((a AND b) OR c) AND d ...`` adds a level per
group and is refused past 100.
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
"""Levels of closures a selector may nest, counted after AND/OR chains are flattened."""

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
    if tree_depth(node) > MAX_DEPTH:
        raise FilterSyntaxError(f"expression is nested more than {MAX_DEPTH} levels deep", expression=source)
    evaluator, depth = _compile(node)  # recurses at most MAX_DEPTH levels, checked just above
    assert depth <= MAX_DEPTH
    return evaluator


def _operands(node: Node) -> list[Node]:
    """The nodes :func:`_compile` compiles directly below ``node``."""
    if isinstance(node, And | Or):
        return _chain(node, type(node))
    if isinstance(node, Equal | Compare):
        return [node.left, node.right]
    if isinstance(node, Negate | Not | BooleanCast | InList | StringMatch):
        return [node.operand]
    return []


def tree_depth(root: Node) -> int:
    """The depth :func:`_compile` reports for ``root``, worked out with an explicit stack (post-order)."""
    depth: dict[int, int] = {}
    todo: list[tuple[Node, bool]] = [(root, False)]
    while todo:
        node, operands_done = todo.pop()
        below = _operands(node)
        if not operands_done:
            todo.append((node, True))
            todo.extend((n, False) for n in below)
            continue
        deepest = max((depth[id(n)] for n in below), default=0)
        if isinstance(node, Equal) and isinstance(node.right, Constant) and node.right.value is None:
            deepest = depth[id(node.left)]  # IS NULL: the NULL is not compiled
        elif isinstance(node, StringMatch) and not node.search:
            deepest = 0  # constant FALSE
        elif isinstance(node, Negate) and isinstance(node.operand, Constant | Negate) and deepest == 1:
            deepest = 0  # folded into a constant
        depth[id(node)] = deepest + 1
    return depth[id(root)]


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
    if isinstance(node, Negate):
        base, negations = node.operand, 1
        while isinstance(base, Negate):
            base, negations = base.operand, negations + 1
        if isinstance(base, Constant):  # - - 5 folds to a constant however long the chain
            folded = base.value
            for _ in range(negations):
                folded = negate(folded)
            return (lambda p: folded), 1
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
