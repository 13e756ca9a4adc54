"""Durable ACL 2.0 users in ``<store>/config/users.json``.

Why this module exists: RocketMQ keeps users in a local RocksDB under ``config/users``; rmqops keeps
the same data as an atomically written JSON file (DESIGN.md), so a crash never leaves half a user
table, and a file that cannot be read is reported instead of being silently replaced. The file holds
secret keys, so it is written owner-readable only.
"""

from __future__ import annotations

import os
from pathlib import Path

from broker_core.auth.converter import user_from_info, user_to_info
from broker_core.auth.errors import AuthError, AuthStoreError, AuthStoreWriteError
from broker_core.auth.model import User
from broker_core.store.config_file import (
    ConfigFileError,
    ConfigWriteError,
    read_config_json,
    write_config_json,
)

USERS_FILE_NAME = "users.json"


class UserStore:
    """Users keyed by username, loaded once and written through on every change."""

    def __init__(self, config_dir: Path) -> None:
        self.path = Path(config_dir) / USERS_FILE_NAME
        self._users: dict[str, User] = _load_users(self.path)

    def get(self, username: str) -> User | None:
        return self._users.get(username)

    def list(self, username_filter: str | None = None) -> list[User]:
        """Users whose name contains the filter (RocketMQ's listUser -f), sorted by name."""
        return sorted(
            (u for u in self._users.values() if not username_filter or username_filter in u.username),
            key=lambda u: u.username,
        )

    def put(self, user: User) -> None:
        users = dict(self._users)
        users[user.username] = user
        self._save(users)

    def delete(self, username: str) -> bool:
        if username not in self._users:
            return False
        users = dict(self._users)
        del users[username]
        self._save(users)
        return True

    def _save(self, users: dict[str, User]) -> None:
        # Memory changes only after the file is safely on disk.
        try:
            write_config_json(self.path, {"users": {name: user_to_info(u) for name, u in users.items()}})
        except ConfigWriteError as e:
            raise AuthStoreWriteError(f"{e}; the users did not change") from e
        _restrict_permissions(self.path)
        self._users = users


def _load_users(path: Path) -> dict[str, User]:
    try:
        data = read_config_json(path, previous_version=False)  # a deleted user must stay deleted
    except ConfigFileError as e:
        raise AuthStoreError(f"cannot read users file {path}: {e}") from None
    if data is None:
        return {}
    raw = data.get("users") if isinstance(data, dict) else None
    if not isinstance(raw, dict):
        raise AuthStoreError(f"cannot read users file {path}: expected an object with a 'users' map")
    users: dict[str, User] = {}
    for name, info in raw.items():
        try:
            user = user_from_info(info)
        except AuthError as e:
            raise AuthStoreError(f"cannot read users file {path}: user {name!r}: {e.message}") from None
        users[user.username] = user
    return users


def _restrict_permissions(path: Path) -> None:
    for candidate in (path, path.with_name(path.name + ".bak")):
        try:
            os.chmod(candidate, 0o600)
        except OSError:
            pass
