"""Argument types shared by the benchmarks: a count that makes no sense at zero (or below) is a usage
error (argparse prints one line and exits 2), found before any store, broker or child process starts.

Usage in a script (run as ``python bench/X.py``, so this folder is on ``sys.path``)::

    from _args import positive_int
    ap.add_argument("--reps", type=positive_int, default=3)
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable
from typing import TypeVar

N = TypeVar("N", int, float)


def _parse(text: str, kind: type[int] | type[float]) -> float:
    try:
        value = kind(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid {kind.__name__} value: {text!r}") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"must be a finite number, not {text!r}")
    return value


def _number(kind: type[N], ok: Callable[[N], bool], rule: str, doc: str) -> Callable[[str], N]:
    """An argparse type: ``text`` parsed as ``kind`` and refused with "``rule``, not 'text'" unless ``ok``."""
    def parse(text: str) -> N:
        value = kind(_parse(text, kind))
        if not ok(value):
            raise argparse.ArgumentTypeError(f"{rule}, not {text!r}")
        return value
    parse.__doc__ = doc
    return parse


positive_int = _number(int, lambda v: v >= 1, "must be >= 1",
                       "An int >= 1 (repetitions, rounds, message counts, sizes).")
nonnegative_int = _number(int, lambda v: v >= 0, "must be >= 0",
                          'An int >= 0 (where 0 means "none", e.g. no warm-up).')
positive_float = _number(float, lambda v: v > 0, "must be > 0", "A finite float > 0 (durations, sizes).")
nonnegative_float = _number(float, lambda v: v >= 0, "must be >= 0",
                            'A finite float >= 0 (waits, where 0 means "do not wait").')
fraction = _number(float, lambda v: 0 <= v <= 1, "must be between 0 and 1",
                   "A float in [0, 1] (a busy fraction of the machine's cores).")
