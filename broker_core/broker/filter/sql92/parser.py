"""Recursive-descent parser for RocketMQ's SQL92 selectors, one method per production of SelectorParser.jj.

Precedence therefore is RocketMQ's (loosest first): OR; AND; ``=`` ``<>`` ``IS [NOT] NULL``;
``>`` ``>=`` ``<`` ``<=`` ``[NOT] BETWEEN`` ``[NOT] IN`` ``[NOT] CONTAINS|STARTSWITH|ENDSWITH``;
unary ``+`` ``-`` ``NOT``. Because NOT is unary, ``NOT a = 'x'`` means ``(NOT a) = 'x'``.

The semantic checks RocketMQ makes while building expressions (no ``= NULL``, no ordering of
strings or booleans, BETWEEN bounds in order, IN only on a property, literals in range) are made
here too, so an expression RocketMQ refuses is refused at subscription time. One deliberate
difference: RocketMQ stops after the first complete expression and ignores what follows; this parser
rejects trailing input, since ``a = 1 AN b = 2`` silently meaning ``a = 1`` is never what was meant.
The one trailing input accepted is a ``--`` comment that runs to the end of the expression without a
line end (``a = 'x' -- only x``): RocketMQ's token rules read it as two minus signs, which its parser
then ignores, so it accepts the expression; what the writer meant is a comment.

Nesting does not use the Python stack. Each production is a generator that yields the sub-production
it needs and is resumed with its result; :meth:`Parser._run` drives them from an explicit list, so a
parenthesised sub-expression costs a few list entries instead of Python frames, and whether an
expression parses never depends on how deep the caller's stack already is. Prefix ``+``, ``-`` and
``NOT`` are read in a loop for the same reason. Parentheses may nest :data:`MAX_PARENTHESES` deep,
a limit counted here: query builders write ``((a = '0') OR a = '1') OR a = '2' ...`` with one level
per term, and Apache's JavaCC parser gets through about a thousand levels before its default JVM
stack overflows. Parentheses cost nothing at evaluation time when they do not change the operator
(an OR chain, however grouped, is one flat loop); the evaluation depth that remains, e.g. alternating
AND/OR groups or NOT chains, is limited separately by the compiler's ``MAX_DEPTH``.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import TypeAlias

from broker_core.broker.filter.errors import FilterSyntaxError
from broker_core.broker.filter.sql92.javalang import (
    DOUBLE_MAX,
    DOUBLE_MIN_POSITIVE,
    INT_MAX,
    LONG_MAX,
    JavaLong,
    SqlEvaluationError,
    java_compare,
)
from broker_core.broker.filter.sql92.lexer import DECIMAL, EOF, FLOAT, ID, STRING, Lexer, Token, describe
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
    is_boolean_expression,
)

NULL = Constant(None)
_ORDERING = (">", ">=", "<", "<=")
_STRING_OPS = ("CONTAINS", "STARTSWITH", "ENDSWITH")
_AFTER_NOT = ("BETWEEN", "IN", *_STRING_OPS)
_OPERAND = ("a property", "a literal", "'('", "NOT", "'-'", "'+'")
_CONTINUATION = ("AND", "OR", "a comparison operator", "end of expression")
_PREFIX = ("+", "-", "NOT")

MAX_PARENTHESES = 2000
"""How deep parentheses may nest: twice what Apache's parser reaches on a default JVM stack."""

# A production: yields the sub-productions it needs, is sent their results, returns its node.
_Production: TypeAlias = Generator["_Production", Node, Node]


