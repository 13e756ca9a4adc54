"""Cluster membership as the name server reports it (GET_BROKER_CLUSTER_INFO): BrokerData, ClusterInfo.

Why apart from ``route_info`` (which re-exports both): every mqadmin command on a store directory asks
its broker's identity as a ClusterInfo, while the route table and its manager serve routes only.
JSON shapes (``to_dict``) are RocketMQ's BrokerData / ClusterInfo field names.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

MASTER_ID = 0


@dataclass(slots=True)
class BrokerData:
    cluster: str
    broker_name: str
    broker_addrs: dict[int, str] = field(default_factory=dict)
    enable_acting_master: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {"brokerAddrs": dict(sorted(self.broker_addrs.items())), "brokerName": self.broker_name,
                "cluster": self.cluster, "enableActingMaster": self.enable_acting_master}

    def master_addr(self) -> str | None:
        return self.broker_addrs.get(MASTER_ID)


@dataclass(slots=True)
class ClusterInfo:
    """GET_BROKER_CLUSTER_INFO: brokers by name, and broker names by cluster."""

    broker_addr_table: dict[str, BrokerData] = field(default_factory=dict)
    cluster_addr_table: dict[str, list[str]] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"brokerAddrTable": {n: b.to_dict() for n, b in sorted(self.broker_addr_table.items())},
                "clusterAddrTable": {c: sorted(ns) for c, ns in sorted(self.cluster_addr_table.items())}}
