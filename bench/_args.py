"""Argument types shared by the benchmarks: a count that makes no sense at zero (or below) is a usage
error (argparse prints one line and exits 2), found before any store, broker or child process starts.

Usage in a script (run as ``python bench/X.py``, so this folder is on ``sys.path``)::

    from _args import positive_int
    ap.add_argument("--reps", type=positive_int, default=3)
"""

from __future__ import annotations

import argparse
import math


def _parse(text: str, kind: type[int] | type[float]) -> float:
    try:
        value = kind(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid {kind.__name__} value: {text!r}") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"must be a finite number, not {text!r}")
    return value


def positive_int(text: str) -> int:
    """An int >= 1 (repetitions, rounds, message counts, sizes)."""
    value = int(_parse(text, int))
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, not {text!r}")
    return value


def nonnegative_int(text: str) -> int:
    """An int >= 0 (where 0 means "none", e.g. no warm-up)."""
    value = int(_parse(text, int))
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, not {text!r}")
    return value


def positive_float(text: str) -> float:
    """A finite float > 0 (durations, sizes)."""
    value = float(_parse(text, float))
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be > 0, not {text!r}")
    return value


def nonnegative_float(text: str) -> float:
    """A finite float >= 0 (waits, where 0 means "do not wait")."""
    value = float(_parse(text, float))
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, not {text!r}")
    return value


def fraction(text: str) -> float:
    """A float in [0, 1] (a busy fraction of the machine's cores)."""
    value = float(_parse(text, float))
    if not 0 <= value <= 1:
        raise argparse.ArgumentTypeError(f"must be between 0 and 1, not {text!r}")
    return value
