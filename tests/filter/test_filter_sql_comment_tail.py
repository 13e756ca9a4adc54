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


@pytest.mark.parametrize("line_end", ["\n", "\r", "\r\n"])
def test_line_comments_end_at_either_line_end(line_end: str) -> None:
    assert str(compile_sql92(f"a = 1 -- one{line_end}AND b = 2 -- two{line_end}").tree) == "((a = 1) AND (b = 2))"


def test_many_line_comments_lex_in_linear_time() -> None:
    """Each ``--`` comment searched the rest of the text for both line ends: "a=1 " + "--\n" * 1,600,000
    (4.8 MB) took over a minute, a worker thread burnt per subscription. One search per comment now
    (a few seconds; the bound only catches the quadratic walk)."""
    import time

    text = "a = 1 " + "--\n" * 1_600_000
    started = time.monotonic()
    tree = compile_sql92(text).tree
    assert str(tree) == "(a = 1)" and time.monotonic() - started < 30
