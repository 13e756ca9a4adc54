"""Plain helpers shared by the Spark tests (imported by name; fixtures live in conftest.py)."""

from __future__ import annotations

import json
from pathlib import Path


def write_store_config(manifest: dict, dest: Path, **overrides: object) -> Path:
    """A key=value broker config file with the settings the golden store was written with."""
    settings = dict(manifest["settings"])
    settings.update(overrides)
    dest.write_text("".join(f"{k}={str(v).lower() if isinstance(v, bool) else v}\n" for k, v in settings.items()),
                    encoding="utf-8")
    return dest


def tree_bytes(root: Path) -> dict[str, bytes]:
    """Relative path -> content of every file under ``root`` (empty dict if absent)."""
    if not root.is_dir():
        return {}
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def index_contents(index_dir: Path) -> list[bytes]:
    """Index files' bytes in name order (names are creation times, so only contents are compared)."""
    return [p.read_bytes() for p in sorted(index_dir.iterdir()) if p.is_file()]


def manifest_key_queries(manifest: dict) -> list[tuple[str, str, list[int]]]:
    return [(q["topic"], q["key"], sorted(q["indexServicePhysicalOffsets"])) for q in manifest.get("keyQueries", [])]


def dump(obj: object) -> str:
    return json.dumps(obj, default=str, indent=1)


REPO = Path(__file__).resolve().parents[2]
# The JVM's own banner for the vector module Spark 4 adds: not a log line, printed before any of ours.
JVM_BANNER = "WARNING: Using incubator modules:"


def mqadmin_env(**extra: str) -> dict[str, str]:
    """The environment for ``python -m mqadmin.app`` in a subprocess (its own Spark driver JVM)."""
    import os

    env = dict(os.environ, PYTHONPATH=str(REPO), NAMESRV_ADDR="", RMQ_STORE="")
    env.update(extra)
    return env


def mqadmin_argv(*args: str) -> list[str]:
    import sys

    return [sys.executable, "-m", "mqadmin.app", *args]


def stderr_lines(text: str) -> list[str]:
    """What a command printed on stderr, without the JVM's banner line."""
    return [line for line in text.splitlines() if line.strip() and not line.startswith(JVM_BANNER)]
