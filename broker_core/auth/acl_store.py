"""Durable ACL 2.0 policies in ``<store>/config/acls.json``.

Why this module exists: RocketMQ keeps ACLs in a local RocksDB under ``config/acls`` keyed by subject;
rmqops keeps the same data (AclInfo shape) as one atomically written JSON file, never overwriting a
file it could not read.
"""

from __future__ import annotations

from pathlib import Path

from broker_core.auth.converter import acl_from_info, acl_to_info
from broker_core.auth.errors import AuthError, AuthStoreError, AuthStoreWriteError
from broker_core.auth.model import Acl, Policy, Subject
from broker_core.store.config_file import (
    ConfigFileError,
    ConfigWriteError,
    read_config_json,
    write_config_json,
)

ACLS_FILE_NAME = "acls.json"


class AclStore:
    """ACLs keyed by subject key (``User:alice``), loaded once and written through."""

    def __init__(self, config_dir: Path) -> None:
        self.path = Path(config_dir) / ACLS_FILE_NAME
        self._acls: dict[str, Acl] = _load_acls(self.path)

    def get(self, subject: Subject) -> Acl | None:
        return self._acls.get(subject.key)

    def list(self, subject_filter: str | None = None, resource_filter: str | None = None) -> list[Acl]:
        """RocketMQ's listAcl filters: subject key substring; resource key substring on entries.

        Quirk kept from RocketMQ: when the subject key itself contains the resource filter, all of
        its entries are kept.
        """
        out: list[Acl] = []
        for key in sorted(self._acls):
            acl = self._acls[key]
            if subject_filter and subject_filter not in key:
                continue
            if resource_filter and resource_filter not in key:
                acl = _filter_entries(acl, resource_filter)
                if acl is None:
                    continue
            out.append(acl)
        return out

    def put(self, acl: Acl) -> None:
        acls = dict(self._acls)
        acls[acl.subject.key] = acl
        self._save(acls)

    def delete(self, subject: Subject) -> bool:
        if subject.key not in self._acls:
            return False
        acls = dict(self._acls)
        del acls[subject.key]
        self._save(acls)
        return True

    def _save(self, acls: dict[str, Acl]) -> None:
        try:
            write_config_json(self.path, {"acls": {key: acl_to_info(a) for key, a in acls.items()}})
        except ConfigWriteError as e:
            raise AuthStoreWriteError(f"{e}; the ACLs did not change") from e
        self._acls = acls


def _filter_entries(acl: Acl, resource_filter: str) -> Acl | None:
    policies = []
    for policy in acl.policies:
        kept = tuple(e for e in policy.entries if resource_filter in e.resource.key)
        if kept:
            policies.append(Policy(policy.policy_type, kept))
    return Acl(acl.subject, tuple(policies)) if policies else None


def _load_acls(path: Path) -> dict[str, Acl]:
    try:
        data = read_config_json(path, previous_version=False)  # a revoked permission must stay revoked
    except ConfigFileError as e:
        raise AuthStoreError(f"cannot read ACL file {path}: {e}") from None
    if data is None:
        return {}
    raw = data.get("acls") if isinstance(data, dict) else None
    if not isinstance(raw, dict):
        raise AuthStoreError(f"cannot read ACL file {path}: expected an object with an 'acls' map")
    acls: dict[str, Acl] = {}
    for key, info in raw.items():
        try:
            acl = acl_from_info(info, subject=key)
        except AuthError as e:
            raise AuthStoreError(f"cannot read ACL file {path}: subject {key!r}: {e.message}") from None
        acls[acl.subject.key] = acl
    return acls
