"""The hash ring of Java's ``ConsistentHashRouter`` (MD5, virtual nodes).

Why a byte-exact copy of Java's ring: clients of one group allocate queues independently; a Python
consumer sharing a group with Java consumers that use ``AllocateMessageQueueConsistentHash`` must put
every queue on the same client the Java ones do, or queues are consumed twice or not at all.
"""

from __future__ import annotations

import bisect
import hashlib
from collections.abc import Iterable


def md5_hash(key: str) -> int:
    """Java's default ``MD5Hash``: the first four digest bytes, big-endian, as a non-negative long."""
    return int.from_bytes(hashlib.md5(key.encode("utf-8")).digest()[:4], "big")


class ConsistentHashRing:
    """Physical node keys on a ring of ``virtual_nodes`` points each, named ``key-<replica>`` as Java does."""

    def __init__(self, node_keys: Iterable[str], virtual_nodes: int = 10) -> None:
        if virtual_nodes < 0:
            raise ValueError(f"illegal virtual node count: {virtual_nodes}")
        ring: dict[int, str] = {}
        replicas: dict[str, int] = {}
        for key in node_keys:
            existing = replicas.get(key, 0)  # a repeated key adds replicas after its existing ones
            for i in range(virtual_nodes):
                # a later point with the same hash replaces the earlier one, as TreeMap.put does
                ring[md5_hash(f"{key}-{i + existing}")] = key
            replicas[key] = existing + virtual_nodes
        self._hashes = sorted(ring)
        self._nodes = [ring[h] for h in self._hashes]

    def route(self, object_key: str) -> str | None:
        """The node owning ``object_key``: the first point at or after its hash, wrapping to the first."""
        if not self._hashes:
            return None
        i = bisect.bisect_left(self._hashes, md5_hash(object_key))
        return self._nodes[i if i < len(self._nodes) else 0]
