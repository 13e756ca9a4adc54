"""The fake clock fixture."""

from __future__ import annotations

import pytest
from schedule_util import FakeClock


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()
