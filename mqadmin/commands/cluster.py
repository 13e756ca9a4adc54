"""Cluster / broker commands (spec E.7): clusterList, brokerStatus, getBrokerConfig."""

import time
from typing import Annotated, Any

import typer

from broker_core.broker.limits import JAVA_INT_MAX
from mqadmin.cli import Cmd, register
from mqadmin.errors import UsageProblem

app = typer.Typer()
BASE_FORMAT = "%-22s  %-22s  %-4s  %-22s %-16s  %16s  %30s  %-22s  %-11s  %-12s  %-8s  %-10s%n"


@register(app, "clusterList", "List clusters and their brokers.")
def cluster_list(
    cmd: Cmd,
    more_stats: Annotated[bool, typer.Option("-m", "--moreStats", help="message totals instead of TPS")] = False,
    interval: Annotated[int | None, typer.Option("-i", "--interval", help="repeat every N seconds", min=0, max=JAVA_INT_MAX)] = None,
    cluster: Annotated[str | None, typer.Option("-c", "--clusterName", help="cluster name")] = None,
) -> None:
    admin = cmd.admin()
    if cluster is not None:
        admin.check_target(cluster_name=cluster)
    while True:
        _print_cluster(cmd, admin.cluster_list(), more_stats)
        if not interval or interval <= 0:
            return
        time.sleep(interval)


def _print_cluster(cmd: Cmd, rows: list[dict[str, Any]], more_stats: bool) -> None:
    def render_more() -> None:
        cmd.printf("%-16s  %-32s %14s %14s %14s %14s%n", "#Cluster Name", "#Broker Name", "#InTotalYest",
                   "#OutTotalYest", "#InTotalToday", "#OutTotalToday")
        for r in rows:
            cmd.printf("%-16s  %-32s %14d %14d %14d %14d%n", r["clusterName"], r["brokerName"], r["inTotalYest"],
                       r["outTotalYest"], r["inTotalToday"], r["outTotalToday"])

    def render_base() -> None:
        cmd.printf(BASE_FORMAT, "#Cluster Name", "#Broker Name", "#BID", "#Addr", "#Version", "#InTPS(LOAD)",
                   "#OutTPS(LOAD)", "#Timer(Progress)", "#PCWait(ms)", "#Hour", "#SPACE", "#ACTIVATED")
        for r in rows:
            cmd.printf(
                "%-22s  %-22s  %-4s  %-22s %-16s  %16s  %30s  %-22s  %11s  %-12s  %-8s  %10s%n",
                r["clusterName"], r["brokerName"], r["brokerId"], r["brokerAddr"], r["version"],
                f"{r['inTps']:9.2f}({r['sendThreadPoolQueueSize']},{r['sendThreadPoolQueueHeadWaitTimeMills']}ms)",
                f"{r['outTps']:9.2f}({r['pullThreadPoolQueueSize']},{r['pullThreadPoolQueueHeadWaitTimeMills']}ms"
                f"|{r['ackThreadPoolQueueSize']},{r['ackThreadPoolQueueHeadWaitTimeMills']}ms)",
                f"{r['timerReadBehind']}-{r['timerOffsetBehind']}({r['timerCongestNum'] / 10000:.1f}w, "
                f"{r['timerEnqueueTps']:.1f}, {r['timerDequeueTps']:.1f})",
                r["pageCacheLockTimeMills"], f"{r['hours']:2.2f}", f"{r['space']:.4f}", r["activated"])

    cmd.emit(rows, render_more if more_stats else render_base)


@register(app, "brokerStatus", "Show a broker's runtime information.")
def broker_status(
    cmd: Cmd,
    broker: Annotated[str | None, typer.Option("-b", "--brokerAddr", help="broker address")] = None,
    cluster: Annotated[str | None, typer.Option("-c", "--clusterName", help="cluster name")] = None,
) -> None:
    if broker is None and cluster is None:
        raise UsageProblem("one of -b/--brokerAddr or -c/--clusterName is required")
    admin = cmd.admin()
    targets = admin.check_target(cluster_name=cluster, broker_addr=broker)
    status = dict(sorted(admin.broker_status(targets[0].broker_addr).items()))

    def render() -> None:
        for k, v in status.items():
            prefix = f"{targets[0].broker_addr:<24} " if cluster is not None else ""
            cmd.print(f"{prefix}{k:<32}: {v}")

    cmd.emit(status, render)


@register(app, "getBrokerConfig", "Print a broker's configuration.")
def get_broker_config(
    cmd: Cmd,
    broker: Annotated[str | None, typer.Option("-b", "--brokerAddr", help="broker address")] = None,
    cluster: Annotated[str | None, typer.Option("-c", "--clusterName", help="cluster name")] = None,
) -> None:
    if broker is None and cluster is None:
        return  # as mqadmin: neither option prints nothing
    admin = cmd.admin()
    targets = admin.check_target(cluster_name=cluster, broker_addr=broker)
    props = admin.get_broker_config(targets[0].broker_addr)

    def render() -> None:
        addr = targets[0].broker_addr
        cmd.print(f"============Master: {addr}============" if cluster is not None else f"============{addr}============")
        for k, v in props.items():
            cmd.print(f"{k:<50}=  {v}")
        cmd.print("")

    cmd.emit(props, render)


@register(app, "updateBrokerConfig", "Update broker's config.")
def update_broker_config(
    cmd: Cmd,
    key: Annotated[str, typer.Option("-k", "--key", help="config key")],
    value: Annotated[str, typer.Option("-v", "--value", help="config value")],
    broker: Annotated[str | None, typer.Option("-b", "--brokerAddr", help="update which broker")] = None,
    cluster: Annotated[str | None, typer.Option("-c", "--clusterName", help="update which cluster")] = None,
    update_all: Annotated[str | None, typer.Option("-a", "--updateAllBroker",
                                                   help="update all brokers include slave")] = None,
) -> None:
    if (broker is None) == (cluster is None):
        raise UsageProblem("exactly one of -b/--brokerAddr or -c/--clusterName is required")
    if not key.strip():
        raise UsageProblem("-k/--key must not be blank")
    admin = cmd.admin()
    targets = admin.check_target(cluster_name=cluster, broker_addr=broker)
    addrs = admin.update_broker_config({key.strip(): value.strip()}, targets)
    cmd.emit({"brokers": addrs, "key": key.strip(), "value": value.strip()},
             lambda: [cmd.printf("update broker config success, %s\n", a) for a in addrs])
