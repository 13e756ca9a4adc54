"""SQL92 selectors at subscription time: what parses, how it groups, and what is refused and where."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from broker_core.broker.filter import FilterSyntaxError, Sql92Filter, build_filter, compile_sql92
from broker_core.broker.filter.sql92.compiler import MAX_DEPTH, Evaluator, compile_tree
from broker_core.broker.filter.sql92.javalang import JavaLong
from broker_core.broker.filter.sql92.nodes import Constant, Negate, Node
from broker_core.broker.filter.sql92.parser import MAX_PARENTHESES, parse


def tree(expr: str) -> str:
    return str(compile_sql92(expr).tree)


def refuse(expr: str) -> FilterSyntaxError:
    with pytest.raises(FilterSyntaxError) as info:
        compile_sql92(expr)
    return info.value


# -- grouping --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("expr", "grouped"),
    [
        ("a = 1 OR b = 2 AND c = 3", "((a = 1) OR ((b = 2) AND (c = 3)))"),
        ("a = 1 AND b = 2 OR c = 3", "(((a = 1) AND (b = 2)) OR (c = 3))"),
        ("(a = 1 OR b = 2) AND c = 3", "(((a = 1) OR (b = 2)) AND (c = 3))"),
        ("NOT a = 1 OR b", "(((NOT a) = 1) OR b)"),
        ("NOT (a = 1) AND b = 2", "((NOT (a = 1)) AND (b = 2))"),
        ("NOT NOT (a = 1)", "(NOT (NOT (a = 1)))"),
        ("a > 1 = TRUE", "((a > 1) = TRUE)"),
        ("a IS NULL OR b IS NOT NULL", "((a IS NULL) OR (NOT (b IS NULL)))"),
        ("a <> 'x'", "(NOT (a = 'x'))"),
        ("a BETWEEN 1 AND 3 AND b = 1", "(((a >= 1) AND (a <= 3)) AND (b = 1))"),
        ("a NOT BETWEEN 1 AND 3", "((a < 1) OR (a > 3))"),
        ("a NOT IN ('x')", "(a NOT IN ('x'))"),
        (
            "a NOT CONTAINS 'x' AND b STARTSWITH 'y' OR c NOT ENDSWITH 'z'",
            "(((a NOT CONTAINS 'x') AND (b STARTSWITH 'y')) OR (c NOT ENDSWITH 'z'))",
        ),
        ("((((a = 1))))", "(a = 1)"),
        ("((a = 1 OR (b = 2 AND (c = 3 OR d = 4))))", "((a = 1) OR ((b = 2) AND ((c = 3) OR (d = 4))))"),
        ("a", "a"),
        ("True", "TRUE"),
        ("a > -5", "(a > (-5))"),
        ("a > +5", "(a > 5)"),
    ],
)
def test_grouping_follows_rocketmq_precedence(expr: str, grouped: str) -> None:
    assert tree(expr) == grouped


def test_keywords_are_case_insensitive_and_properties_are_not() -> None:
    assert tree("a is not null and B between 1 And 2 oR c In ('x') AnD d not Contains 'y'") == (
        "(((NOT (a IS NULL)) AND ((B >= 1) AND (B <= 2))) OR ((c IN ('x')) AND (d NOT CONTAINS 'y')))"
    )
    assert tree("andy = 1 AND nota = 2 AND $_x9 = 3") == "(((andy = 1) AND (nota = 2)) AND ($_x9 = 3))"


def test_whitespace_and_comments() -> None:
    assert tree(" \t\r\n a\f=\n1 ") == "(a = 1)"
    assert tree("a = 1 -- a line comment\n AND b = 2") == "((a = 1) AND (b = 2))"
    assert tree("a = /* block */ 1 /** x * / y **/") == "(a = 1)"
    # Without a line end "--" is two minus signs, exactly as in RocketMQ's token rules.
    assert tree("a = --1") == "(a = (-(-1)))"


# -- literals --------------------------------------------------------------------------------------


def literal(expr: str) -> object:
    node = compile_sql92(f"a = {expr}").tree
    right = node.right  # type: ignore[union-attr]
    assert isinstance(right, Constant)
    return right.value


def test_string_literals_unescape_doubled_quotes() -> None:
    assert literal("''") == ""
    assert literal("'it''s'") == "it's"
    assert literal("''''") == "'"
    assert literal("'''''tag'''''") == "''tag''"
    assert literal("'a\nb -- c /* d */'") == "a\nb -- c /* d */"
    assert literal("'中文'") == "中文"


def test_integer_literals_are_integer_or_long() -> None:
    assert type(literal("2147483647")) is int
    assert type(literal("2147483648")) is JavaLong
    assert literal("9223372036854775807") == 2**63 - 1
    assert type(literal("5L")) is int and literal("5l") == 5
    assert type(literal("0")) is int


def test_float_literals() -> None:
    assert literal("5.5") == 5.5
    assert literal("5.") == 5.0
    assert literal(".5") == 0.5
    assert literal("1e3") == 1000.0 and type(literal("1e3")) is float
    assert literal("3.1E10") == 3.1e10
    assert literal("2.5e-3") == 0.0025


def test_negative_literals_are_negations_not_constants() -> None:
    node = compile_sql92("a > -5").tree.right  # type: ignore[union-attr]
    assert isinstance(node, Negate)
    # ... so RocketMQ's constant checks do not apply: reversed negative bounds are accepted.
    compile_sql92("a BETWEEN -1 AND -5")


def test_booleans_and_null() -> None:
    assert literal("TRUE") is True
    assert literal("false") is False
    assert tree("a IS NULL") == "(a IS NULL)"
    assert tree("NULL") == "NULL"


# -- refusals --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("expr", "position", "fragment"),
    [
        ("a = 'abc", 4, "unterminated string"),
        ("a = 'it''s", 4, "unterminated string"),
        ("a = ", 4, "found end of expression"),
        ("a =", 3, "expected a property, a literal"),
        ("= 1", 0, "expected a property"),
        ("a = 1 AND", 9, "found end of expression"),
        ("a = 1 OR OR b = 2", 9, "found OR"),
        ("a BETWEEN 1", 11, "expected AND"),
        ("a BETWEEN 1 OR 2", 12, "expected AND"),
        ("a != 1", 2, "use <>"),
        ("a == 1", 3, "found '='"),
        ("a ~ 1", 2, "unexpected character '~'"),
        ('a = "x"', 4, "single quotes"),
        ("a = 1 && b = 2", 6, "use AND"),
        ("a = 1 b = 2", 6, "after a complete expression"),
        ("a = 1)", 5, "unbalanced ')'"),
        ("(a = 1", 6, "expected ')'"),
        ("a NOT b", 6, "must be followed by BETWEEN"),
        ("a IS 1", 5, "expected NULL or NOT NULL"),
        ("a IS NOT 1", 9, "expected NULL"),
        ("a IN 'x'", 5, "'(' after IN"),
        ("a IN ()", 6, "string literals only"),
        ("a IN ('x' 'y')", 10, "',' or ')'"),
        ("a IN ('x', 1)", 11, "string literals only"),
        ("a CONTAINS b", 11, "string literal after CONTAINS"),
        ("a NOT STARTSWITH 5", 17, "string literal after STARTSWITH"),
        ("a = 1 /* open", 6, "unterminated /* comment"),
        ("a.b = 1", 1, "unexpected character '.'"),
        ("a = 007", 5, "after a complete expression"),
        ("a = 0L", 5, "after a complete expression"),
        ("", 0, "empty"),
        ("   ", 3, "empty"),
        ("a = 1 garbage", 6, "after a complete expression"),
    ],
)
def test_syntax_errors_name_position_and_expectation(expr: str, position: int, fragment: str) -> None:
    err = refuse(expr)
    assert err.position == position
    assert fragment in str(err)
    assert err.expression == expr
    assert repr(expr) in str(err)


def test_error_carries_expected_and_found() -> None:
    err = refuse("a = 1 AND")
    assert "a property" in err.expected
    assert err.found == "end of expression"


@pytest.mark.parametrize(
    ("expr", "fragment"),
    [
        ("a = NULL", "use IS [NOT] NULL"),
        ("NULL = a", "use IS [NOT] NULL"),
        ("a <> NULL", "use IS [NOT] NULL"),
        ("TRUE = 1", "cannot be compared"),
        ("a > 'x'", "only numbers are ordered"),
        ("'x' <= a", "only numbers are ordered"),
        ("a > TRUE", "only numbers are ordered"),
        ("a < NULL", "only numbers are ordered"),
        ("a > (b = 1)", "condition"),
        ("NOT a > 5", "condition"),
        ("a BETWEEN 3 AND 1", "greater than upper bound"),
        ("a BETWEEN 1 AND NULL", "cannot be NULL"),
        ("a BETWEEN 1 AND 'x'", "cannot be compared"),
        ("a BETWEEN 'a' AND 'b'", "only numbers are ordered"),
        ("a NOT BETWEEN 'a' AND 1", "only numbers are ordered"),
        ("'x' IN ('x')", "IN needs a property"),
        ("(a = 1) NOT IN ('x')", "IN needs a property"),
        ("5", "must be a condition"),
        ("'x'", "must be a condition"),
        ("-a", "must be a condition"),
        ("a = 1 AND 5", "right of AND must be a condition"),
        ("'x' OR a = 1", "left of OR must be a condition"),
        ("NOT 5", "operand of NOT must be a condition"),
        ("a > 9223372036854775808", "does not fit a 64-bit long"),
        ("a > 1e400", "exceeds"),
        ("a > 0.0", "below Double.MIN_VALUE"),
        ("a > 1e-400", "below Double.MIN_VALUE"),
    ],
)
def test_semantic_checks_rocketmq_makes_while_parsing(expr: str, fragment: str) -> None:
    assert fragment in str(refuse(expr))


def test_equal_bounds_and_mixed_numeric_bounds_are_accepted() -> None:
    compile_sql92("a BETWEEN 3 AND 3")
    compile_sql92("a BETWEEN 1 AND 2.5")
    compile_sql92("a BETWEEN 2147483647 AND 2147483648")


def left_nested_or(n: int) -> str:
    """What query builders write: ``((a = '0') OR a = '1') OR a = '2' ...``: n terms, n - 1 '(' levels."""
    expr = "a = '0'"
    for i in range(1, n):
        expr = f"({expr}) OR a = '{i}'"
    return expr


def at_stack_depth(frames: int, fn: Callable[[], object]) -> object:
    """Call ``fn`` from ``frames`` Python frames deeper than the caller, as a deep call path in the broker would."""
    return fn() if frames == 0 else at_stack_depth(frames - 1, fn)


def outcome(expr: str, props: dict[str, str]) -> str:
    try:
        f = Sql92Filter(expr, *_parse_and_compile(expr))
    except FilterSyntaxError as e:
        return f"refused: {e.detail}"
    return "match" if f.is_matched_by_commit_log(props) else "no match"


def _parse_and_compile(expr: str) -> tuple[Node, Evaluator]:
    tree = parse(expr)  # bypasses compile_sql92's cache, so every call really parses
    return tree, compile_tree(tree, expr)


def test_left_nested_or_chains_of_a_thousand_levels_are_accepted() -> None:
    """Apache parses these (its JavaCC parser overflows a default JVM stack only past ~1000 levels)."""
    f = compile_sql92(left_nested_or(MAX_PARENTHESES + 1))
    assert f.is_matched_by_commit_log({"a": str(MAX_PARENTHESES)})
    assert f.is_matched_by_commit_log({"a": "0"})
    assert not f.is_matched_by_commit_log({"a": "x"})
    assert str(f).count(" OR ") == MAX_PARENTHESES  # rendering a deep tree does not recurse either
    assert compile_sql92("(" * 1000 + "a = 1" + ")" * 1000).is_matched_by_commit_log({"a": "1"})


def test_parenthesis_nesting_limit_is_counted_not_a_recursion_error() -> None:
    assert MAX_PARENTHESES >= 1000
    deepest = "(" * MAX_PARENTHESES + "a = 1" + ")" * MAX_PARENTHESES
    compile_sql92(deepest)
    error = refuse("(" + deepest + ")")
    assert f"more than {MAX_PARENTHESES}" in str(error) and error.position == MAX_PARENTHESES
    assert f"more than {MAX_PARENTHESES}" in str(refuse(left_nested_or(MAX_PARENTHESES + 2)))


@pytest.mark.parametrize(
    ("expr", "props"),
    [
        (left_nested_or(100), {"a": "99"}),
        (left_nested_or(1001), {"a": "1000"}),
        ("(" * 1000 + "a = 1" + ")" * 1000, {"a": "1"}),
        ("(" * (MAX_PARENTHESES + 1) + "a = 1" + ")" * (MAX_PARENTHESES + 1), {"a": "1"}),
        ("NOT " * 100 + "(a = '1')", {"a": "1"}),
        ("NOT " * 101 + "(a = '1')", {"a": "1"}),
        ("NOT " * 3000 + "a", {"a": "1"}),
        ("a = " + "+ " * 3000 + "1", {"a": "1"}),
        ("a = " + "- " * 3000 + "1", {"a": "1"}),
        ("NOT " + "- " * 3000 + "1", {"a": "1"}),
    ],
    ids=[
        "or-chain-100",
        "or-chain-1001",
        "parens-1000",
        "parens-over-limit",
        "not-100",
        "not-101",
        "not-3000",
        "plus-3000",
        "minus-3000",
        "not-minus-3000",
    ],
)
def test_the_answer_does_not_depend_on_the_callers_stack_depth(expr: str, props: dict[str, str]) -> None:
    shallow = outcome(expr, props)
    assert at_stack_depth(500, lambda: outcome(expr, props)) == shallow
    assert "RecursionError" not in shallow


def test_deep_nesting_is_refused_not_crashed() -> None:
    assert compile_sql92("(" * 400 + "a = 1" + ")" * 400)  # only parentheses: nothing deep to evaluate
    assert f"more than {MAX_DEPTH} levels" in str(refuse("NOT " * 3000 + "a"))
    alternating = "a = '0'"
    for i in range(1, 200):
        alternating = f"({alternating}) {'AND' if i % 2 else 'OR'} a = '{i}'"
    assert f"more than {MAX_DEPTH} levels" in str(refuse(alternating))


def test_long_or_chains_compile_and_evaluate() -> None:
    expr = " OR ".join(f"a = '{i}'" for i in range(3000))
    f = compile_sql92(expr)
    assert f.is_matched_by_commit_log({"a": "2999"})
    assert not f.is_matched_by_commit_log({"a": "3000"})


def test_build_filter_sql92() -> None:
    f = build_filter("SQL92", "a = 1")
    assert isinstance(f, Sql92Filter)
    assert f.expression_type == "SQL92" and f.expression == "a = 1"
    assert f is build_filter("SQL92", "a = 1")  # compiled once, shared
    for empty in ("", "  ", None):
        with pytest.raises(FilterSyntaxError, match="empty"):
            build_filter("SQL92", empty)
