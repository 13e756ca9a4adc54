"""Argument types the spark-submit front ends share (``rebuild_store.py``, ``search_cli.py``)."""

from __future__ import annotations

import argparse


def split_mb(text: str) -> int:
    """``--split-mb``: MiB of commitlog per task, at least 1. Why refused below: 0 or less planned a range
    per record (a task each, millions on a real store) instead of failing."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value
