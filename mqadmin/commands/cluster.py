"""Cluster / broker commands (spec E.7): clusterList, brokerStatus, getBrokerConfig."""

import time
from typing import Annotated, Any

import typer

from broker_core.broker.limits import JAVA_INT_MAX, JAVA_LONG_MAX, JAVA_LONG_MIN
from mqadmin.cli import Cmd, complete_topic, front, register
from mqadmin.commands.targets import BrokerAddrOpt, ClusterNameOpt, require_a_target, require_one_target
from mqadmin.errors import AdminError, SilentBrokersError, UsageProblem

app = typer.Typer()
BASE_FORMAT = "%-22s  %-22s  %-4s  %-22s %-16s  %16s  %30s  %-22s  %-11s  %-12s  %-8s  %-10s%n"


@register(app, "clusterList", "List clusters and their brokers.")
def cluster_list(
    cmd: Cmd,
    more_stats: Annotated[bool, typer.Option("-m", "--moreStats", help="message totals instead of TPS")] = False,
    interval: Annotated[int | None, typer.Option("-i", "--interval", help="repeat every N seconds", min=0, max=JAVA_INT_MAX)] = None,
    cluster: ClusterNameOpt = None,
) -> None:
    admin = cmd.admin()
    if cluster is not None:
        cluster = cluster.strip()
        admin.check_target(cluster_name=cluster, members=True)  # an unknown cluster is not found (Apache prints no rows)
    while True:
        rows = admin.cluster_list(cluster)  # -c: that cluster's brokers only
        _print_cluster(cmd, rows, more_stats, repeating=bool(interval and interval > 0))
        if not interval or interval <= 0:
            silent = [SilentBrokersError.entry(r["brokerName"], r["brokerAddr"], r["error"]) for r in rows if "error" in r]
            if silent:  # the table is out; the exit code and one line say which brokers are missing from it
                raise SilentBrokersError(silent)
            return
        time.sleep(interval)


def _print_cluster(cmd: Cmd, rows: list[dict[str, Any]], more_stats: bool, repeating: bool = False) -> None:
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

    (cmd.emit_round if repeating else cmd.emit)(rows, render_more if more_stats else render_base)


@register(app, "brokerStatus", "Show a broker's runtime information.")
def broker_status(
    cmd: Cmd,
    broker: BrokerAddrOpt = None,
    cluster: ClusterNameOpt = None,
) -> None:
    require_a_target(broker, cluster)
    admin = cmd.admin()
    # -c: every broker of the cluster, slaves too (fetchMasterAndSlaveAddrByClusterName), each line prefixed
    # with its address (as Apache's); -b: the one.
    targets = admin.check_target(cluster_name=cluster, broker_addr=broker, members=True)
    # A broker of -c that does not answer is named after the others are printed, as Apache's
    # BrokerStatusSubCommand goes on to the next broker; one silent broker used to hide them all.
    statuses: dict[str, dict[str, str]] = {}
    silent: list[str] = []
    for b in targets:
        try:
            statuses[b.broker_addr] = dict(sorted(admin.broker_status(b.broker_addr).items()))
        except AdminError as e:
            if cluster is None:
                raise
            silent.append(SilentBrokersError.entry(b.broker_name, b.broker_addr, e.message))

    def render() -> None:
        for addr, status in statuses.items():
            for k, v in status.items():
                prefix = f"{addr:<24} " if cluster is not None else ""
                cmd.print(f"{prefix}{k:<32}: {v}")

    cmd.emit(statuses if cluster is not None else statuses[targets[0].broker_addr], render)
    if silent:  # the answers are out; the exit code and one line say which brokers are missing from them
        raise SilentBrokersError(silent)


MASTER_ID = 0  # MixAll.MASTER_ID (mqadmin.admin's, not imported here: it loads lazily, for a fast --help)
NO_MASTER = "NO_MASTER"  # CommandUtil.NO_MASTER_PLACEHOLDER: heads the slaves of a group with no master


