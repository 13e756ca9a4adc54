"""The fake clock fixture."""

from __future__ import annotations

import pytest
from transaction_util import FakeClock


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()
