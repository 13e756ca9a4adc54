"""What makes a directory a RocketMQ store: the files a broker (Java or ours) leaves in its root.

Why: opening a Broker on a path builds a store there (lock, config, checkpoint, a sparse timer
wheel). Tools that take a path from an operator must tell "a store" from "a typo" BEFORE that,
and only build a new store when asked to.
"""

from __future__ import annotations

import os
from pathlib import Path

DEFAULT_STORE = "./store"
"""The store directory when none is given (DESIGN.md defaults): ./store of the current directory."""
STORE_ENV = "RMQ_STORE"
"""The environment variable that gives the store directory when --store does not."""


def store_dir_from(value: str | Path | None, config_root: str | None = None) -> Path:
    """``--store``, else $RMQ_STORE, else the config file's ``storePathRootDir``, else ./store.

    Why one order for mqbroker and mqadmin: ``mqadmin --config broker.conf`` opened ./store while the
    broker ran on the config's root, and took that file's ``storePathCommitLog`` all the same: a second,
    unlocked writer on the broker's commitlog.

    A leading ``~`` is expanded as a shell would: a path that reaches us quoted (``--store '~/s'``,
    a playbook's ``store:`` passed over SSH, $RMQ_STORE set in a unit file) must not make a
    directory literally named ``~``."""
    return expand_store_path(value or os.environ.get(STORE_ENV) or config_root or DEFAULT_STORE)


def expand_store_path(path: str | Path) -> Path:
    """``path`` with a leading ``~`` or ``~user`` expanded (the home directory as $HOME gives it); an
    unknown ``~user`` stays as it is, as a shell leaves it."""
    try:
        return Path(path).expanduser()
    except RuntimeError:
        return Path(path)

STORE_MARKERS = ("checkpoint", "commitlog", "consumequeue", "batchconsumequeue", "config/topics.json")
"""Any one of these in the root marks a store (a Java broker writes checkpoint at its first start)."""


def is_store_dir(path: str | Path) -> bool:
    root = Path(path)
    return root.is_dir() and any((root / marker).exists() for marker in STORE_MARKERS)


def not_a_store_reason(path: str | Path) -> str:
    """One line saying why ``path`` is not a store (for an error message)."""
    root = Path(path)
    if not root.exists():
        return f"{root} is not a store directory (it does not exist)"
    if not root.is_dir():
        return f"{root} is not a store directory (it is a file)"
    return f"{root} is not a store directory (no commitlog, consumequeue, checkpoint or config/topics.json in it)"
