"""The fake clock fixture."""

from __future__ import annotations

import pytest
from hooked_store import FakeClock


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()