@register(app, "getBrokerConfig", "Print a broker's configuration.")
def get_broker_config(
    cmd: Cmd,
    broker: BrokerAddrOpt = None,
    cluster: ClusterNameOpt = None,
) -> None:
    require_a_target(broker, cluster)  # neither used to print nothing and exit 0, hiding the mistake
    admin = cmd.admin()
    # -c: each group of the cluster, its master's block then one per slave (Apache's
    # fetchMasterAndSlaveDistinguish; a group whose master is gone under NO_MASTER), so a slave's config,
    # which may differ from its master's, is seen too; -b: the one broker
    targets = admin.check_target(cluster_name=cluster, broker_addr=broker, members=cluster is not None)
    masters = {b.broker_name: b.broker_addr for b in targets if b.broker_id == MASTER_ID}
    configs = {b.broker_addr: admin.get_broker_config(b.broker_addr) for b in targets}
    headings = {b.broker_addr: f"============{b.broker_addr}============" if cluster is None
                else f"============Master: {b.broker_addr}============" if b.broker_id == MASTER_ID
                else f"============My Master: {masters.get(b.broker_name, NO_MASTER)}=====Slave: {b.broker_addr}"
                     "============" for b in targets}

    def render() -> None:
        shown_no_master = False
        for b in targets:
            if cluster is not None and b.broker_name not in masters and not shown_no_master:
                cmd.print(f"============Master: {NO_MASTER}============")  # Apache's placeholder block
                shown_no_master = True
            props = configs[b.broker_addr]
            cmd.print(headings[b.broker_addr])
            for k, v in props.items():
                cmd.print(f"{k:<50}=  {v}")
            cmd.print("")

    cmd.emit(configs if cluster is not None else configs[targets[0].broker_addr], render)


@register(app, "updateBrokerConfig", "Update broker's config.", writes=True)
def update_broker_config(
    cmd: Cmd,
    key: Annotated[str, typer.Option("-k", "--key", help="config key")],
    value: Annotated[str, typer.Option("-v", "--value", help="config value")],
    broker: Annotated[str | None, typer.Option("-b", "--brokerAddr", help="update which broker")] = None,
    cluster: Annotated[str | None, typer.Option("-c", "--clusterName", help="update which cluster")] = None,
    update_all: Annotated[str | None, typer.Option("-a", "--updateAllBroker",
                                                   help="update all brokers include slave")] = None,
) -> None:
    require_one_target(broker, cluster)
    if not key.strip():
        raise UsageProblem("-k/--key must not be blank")
    for flag, text in (("-k/--key", key), ("-v/--value", value)):
        # one key=value line of the request body each: a line break would set a key of its own, past
        # the unknown-key check ("05\nfileReservedTime=1" changed two keys)
        if len(f"{text}.".splitlines()) != 1:
            raise UsageProblem(f"{flag} must not contain a line break: the broker reads each line as a "
                               "key=value of its own")
    admin = cmd.admin()
    # -c -a (any value, as Apache's hasOption('a')): masters and slaves (fetchMasterAndSlaveAddrByClusterName),
    # else the cluster's masters only; -a used to be ignored, leaving the slaves' config unchanged
    targets = admin.check_target(cluster_name=cluster, broker_addr=broker,
                                 members=cluster is not None and update_all is not None)
    addrs = admin.update_broker_config({key.strip(): value.strip()}, targets)
    cmd.emit({"brokers": addrs, "key": key.strip(), "value": value.strip()},
             lambda: [cmd.printf("update broker config success, %s\n", a) for a in addrs])


@register(app, "brokerConsumeStats", "Fetch broker consume stats data.")
def broker_consume_stats(
    cmd: Cmd,
    broker: Annotated[str, typer.Option("-b", "--brokerAddr", help="Broker address")],
    timeout_millis: Annotated[int | None, typer.Option("-t", "--timeoutMillis", help="request timeout Millis",
                                                       min=1, max=JAVA_LONG_MAX)] = None,
    level: Annotated[int, typer.Option("-l", "--level", help="threshold of print diff",
                                       min=JAVA_LONG_MIN, max=JAVA_LONG_MAX)] = 0,
    order: Annotated[str | None, typer.Option("-o", "--order", help="order topic: true/false")] = None,
) -> None:
    from mqadmin.cli import front, parse_bool
    from mqadmin.timefmt import seconds_text

    order_only = parse_bool(order, "-o/--order", False)
    # the broker is asked directly (no check_target request first), so -t bounds every wait on it
    rows = cmd.admin().broker_consume_stats(broker.strip(), level, order_only, timeout_millis)
    total = sum(r.diff for r in rows)

    def render() -> None:
        cmd.printf("%-64s  %-64s  %-32s  %-4s  %-20s  %-20s  %-20s  %s%n", "#Topic", "#Group", "#Broker Name",
                   "#QID", "#Broker Offset", "#Consumer Offset", "#Diff", "#LastTime")
        for r in rows:
            cmd.printf("%-64s  %-64s  %-32s  %-4d  %-20d  %-20d  %-20d  %s%n", front(r.topic, 64), r.group,
                       front(r.broker_name, 32), r.queue_id, r.broker_offset, r.consumer_offset, r.diff,
                       seconds_text(r.last_timestamp))
        cmd.printf("%nDiff Total: %d%n", total)

    cmd.emit({"rows": [r.to_dict() for r in rows], "diffTotal": total}, render)


