"""Topic commands (spec E.4): updateTopic, deleteTopic, topicList, topicRoute, topicStatus."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Annotated

import typer

from broker_core.broker.limits import JAVA_INT_MAX, JAVA_LONG_MAX, MAX_TOPIC_PERM, MAX_TOPIC_QUEUE_NUMS
from mqadmin.cli import Cmd, TopicOpt, front, parse_bool, register, trimmed
from mqadmin.commands.targets import BrokerAddrOpt, ClusterNameOpt, require_one_target
from mqadmin.errors import AdminError, NotFoundError, UsageProblem
from mqadmin.timefmt import human2

if TYPE_CHECKING:  # start-up: mqadmin.admin loads when a command runs
    from mqadmin.admin import TopicInfo
    from mqadmin.reports import DeleteTopicPlan

app = typer.Typer()

ROUTE_FORMAT = "%-45s %-32s %-50s %-10s %-11s %-5s%n"


def perm_to_string(perm: int) -> str:
    """PermName.perm2String: R, W, X (inherit) or '-'."""
    return ("R" if perm & 4 else "-") + ("W" if perm & 2 else "-") + ("X" if perm & 1 else "-")


def topic_config_line(t: TopicInfo, attributes_text: str) -> str:
    return (f"TopicConfig [topicName={t.topic_name}, readQueueNums={t.read_queue_nums}, "
            f"writeQueueNums={t.write_queue_nums}, perm={perm_to_string(t.perm)}, "
            f"topicFilterType={t.topic_filter_type}, topicSysFlag={t.topic_sys_flag}, "
            f"order={'true' if t.order else 'false'}, attributes={attributes_text}]")


def parse_attributes(text: str | None) -> dict[str, str]:
    """``+a=b,+c=d,-e`` (mqadmin's -a) as an ordered map of signed keys to values."""
    out: dict[str, str] = {}
    if not text:
        return out
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        key, sep, value = part.partition("=")
        if not key or key[0] not in "+-":
            raise UsageProblem(f"bad attribute {part!r}: write +key=value to set or -key to remove")
        if key[0] == "+" and not sep:
            raise UsageProblem(f"bad attribute {part!r}: +key needs =value")
        out[key] = value
    return out


@register(app, "updateTopic", "Create or update a topic.", writes=True)
def update_topic(
    cmd: Cmd,
    topic: Annotated[str, typer.Option("-t", "--topic", help="topic", callback=trimmed)],
    broker: BrokerAddrOpt = None,
    cluster: ClusterNameOpt = None,
    read_queue_nums: Annotated[int, typer.Option("-r", "--readQueueNums", help="read queues", min=0, max=MAX_TOPIC_QUEUE_NUMS)] = 8,
    write_queue_nums: Annotated[int, typer.Option("-w", "--writeQueueNums", help="write queues", min=0, max=MAX_TOPIC_QUEUE_NUMS)] = 8,
    perm: Annotated[int, typer.Option("-p", "--perm", help="2 W, 4 R, 6 RW", min=0, max=MAX_TOPIC_PERM)] = 6,
    order: Annotated[str | None, typer.Option("-o", "--order", help="ordered topic: true/false")] = None,
    unit: Annotated[str | None, typer.Option("-u", "--unit", help="unit topic: true/false")] = None,
    has_unit_sub: Annotated[str | None, typer.Option("-s", "--hasUnitSub", help="true/false")] = None,
    attributes: Annotated[str | None, typer.Option("-a", "--attributes", help="+a=b,+c=d,-e")] = None,
) -> None:
    require_one_target(broker, cluster)
    if read_queue_nums == 0 and write_queue_nums == 0:  # the broker would refuse it: say so as a usage error
        raise UsageProblem("-r/--readQueueNums and -w/--writeQueueNums cannot both be 0")
    is_order = parse_bool(order, "-o/--order", False)
    is_unit = parse_bool(unit, "-u/--unit", False)
    has_sub = parse_bool(has_unit_sub, "-s/--hasUnitSub", False)
    attrs = parse_attributes(attributes)
    admin = cmd.admin()
    targets = admin.check_target(cluster_name=cluster, broker_addr=broker)
    sys_flag = (1 if is_unit else 0) | (2 if has_sub else 0)
    from mqadmin.admin import ORDER_TOPIC_CONFIG
    from mqadmin.transport.base import TopicInfo

    wanted = TopicInfo(topic, read_queue_nums, write_queue_nums, perm, "SINGLE_TAG", sys_flag, is_order, attrs)
    if len(targets) > 1:  # judged on every broker first: one refusing after others were changed half-did it
        try:
            problem = admin.topic_update_problem(wanted, targets)
        except AdminError as e:  # a broker that does not answer the check: nothing was sent yet
            raise e.noting("nothing was changed") from None
        if problem is not None:
            raise AdminError(f"topic [{topic}]: {problem} (nothing was changed)")
    # -o true: the name server's orderConf is written after the brokers, as Apache's; it is worked out
    # (the name server read) first, so a missing name server fails before any broker is changed
    order_conf = admin.order_conf_for(topic, write_queue_nums, targets, cluster is not None) if is_order else None
    result = admin.update_topic(wanted, targets)
    if order_conf is not None:
        admin.put_kv_config(ORDER_TOPIC_CONFIG, topic, order_conf)
    attr_text = "{" + ", ".join(f"{k}={v}" for k, v in attrs.items()) + "}"

    def render() -> None:
        for b in targets:
            cmd.print(f"create topic to {b.broker_addr} success.")
        if is_order:
            names = ";".join(f"{b.broker_name}:{write_queue_nums}" for b in targets)
            scope = "cluster" if cluster is not None else "broker"
            cmd.print(f"set {scope} orderConf. isOrder={'true'}, orderConf=[{names}]")
        cmd.print(topic_config_line(wanted, attr_text))

    out = {"brokers": [b.broker_addr for b in targets], "topicConfig": result.to_dict()}
    if order_conf is not None:
        out["orderConf"] = order_conf
    cmd.emit(out, render)


@register(app, "deleteTopic", "Delete a topic (config, consume queues and offsets).", writes=True)
def delete_topic(
    cmd: Cmd,
    topic: TopicOpt,
    cluster: Annotated[str, typer.Option("-c", "--clusterName", help="cluster name")],
    dry_run: Annotated[bool, typer.Option("--dry-run", help="print what would be deleted, change nothing")] = False,
) -> None:
    cmd.writes = not dry_run  # a dry run opens the store read-only: it cannot change anything
    admin = cmd.admin()
    admin.check_target(cluster_name=cluster)
    try:
        plan = admin.delete_topic(topic, cluster, dry_run=dry_run)
    except NotFoundError:
        # no broker has it: a re-run after the name server part failed still cleans the route
        _delete_topic_route(cmd, admin.delete_topic_route(topic, cluster, dry_run=dry_run), dry_run)
        return

    def render() -> None:
        if dry_run:
            cmd.print(f"[dry-run] would delete topic [{topic}] from cluster [{cluster}]: {plan.queues} queue(s), "
                      f"{plan.messages} message(s) no longer readable, consumer offsets of "
                      f"{len(plan.groups_with_offsets)} group(s)"
                      + (f" ({', '.join(plan.groups_with_offsets)})" if plan.groups_with_offsets else ""))
            return
        cmd.print(f"delete topic [{topic}] from cluster [{cluster}] success.")
        cmd.print(f"delete topic [{topic}] from NameServer success.")

    cmd.emit(plan.to_dict(), render)


def _delete_topic_route(cmd: Cmd, plan: DeleteTopicPlan, dry_run: bool) -> None:
    """deleteTopic's words when only the name servers still had the topic's route."""
    def render() -> None:
        where = f"no broker of cluster [{plan.cluster_name}] has topic [{plan.topic}]"
        if dry_run:
            cmd.print(f"[dry-run] would delete topic [{plan.topic}] from NameServer only: {where}")
            return
        cmd.print(f"{where} (already deleted there); its route was still in the name server")
        cmd.print(f"delete topic [{plan.topic}] from NameServer success.")

    cmd.emit({**plan.to_dict(), "brokersHadTopic": False}, render)


@register(app, "topicList", "List topics (-c: with cluster and consumer groups).")
def topic_list(
    cmd: Cmd,
    cluster_model: Annotated[bool, typer.Option("-c", "--clusterModel", help="print cluster and groups")] = False,
) -> None:
    admin = cmd.admin()
    topics = admin.list_topics()
    if not cluster_model:
        cmd.emit(topics, lambda: [cmd.print(t) for t in topics])
        return
    # each topic's cluster is that of the first broker of its route, as Apache's (not one for all)
    rows = [(c, t, g) for c, t, groups in admin.topic_list_clusters() for g in groups or [""]]

    def render() -> None:
        cmd.printf("%-20s  %-48s  %-48s%n", "#Cluster Name", "#Topic", "#Consumer Group")
        for c, t, g in rows:
            cmd.printf("%-20s  %-64s  %-64s%n", "null" if c is None else front(c, 20), front(t, 64), front(g, 64))

    cmd.emit([{"clusterName": c, "topic": t, "consumerGroup": g} for c, t, g in rows], render)


@register(app, "topicRoute", "Show a topic's route (brokers and queues).")
def topic_route(
    cmd: Cmd,
    topic: TopicOpt,
    as_list: Annotated[bool, typer.Option("-l", "--list", help="print as a table")] = False,
) -> None:
    route = cmd.admin().topic_route(topic)

    def render() -> None:
        if not as_list:
            cmd.print(json.dumps(route, indent="\t", sort_keys=True))
            return
        queues = {q["brokerName"]: q for q in route["queueDatas"]}
        total_r = total_w = 0
        cmd.printf(ROUTE_FORMAT, "#ClusterName", "#BrokerName", "#BrokerAddrs", "#ReadQueue", "#WriteQueue", "#Perm")
        for b in sorted(route["brokerDatas"], key=lambda b: b["brokerName"]):
            q = queues.get(b["brokerName"])
            if q is None:
                continue
            total_r += q["readQueueNums"]
            total_w += q["writeQueueNums"]
            cmd.printf(ROUTE_FORMAT, b["cluster"], b["brokerName"], b["brokerAddrs"], q["readQueueNums"],
                       q["writeQueueNums"], q["perm"])
        cmd.print("-" * 158)
        cmd.printf(ROUTE_FORMAT, "Total:", len(queues), "", total_r, total_w, "")

    cmd.emit(route, render)


@register(app, "topicStatus", "Show each queue's min/max offset and last update time.")
def topic_status(
    cmd: Cmd,
    topic: TopicOpt,
    cluster: Annotated[str | None, typer.Option("-c", "--cluster", help="cluster name")] = None,
) -> None:
    admin = cmd.admin()
    # -c: only the queues of that cluster's brokers (Apache asks each broker of the cluster)
    among = admin.check_target(cluster_name=cluster) if cluster is not None else None
    stats = admin.topic_stats(topic, among)
    rows = stats.queues
    if not rows:
        raise NotFoundError("Not found the topic stats info")

    def render() -> None:
        cmd.printf("%-32s  %-4s  %-20s  %-20s    %s%n", "#Broker Name", "#QID", "#Min Offset", "#Max Offset",
                   "#Last Updated")
        for r in sorted(rows, key=lambda r: (r.broker_name, r.queue_id)):
            cmd.printf("%-32s  %-4d  %-20d  %-20d    %s%n", front(r.broker_name, 32), r.queue_id, r.min_offset,
                       r.max_offset, human2(r.last_update_timestamp) if r.last_update_timestamp else "")
        cmd.print("")
        # summed over the brokers asked; "%s" of a Java double, as Apache's line
        cmd.print(f"Topic Put TPS: {stats.put_tps!r}")

    cmd.emit([r.to_dict() for r in rows], render)


@register(app, "updateTopicPerm", "Update topic perm.", writes=True)
def update_topic_perm(
    cmd: Cmd,
    topic: TopicOpt,
    perm: Annotated[int, typer.Option("-p", "--perm", help="2 W, 4 R, 6 RW", min=0, max=MAX_TOPIC_PERM)],
    broker: BrokerAddrOpt = None,
    cluster: ClusterNameOpt = None,
) -> None:
    require_one_target(broker, cluster)
    if perm not in (2, 4, 6):
        raise UsageProblem(f"invalid -p/--perm {perm}: expected 2 (W), 4 (R) or 6 (RW)")
    admin = cmd.admin()
    results = admin.update_topic_perm(topic.strip(), perm, admin.check_target(cluster_name=cluster, broker_addr=broker))

    def render() -> None:
        for b, old, stored in results:
            if stored is None:
                cmd.print("new perm equals to the old one!")
                continue
            cmd.print(f"update topic perm from {old} to {perm} in {b.broker_addr} success.")
            if broker is not None:
                attrs = "{" + ", ".join(f"{k}={v}" for k, v in stored.attributes.items()) + "}"
                cmd.print(topic_config_line(stored, attrs) + ".")

    cmd.emit([{"brokerAddr": b.broker_addr, "oldPerm": old, "perm": perm, "changed": stored is not None}
              for b, old, stored in results], render)


@register(app, "topicClusterList", "Get cluster info for topic.")
def topic_cluster_list(cmd: Cmd, topic: TopicOpt) -> None:
    clusters = cmd.admin().topic_cluster_list(topic.strip())
    cmd.emit(clusters, lambda: [cmd.print(c) for c in clusters])


@register(app, "allocateMQ", "Allocate MQ.")
def allocate_mq(
    cmd: Cmd,
    topic: TopicOpt,
    ip_list: Annotated[str, typer.Option("-i", "--ipList", help="comma list of client ids / ips")],
) -> None:
    ips = [p for p in ip_list.strip().split(",") if p]
    if not ips:
        raise UsageProblem("-i/--ipList must name at least one client")
    result = cmd.admin().allocate_mq(topic.strip(), ips)
    cmd.emit({"result": result}, lambda: cmd.print(json.dumps({"result": result}, separators=(",", ":"))))


@register(app, "updateTopicList", "create or update topic in batch", writes=True)
def update_topic_list(
    cmd: Cmd,
    filename: Annotated[str, typer.Option("-f", "--filename", help="JSON file: a list of TopicConfig")],
    broker: BrokerAddrOpt = None,
    cluster: ClusterNameOpt = None,
) -> None:
    from mqadmin.commands.config_list import field, read_json_list, signed_attributes, submit_config_list
    from mqadmin.transport.base import TopicInfo

    require_one_target(broker, cluster)
    wanted = []
    labels = []
    for where, obj in read_json_list(filename, "TopicConfig"):
        name = field(obj, "topicName", str, "", where)
        nums = [field(obj, k, int, 16, where) for k in ("readQueueNums", "writeQueueNums")]
        perm = field(obj, "perm", int, 6, where)
        sys_flag = field(obj, "topicSysFlag", int, 0, where)
        if not name or not all(0 <= n <= MAX_TOPIC_QUEUE_NUMS for n in nums) or not 0 <= perm <= MAX_TOPIC_PERM \
                or not 0 <= sys_flag <= JAVA_INT_MAX:
            raise AdminError(f"{where}: needs topicName, queue numbers 0..{MAX_TOPIC_QUEUE_NUMS} and perm 0..{MAX_TOPIC_PERM}")
        attrs = signed_attributes(obj, where)
        wanted.append(TopicInfo(name, nums[0], nums[1], perm, field(obj, "topicFilterType", str, "SINGLE_TAG", where),
                                sys_flag, bool(field(obj, "order", bool, False, where)), attrs))
        labels.append(f"{where} (topic {name})")
    submit_config_list(cmd, broker, cluster, wanted, lambda admin, ts, targets: admin.update_topic_list(ts, targets),
                       ("topics", [t.topic_name for t in wanted]), "topic", labels,
                       lambda admin, t, targets: admin.topic_update_problem(t, targets))


@register(app, "queryCq", "Query cq command.")
def query_cq(
    cmd: Cmd,
    topic: TopicOpt,
    queue_id: Annotated[int, typer.Option("-q", "--queue", help="queue num, ie. 1", min=0, max=JAVA_INT_MAX)],
    index: Annotated[int, typer.Option("-i", "--index", help="start queue index.", min=0, max=JAVA_LONG_MAX)],
    count: Annotated[int, typer.Option("-c", "--count", help="how many.", min=0, max=JAVA_INT_MAX)] = 10,
    broker: Annotated[str | None, typer.Option("-b", "--broker", help="broker addr.")] = None,
    group: Annotated[str | None, typer.Option("-g", "--consumer", help="consumer group (not used: no filter)")] = None,
) -> None:
    view = cmd.admin().query_consume_queue(topic.strip(), queue_id, index, count, broker.strip() if broker else None)

    def render() -> None:
        cmd.printf("Queue data: \nmax: %d, min: %d\n", view.max_queue_index, view.min_queue_index)
        cmd.printf("======================================\n")
        for i, e in enumerate(view.entries, index):
            cmd.printf("idx: %d\n", i)
            cmd.printf("ConsumeQueueData{physicOffset=%d, physicSize=%d, tagsCode=%d, extendDataJson='null', "
                       "bitMap='null', eval=false, msg='null'}\n", e.physic_offset, e.physic_size, e.tags_code)
            cmd.printf("======================================\n")

    cmd.emit({"maxQueueIndex": view.max_queue_index, "minQueueIndex": view.min_queue_index,
              "queueData": [{"physicOffset": e.physic_offset, "physicSize": e.physic_size, "tagsCode": e.tags_code}
                            for e in view.entries]}, render)
