"""Which brokers a write command goes to: ``-b`` one broker, or ``-c`` every master of a cluster.

Why one module: the topic, group and cluster commands spell these options and refuse a missing or
doubled target with the same words; declaring them once keeps ``-h`` and the errors identical.
"""

from __future__ import annotations

from typing import Annotated

import typer

from mqadmin.errors import UsageProblem

BrokerAddrOpt = Annotated[str | None, typer.Option("-b", "--brokerAddr", help="broker address")]
ClusterNameOpt = Annotated[str | None, typer.Option("-c", "--clusterName", help="cluster name")]


def require_a_target(broker: str | None, cluster: str | None) -> None:
    """Commands that need a broker (-b) or a cluster (-c), -b winning when both are given (as Apache's)."""
    if broker is None and cluster is None:
        raise UsageProblem("one of -b/--brokerAddr or -c/--clusterName is required")


def require_one_target(broker: str | None, cluster: str | None) -> None:
    """Commands that write to exactly one of a broker (-b) or every broker of a cluster (-c)."""
    if (broker is None) == (cluster is None):
        raise UsageProblem("exactly one of -b/--brokerAddr or -c/--clusterName is required")
