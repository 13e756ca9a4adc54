"""Tokens of RocketMQ's selector language (the TOKEN section of SelectorParser.jj).

The lexer is lazy, like JavaCC's token manager, so the first error reported is the leftmost one.
Where several token rules match, the longest wins and on a tie keywords beat identifiers; numbers
follow the same rule (``5.5`` is one float; ``007`` lexes as 0, 0, 7 and so fails to parse).
"""

from __future__ import annotations

import re
from typing import NamedTuple

from broker_core.broker.filter.errors import FilterSyntaxError

KEYWORDS = frozenset(
    {"NOT", "AND", "OR", "BETWEEN", "IN", "TRUE", "FALSE", "NULL", "IS", "CONTAINS", "STARTSWITH", "ENDSWITH"}
)
DECIMAL, FLOAT, STRING, ID, EOF = "DECIMAL", "FLOAT", "STRING", "ID", "EOF"
# Longest first so ">=" is not read as ">" then "=".
_OPERATORS = (">=", "<=", "<>", ">", "<", "=", "(", ")", ",", "+", "-")
_WHITESPACE = " \t\n\r\f"
_LINE_END = re.compile("[\n\r]")

_DECIMAL_RE = re.compile(r"0|[1-9][0-9]*[lL]?")
_EXP = r"(?:[eE][+-]?[0-9]+)"
_FLOAT_RES = (
    re.compile(rf"[0-9]+\.[0-9]*{_EXP}?"),
    re.compile(rf"\.[0-9]+{_EXP}?"),
    re.compile(rf"[0-9]+{_EXP}"),
)
_ID_RE = re.compile(r"[A-Za-z_$][A-Za-z0-9_$]*")

_HINTS = {
    "!": "use <> for 'not equal' and NOT for negation",
    '"': "string literals are written in single quotes",
    "&": "use AND",
    "|": "use OR",
}


class Token(NamedTuple):
    """``kind`` is a keyword in upper case, an operator's text, or DECIMAL/FLOAT/STRING/ID/EOF."""

    kind: str
    text: str
    pos: int
    value: str = ""


def describe(token: Token) -> str:
    """How a token is named in error messages."""
    if token.kind == EOF:
        return "end of expression"
    if token.kind == ID:
        return f"identifier {token.text}"
    if token.kind == STRING:
        return f"string {token.text}"
    if token.kind in (DECIMAL, FLOAT):
        return f"number {token.text}"
    if token.kind in KEYWORDS:
        return token.kind
    return f"'{token.text}'"


class Lexer:
    """Produces tokens on demand from a selector string."""

    __slots__ = ("_src", "_pos", "_last_line_end")

    def __init__(self, source: str) -> None:
        self._src = source
        self._pos = 0
        # past it no "--" comment can end: each one would otherwise search the rest of the text again
        self._last_line_end = max(source.rfind("\n"), source.rfind("\r"))

    def _error(self, detail: str, pos: int, found: str) -> FilterSyntaxError:
        return FilterSyntaxError(detail, expression=self._src, position=pos, found=found)

    def _skip_blanks_and_comments(self) -> None:
        src, n = self._src, len(self._src)
        while self._pos < n:
            c = src[self._pos]
            if c in _WHITESPACE:
                self._pos += 1
            elif src.startswith("--", self._pos):
                # A line comment needs its line end; without one the "--" is two minus signs. One search
                # for either end (two finds each scanned the rest of the text: quadratic on many comments).
                if self._pos > self._last_line_end:
                    return
                end = _LINE_END.search(src, self._pos)
                assert end is not None  # a line end lies at or after _pos (see _last_line_end)
                self._pos = end.end()
            elif src.startswith("/*", self._pos):
                end = src.find("*/", self._pos + 2)
                if end < 0:
                    raise self._error("unterminated /* comment", self._pos, "/*")
                self._pos = end + 2
            else:
                return

    def next(self) -> Token:
        self._skip_blanks_and_comments()
        src, start = self._src, self._pos
        if start >= len(src):
            return Token(EOF, "", start)
        c = src[start]
        if c == "'":
            return self._string(start)
        if "0" <= c <= "9" or (c == "." and "0" <= src[start + 1 : start + 2] <= "9"):
            return self._number(start)
        m = _ID_RE.match(src, start)
        if m is not None:
            self._pos = m.end()
            word = m.group()
            upper = word.upper()
            return Token(upper, word, start) if upper in KEYWORDS else Token(ID, word, start, word)
        for op in _OPERATORS:
            if src.startswith(op, start):
                self._pos = start + len(op)
                return Token(op, op, start)
        hint = _HINTS.get(c)
        detail = f"unexpected character {c!r}" + (f" ({hint})" if hint else "")
        raise self._error(detail, start, c)

    def _string(self, start: int) -> Token:
        src, i, parts = self._src, start + 1, []
        while True:
            end = src.find("'", i)
            if end < 0:
                raise self._error("unterminated string literal", start, src[start:])
            parts.append(src[i:end])
            if src.startswith("''", end):
                parts.append("'")
                i = end + 2
                continue
            self._pos = end + 1
            return Token(STRING, src[start : end + 1], start, "".join(parts))

    def _number(self, start: int) -> Token:
        src = self._src
        best_kind, best_end = DECIMAL, start
        m = _DECIMAL_RE.match(src, start)
        if m is not None:
            best_end = m.end()
        for rx in _FLOAT_RES:
            m = rx.match(src, start)
            if m is not None and m.end() > best_end:
                best_kind, best_end = FLOAT, m.end()
        self._pos = best_end
        text = src[start:best_end]
        return Token(best_kind, text, start, text)
