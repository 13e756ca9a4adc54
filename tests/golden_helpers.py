"""Golden store helpers shared by tests (import as ``from golden_helpers import ...``).

A module of its own because several test directories have a ``conftest.py``, and importing
``conftest`` by name would pick whichever was loaded last.
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
GOLDEN_ROOT = Path(os.environ.get("RMQ_GOLDEN", REPO_ROOT.parent / "shared" / "golden"))
GOLDEN_STORES = ("store-basic", "store-batchcq", "store-timer")


def require_golden() -> Path:
    if not GOLDEN_ROOT.is_dir():
        pytest.fail(f"golden data not found at {GOLDEN_ROOT} (set RMQ_GOLDEN or place shared/ beside the clone)")
    return GOLDEN_ROOT


def load_manifest(name: str) -> dict:
    return json.loads((require_golden() / f"{name}.manifest.json").read_text(encoding="utf-8"))


def copy_golden_store(name: str, dest: Path) -> Path:
    """Copy a golden store to ``dest`` (writable), restoring timerwheel from timerwheel.gz if present."""
    src = require_golden() / name
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


def golden_store_config(name: str) -> dict[str, str]:
    """The RocketMQ-style config keys a golden store was written with (for --config / StoreConfig)."""
    settings = load_manifest(name)["settings"]
    return {k: (str(v).lower() if isinstance(v, bool) else str(v)) for k, v in settings.items()}


def write_broker_conf(name: str, path: Path) -> Path:
    """A broker.conf (key=value) with the golden store's settings, for ``--config``."""
    path.write_text("".join(f"{k}={v}\n" for k, v in golden_store_config(name).items()), encoding="utf-8")
    return path