class Parser:
    """Parses one expression; create a new instance per expression."""

    def __init__(self, source: str) -> None:
        self._src = source
        self._lexer = Lexer(source)
        self._ahead: list[Token] = []
        self._open_parentheses = 0

    # -- token plumbing -------------------------------------------------------------------------

    def _peek(self, k: int = 0) -> Token:
        while len(self._ahead) <= k:
            self._ahead.append(self._lexer.next())
        return self._ahead[k]

    def _advance(self) -> Token:
        tok = self._peek()
        del self._ahead[0]
        return tok

    def _error(self, detail: str, tok: Token, expected: tuple[str, ...] = ()) -> FilterSyntaxError:
        return FilterSyntaxError(
            detail, expression=self._src, position=tok.pos, expected=expected, found=describe(tok)
        )

    def _unexpected(self, tok: Token, expected: tuple[str, ...]) -> FilterSyntaxError:
        return self._error(f"expected {_one_of(expected)} but found {describe(tok)}", tok, expected)

    def _expect(self, kind: str, what: str) -> Token:
        tok = self._peek()
        if tok.kind != kind:
            raise self._unexpected(tok, (what,))
        return self._advance()

    # -- productions ----------------------------------------------------------------------------

    def parse(self) -> Node:
        """JmsSelector, plus the end-of-input check RocketMQ lacks."""
        first = self._peek()
        if first.kind == EOF:
            raise self._error("empty SQL92 expression", first, _OPERAND)
        node = self._as_boolean(self._run(self._or()), first, "the expression")
        tok = self._peek()
        if tok.kind != EOF and not self._is_final_line_comment(tok):
            raise self._trailing(tok)
        return node

    def _is_final_line_comment(self, tok: Token) -> bool:
        """``tok`` starts a ``--`` comment with no line end after it (one with a line end the lexer has
        skipped already): it runs to the end of the expression and is ignored, as RocketMQ ignores it."""
        return tok.kind == "-" and self._src.startswith("--", tok.pos)

    def _trailing(self, tok: Token) -> FilterSyntaxError:
        if tok.kind == "NOT":
            return self._error(
                f"NOT after an operand must be followed by {_one_of(_AFTER_NOT)}",
                self._peek(1),
                _AFTER_NOT,
            )
        if tok.kind == ")":
            return self._error("unbalanced ')'", tok, _CONTINUATION)
        return self._error(f"unexpected {describe(tok)} after a complete expression", tok, _CONTINUATION)

    @staticmethod
    def _run(start: _Production) -> Node:
        """Drives the productions: a yielded production runs next, its result resumes the one below it."""
        stack = [start]
        result: Node | None = None
        while True:
            try:
                call = stack[-1].send(result)  # type: ignore[arg-type]  # None starts a production
            except StopIteration as done:
                stack.pop()
                if not stack:
                    return done.value  # type: ignore[no-any-return]
                result = done.value
            else:
                stack.append(call)
                result = None

    def _or(self) -> _Production:
        left = yield self._and()
        while self._peek().kind == "OR":
            op = self._advance()
            right = yield self._and()
            left = Or(self._as_boolean(left, op, "left of OR"), self._as_boolean(right, op, "right of OR"))
        return left

    def _and(self) -> _Production:
        left = yield self._equality()
        while self._peek().kind == "AND":
            op = self._advance()
            right = yield self._equality()
            left = And(self._as_boolean(left, op, "left of AND"), self._as_boolean(right, op, "right of AND"))
        return left

    def _equality(self) -> _Production:
        left = yield self._comparison()
        while True:
            tok = self._peek()
            if tok.kind == "=":
                self._advance()
                left = self._equal(left, (yield self._comparison()), tok)
            elif tok.kind == "<>":
                self._advance()
                left = Not(self._equal(left, (yield self._comparison()), tok))
            elif tok.kind == "IS":
                self._advance()
                if self._peek().kind == "NOT":
                    self._advance()
                    self._expect("NULL", "NULL")
                    left = Not(Equal(left, NULL))
                elif self._peek().kind == "NULL":
                    self._advance()
                    left = Equal(left, NULL)
                else:
                    raise self._unexpected(self._peek(), ("NULL", "NOT NULL"))
            else:
                return left

    def _comparison(self) -> _Production:
        left = yield self._unary()
        while True:
            tok = self._peek()
            kind = tok.kind
            negated = kind == "NOT" and self._peek(1).kind in _AFTER_NOT
            if negated:
                self._advance()
                kind = self._peek().kind
            elif kind not in _ORDERING and kind not in _AFTER_NOT:
                return left
            op = self._advance()
            if kind in _ORDERING:
                left = self._ordering(kind, left, (yield self._unary()), op)
            elif kind in _STRING_OPS:
                search = self._expect(STRING, f"a string literal after {kind}").value
                left = StringMatch(kind, left, search, negated)
            elif kind == "BETWEEN":
                low = yield self._unary()
                self._expect("AND", "AND between the BETWEEN bounds")
                high = yield self._unary()
                left = self._between(left, low, high, negated, op)
            else:
                left = self._in(left, negated, op)

    def _unary(self) -> _Production:
        """Prefix operators, then a primary: a parenthesised expression or a single token."""
        prefixes: list[Token] = []
        while self._peek().kind in _PREFIX:
            tok = self._advance()
            if tok.kind != "+":  # unary plus changes nothing, as in RocketMQ
                prefixes.append(tok)
        tok = self._peek()
        if tok.kind == "(":
            if self._open_parentheses == MAX_PARENTHESES:
                raise self._error(f"parentheses are nested more than {MAX_PARENTHESES} levels deep", tok)
            self._advance()
            self._open_parentheses += 1
            node = yield self._or()
            self._expect(")", "')'")
            self._open_parentheses -= 1
        else:
            node = self._primary()
        for tok in reversed(prefixes):  # the innermost operator applies first
            if tok.kind == "-":
                node = Negate(node)
            else:
                node = Not(self._as_boolean(node, tok, "operand of NOT"))
        return node

    def _primary(self) -> Node:
        """A property or literal ('(' is handled by :meth:`_unary`, which can resume after the group)."""
        tok = self._advance()
        kind = tok.kind
        if kind == ID:
            return Property(tok.value)
        if kind == STRING:
            return Constant(tok.value)
        if kind == DECIMAL:
            return self._decimal(tok)
        if kind == FLOAT:
            return self._float(tok)
        if kind in ("TRUE", "FALSE"):
            return Constant(kind == "TRUE")
        if kind == "NULL":
            return NULL
        raise self._unexpected(tok, _OPERAND)

    # -- literals -------------------------------------------------------------------------------

    def _decimal(self, tok: Token) -> Constant:
        """Integer literals are Integer when they fit 32 bits, else Long (an ``L`` suffix changes nothing)."""
        value = int(tok.text.rstrip("lL"))
        if value > LONG_MAX:
            raise self._error(f"integer literal {tok.text} does not fit a 64-bit long", tok)
        return Constant(value if value <= INT_MAX else JavaLong(value))

    def _float(self, tok: Token) -> Constant:
        """RocketMQ only takes finite floats not below Double.MIN_VALUE, so ``0.0`` is refused too."""
        value = float(tok.text)
        if value > DOUBLE_MAX:
            raise self._error(f"float literal {tok.text} exceeds {DOUBLE_MAX!r}", tok)
        if value < DOUBLE_MIN_POSITIVE:
            raise self._error(
                f"float literal {tok.text} is below Double.MIN_VALUE (RocketMQ rejects 0.0; write 0)", tok
            )
        return Constant(value)

    # -- RocketMQ's construction-time checks ----------------------------------------------------

    def _as_boolean(self, node: Node, at: Token, role: str) -> Node:
        if is_boolean_expression(node):
            return node
        if isinstance(node, Property):
            return BooleanCast(node)
        raise self._error(f"{role} must be a condition, but {node} is a value", at, ("a condition",))

    def _equal(self, left: Node, right: Node, op: Token) -> Node:
        for side in (left, right):
            if isinstance(side, Constant) and side.value is None:
                raise self._error("NULL cannot be compared with '=' or '<>'; use IS [NOT] NULL", op)
        if (
            isinstance(left, Constant)
            and isinstance(right, Constant)
            and is_boolean_expression(left)
            and not is_boolean_expression(right)
        ):
            raise self._error(f"{left} cannot be compared with {right}", op)
        return Equal(left, right)

    def _ordering(self, op: str, left: Node, right: Node, at: Token) -> Node:
        for side in (left, right):
            if isinstance(side, Constant):
                if isinstance(side.value, bool) or not isinstance(side.value, int | float):
                    raise self._error(
                        f"{side} cannot be compared with '{at.text}': only numbers are ordered", at
                    )
            elif is_boolean_expression(side):
                raise self._error(f"the condition {side} cannot be compared with '{at.text}'", at)
        return Compare(op, left, right)

    def _between(self, value: Node, low: Node, high: Node, negated: bool, at: Token) -> Node:
        if negated:
            return Or(self._ordering("<", value, low, at), self._ordering(">", value, high, at))
        if isinstance(low, Constant) and isinstance(high, Constant):
            if low.value is None or high.value is None:
                raise self._error("BETWEEN bounds cannot be NULL", at)
            try:
                ordered = java_compare(high.value, low.value) >= 0
            except SqlEvaluationError as e:
                raise self._error(f"BETWEEN bounds {low} and {high} cannot be compared ({e})", at) from None
            if not ordered:
                raise self._error(f"BETWEEN lower bound {low} is greater than upper bound {high}", at)
        return And(self._ordering(">=", value, low, at), self._ordering("<=", value, high, at))

    def _in(self, left: Node, negated: bool, at: Token) -> Node:
        if not isinstance(left, Property):
            raise self._error(f"IN needs a property on its left, not {left}", at)
        self._expect("(", "'(' after IN")
        values = [self._in_item()]
        while self._peek().kind == ",":
            self._advance()
            values.append(self._in_item())
        self._expect(")", "',' or ')' in the IN list")
        return InList(left, frozenset(values), negated)

    def _in_item(self) -> str:
        tok = self._peek()
        if tok.kind != STRING:
            raise self._error(
                f"IN lists hold string literals only, found {describe(tok)}", tok, ("a string literal",)
            )
        return self._advance().value


def _one_of(options: tuple[str, ...]) -> str:
    if len(options) == 1:
        return options[0]
    return ", ".join(options[:-1]) + " or " + options[-1]


def parse(source: str) -> Node:
    """Parse a selector into its node tree; any refusal is a :class:`FilterSyntaxError`."""
    return Parser(source).parse()
