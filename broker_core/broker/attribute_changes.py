"""Signed attribute changes (``+key=value``, ``-key``): RocketMQ's AttributeUtil.alterCurrentAttributes rules.

Why a module of its own: topics and subscription groups take their attribute changes by the same
rules (a new one takes only ``+k``; ``-k`` removes a key it has; no key twice); what each accepts as
a key and a value is its own (``topic_attributes``; groups have no supported attribute in 5.x).
"""

from __future__ import annotations

from collections.abc import Mapping

from .errors import BrokerError, BrokerSystemError


def signed_changes(create: bool, current: Mapping[str, str], modifications: Mapping[str, str], kind: str,
                   error: type[BrokerError] = BrokerSystemError) -> list[tuple[str, str, bool]]:
    """``modifications`` as ``(key, value, delete)``, in order, checked against ``current`` (the
    ``kind``'s attributes; ``create``: it is being created); ``error`` names the first rule broken."""
    changes: list[tuple[str, str, bool]] = []
    seen: set[str] = set()
    for signed, value in modifications.items():
        key = signed[1:]
        if not key or "+" in key or "-" in key:
            raise error("kv string format wrong.")
        if key in seen:
            raise error(f"alter duplication key. key: {key}")
        seen.add(key)
        if create and not signed.startswith("+"):
            raise error(f"only add attribute is supported while creating {kind}. key: {key}")
        if signed.startswith("-"):
            if key not in current:
                raise error(f"attempt to delete a nonexistent key: {key}")
            changes.append((key, value, True))
        elif signed.startswith("+"):
            changes.append((key, value, False))
        else:
            raise error(f"wrong format key: {key}")
    return changes


def apply_changes(current: Mapping[str, str], changes: list[tuple[str, str, bool]]) -> dict[str, str]:
    """``current`` with ``changes`` (from ``signed_changes``) made."""
    result = dict(current)
    for key, value, delete in changes:
        if delete:
            result.pop(key, None)
        else:
            result[key] = value
    return result
