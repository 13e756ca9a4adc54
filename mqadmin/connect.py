"""open_admin: the one place that decides which transport an Admin runs over.

Why: every front end (CLI, dashboard, playbooks) names a target the same way — a store directory
(``--store``, $RMQ_STORE, ./store) or a name server (``-n``, $NAMESRV_ADDR) — and must get the same
Admin either way. A name server means the remoting transport (``mqadmin.transport.remoting``);
anything else is the in-process transport over the store directory.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from broker_core.store.store_dir import store_dir_from
from mqadmin.admin import Admin
from mqadmin.errors import AdminError, RemoteUnavailableError, UsageProblem
from mqadmin.timefmt import now_ms
from mqadmin.transport.local import LocalBrokerClient

REMOTING_MODULE = "mqadmin.transport.remoting"


def open_local_admin(store_dir: str | Path, config_file: str | Path | None = None, writes: bool = False,
                     clock: Callable[[], int] = now_ms, create: bool = False) -> Admin:
    """An Admin over a store directory: read-only unless ``writes`` (then it takes the store lock).
    Only ``create`` lets a write build a new store where there is none (a typo must not)."""
    client = LocalBrokerClient(store_dir, config_file, read_only=not writes, clock=clock, create=create)
    return Admin(client, maintenance=client, clock=clock)


def open_remote_admin(namesrv_addr: str, clock: Callable[[], int] = now_ms, *, access_key: str | None = None,
                      secret_key: str | None = None) -> Admin:
    """An Admin over the remoting transport to ``namesrv_addr`` (``host:port[;host:port]``); requests
    are signed with ``--ak/--sk``, else $ROCKETMQ_ACCESS_KEY/$ROCKETMQ_SECRET_KEY, else
    $ROCKETMQ_HOME/conf/tools.yml (as Apache mqadmin reads it), else sent unsigned."""
    try:
        from mqadmin.transport.remoting import RemotingBrokerClient
    except ModuleNotFoundError as e:
        if e.name != REMOTING_MODULE:
            raise
        raise RemoteUnavailableError(namesrv_addr) from None
    from broker_core.client.credentials import CredentialsError, resolve_credentials

    if bool(access_key) != bool(secret_key):  # an option missing (or empty): a usage error, exit 2
        raise UsageProblem("--ak/--accessKey and --sk/--secretKey must be given together")
    try:
        credentials = resolve_credentials(access_key, secret_key)
    except CredentialsError as e:
        raise AdminError(str(e)) from None
    return Admin(RemotingBrokerClient(namesrv_addr, credentials), clock=clock)


def open_admin(store: str | Path | None = None, namesrv_addr: str | None = None,
               config_file: str | Path | None = None, writes: bool = False,
               clock: Callable[[], int] = now_ms, *, access_key: str | None = None,
               secret_key: str | None = None, create: bool = False) -> Admin:
    """The Admin for a target: ``namesrv_addr`` (or $NAMESRV_ADDR) picks remoting, else the store
    directory ``store`` (or $RMQ_STORE, else the config file's storePathRootDir, else ./store) in process."""
    remote = namesrv_addr or os.environ.get("NAMESRV_ADDR") or None
    if remote:
        return open_remote_admin(remote, clock, access_key=access_key, secret_key=secret_key)
    return open_local_admin(store_dir_from(store), config_file, writes, clock, create)
