"""Fixtures for the ACL 2.0 tests: a controllable clock and AuthManager factories on tmp dirs."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from broker_core.auth import AuthConfig, AuthManager


class FakeClock:
    def __init__(self, now_ms: int = 1_700_000_000_000) -> None:
        self.now_ms = now_ms

    def __call__(self) -> int:
        return self.now_ms

    def advance(self, ms: int) -> None:
        self.now_ms += ms


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def audit_path(tmp_path: Path) -> Path:
    return tmp_path / "logs" / "auth_audit.log"


@pytest.fixture
def make_manager(tmp_path: Path, clock: FakeClock, audit_path: Path) -> Callable[..., AuthManager]:
    managers: list[AuthManager] = []

    def make(config: AuthConfig | None = None, store: str = "store", **kwargs: object) -> AuthManager:
        config = config or AuthConfig(authentication_enabled=True, authorization_enabled=True)
        manager = AuthManager(tmp_path / store / "config", config, clock=clock, audit_log_path=audit_path, **kwargs)
        managers.append(manager)
        return manager

    yield make
    for m in managers:
        m.close()
