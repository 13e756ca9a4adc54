"""EmbeddedAdmin: the Admin over a local store directory, under its historical constructor.

Why this module still exists: the dashboard, the playbooks and tests open a store directory with
``EmbeddedAdmin(store_dir, config_file, read_only=..., clock=...)``. The operator logic now lives
in ``mqadmin.admin.Admin`` (one implementation for every transport) and the store access in
``mqadmin.transport.local.LocalBrokerClient``; this is only that pairing.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from mqadmin.admin import Admin
from mqadmin.connect import store_dir_from
from mqadmin.timefmt import now_ms
from mqadmin.transport.local import LocalBrokerClient

__all__ = ["EmbeddedAdmin", "store_dir_from"]


class EmbeddedAdmin(Admin):
    """``Admin(LocalBrokerClient(store_dir, ...))``; ``read_only`` decides whether the lock may be taken."""

    def __init__(self, store_dir: str | Path, config_file: str | Path | None = None, read_only: bool = True,
                 clock: Callable[[], int] = now_ms, create: bool = False) -> None:
        client = LocalBrokerClient(store_dir, config_file, read_only=read_only, clock=clock, create=create)
        super().__init__(client, maintenance=client, clock=clock)
        self.store_dir = client.store_dir
        self.read_only = read_only
        self.config = client.config

    def __enter__(self) -> EmbeddedAdmin:
        return self
