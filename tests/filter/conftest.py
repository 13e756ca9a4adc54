"""The filter tests that need a live name server and brokers get them from one fixture."""
from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.net.harness import Servers


@pytest.fixture
def servers(tmp_path: Path) -> Iterator[Servers]:
    s = Servers(tmp_path)
    try:
        yield s
    finally:
        s.close()
