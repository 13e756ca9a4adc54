"""A data directory outside the store root is locked with it: a copy of the store (``cp -r`` keeps a
symlinked commitlog a symlink) or a second store naming the same storePathCommitLog cannot open it.

Why: the lock covered the root only, so the copy's broker started and wrote the original broker's
commitlog files at its own offsets, overwriting messages already acknowledged SEND_OK."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from store_util import make_msg, small_config

from broker_core.store.message_store import MessageStore
from broker_core.store.store_config import StoreConfig
from broker_core.store.store_lock import StoreLockedError

REPO = Path(__file__).resolve().parents[2]


def _store_with_symlinked_commitlog(tmp_path: Path) -> tuple[Path, Path]:
    root, disk2 = tmp_path / "store", tmp_path / "disk2" / "commitlog"
    disk2.mkdir(parents=True)
    root.mkdir()
    (root / "commitlog").symlink_to(disk2)
    store = MessageStore(root, small_config()).open()
    try:
        assert store.put_message(make_msg("T", 0, b"acknowledged")).ok
    finally:
        store.shutdown()
    return root, disk2


def _sums(d: Path) -> dict[str, str]:
    return {p.name: hashlib.md5(p.read_bytes()).hexdigest() for p in sorted(d.iterdir())}


def test_a_copy_keeping_the_symlink_cannot_open_while_the_original_runs(tmp_path: Path) -> None:
    root, disk2 = _store_with_symlinked_commitlog(tmp_path)
    shutil.copytree(root, tmp_path / "copy", symlinks=True)  # what cp -r does with the symlink
    original = MessageStore(root, small_config()).open()
    try:
        before = _sums(disk2)
        with pytest.raises(StoreLockedError) as e:
            MessageStore(tmp_path / "copy", small_config()).open()
        assert str(e.value) == (
            f"store {tmp_path / 'copy'}: its directory {tmp_path / 'copy' / 'commitlog'} ({disk2}) is in use by "
            "another store's broker (a copy of this store keeps the symlink, or another store's broker.conf "
            "names the same directory): two brokers writing one directory overwrite each other's messages")
        assert _sums(disk2) == before
        assert original.put_message(make_msg("T", 0, b"still writable")).ok
    finally:
        original.shutdown()
    MessageStore(tmp_path / "copy", small_config()).open().shutdown()  # alone, the copy opens


def test_two_stores_naming_one_store_path_commit_log(tmp_path: Path) -> None:
    shared = tmp_path / "shared-commitlog"
    shared.mkdir()
    first = MessageStore(tmp_path / "a", StoreConfig(store_path_commit_log=str(shared))).open()
    try:
        with pytest.raises(StoreLockedError, match="is in use by another store's broker"):
            MessageStore(tmp_path / "b", StoreConfig(store_path_commit_log=str(shared))).open()
    finally:
        first.shutdown()


def test_a_store_naming_another_stores_own_commitlog_cannot_open(tmp_path: Path) -> None:
    """broker-b's broker.conf copied from broker-a's still names broker-a's commitlog, which is inside
    broker-a's root: only directories outside a root were locked, so both brokers wrote one commitlog,
    each overwriting the other's acknowledged messages. Either order is refused now."""
    a_root = tmp_path / "a"
    first = MessageStore(a_root, small_config()).open()
    try:
        assert first.put_message(make_msg("T", 0, b"acknowledged")).ok
        before = _sums(a_root / "commitlog")
        b_config = small_config(store_path_commit_log=str(a_root / "commitlog"))
        with pytest.raises(StoreLockedError, match="is in use by another store's broker"):
            MessageStore(tmp_path / "b", b_config).open()
        assert _sums(a_root / "commitlog") == before
        assert first.put_message(make_msg("T", 0, b"still writable")).ok
    finally:
        first.shutdown()
    second = MessageStore(tmp_path / "b", b_config).open()  # b first: now a is the one refused
    try:
        with pytest.raises(StoreLockedError, match="is in use by another store's broker"):
            MessageStore(a_root, small_config()).open()
    finally:
        second.shutdown()
    MessageStore(a_root, small_config()).open().shutdown()  # alone, each opens


def test_a_new_store_path_commit_log_is_locked_once_created(tmp_path: Path) -> None:
    """A storePathCommitLog that does not exist yet is created by the first store (after it checked no
    consume queue points into a log there) and locked at once: a second store naming it is refused."""
    shared = tmp_path / "disk2" / "commitlog"
    first = MessageStore(tmp_path / "a", small_config(store_path_commit_log=str(shared))).open()
    try:
        assert shared.is_dir()
        with pytest.raises(StoreLockedError, match="is in use by another store's broker"):
            MessageStore(tmp_path / "b", small_config(store_path_commit_log=str(shared))).open()
    finally:
        first.shutdown()


def test_mqbroker_on_the_copy_exits_1_naming_the_directory(tmp_path: Path) -> None:
    root, disk2 = _store_with_symlinked_commitlog(tmp_path)
    shutil.copytree(root, tmp_path / "copy", symlinks=True)
    original = MessageStore(root, small_config()).open()
    try:
        env = dict(os.environ, PYTHONPATH=str(REPO))
        r = subprocess.run([sys.executable, "-m", "broker_core.mqbroker", "--store", str(tmp_path / "copy"),
                            "--listenPort", "0", "--namesrvPort", "0", "--grpc-port", "0"],
                           capture_output=True, text=True, env=env, cwd=REPO, timeout=60)
    finally:
        original.shutdown()
    assert r.returncode == 1, r.stdout + r.stderr
    assert f"its directory {tmp_path / 'copy' / 'commitlog'} ({disk2}) is in use by another store's broker" in r.stderr
    assert "Traceback" not in r.stderr


def test_mqadmin_write_on_the_copy_says_why_in_one_line(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from mqadmin.app import app

    root, disk2 = _store_with_symlinked_commitlog(tmp_path)
    shutil.copytree(root, tmp_path / "copy", symlinks=True)
    original = MessageStore(root, small_config()).open()
    try:
        r = CliRunner().invoke(app, ["updateTopic", "--store", str(tmp_path / "copy"), "-c", "DefaultCluster", "-t", "New"])
    finally:
        original.shutdown()
    assert r.exit_code == 1, r.output
    assert f"its directory {tmp_path / 'copy' / 'commitlog'} ({disk2}) is in use by another store's broker" in r.output
