"""The store's ``lock`` file (spec §9.3): one writer per store directory, Java brokers included.

POSIX record locks (fcntl) are what Java's FileChannel.tryLock takes on Linux, so a lock held by a
real RocketMQ broker is seen here and vice versa. Locks of one process never conflict with each
other in POSIX, so a process-local registry catches a second opening inside the same process.
"""

from __future__ import annotations

import errno
import fcntl
import logging
import os
import threading
from collections.abc import Iterable
from pathlib import Path

log = logging.getLogger("rmqops.store")
_held: set[str] = set()
_held_guard = threading.Lock()


# What this process is, written into the lock file with its pid so a refused opener can say who holds
# the store. mqadmin sets "mqadmin"; anything else is taken as a broker.
PROCESS_ROLE = "broker"
HOLDER_FILE = "lock.holder"


class StoreLockedError(RuntimeError):
    """Another process (a running broker) holds the store directory."""


class SharedDirectoryLockedError(StoreLockedError):
    """A data directory outside the root is held by another store's opener (see StoreLock)."""


def holder_fields(root: Path) -> dict[str, str]:
    """What the process holding ``root``'s lock wrote about itself; {} when unknown.

    The ``lock`` file keeps Java's content (``lock``) byte for byte; the holder is written beside it
    in ``lock.holder`` (``pid=<pid> role=<role>``, and ``namesrv=<addrs>`` once a broker serves) while
    the lock is held. Java brokers write none.
    """
    try:
        text = (root / HOLDER_FILE).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return {}
    return dict(part.split("=", 1) for part in text.split() if "=" in part)


def lock_holder(root: Path) -> tuple[int | None, str]:
    """(pid, role) written by the process holding ``root``'s lock; (None, "") when unknown."""
    fields = holder_fields(root)
    pid = fields.get("pid", "")
    return (int(pid) if pid.isdigit() else None), fields.get("role", "")


def holder_namesrv(root: Path) -> str | None:
    """The name server addresses the broker holding ``root`` registers with (``a;b``), when it said."""
    return holder_fields(root).get("namesrv") or None


def describe_holder(root: Path) -> str:
    """'another mqadmin (pid 12)' / 'a running broker (pid 34)' / 'a running broker' (Java's lock)."""
    pid, role = lock_holder(root)
    who = "another mqadmin" if role == "mqadmin" else "a running broker"
    return f"{who} (pid {pid})" if pid is not None else who


