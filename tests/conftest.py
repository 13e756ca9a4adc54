"""Shared fixtures: the golden store directories (read from ../shared/golden, always used on copies) and
a small filesystem to fill."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from golden_helpers import (  # noqa: F401  (re-exported for older imports)
    GOLDEN_ROOT,
    GOLDEN_STORES,
    copy_golden_store,
    golden_store_config,
    load_manifest,
    require_golden,
    write_broker_conf,
)
from msync_eio import msync_eio  # noqa: F401  (the fixture of the failed-flush tests)
from small_fs import small_fs  # noqa: F401  (the fixture of the full-disk tests)


@pytest.fixture(scope="session")
def golden_root() -> Path:
    return require_golden()


@pytest.fixture(scope="session")
def manifests() -> dict[str, dict]:
    return {n: load_manifest(n) for n in GOLDEN_STORES}


@pytest.fixture
def golden_copy(tmp_path: Path):
    """Factory: ``golden_copy("store-basic")`` returns a fresh writable copy of that golden store."""

    def make(name: str) -> Path:
        return copy_golden_store(name, tmp_path / name)

    return make


@pytest.fixture
def zone(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[str], None]]:
    """``zone("America/New_York")``: the process's local time zone for one test (TZ and time.tzset), put
    back after it: mqadmin's time options and Spark's local-time buckets read the zone as Java does."""

    def set_zone(name: str) -> None:
        monkeypatch.setenv("TZ", name)
        time.tzset()

    yield set_zone
    monkeypatch.undo()
    time.tzset()
