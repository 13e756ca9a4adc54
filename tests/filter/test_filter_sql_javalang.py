"""Java conversions and ordering the SQL92 filter relies on, plus fuzzing of the whole pipeline."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from broker_core.broker.filter import FilterSyntaxError, Sql92Filter, compile_sql92
from broker_core.broker.filter.sql92.javalang import (
    JavaLong,
    SqlEvaluationError,
    compare_doubles,
    java_compare,
    negate,
    parse_java_boolean,
    parse_java_double,
    parse_java_int,
    parse_java_long,
)


def test_parse_java_int_and_long_ranges() -> None:
    assert parse_java_int("2147483647") == 2**31 - 1
    assert parse_java_int("-2147483648") == -(2**31)
    assert parse_java_int("+7") == 7
    assert parse_java_long("9223372036854775807") == 2**63 - 1
    assert parse_java_int("0" * 5000 + "1") == 1  # Java accepts any number of leading zeros
    assert parse_java_int("-" + "٠" * 5000 + "12") == -12
    with pytest.raises(SqlEvaluationError):
        parse_java_long("1" * 5000)
    for bad in ("2147483648", "", "+", "-", " 1", "1 ", "1.0", "1e3", "0x10", "1_0", "١٢x"):
        with pytest.raises(SqlEvaluationError):
            parse_java_int(bad)
    with pytest.raises(SqlEvaluationError):
        parse_java_long("9223372036854775808")


MATHEMATICAL_BOLD_ONE = "\U0001d7cf"  # 𝟏: a decimal digit outside the BMP, a surrogate pair in Java


def test_integral_conversion_takes_bmp_digits_only() -> None:
    # Integer.parseInt reads UTF-16 chars with Character.digit(char, 10): BMP digits (full-width,
    # Arabic-Indic) count, a surrogate half does not, so a digit outside the BMP is a NumberFormatException.
    assert parse_java_int("\uff11\uff12") == 12 and parse_java_long("-\u0663") == -3
    for bad in (
        MATHEMATICAL_BOLD_ONE,
        "1" + MATHEMATICAL_BOLD_ONE,
        "-" + MATHEMATICAL_BOLD_ONE,
        "\U00016ac1",
    ):
        with pytest.raises(SqlEvaluationError):
            parse_java_int(bad)
        with pytest.raises(SqlEvaluationError):
            parse_java_long(bad)


@pytest.mark.parametrize(
    "expr",
    ["a = 1", "1 = a", "a < 9", "9 > a", "a BETWEEN 0 AND 9", "a = 1L", "a >= 1", "a <> 2"],
)
def test_property_with_a_digit_outside_the_bmp_is_not_a_number(expr: str) -> None:
    """Apache's broker throws NumberFormatException for a='𝟏' and delivers nothing; so does this one."""
    f = compile_sql92(expr)
    assert not f.is_matched_by_commit_log({"a": MATHEMATICAL_BOLD_ONE})
    assert f.is_matched_by_commit_log({"a": "\uff11"}) is True


@pytest.mark.parametrize(
    "text", ["\uff11", "\uff11.\uff15", MATHEMATICAL_BOLD_ONE + ".0", "\u0661.0", "\uff11e1"]
)
def test_double_conversion_takes_ascii_digits_only(text: str) -> None:
    """FloatingDecimal reads ASCII digits only (checked against Double.valueOf on OpenJDK 17)."""
    with pytest.raises(SqlEvaluationError):
        parse_java_double(text)
    assert not compile_sql92("a = 1.0").is_matched_by_commit_log({"a": text})


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1", 1.0),
        ("-1.5", -1.5),
        (".5", 0.5),
        ("5.", 5.0),
        ("1e3", 1000.0),
        ("1E-3", 0.001),
        ("2f", 2.0),
        ("2.5D", 2.5),
        ("  7\t", 7.0),
        ("0x1p4", 16.0),
        ("-0x1.8p1", -3.0),
        ("Infinity", math.inf),
        ("-Infinity", -math.inf),
        ("1e400", math.inf),
    ],
)
def test_parse_java_double(text: str, expected: float) -> None:
    assert parse_java_double(text) == expected


@pytest.mark.parametrize("bad", ["", ".", "e5", "1e", "inf", "nan", "infinity", "1,5", "0x1", "1.0ff", "١"])
def test_parse_java_double_rejects(bad: str) -> None:
    with pytest.raises(SqlEvaluationError):
        parse_java_double(bad)


def test_parse_java_double_nan_and_negative_zero() -> None:
    assert math.isnan(parse_java_double("NaN"))
    assert math.copysign(1.0, parse_java_double("-0")) == -1.0


