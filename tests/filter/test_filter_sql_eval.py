"""SQL92 evaluation on string properties, with RocketMQ's Java conversions and null rules."""

from __future__ import annotations

import pytest

from broker_core.broker.filter import SqlEvaluationError, build_filter, compile_sql92


def match(expr: str, **props: str) -> bool:
    return compile_sql92(expr).is_matched_by_commit_log(props)


def value(expr: str, **props: str) -> bool | None:
    """The three-valued result before the broker turns it into match / no match."""
    return compile_sql92(expr).evaluate(props)


def fails(expr: str, **props: str) -> bool:
    """RocketMQ's evaluation throws here; the broker then treats the message as not matching."""
    f = compile_sql92(expr)
    with pytest.raises(SqlEvaluationError):
        f.evaluate(props)
    return not f.is_matched_by_commit_log(props)


# -- comparisons -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("expr", "a", "expected"),
    [
        ("a = 10", "10", True),
        ("a = 10", "010", True),
        ("a = 10", "+10", True),
        ("a = 10", "11", False),
        ("a <> 10", "11", True),
        ("a <> 10", "10", False),
        ("a > 10", "11", True),
        ("a > 10", "10", False),
        ("a >= 10", "10", True),
        ("a >= 10", "9", False),
        ("a < 10", "9", True),
        ("a < 10", "10", False),
        ("a <= 10", "10", True),
        ("a <= 10", "11", False),
        ("a > -5", "-4", True),
        ("a < -5", "-4", False),
        ("a > 3.14", "3.1415", True),
        ("a > 3.1E10", "3.1415E10", True),
        ("a = 10.0", "10", True),
        ("a > 10.5", "11", True),
        ("a < 2.5", "2.5", False),
        ("a <= 2.5", "2.5", True),
        ("10 < a", "11", True),
        ("a = 'abc'", "abc", True),
        ("a = 'abc'", "ABC", False),
        ("a <> 'abc'", "abd", True),
        ("a = 'it''s'", "it's", True),
        ("a = '10'", "10.0", False),
    ],
)
def test_comparison_operators(expr: str, a: str, expected: bool) -> None:
    assert match(expr, a=a) is expected


def test_string_against_integer_literal_uses_integer_parsing() -> None:
    # Integer.valueOf: a decimal point or a value beyond 32 bits makes RocketMQ's evaluation throw.
    assert fails("price > 10", price="10.5")
    assert fails("price > 10", price="3000000000")
    assert fails("price > 10", price=" 11")
    assert fails("price = 10", price="abc")
    # ... while a Long literal parses the property as a long, and a double literal as a double.
    assert match("price > 2147483648", price="3000000000")
    assert match("price > 10.0", price="10.5")
    assert match("price > 10.0", price=" 10.5 ")
    assert match("price > 10.0", price="1.1e1")


def test_java_double_parsing_quirks() -> None:
    assert match("a > 1.0", a="2f")
    assert match("a > 1.0", a="0x1p4")
    assert match("a > 1.0", a="Infinity")
    assert not match("a > 1.0", a="-Infinity")
    assert match("a > 1.0", a="NaN")  # Double.compare puts NaN above everything
    assert not match("a = 1.0", a="NaN")
    assert fails("a > 1.0", a="1,5")
    assert fails("a > 1.0", a="1_000")


def test_unicode_digits_parse_like_java() -> None:
    assert match("a = 12", a="١٢")  # Arabic-Indic digits, accepted by Integer.parseInt


def test_two_properties_are_ordered_as_doubles_never_as_text() -> None:
    assert match("a > b", a="20", b="10")
    assert not match("a > b", a="10", b="20")
    assert match("a < b", a="9", b="10")  # numerically; as text "9" > "10"
    assert fails("a > b", a="x", b="y")
    assert match("a = b", a="3.14", b="3.14")
    assert not match("a = b", a="3.14", b="3.140")  # '=' on two strings is text equality
    assert match("a <> b", a="3.14", b="3.141")


def test_literal_on_either_side() -> None:
    assert match("5 = a", a="5")
    assert match("5 < a", a="6")
    assert match("'x' = a", a="x")
    assert match("1 = 1")
    assert match("1 = 1.0")
    assert value("'1' = 1.5") is False  # Double.valueOf("1") is 1.0: unequal, no error
    assert fails("'x' = 1")


# -- nulls -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "expr",
    [
        "a = 1",
        "a <> 1",
        "a > 1",
        "a >= 1",
        "a < 1",
        "a <= 1",
        "a = 'x'",
        "a <> 'x'",
        "a BETWEEN 1 AND 2",
        "a NOT BETWEEN 1 AND 2",
        "a IN ('x')",
        "a NOT IN ('x')",
        "a = TRUE",
        "a",
        "NOT a",
        "NOT (a = 1)",
    ],
)
def test_missing_property_never_matches(expr: str) -> None:
    assert value(expr, b="1") is None
    assert not match(expr, b="1")
    assert not compile_sql92(expr).is_matched_by_commit_log(None)