def _write_export(path_text: str, name: str, data: dict[str, Any]) -> str:
    """Write ``<dir>/<name>`` (mqadmin's export layout) atomically; the path written."""
    import json
    import os
    from pathlib import Path

    from mqadmin.errors import AdminError

    target = Path(path_text) / name
    tmp = target.with_name(target.name + ".tmp")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        os.replace(tmp, target)
    except OSError as e:
        tmp.unlink(missing_ok=True)  # a full disk keeps no half-written export
        raise AdminError(f"cannot write {target}: {e.strerror or e}") from None
    return str(target)


@register(app, "exportMetadata", "Export metadata.")
def export_metadata(
    cmd: Cmd,
    cluster: Annotated[str | None, typer.Option("-c", "--clusterName", help="choose a cluster to export")] = None,
    broker: Annotated[str | None, typer.Option("-b", "--brokerAddr", help="choose a broker to export")] = None,
    file_path: Annotated[str, typer.Option("-f", "--filePath", help="export directory")] = "/tmp/rocketmq/export",
    topic_only: Annotated[bool, typer.Option("-t", "--topic", help="only export topic metadata")] = False,
    group_only: Annotated[bool, typer.Option("-g", "--subscriptionGroup",
                                             help="only export subscriptionGroup metadata")] = False,
    special_topic: Annotated[bool, typer.Option("-s", "--specialTopic", help="need retryTopic and dlqTopic")] = False,
) -> None:
    require_one_target(broker, cluster)
    admin = cmd.admin()
    topics, groups = admin.user_metadata(admin.check_target(cluster_name=cluster, broker_addr=broker), special_topic)
    data: dict[str, Any]
    if topic_only:
        name, data = "topic.json", {"topicConfigTable": topics}
    elif group_only:
        name, data = "subscriptionGroup.json", {"subscriptionGroupTable": groups}
    else:
        name, data = "metadata.json", {"topicConfigTable": topics, "subscriptionGroupTable": groups}
    if cluster is not None:
        data["exportTime"] = admin.clock()
    path = _write_export(file_path, name, data)
    cmd.emit({"path": path, **data}, lambda: cmd.printf("export %s success%n", path))


_EXPORTED_BROKER_KEYS = ("brokerClusterName", "brokerId", "brokerName", "brokerRole", "fileReservedTime",
                         "filterServerNums", "flushDiskType", "maxMessageSize", "messageDelayLevel",
                         "msgTraceTopicName", "slaveReadEnable", "traceOn", "traceTopicEnable", "useTLS",
                         "autoCreateTopicEnable", "autoCreateSubscriptionGroup")


@register(app, "exportConfigs", "Export configs.")
def export_configs(
    cmd: Cmd,
    cluster: Annotated[str, typer.Option("-c", "--clusterName", help="choose a cluster to export")],
    file_path: Annotated[str, typer.Option("-f", "--filePath", help="export directory")] = "/tmp/rocketmq/export",
) -> None:
    admin = cmd.admin()
    masters = admin.check_target(cluster_name=cluster)
    configs = {}
    for b in masters:
        props = admin.get_broker_config(b.broker_addr)
        configs[props.get("brokerName", b.broker_name)] = {k: props[k] for k in _EXPORTED_BROKER_KEYS if k in props}
    namesrvs = [a for a in (cmd.opts.remote_target or "").split(";") if a]
    data = {"brokerConfigs": configs, "clusterScale": {"namesrvSize": len(namesrvs), "masterBrokerSize": len(masters),
                                                       "slaveBrokerSize": 0}}
    path = _write_export(file_path, "configs.json", data)
    cmd.emit({"path": path, **data}, lambda: cmd.printf("export %s success%n", path))


def send_result_text(r: Any, topic: str) -> str:
    """SendResult.toString as Apache prints it."""
    return (f"SendResult [sendStatus={r.send_status}, msgId={r.msg_id}, offsetMsgId={r.offset_msg_id}, "
            f"messageQueue=MessageQueue [topic={topic}, brokerName={r.broker_name}, queueId={r.queue_id}], "
            f"queueOffset={r.queue_offset}, recallHandle=null]")


@register(app, "sendMsgStatus", "Send msg to broker.", writes=True)
def send_msg_status(
    cmd: Cmd,
    broker_name: Annotated[str, typer.Option("-b", "--brokerName", help="Broker Name, e.g. broker-a")],
    message_size: Annotated[int, typer.Option("-s", "--messageSize", help="Message Size, Default: 128",
                                              min=0, max=4 * 1024 * 1024)] = 128,
    count: Annotated[int, typer.Option("-c", "--count", help="send message count, Default: 50",
                                       min=0, max=JAVA_INT_MAX)] = 50,
) -> None:
    admin = cmd.admin()
    name = broker_name.strip()
    admin.check_target(broker_name=name)
    admin.send_message(name, b"a" * 16, broker_name=name)  # warm-up, as Apache's first send
    results = []
    for _ in range(count):
        t0 = time.perf_counter()
        r = admin.send_message(name, b"a" * message_size, broker_name=name)
        results.append((int((time.perf_counter() - t0) * 1000), r))
        if not cmd.structured:
            cmd.printf("rt=%sms, SendResult=%s%n", results[-1][0], send_result_text(r, name))
    if cmd.structured:
        cmd.emit([{"rtMs": rt, **r.to_dict()} for rt, r in results], lambda: None)


