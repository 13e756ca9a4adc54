"""TAG subscriptions: parsing like FilterAPI, then the tagsCode step and the exact step."""

from __future__ import annotations

import pytest

from broker_core.broker.filter import (
    FilterSyntaxError,
    MessageFilter,
    TagFilter,
    UnsupportedExpressionTypeError,
    build_filter,
    parse_tag_expression,
)
from broker_core.store.codec.hashing import tags_code

# Java "X".hashCode() values, computed independently of the code under test.
TAG_A, TAG_B, TAG_C = 2598919, 2598920, 2598921
COLLIDING = 2112  # "Aa".hashCode() == "BB".hashCode()
MIN_INT_TAG = "polygenelubricants"  # hashCode() == Integer.MIN_VALUE


@pytest.mark.parametrize("expr", [None, "", "*", "   ", "  *  ", "\t*\n"])
def test_subscribe_all_forms(expr: str | None) -> None:
    sub = parse_tag_expression(expr)
    assert sub.is_sub_all
    assert sub.sub_string == "*"
    assert sub.tags_set == frozenset() and sub.code_set == frozenset()


def test_single_tag() -> None:
    sub = parse_tag_expression("TagA")
    assert not sub.is_sub_all
    assert sub.tags_set == {"TagA"}
    assert sub.code_set == {TAG_A}


@pytest.mark.parametrize(
    "expr", ["TagA||TagB||TagC", " TagA || TagB ||TagC ", "TagA ||\tTagB|| TagC||", "||TagA||TagB||||TagC"]
)
def test_tag_list_is_whitespace_tolerant(expr: str) -> None:
    sub = parse_tag_expression(expr)
    assert sub.tags_set == {"TagA", "TagB", "TagC"}
    assert sub.code_set == {TAG_A, TAG_B, TAG_C}
    assert sub.sub_string == expr


def test_star_inside_a_list_is_a_literal_tag() -> None:
    sub = parse_tag_expression("TagA || *")
    assert not sub.is_sub_all
    assert sub.tags_set == {"TagA", "*"}
    assert not sub.is_matched_by_commit_log("TagB")
    assert sub.is_matched_by_commit_log("*")


def test_single_pipe_is_part_of_the_tag() -> None:
    assert parse_tag_expression("TagA | TagB").tags_set == {"TagA | TagB"}


@pytest.mark.parametrize("expr", ["||", " || || ", "|| \t"])
def test_expression_without_tags_is_refused(expr: str) -> None:
    with pytest.raises(FilterSyntaxError, match="no tag"):
        parse_tag_expression(expr)


def test_subscription_is_frozen() -> None:
    sub = parse_tag_expression("TagA")
    with pytest.raises(AttributeError):
        sub.sub_string = "x"  # type: ignore[misc]


def test_consume_queue_step() -> None:
    sub = parse_tag_expression("TagA || TagB")
    assert sub.is_matched_by_consume_queue(TAG_A)
    assert sub.is_matched_by_consume_queue(TAG_B)
    assert not sub.is_matched_by_consume_queue(TAG_C)
    assert not sub.is_matched_by_consume_queue(0)  # untagged message
    assert sub.is_matched_by_consume_queue(None)  # unknown code: let the exact step decide


def test_consume_queue_step_uses_int_value_of_the_long_tags_code() -> None:
    sub = parse_tag_expression(f"TagA || {MIN_INT_TAG}")
    assert -(2**31) in sub.code_set
    assert sub.is_matched_by_consume_queue(TAG_A + (1 << 32))
    assert sub.is_matched_by_consume_queue(2**31)  # same low 32 bits as Integer.MIN_VALUE
    assert sub.is_matched_by_consume_queue(tags_code(MIN_INT_TAG))
    assert not sub.is_matched_by_consume_queue(TAG_A + 1)


def test_commit_log_step_is_exact() -> None:
    sub = parse_tag_expression("TagA || TagB")
    assert sub.is_matched_by_commit_log("TagA")
    assert not sub.is_matched_by_commit_log("taga")
    assert not sub.is_matched_by_commit_log("TagA ")
    assert not sub.is_matched_by_commit_log("TagC")
    assert not sub.is_matched_by_commit_log(None)
    assert not sub.is_matched_by_commit_log("")


def test_star_matches_everything_including_untagged() -> None:
    sub = parse_tag_expression("*")
    for code in (0, TAG_A, -1, None, 2**40):
        assert sub.is_matched_by_consume_queue(code)
    for tags in (None, "", "TagA", "anything"):
        assert sub.is_matched_by_commit_log(tags)


def test_hash_collision_passes_cq_step_and_fails_exact_step() -> None:
    sub = parse_tag_expression("Aa")
    assert tags_code("Aa") == tags_code("BB") == COLLIDING
    assert sub.is_matched_by_consume_queue(tags_code("BB"))
    assert not sub.is_matched_by_commit_log("BB")
    assert sub.is_matched_by_commit_log("Aa")


@pytest.mark.parametrize("expression_type", ["TAG", None, ""])
def test_build_filter_tag(expression_type: str | None) -> None:
    f = build_filter(expression_type, "TagA || Aa")
    assert isinstance(f, TagFilter)
    assert isinstance(f, MessageFilter)
    assert f.expression_type == "TAG"
    assert f.is_matched_by_consume_queue(TAG_A)
    assert f.is_matched_by_consume_queue(COLLIDING)
    assert not f.is_matched_by_consume_queue(TAG_B)
    assert f.is_matched_by_commit_log({"TAGS": "TagA", "KEYS": "k"})
    assert not f.is_matched_by_commit_log({"TAGS": "BB"})
    assert not f.is_matched_by_commit_log({"KEYS": "k"})
    assert not f.is_matched_by_commit_log({})
    assert not f.is_matched_by_commit_log(None)


def test_build_filter_tag_all_matches_untagged_properties() -> None:
    f = build_filter("TAG", "*")
    assert f.is_matched_by_consume_queue(0)
    assert f.is_matched_by_commit_log({})
    assert f.is_matched_by_commit_log(None)


@pytest.mark.parametrize("expression_type", ["sql92", "tag", "CLASS", "SQL", "EXPRESSION"])
def test_unknown_expression_type(expression_type: str) -> None:
    with pytest.raises(UnsupportedExpressionTypeError, match="TAG, SQL92"):
        build_filter(expression_type, "a = 1")