def test_is_null_and_is_not_null() -> None:
    assert match("a IS NULL")
    assert not match("a IS NULL", a="")
    assert match("a IS NOT NULL", a="")
    assert not match("a IS NOT NULL")
    assert value("a IS NULL") is True and value("a IS NULL", a="x") is False


def test_null_propagation_through_and_or_not() -> None:
    assert value("a = 1 AND b = 1", b="1") is None
    assert value("a = 1 AND b = 1", b="2") is False
    assert value("a = 1 OR b = 1", b="1") is True
    assert value("a = 1 OR b = 1", b="2") is None
    assert value("NOT (a = 1)") is None
    assert match("a IS NULL OR a = 'hello'")
    assert match("a IS NULL OR a = 'hello'", a="hello")
    assert not match("a IS NULL OR a = 'hello'", a="bye")


def test_equality_of_two_properties_with_nulls_is_asymmetric_as_in_rocketmq() -> None:
    assert value("a = b") is True  # null == null
    assert value("a = b", b="x") is None
    assert value("a = b", a="x") is False
    assert match("a <> b", a="x")  # NOT FALSE
    assert not match("a <> b", b="x")  # NOT null


def test_not_contains_family_on_missing_property() -> None:
    assert value("a CONTAINS 'x'") is False
    assert value("a NOT CONTAINS 'x'") is False
    assert match("NOT (a CONTAINS 'x')")


# -- booleans --------------------------------------------------------------------------------------


def test_boolean_literals_and_properties() -> None:
    assert match("TRUE") and match("true") and match("True")
    assert not match("FALSE")
    assert not match("NULL")
    assert match("a = TRUE", a="true")
    assert match("a = TRUE", a="TRUE")
    assert not match("a = TRUE", a="yes")
    assert match("a = FALSE", a="no")  # Boolean.valueOf: anything but "true" is false
    assert match("a <> TRUE", a="1")
    assert match("a=TRUE OR b=FALSE", b="false")
    assert match("TRUE = TRUE") and not match("TRUE = FALSE")
    assert match("(a > 1) = TRUE", a="2")
    assert match("(a > 1) = FALSE", a="0")


def test_bare_property_is_a_boolean_cast_which_strings_never_satisfy() -> None:
    assert value("a", a="true") is False
    assert value("a") is None
    assert match("NOT a", a="true")
    assert not match("a AND TRUE", a="TRUE")


def test_boolean_on_the_left_of_a_string_throws_like_java() -> None:
    # (NOT a) = 'x' compares a Boolean with a String: ClassCastException in RocketMQ.
    assert fails("NOT a = 'x'", a="y")
    assert fails("TRUE = a", a="true")
    assert not match("1 = TRUE")  # Integer vs Boolean: unequal, no error


# -- BETWEEN / IN / string matching ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("a", "inside"), [("-1", False), ("0", True), ("1", True), ("3", True), ("4", False)]
)
def test_between_includes_both_bounds(a: str, inside: bool) -> None:
    assert match("a BETWEEN 0 AND 3", a=a) is inside
    assert match("a NOT BETWEEN 0 AND 3", a=a) is (not inside)


def test_between_with_double_and_negative_bounds() -> None:
    assert match("a BETWEEN -2.5 AND 2.5", a="2.5")
    assert match("a BETWEEN -2.5 AND 2.5", a="-2.5")
    assert not match("a BETWEEN -2.5 AND 2.5", a="2.6")
    assert not match("a BETWEEN -1 AND -5", a="-3")  # accepted at parse time, matches nothing
    assert fails("a BETWEEN 0 AND 100", a="abc")


def test_in_lists() -> None:
    for expr in ("a IN ('3', '4', '5')", "a IN ('1', '2', '3', '4', '5', '6', '7')", "(a) IN ('3')"):
        assert match(expr, a="3")
        assert not match(expr, a="8")
        assert not match(expr, a="3 ")
    assert match("a NOT IN ('6', '4', '5')", a="3")
    assert not match("a NOT IN ('6', '4', '5')", a="4")
    assert match("a IN ('it''s', '')", a="it's")
    assert match("a IN ('it''s', '')", a="")
    assert not match("a IN ('3')", a="03")  # IN compares strings, never numbers


