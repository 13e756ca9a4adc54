"""A ``--`` comment that ends the expression without a line end is accepted, as Apache RocketMQ accepts it
(its LINE_COMMENT token needs a line end, so the text lexes as two minus signs, which its parser then
ignores after the complete expression); every other trailing input is still refused."""

from __future__ import annotations

import pytest

from broker_core.broker.filter import FilterSyntaxError, build_filter, compile_sql92


@pytest.mark.parametrize("expr", [
    "a = 'x' -- only x",
    "a = 'x' --",
    "a = 'x'-- it's a comment: ' \" & | ~",
    "a = 'x' /* block */ -- and a line comment",
    "a = 'x' -- first line\n-- last line without its end",
])
def test_a_final_line_comment_without_line_end_is_ignored(expr: str) -> None:
    assert str(compile_sql92(expr).tree) == "(a = 'x')"
    f = build_filter("SQL92", expr)
    assert f.is_matched_by_commit_log({"a": "x"}) and not f.is_matched_by_commit_log({"a": "y"})


def test_minus_signs_inside_the_expression_keep_their_meaning() -> None:
    assert str(compile_sql92("a = --1").tree) == "(a = (-(-1)))"
    assert str(compile_sql92("a = --1 -- one").tree) == "(a = (-(-1)))"


@pytest.mark.parametrize(("expr", "position"), [
    ("a = 'x' -", 8),
    ("a = 'x' - - c", 8),
    ("a = 'x' garbage -- c", 8),
    ("a = 'x' -- c\n garbage", 14),
])
def test_other_trailing_input_is_still_refused(expr: str, position: int) -> None:
    with pytest.raises(FilterSyntaxError) as info:
        compile_sql92(expr)
    assert info.value.position == position
