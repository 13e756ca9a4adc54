"""Argument types shared by the benchmarks: a count that makes no sense at zero (or below) is a usage
error (argparse prints one line and exits 2), found before any store, broker or child process starts.

Usage in a script (run as ``python bench/X.py``, so this folder is on ``sys.path``)::

    from _args import positive_int, work_dir
    ap.add_argument("--reps", type=positive_int, default=3)
    ap.add_argument("--dir", type=work_dir, default=None)

Importing this module from a benchmark run as a script also makes SIGTERM stop it as Ctrl-C does
(``finally`` blocks and ``with`` exits run: temp dirs removed, brokers and children stopped), exit 143.
"""

from __future__ import annotations

import argparse
import math
import os
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from types import FrameType
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


def work_dir(text: str) -> Path:
    """A ``--dir``: an existing directory, or a missing one created (with its parents) as every benchmark
    taking ``--dir`` does; a file, or a path that cannot be made a writable directory, is a usage error.

    Why at parse time: the benchmarks used the path in different ways (a temp dir under it, a store
    in it, ``mkdir`` first or not), so a bad one failed with a different traceback in each, some only
    after minutes of store generation."""
    if not text:
        raise argparse.ArgumentTypeError("must name a directory, not ''")
    path = Path(text)
    if path.exists() and not path.is_dir():
        raise argparse.ArgumentTypeError(f"not a directory: {text!r}")
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise argparse.ArgumentTypeError(f"cannot create directory {text!r}: {e.strerror or e}") from None
    if not os.access(path, os.W_OK | os.X_OK):
        raise argparse.ArgumentTypeError(f"directory not writable: {text!r}")
    return path


def _stop_on_sigterm(signum: int, frame: FrameType | None) -> None:
    """SIGTERM as Ctrl-C: unwind (every ``finally`` and ``with`` exit runs), then exit 128 + SIGTERM."""
    raise SystemExit(128 + signum)


def _run_as_benchmark() -> bool:
    """Whether the running program is a script of this folder (not e.g. a test importing a helper)."""
    main_file = getattr(sys.modules.get("__main__"), "__file__", None)
    return main_file is not None and Path(main_file).resolve().parent == Path(__file__).resolve().parent


# Python's default SIGTERM ends the process at once, skipping ``finally``: ``kill`` (or a harness's
# timeout) left a benchmark's temp dir (hundreds of MiB of store) and its broker behind. A SIGTERM
# ignored by the parent (SIG_IGN) stays ignored.
if _run_as_benchmark() and signal.getsignal(signal.SIGTERM) == signal.SIG_DFL:
    signal.signal(signal.SIGTERM, _stop_on_sigterm)