def test_parse_java_boolean() -> None:
    assert parse_java_boolean("true") and parse_java_boolean("TrUe")
    for s in ("", "yes", "1", " true", "truee", "false"):
        assert not parse_java_boolean(s)


def test_compare_doubles_matches_double_compare() -> None:
    nan = math.nan
    assert compare_doubles(1.0, 2.0) == -1 and compare_doubles(2.0, 1.0) == 1
    assert compare_doubles(nan, nan) == 0
    assert compare_doubles(nan, math.inf) == 1 and compare_doubles(math.inf, nan) == -1
    assert compare_doubles(0.0, -0.0) == 1 and compare_doubles(-0.0, 0.0) == -1
    assert compare_doubles(-0.0, -0.0) == 0


def test_java_compare_class_rules() -> None:
    assert java_compare(5, JavaLong(5)) == 0
    assert java_compare(JavaLong(2**40), 5) == 1
    assert java_compare(5, 5.5) == -1
    assert java_compare(JavaLong(2**53 + 1), float(2**53)) == 0  # long -> double loses the 1
    assert java_compare("5", 5) == 0 and java_compare(5, "6") == -1
    assert java_compare("3000000000", JavaLong(3000000000)) == 0
    assert java_compare("true", True) == 0 and java_compare("x", True) == -1
    assert java_compare(True, 1) == -1 and java_compare(1, True) == -1
    assert java_compare(False, True) == -1
    assert java_compare("\uffff", "\U0001f600") == 1  # UTF-16 order, not code point order
    with pytest.raises(SqlEvaluationError):
        java_compare(True, "true")
    with pytest.raises(SqlEvaluationError):
        java_compare("3000000000", 1)


def test_negate_keeps_the_java_class() -> None:
    assert type(negate(JavaLong(5))) is JavaLong
    assert negate(5) == -5 and type(negate(5)) is int
    assert negate(2.5) == -2.5
    assert negate("5") is None and negate(True) is None and negate(None) is None


# -- fuzzing ---------------------------------------------------------------------------------------

FRAGMENTS = [
    "a",
    "b",
    "TAGS",
    "=",
    "<>",
    ">",
    ">=",
    "<",
    "<=",
    "(",
    ")",
    "AND",
    "OR",
    "NOT",
    "IS",
    "NULL",
    "BETWEEN",
    "IN",
    "CONTAINS",
    "STARTSWITH",
    "ENDSWITH",
    "'x'",
    "'it''s'",
    "''",
    "1",
    "0",
    "-",
    "+",
    "2.5",
    "1e3",
    "9999999999",
    "TRUE",
    "FALSE",
    ",",
    "'",
    "!",
    "--",
    "\n",
    "/*",
    "*/",
    ".",
    "L",
]
PROPS = st.dictionaries(
    st.sampled_from(["a", "b", "TAGS"]),
    st.sampled_from(["", "1", "0", "-1", "2.5", "x", "it's", "true", "NaN", "9999999999", "1e3", " 1"]),
)


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from(FRAGMENTS), min_size=1, max_size=12), PROPS)
def test_compile_only_raises_syntax_errors_and_matching_never_raises(
    parts: list[str], props: dict[str, str]
) -> None:
    expr = " ".join(parts)
    try:
        f = compile_sql92(expr)
    except FilterSyntaxError as e:
        assert e.expression == expr
        assert e.position is None or 0 <= e.position <= len(expr)
        return
    assert isinstance(f, Sql92Filter)
    assert f.is_matched_by_commit_log(props) in (True, False)


@settings(max_examples=200, deadline=None)
@given(st.integers(-50, 50), st.integers(-20, 20), st.integers(0, 20))
def test_between_equals_its_definition(a: int, low: int, span: int) -> None:
    high = low + span
    expr = f"a BETWEEN {low} AND {high}"
    assert compile_sql92(expr).is_matched_by_commit_log({"a": str(a)}) is (low <= a <= high)
    assert compile_sql92(f"a NOT BETWEEN {low} AND {high}").is_matched_by_commit_log({"a": str(a)}) is not (
        low <= a <= high
    )


@settings(max_examples=200, deadline=None)
@given(st.sets(st.text("xy'", max_size=3), min_size=1, max_size=7), st.text("xy'", max_size=3))
def test_in_equals_or_of_equalities(values: set[str], a: str) -> None:
    quoted = ["'" + v.replace("'", "''") + "'" for v in sorted(values)]
    in_expr = compile_sql92(f"a IN ({', '.join(quoted)})")
    or_expr = compile_sql92(" OR ".join(f"a = {q}" for q in quoted))
    assert (
        in_expr.is_matched_by_commit_log({"a": a})
        is or_expr.is_matched_by_commit_log({"a": a})
        is (a in values)
    )