class StoreLock:
    """``root``'s lock file, and a lock on each data directory the store writes.

    Why the directories: an operator's commitlog on another disk is a symlink (or storePathCommitLog);
    a store copied with ``cp -r`` keeps the symlink, so the copy's broker took its own root's lock and
    then wrote the very commitlog the original broker was writing, overwriting acknowledged messages.
    A copied broker.conf does the same with storePathCommitLog naming the first store's own (in-root)
    commitlog, so every data directory is locked, wherever it is. Each gets an flock on the directory
    itself (nothing is created in it), which any other opener, in this process too, is refused.
    A data directory that does not exist yet is locked by ``lock_data_dirs`` once the store has
    checked it may create it (a typo'd storePathCommitLog must be refused, not created)."""

    def __init__(self, root: Path, data_dirs: Iterable[Path] = (), role: str | None = None) -> None:
        self.path = root / "lock"
        self.role = role  # None: this process's PROCESS_ROLE
        self._fd = -1
        self._key = str(root.resolve())
        self._data_dirs = list(data_dirs)
        self._dir_fds: list[int] = []
        self._locked_dirs: set[Path] = set()

    def acquire(self) -> None:
        with _held_guard:
            if self._key in _held:
                raise StoreLockedError(f"store {self.path.parent} is already open for writing in this process")
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, 0)
            except OSError as e:
                os.close(fd)
                if e.errno in (errno.EACCES, errno.EAGAIN):
                    raise StoreLockedError(f"store {self.path.parent} is locked by "
                                           f"{describe_holder(self.path.parent)}") from e
                raise
            try:
                os.pwrite(fd, b"lock", 0)
            except OSError as e:  # a full disk: the lock goes with its descriptor, and the error names the file
                os.close(fd)
                raise OSError(e.errno, e.strerror, str(self.path)) from None
            try:
                self._lock_dirs(self._existing_data_dirs())
            except BaseException:
                fcntl.lockf(fd, fcntl.LOCK_UN, 1, 0)
                os.close(fd)
                raise
            self._fd = fd
            _held.add(self._key)
            self.announce()

    def lock_data_dirs(self) -> None:
        """Create the data directories that do not exist yet and lock them (see the class docstring)."""
        if self._fd < 0:
            return
        for d in self._data_dirs:
            try:
                d.mkdir(parents=True, exist_ok=True)
            except OSError as e:
                raise OSError(e.errno, e.strerror, str(d)) from None
        self._lock_dirs(self._existing_data_dirs())

    def _existing_data_dirs(self) -> list[tuple[Path, Path]]:
        """(as named, resolved) of each existing data directory: the given ones, wherever they are, and
        the root's subdirectories that are symlinks out of it."""
        root = self.path.parent.resolve()
        named = [(d, True) for d in self._data_dirs]
        try:
            named += [(p, False) for p in self.path.parent.iterdir() if p.is_symlink()]
        except OSError:
            pass
        out: dict[Path, Path] = {}
        for d, given in named:
            try:
                real = d.resolve()
            except (OSError, RuntimeError):
                continue
            if real.is_dir() and (given or not real.is_relative_to(root)) and real not in out:
                out[real] = d
        return [(d, real) for real, d in out.items()]

    def _lock_dirs(self, dirs: list[tuple[Path, Path]]) -> None:
        for named, real in dirs:
            if real in self._locked_dirs:
                continue
            try:
                fd = os.open(real, os.O_RDONLY | os.O_DIRECTORY)
            except OSError as e:
                self._unlock_dirs()
                raise OSError(e.errno, e.strerror, str(named)) from None
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as e:
                os.close(fd)
                if e.errno in (errno.EWOULDBLOCK, errno.EACCES):
                    self._unlock_dirs()
                    raise SharedDirectoryLockedError(
                        f"store {self.path.parent}: its directory {named} ({real}) is in use by another store's "
                        "broker (a copy of this store keeps the symlink, or another store's broker.conf names "
                        "the same directory): two brokers writing one directory overwrite each other's "
                        "messages") from None
                # a file system without flock on directories: the store opens as before, unguarded there
                log.warning("store %s: cannot lock its directory %s (%s): %s", self.path.parent, named, real,
                            e.strerror)
                continue
            self._dir_fds.append(fd)
            self._locked_dirs.add(real)

    def _unlock_dirs(self) -> None:
        for fd in self._dir_fds:
            os.close(fd)  # the flock goes with its last descriptor
        self._dir_fds.clear()
        self._locked_dirs.clear()

    def announce(self, **fields: str) -> None:
        """(Re)write ``lock.holder``: pid, role and ``fields`` (a broker adds the name servers it serves
        through once it knows them, so a refused opener can say where to send the command instead)."""
        if self._fd < 0:
            return
        extra = "".join(f" {k}={v}" for k, v in fields.items() if v and not any(c.isspace() for c in v))
        try:
            (self.path.parent / HOLDER_FILE).write_text(f"pid={os.getpid()} role={self.role or PROCESS_ROLE}{extra}\n")
        except OSError:  # only a courtesy for the next opener's message
            pass

    def release(self) -> None:
        if self._fd >= 0:
            try:
                (self.path.parent / HOLDER_FILE).unlink()
            except OSError:
                pass
            self._unlock_dirs()
            try:
                fcntl.lockf(self._fd, fcntl.LOCK_UN, 1, 0)
            finally:
                os.close(self._fd)
                self._fd = -1
                with _held_guard:
                    _held.discard(self._key)


def is_store_locked(root: Path) -> bool:
    """True when some process (or this one) holds the store lock right now."""
    key = str(root.resolve()) if root.exists() else str(root)
    with _held_guard:
        if key in _held:
            return True
    path = root / "lock"
    if not path.exists():
        return False
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return False
    try:
        # F_GETLK via a shared test lock would need write access for LOCK_EX; a shared lock
        # conflicts with any exclusive lock, which is what a broker holds.
        fcntl.lockf(fd, fcntl.LOCK_SH | fcntl.LOCK_NB, 1, 0)
        fcntl.lockf(fd, fcntl.LOCK_UN, 1, 0)
        return False
    except OSError as e:
        return e.errno in (errno.EACCES, errno.EAGAIN)
    finally:
        os.close(fd)
