"""open_admin: --store / -n (and RMQ_STORE / NAMESRV_ADDR) decide the transport."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from mqadmin.connect import open_admin
from mqadmin.errors import RemoteUnavailableError
from mqadmin.transport.local import LocalBrokerClient


def test_a_store_directory_opens_the_local_transport(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NAMESRV_ADDR", raising=False)
    monkeypatch.setenv("RMQ_STORE", str(tmp_path / "from-env"))
    with open_admin(tmp_path / "store") as admin:
        assert isinstance(admin.client, LocalBrokerClient) and admin.maintenance is admin.client
        assert admin.target == f"store {tmp_path / 'store'}"
    with open_admin() as admin:
        assert admin.target == f"store {tmp_path / 'from-env'}"


def test_a_name_server_without_the_remoting_transport_says_so(tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "mqadmin.transport.remoting", None)  # as if the module were absent
    with pytest.raises(RemoteUnavailableError, match="127.0.0.1:9876"):
        open_admin(tmp_path / "store", "127.0.0.1:9876")
    monkeypatch.setenv("NAMESRV_ADDR", "10.0.0.1:9876")
    with pytest.raises(RemoteUnavailableError, match="10.0.0.1:9876"):
        open_admin(tmp_path / "store")


def test_store_jobs_need_a_store_directory_target(tmp_path: Path) -> None:
    """verifyStore/rebuildStore need files: a store target has them (maintenance), -n does not."""
    from mqadmin.admin import Admin
    from mqadmin.errors import AdminError

    client = LocalBrokerClient(tmp_path / "store")
    no_files = Admin(client)  # an Admin without store maintenance, as over -n
    with pytest.raises(AdminError, match="verifyStore works on a store directory"):
        no_files.verify_store()
    no_files.close()