@register(app, "clusterRT", "List All clusters Message Send RT.", writes=True)
def cluster_rt(
    cmd: Cmd,
    amount: Annotated[int, typer.Option("-a", "--amount", help="message amount | default 100",
                                        min=2, max=JAVA_LONG_MAX)] = 100,
    size: Annotated[int, typer.Option("-s", "--size", help="message size | default 128 Byte",
                                      min=0, max=4 * 1024 * 1024)] = 128,
    cluster: Annotated[str | None, typer.Option("-c", "--cluster", help="cluster name | default all")] = None,
    print_log: Annotated[str | None, typer.Option("-p", "--printLog", help="print as tlog: true/false")] = None,
    machine_room: Annotated[str, typer.Option("-m", "--machineRoom", help="machine room name")] = "noname",
    interval: Annotated[int | None, typer.Option("-i", "--interval", help="repeat every N seconds (Apache: "
                                                 "always, every 10); without -i one round", min=1,
                                                 max=JAVA_INT_MAX)] = None,
) -> None:
    from datetime import datetime

    from mqadmin.cli import parse_bool
    from mqadmin.errors import AdminError

    tlog = parse_bool(print_log, "-p/--printLog", False)
    admin = cmd.admin()
    brokers = admin.check_target(cluster_name=cluster)
    if not tlog and not cmd.structured:
        cmd.printf("%-24s  %-24s  %-4s  %-8s  %-8s%n", "#Cluster Name", "#Broker Name", "#RT", "#successCount",
                   "#failCount")
    rows: list[dict[str, Any]] = []
    while True:
        for b in brokers:
            ok = failed = 0
            elapsed = 0.0
            for i in range(amount):
                t0 = time.perf_counter()
                try:
                    admin.send_message(b.broker_name, b"a" * size, broker_name=b.broker_name)
                    ok += 1
                except AdminError:
                    failed += 1
                if i:
                    elapsed += (time.perf_counter() - t0) * 1000
            rt = elapsed / (amount - 1)
            rows.append({"clusterName": b.cluster_name, "brokerName": b.broker_name, "rtMs": rt,
                         "successCount": ok, "failCount": failed})
            if cmd.structured:
                continue
            if tlog:
                now = datetime.now().strftime("%Y-%m-%d %H:%M:%S")
                cmd.printf("%s", f"{now}|{machine_room}|{b.cluster_name}|{b.broker_name}|{round(rt)}\n")
            else:
                cmd.printf("%-24s  %-24s  %-8s  %-16s  %-16s%n", b.cluster_name, b.broker_name, f"{rt:.2f}", ok,
                           failed)
        if interval is None:
            break
        if cmd.structured:  # every round as it comes: the loop has no end to emit them at
            cmd.emit_round(rows, lambda: None)
            rows = []
        time.sleep(interval)
    if cmd.structured:
        cmd.emit(rows, lambda: None)


@register(app, "statsAll", "Topic and Consumer tps stats (a running broker's in-memory counters since it "
                            "started: -n only; on a store directory, consumerProgress shows lag)")
def stats_all(
    cmd: Cmd,
    active_topic: Annotated[bool, typer.Option("-a", "--activeTopic", help="print active topic only")] = False,
    topic: Annotated[str | None, typer.Option("-t", "--topic", help="print select topic only",
                                              autocompletion=complete_topic)] = None,
) -> None:
    rows = cmd.admin().stats_all(topic.strip() if topic else None, active_topic)

    def render() -> None:
        cmd.printf("%-64s  %-64s %12s %11s %11s %14s %14s%n", "#Topic", "#Consumer Group", "#Accumulation",
                   "#InTPS", "#OutTPS", "#InMsg24Hour", "#OutMsg24Hour")
        for r in rows:
            if r.group is None:
                cmd.printf("%-64s  %-64s %12d %11.2f %11s %14d %14s%n", front(r.topic, 64), "", 0, r.in_tps, "",
                           r.in_msg_24h, "NO_CONSUMER")
            else:
                cmd.printf("%-64s  %-64s %12d %11.2f %11.2f %14d %14d%n", front(r.topic, 64), front(r.group, 64),
                           r.accumulation, r.in_tps, r.out_tps, r.in_msg_24h, r.out_msg_24h)

    cmd.emit([r.to_dict() for r in rows], render)
