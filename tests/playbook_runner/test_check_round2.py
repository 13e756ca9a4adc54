"""Regression tests for a second probe's report on `mqadmin playbook`: --check, validation at check
time, bad YAML and numbers, SSH errors. Each failed before its fix."""

from __future__ import annotations

from pathlib import Path

import pytest

from .conftest import Playbooks
from .test_actions import book

pytestmark = pytest.mark.timeout(120)


def summary(r) -> list:  # noqa: ANN001 - a conftest Run
    return [(s["name"], s["status"], s["message"]) for s in r.doc["steps"]]


# -- --check plans what earlier steps of the run create ----------------------------------------------------

def test_check_passes_where_the_run_passes_after_earlier_steps_create(pb: Playbooks, tmp_path: Path) -> None:
    """Before: --check failed 'topic [ct] does not exist' (topic.perm, offset.reset) and 'not a store'
    (store.verify) though the real run, whose earlier steps create them, succeeds."""
    path = pb.write("p.yml", book(tmp_path / "s", '''  - topic.ensure: {topic: ct}
  - group.ensure: {group: cg}
  - topic.perm: {topic: ct, write: false}
  - offset.reset: {group: cg, topic: ct, timestamp: now}
  - store.verify: {}
'''))
    check = pb.run(path, "--check")
    assert check.code == 0, summary(check)
    assert [s["status"] for s in check.doc["steps"]] == ["changed", "changed", "changed", "changed", "ok"]
    assert not (tmp_path / "s").exists()
    real = pb.run(path)
    assert real.code == 0, summary(real)