def test_contains_startswith_endswith() -> None:
    assert match("v CONTAINS 'x'", v="axb")
    assert match("v STARTSWITH 'ax'", v="axb")
    assert match("v ENDSWITH 'xb'", v="axb")
    assert not match("v NOT CONTAINS 'x'", v="axb")
    assert match("v NOT STARTSWITH 'x'", v="axb")
    assert match("v NOT ENDSWITH 'a'", v="axb")
    assert not match("v CONTAINS 'u'", v="axb")
    assert match("'axb' CONTAINS 'x'")
    assert match("' ' ENDSWITH ' '")
    # An empty search string is FALSE for both forms, whatever the value.
    for expr in ("v CONTAINS ''", "v NOT CONTAINS ''", "v STARTSWITH ''", "v NOT ENDSWITH ''"):
        assert value(expr, v="axb") is False
    # Non-string operands (a boolean) give FALSE, never an error.
    assert value("(v = 'x') CONTAINS 'x'", v="x") is False


def test_negation_of_non_numbers_is_null() -> None:
    assert value("-a > 1", a="5") is None
    assert value("-a IS NULL", a="5") is True
    assert value("a = -(b = 1)", a="x", b="1") is False  # -(Boolean) is null, so a = null is FALSE
    assert match("a = --1", a="1")


# -- compile once, evaluate many -------------------------------------------------------------------


def test_compiled_filter_is_reused_and_stateless() -> None:
    f = compile_sql92("a > 5 AND b IN ('x', 'y')")
    assert f is compile_sql92("a > 5 AND b IN ('x', 'y')")
    results = [f.is_matched_by_commit_log({"a": str(i), "b": "xy"[i % 2]}) for i in range(10)]
    assert results == [i > 5 for i in range(10)]
    assert f.is_matched_by_consume_queue(0) and f.is_matched_by_consume_queue(None)


def test_tags_is_an_ordinary_property() -> None:
    f = build_filter("SQL92", "TAGS IS NOT NULL AND TAGS = '''''tag'''''")
    assert f.is_matched_by_commit_log({"TAGS": "''tag''"})
    assert not f.is_matched_by_commit_log({"TAGS": "tag"})
    assert build_filter("SQL92", "TAGS IN ('TagA', 'TagB')").is_matched_by_commit_log({"TAGS": "TagB"})
    assert not build_filter("SQL92", "TAGS = 'TagA'").is_matched_by_commit_log({"tags": "TagA"})


# -- seed 004 --------------------------------------------------------------------------------------


def test_seed_004_examples() -> None:
    channel = build_filter("SQL92", "Channel='TaoBao'")
    assert channel.is_matched_by_commit_log({"Channel": "TaoBao", "Price": "5999"})
    assert not channel.is_matched_by_commit_log({"Channel": "JD"})

    pricey = build_filter("SQL92", "Channel='TaoBao' AND Price>5000")
    assert pricey.is_matched_by_commit_log({"Channel": "TaoBao", "Price": "5999"})
    assert not pricey.is_matched_by_commit_log({"Channel": "TaoBao", "Price": "4999"})
    assert not pricey.is_matched_by_commit_log({"Channel": "TaoBao"})

    everything = build_filter("SQL92", "True")
    assert everything.is_matched_by_commit_log({}) and everything.is_matched_by_commit_log(None)

    region = build_filter("SQL92", "region IS NOT NULL AND region = 'hangzhou'")
    assert region.is_matched_by_commit_log({"region": "hangzhou"})
    assert not region.is_matched_by_commit_log({})

    order = build_filter("SQL92", "status = 'order create' and (Price between 50 and 100)")
    assert order.is_matched_by_commit_log({"status": "order create", "Price": "50"})
    assert not order.is_matched_by_commit_log({"status": "order create", "Price": "101"})
    assert not order.is_matched_by_commit_log({"status": "order paid", "Price": "75"})

    assert match("a between 0 and 3", a="2")
    shop = build_filter("SQL92", "region IN ('hz','sh') AND price > 10")
    assert shop.is_matched_by_commit_log({"region": "sh", "price": "11"})
    assert not shop.is_matched_by_commit_log({"region": "bj", "price": "11"})
    assert not shop.is_matched_by_commit_log({"region": "hz", "price": "9"})
    assert not shop.is_matched_by_commit_log({"region": "hz", "price": "10.5"})  # Integer.valueOf throws


def test_rocketmq_and_or_examples() -> None:
    and_expr = "a=3 and b<>4 And c>5 AND d<=4"
    assert match(and_expr, a="3", b="5", c="6", d="4")
    assert not match(and_expr, a="3", b="4", c="6", d="4")
    or_expr = "a=3 or b<>4 Or c>5 OR d<=4"
    assert match(or_expr, a="0", b="4", c="0", d="4")
    assert not match(or_expr, a="0", b="4", c="0", d="5")
    assert match("(a not in ('6', '4', '5')) or (b in ('3', '4', '5'))", a="4", b="3")
