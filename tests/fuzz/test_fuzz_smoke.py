"""A short run of every atheris fuzz target (``make fuzz`` runs them long).

Why: each target fails on any exception other than its module's own error types; running them a
few thousand times on every ``make test`` keeps the decoders honest between long fuzzing runs.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("atheris", reason="atheris (a dev dependency) is not installed")

HERE = Path(__file__).resolve().parent
RUNS = 3000


@pytest.mark.parametrize("target", ["record", "properties", "sql92", "remoting"])
def test_fuzz_target_smoke(target: str) -> None:
    env = dict(os.environ, PYTHONPATH=str(HERE.parents[1]))
    res = subprocess.run([sys.executable, str(HERE / "fuzz_targets.py"), target, f"-runs={RUNS}", "-seed=1"],
                         capture_output=True, text=True, env=env, timeout=300)
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-3000:]
    assert f"Done {RUNS} runs" in res.stderr, res.stderr[-2000:]
