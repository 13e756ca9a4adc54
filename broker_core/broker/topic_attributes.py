"""Topic attributes: ``+key=value,-key`` modifications (AttributeParser/AttributeUtil, spec B.3)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from .attribute_changes import signed_changes
from .errors import BrokerSystemError


@dataclass(frozen=True)
class TopicAttribute:
    name: str
    changeable: bool
    allowed: frozenset[str] | None = None  # None: a long in [lo, hi]
    lo: int = -1
    hi: int = 2**63 - 1

    def verify(self, value: str) -> None:
        if self.allowed is not None:
            if value not in self.allowed:
                raise BrokerSystemError(f"value is not in set: [{', '.join(sorted(self.allowed))}]")
            return
        try:
            n = int(value)
        except ValueError:
            raise BrokerSystemError(f"value is not a long: {value!r} (key {self.name})") from None
        if not self.lo <= n <= self.hi:
            raise BrokerSystemError(f"value is not in range({self.lo}, {self.hi})")


QUEUE_TYPE = TopicAttribute("queue.type", False, frozenset({"BatchCQ", "SimpleCQ"}))
CLEANUP_POLICY = TopicAttribute("cleanup.policy", False, frozenset({"DELETE", "COMPACTION"}))
MESSAGE_TYPE = TopicAttribute("message.type", True,
                              frozenset({"UNSPECIFIED", "NORMAL", "FIFO", "DELAY", "TRANSACTION", "MIXED"}))
RESERVE_TIME = TopicAttribute("reserve.time", True, None, -1, 2**63 - 1)
ALL_TOPIC_ATTRIBUTES = {a.name: a for a in (QUEUE_TYPE, CLEANUP_POLICY, MESSAGE_TYPE, RESERVE_TIME)}


def parse_attribute_modifications(spec: str | Mapping[str, str] | None) -> dict[str, str]:
    """``"+a=b,-c"`` (or an already parsed ``{"+a": "b", "-c": ""}``) into signed keys -> values."""
    if spec is None:
        return {}
    if isinstance(spec, Mapping):
        out = {}
        for k, v in spec.items():
            if not k or k[0] not in "+-":
                raise BrokerSystemError(f"attribute key must start with + or -: {k!r}")
            out[str(k)] = "" if v is None else str(v)
        return out
    text = spec.strip()
    if not text:
        return {}
    out: dict[str, str] = {}
    for kv in text.split(","):
        if "=" in kv:
            key, _, value = kv.partition("=")
            if "+" not in key:
                raise BrokerSystemError(f"add/alter attribute format is wrong: {key}")
        else:
            key, value = kv, ""
            if "-" not in key:
                raise BrokerSystemError(f"delete attribute format is wrong: {key}")
        if key in out:
            raise BrokerSystemError(f"key duplication: {key}")
        out[key] = value
    return out


def alter_attributes(create: bool, current: Mapping[str, str], modifications: Mapping[str, str],
                     unchangeable_ok: frozenset[str] = frozenset()) -> dict[str, str]:
    """The topic's attributes after ``modifications`` (AttributeUtil#alterCurrentAttributes).

    ``unchangeable_ok`` names unchangeable keys the caller allows to change anyway (the broker lets
    ``queue.type`` change while a topic has no data, since no consume queue exists to disagree).
    Re-stating an unchangeable attribute with its current value is accepted (Java refuses even that,
    which makes re-running the same ``updateTopic -a`` fail for no benefit).
    """
    result = dict(current)
    changes = signed_changes(create, current, modifications, "topic")
    for key, value, delete in changes:
        attr = ALL_TOPIC_ATTRIBUTES.get(key)
        if attr is None:
            raise BrokerSystemError(f"unsupported key: {key}")
        same = not delete and current.get(key) == value
        if not create and not attr.changeable and not same and key not in unchangeable_ok:
            raise BrokerSystemError(f"attempt to update an unchangeable attribute. key: {key}")
        if delete:
            result.pop(key, None)
        else:
            attr.verify(value)
            result[key] = value
    return result


def format_modifications(modifications: Mapping[str, str]) -> str:
    """Back to the wire form (AttributeParser#parseToString)."""
    return ",".join(k if not v else f"{k}={v}" for k, v in modifications.items())
