"""Fixtures for the mqadmin CLI tests: golden store copies with a broker.conf, and an in-process runner."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from golden_helpers import copy_golden_store, golden_store_config
from typer.testing import CliRunner

from mqadmin.app import app


class Cli:
    """Runs ``mqadmin`` in-process against one store directory (and its config file)."""

    def __init__(self, store: Path, config: Path | None) -> None:
        self.store = store
        self.config = config
        self.runner = CliRunner()

    def __call__(self, *args: str, store: Path | None = None, env: dict[str, str] | None = None):
        argv = [*args, "--store", str(store or self.store)]
        if self.config is not None:
            argv += ["--config", str(self.config)]
        environ = {"NAMESRV_ADDR": "", "RMQ_STORE": ""}
        environ.update(env or {})
        return self.runner.invoke(app, argv, env=environ)

    def json(self, *args: str, **kw):
        result = self(*args, "--output", "json", **kw)
        assert result.exit_code == 0, (result.exit_code, result.stdout, result.stderr)
        return json.loads(result.stdout)


def write_conf(path: Path, props: dict[str, str]) -> Path:
    path.write_text("".join(f"{k}={v}\n" for k, v in props.items()), encoding="utf-8")
    return path


@pytest.fixture
def golden_cli(tmp_path: Path) -> Callable[[str], Cli]:
    """``golden_cli("store-basic")``: a Cli on a fresh copy of that golden store, sized by its manifest."""

    def make(name: str) -> Cli:
        store = copy_golden_store(name, tmp_path / name)
        conf = write_conf(tmp_path / f"{name}.conf", golden_store_config(name))
        return Cli(store, conf)

    return make


@pytest.fixture
def cli(tmp_path: Path) -> Cli:
    """A Cli on a fresh, empty store (made on purpose, as ``--create`` would) with default settings."""
    from broker_core.broker.broker import Broker
    from broker_core.broker.broker_config import BrokerConfig

    Broker(tmp_path / "store", BrokerConfig(), audit_log_path=None).shutdown()
    return Cli(tmp_path / "store", None)
