"""Errors a subscription can raise when it is registered, long before any message is filtered."""

from __future__ import annotations


class FilterSyntaxError(ValueError):
    """A filter expression RocketMQ would refuse (``MQFilterException`` there).

    Raised at subscription time so a consumer learns about a typo immediately instead of
    silently receiving nothing. ``position`` is a 0-based index into ``expression`` (``None``
    when the whole expression is at fault); ``expected`` names what would have been accepted.
    """

    def __init__(
        self,
        detail: str,
        *,
        expression: str | None,
        position: int | None = None,
        expected: tuple[str, ...] = (),
        found: str | None = None,
    ) -> None:
        self.detail = detail
        self.expression = expression
        self.position = position
        self.expected = expected
        self.found = found
        where = "" if position is None else f" at position {position}"
        super().__init__(f"{detail}{where} in filter expression {expression!r}")


class UnsupportedExpressionTypeError(ValueError):
    """The subscription names an expression type this broker has no filter for."""
