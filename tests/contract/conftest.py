"""The contract suite's transport fixture: the same Admin scenarios over every BrokerClient.

Why: ``Admin`` is one implementation over a request-level transport; this suite is what proves a
transport keeps the contract (mqadmin.transport.base). Each param of ``transport`` yields a
``Target``: how to open an Admin on a fresh, empty single-broker cluster, and that broker's names.

Adding a transport (e.g. "remoting": a real ``mqbroker`` process on free loopback ports, its
``Target.open`` returning ``open_remote_admin("127.0.0.1:<namesrv port>")``): append its name to
TRANSPORTS and a branch to ``_start``; it must stop what it started, even when a test fails.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from broker_core.broker.broker_config import BrokerConfig
from mqadmin.admin import Admin
from mqadmin.connect import open_local_admin, open_remote_admin
from tests.remoting_broker import running_broker

TRANSPORTS = ["local", "remoting"]


@dataclass(frozen=True)
class Target:
    """One running (or openable) single-broker cluster and how to reach it."""

    name: str
    open: Callable[[], Admin]
    cluster_name: str
    broker_name: str
    broker_addr: str


@contextmanager
def _start(kind: str, tmp_path: Path) -> Iterator[Target]:
    if kind == "local":
        store = tmp_path / "store"
        store.mkdir()
        cfg = BrokerConfig()
        yield Target("local", lambda: open_local_admin(store, writes=True, create=True), cfg.broker_cluster_name,
                     cfg.broker_name, cfg.broker_addr)
        return
    if kind == "remoting":
        # a real mqbroker process (name server + broker) on free loopback ports, stopped by PID
        cfg = BrokerConfig()
        with running_broker(tmp_path / "mqbroker", broker_name=cfg.broker_name,
                            cluster=cfg.broker_cluster_name) as proc:
            yield Target("remoting", lambda: open_remote_admin(proc.namesrv_addr), cfg.broker_cluster_name,
                         cfg.broker_name, proc.broker_addr)
        return
    raise ValueError(f"unknown transport {kind!r}")


@pytest.fixture(params=TRANSPORTS)
def transport(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Target]:
    with _start(request.param, tmp_path) as target:
        yield target


@pytest.fixture
def admin(transport: Target) -> Iterator[Admin]:
    with transport.open() as a:
        yield a
