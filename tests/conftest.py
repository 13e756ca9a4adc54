"""Shared fixtures: the golden store directories (read from ../shared/golden, always used on copies)."""

from __future__ import annotations

import gzip
import json
import os
import shutil
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
GOLDEN_ROOT = Path(os.environ.get("RMQ_GOLDEN", REPO_ROOT.parent / "shared" / "golden"))


def _require_golden() -> Path:
    if not GOLDEN_ROOT.is_dir():
        pytest.fail(f"golden data not found at {GOLDEN_ROOT} (set RMQ_GOLDEN or place shared/ beside the clone)")
    return GOLDEN_ROOT


@pytest.fixture(scope="session")
def golden_root() -> Path:
    return _require_golden()


def load_manifest(name: str) -> dict:
    return json.loads((_require_golden() / f"{name}.manifest.json").read_text(encoding="utf-8"))


@pytest.fixture(scope="session")
def manifests() -> dict[str, dict]:
    return {n: load_manifest(n) for n in ("store-basic", "store-batchcq", "store-timer")}


def copy_golden_store(name: str, dest: Path) -> Path:
    """Copy a golden store to ``dest`` (writable), restoring timerwheel from timerwheel.gz if present."""
    src = _require_golden() / name
    shutil.copytree(src, dest)
    for p in dest.rglob("*"):
        if p.is_file():
            p.chmod(0o644)
        elif p.is_dir():
            p.chmod(0o755)
    gz = dest / "timerwheel.gz"
    if gz.exists():
        with gzip.open(gz, "rb") as f_in, open(dest / "timerwheel", "wb") as f_out:
            shutil.copyfileobj(f_in, f_out)
        gz.unlink()
    return dest


@pytest.fixture
def golden_copy(tmp_path: Path):
    """Factory: ``golden_copy("store-basic")`` returns a fresh writable copy of that golden store."""

    def make(name: str) -> Path:
        return copy_golden_store(name, tmp_path / name)

    return make


def golden_store_config(name: str) -> dict[str, str]:
    """The RocketMQ-style config keys a golden store was written with (for --config / StoreConfig)."""
    settings = load_manifest(name)["settings"]
    return {k: (str(v).lower() if isinstance(v, bool) else str(v)) for k, v in settings.items()}
