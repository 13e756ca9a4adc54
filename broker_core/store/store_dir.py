"""What makes a directory a RocketMQ store: the files a broker (Java or ours) leaves in its root.

Why: opening a Broker on a path builds a store there (lock, config, checkpoint, a sparse timer
wheel). Tools that take a path from an operator must tell "a store" from "a typo" BEFORE that,
and only build a new store when asked to.
"""

from __future__ import annotations

import os
import shutil
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

MULTI_PATH_SPLITTER = ","
"""What separates the directories of Apache 5.x's multi-path storePathCommitLog (MixAll.MULTI_PATH_SPLITTER)."""


def commit_log_dir(store_path_commit_log: str, root: Path) -> Path:
    """The commitlog directory: ``storePathCommitLog`` with ``~`` expanded as the root's is (it went to
    ``<cwd>/~/store/commitlog``), else ``commitlog`` under the store ``root``."""
    return expand_store_path(store_path_commit_log) if store_path_commit_log else root / "commitlog"


def rebased_commit_log(store_path_commit_log: str, file_root: str | None, root: str | Path) -> str:
    """``storePathCommitLog`` for the store at ``root`` when the config file says its own root is
    ``file_root`` (``storePathRootDir``): a commitlog inside the file's root moves with the store, the
    same place under ``root``; one outside it (another disk) stays where the file says.

    Why: an Apache broker.conf names both (``storePathRootDir=A``, ``storePathCommitLog=A/commitlog``);
    ``mqbroker --store B -c broker.conf`` moved everything to B but left the commitlog in A, silently,
    and ``mqadmin --store B --config broker.conf`` then read another store's commitlog."""
    if not store_path_commit_log or not file_root or MULTI_PATH_SPLITTER in store_path_commit_log:
        return store_path_commit_log
    log_dir = Path(os.path.abspath(expand_store_path(store_path_commit_log)))
    own_root = Path(os.path.abspath(expand_store_path(file_root)))
    if not log_dir.is_relative_to(own_root):
        return store_path_commit_log
    return str(expand_store_path(root) / log_dir.relative_to(own_root))


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


def first_missing_dir(path: str | Path) -> Path | None:
    """The outermost directory of ``path`` that does not exist yet (None: ``path`` exists).

    Why: a command that builds a new store (``--create``, a playbook step) and then fails must leave
    the disk as it found it; this is the directory to take away again, parents made for it included."""
    missing = None
    for p in [Path(path), *Path(path).parents]:
        if p.exists() or p.is_symlink():
            break
        missing = p
    return missing


def discard_new_store(made: Path, store_dir: Path) -> None:
    """Take away ``made``, the directory a failed command created to hold the new store ``store_dir``.

    It is renamed aside before it is removed, so no one sees a half-deleted store, and left alone while
    any process holds the store lock (someone else uses the store now: it is theirs)."""
    from broker_core.store.store_lock import is_store_locked

    if is_store_locked(store_dir):
        return
    aside = made.with_name(f".{made.name}.rmqops-failed-{os.getpid()}")
    try:
        os.rename(made, aside)
    except OSError:
        return
    shutil.rmtree(aside, ignore_errors=True)
