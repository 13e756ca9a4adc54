"""Fixtures for the dashboard tests: golden store copies (see seed.py) and a helper that waits for
the app's first refresh."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest
from tui_seed import Store, make_store


@pytest.fixture(autouse=True)
def utc(monkeypatch: pytest.MonkeyPatch):
    """Times on screen are local: pin the zone so pilot asserts and snapshots do not depend on it."""
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


@pytest.fixture
def golden_store(tmp_path: Path) -> Callable[[str], Store]:
    """``golden_store("store-timer")``: a fresh copy with its broker.conf (seed.make_store)."""
    return lambda name: make_store(name, tmp_path)
