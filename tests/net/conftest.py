"""Fixtures of the network tests (servers are always stopped, even when a test fails)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Protocol

import pytest
from harness import Servers
from net_util import RawClient


class Stoppable(Protocol):
    def stop(self) -> None: ...


@pytest.fixture
def servers(tmp_path):
    s = Servers(tmp_path)
    try:
        yield s
    finally:
        s.close()


@pytest.fixture
def broker_setup(servers):
    """(servers, broker, namesrv client, broker client) with one broker registered."""
    broker, _server, addr = servers.add_broker()
    ns, bc = RawClient(servers.namesrv_addr), RawClient(addr)
    try:
        yield servers, broker, ns, bc
    finally:
        ns.close()
        bc.close()


@pytest.fixture
def procs() -> Iterator[list[Stoppable]]:
    """Processes a test starts (mqbroker and the like): each is stopped, newest first, even when the
    test fails."""
    started: list[Stoppable] = []
    try:
        yield started
    finally:
        for p in reversed(started):
            p.stop()
