"""Group commands (spec E.5): updateSubGroup, deleteSubGroup, consumerProgress."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Annotated, cast

import typer

from broker_core.broker.limits import (
    JAVA_INT_MAX,
    JAVA_INT_MIN,
    JAVA_LONG_MAX,
    JAVA_LONG_MIN,
    MAX_RETRY_TIMES,
    MAX_TOPIC_QUEUE_NUMS,
)
from mqadmin.cli import Cmd, complete_group, complete_topic, front, parse_bool, register, trimmed
from mqadmin.commands.targets import BrokerAddrOpt, ClusterNameOpt, require_a_target, require_one_target
from mqadmin.errors import AdminError, SilentBrokersError, UsageProblem
from mqadmin.timefmt import seconds_text

if TYPE_CHECKING:  # start-up: mqadmin.admin loads when a command runs
    from mqadmin.admin import BrokerIdentity
    from mqadmin.transport.values import SubscriptionGroupInfo

app = typer.Typer()

GroupOpt = Annotated[str, typer.Option("-g", "--groupName", help="consumer group", autocompletion=complete_group,
                                       callback=trimmed)]


def _targets(cmd: Cmd, cluster: str | None, broker: str | None) -> list[BrokerIdentity]:
    require_a_target(broker, cluster)
    return cmd.admin().check_target(cluster_name=cluster, broker_addr=broker)


def _java_bool(v: bool) -> str:
    return "true" if v else "false"


def _to_string(name: str, fields: dict[str, object]) -> str:
    """Guava's MoreObjects.toStringHelper: ``Name{a=1, b=null}``."""
    return name + "{" + ", ".join(f"{k}={'null' if v is None else v}" for k, v in fields.items()) + "}"


# SubscriptionGroupAttributes.ALL: the keys a group's attributes may have. Empty in RocketMQ 5.x, so its
# broker refuses every key ("unsupported key: foo"); refused here before anything is sent, since our
# broker would store whatever it is given.
SUPPORTED_GROUP_ATTRIBUTES: frozenset[str] = frozenset()
_RETRY_POLICY_TYPES = ("CUSTOMIZED", "EXPONENTIAL")  # GroupRetryPolicyType


def _is_java_long(v: object) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and JAVA_LONG_MIN <= v <= JAVA_LONG_MAX


def retry_policy_problem(policy: object) -> str | None:
    """Why ``policy`` is not a GroupRetryPolicy object as Java reads one (None when it is).

    Why checked here: a policy of the wrong shape used to be dropped without a word (the group then
    got the default CUSTOMIZED policy). The shape: ``type`` EXPONENTIAL or CUSTOMIZED,
    ``exponentialRetryPolicy`` {initial, max, multiplier: long}, ``customizedRetryPolicy`` {next: [long]};
    each may be absent or null (Java's defaults), other keys are ignored as fastjson ignores them.
    """
    if not isinstance(policy, dict):
        return f"groupRetryPolicy must be an object, got {policy!r}"
    kind = policy.get("type")
    if kind is not None and (not isinstance(kind, str) or kind.upper() not in _RETRY_POLICY_TYPES):
        return f"groupRetryPolicy.type must be EXPONENTIAL or CUSTOMIZED, got {kind!r}"
    exp = policy.get("exponentialRetryPolicy")
    if exp is not None:
        if not isinstance(exp, dict):
            return f"groupRetryPolicy.exponentialRetryPolicy must be an object, got {exp!r}"
        for k in ("initial", "max", "multiplier"):
            if k in exp and not _is_java_long(exp[k]):
                return f"groupRetryPolicy.exponentialRetryPolicy.{k} must be an integer, got {exp[k]!r}"
    cust = policy.get("customizedRetryPolicy")
    if cust is not None:
        if not isinstance(cust, dict):
            return f"groupRetryPolicy.customizedRetryPolicy must be an object, got {cust!r}"
        nxt = cust.get("next")
        if nxt is not None and (not isinstance(nxt, list) or not all(_is_java_long(n) for n in nxt)):
            return f"groupRetryPolicy.customizedRetryPolicy.next must be a list of integers, got {nxt!r}"
    return None


def unsupported_group_attributes(keys: list[str]) -> str | None:
    """RocketMQ's refusal of group attribute keys it does not support (None when all are)."""
    bad = [k.lstrip("+-") for k in keys if k.lstrip("+-") not in SUPPORTED_GROUP_ATTRIBUTES]
    return f"unsupported key: {', '.join(bad)}" if bad else None


def retry_policy_text(policy: dict[str, object] | None) -> str:
    """GroupRetryPolicy's toString from its object (type, exponentialRetryPolicy, customizedRetryPolicy)."""
    policy = policy or {"type": "CUSTOMIZED"}
    exp = policy.get("exponentialRetryPolicy")
    cust = policy.get("customizedRetryPolicy")
    exp_text = None if not isinstance(exp, dict) else _to_string(
        "ExponentialRetryPolicy", {k: exp.get(k) for k in ("initial", "max", "multiplier")})
    cust_text = None if not isinstance(cust, dict) else _to_string(
        "CustomizedRetryPolicy", {"next": "[" + ", ".join(str(n) for n in cust.get("next") or []) + "]"})
    return _to_string("GroupRetryPolicy", {"type": policy.get("type", "CUSTOMIZED"),
                                           "exponentialRetryPolicy": exp_text, "customizedRetryPolicy": cust_text})


def _subscriptions_text(subs: list[dict[str, object]] | None) -> str | None:
    if subs is None:
        return None
    return "[" + ", ".join(_to_string("SimpleSubscriptionData", {
        "topic": s.get("topic"), "expressionType": s.get("expressionType"), "expression": s.get("expression"),
        "version": s.get("version", 0)}) for s in subs) + "]"


def _config_fields(g: SubscriptionGroupInfo) -> dict[str, object]:
    """SubscriptionGroupConfig's fields in Java's declaration order, each as its toString shows it."""
    attrs = "{" + ", ".join(f"{k}={v}" for k, v in g.attributes.items()) + "}"
    return {
        "groupName": g.group_name, "consumeEnable": _java_bool(g.consume_enable),
        "consumeFromMinEnable": _java_bool(g.consume_from_min_enable),
        "consumeBroadcastEnable": _java_bool(g.consume_broadcast_enable),
        "consumeMessageOrderly": _java_bool(g.consume_message_orderly), "retryQueueNums": g.retry_queue_nums,
        "retryMaxTimes": g.retry_max_times, "groupRetryPolicy": retry_policy_text(g.group_retry_policy),
        "brokerId": g.broker_id, "whichBrokerWhenConsumeSlowly": g.which_broker_when_consume_slowly,
        "notifyConsumerIdsChangedEnable": _java_bool(g.notify_consumer_ids_changed_enable),
        "groupSysFlag": g.group_sys_flag, "consumeTimeoutMinute": g.consume_timeout_minute,
        "subscriptionDataSet": _subscriptions_text(g.subscription_data_set), "attributes": attrs}


def group_config_text(g: SubscriptionGroupInfo) -> str:
    """SubscriptionGroupConfig's Guava toString, as mqadmin prints it (every field, Java's order)."""
    return _to_string("SubscriptionGroupConfig", _config_fields(g))


@register(app, "updateSubGroup", "Create or update a subscription (consumer) group.", writes=True)
def update_sub_group(
    cmd: Cmd,
    group: Annotated[str, typer.Option("-g", "--groupName", help="consumer group", callback=trimmed)],
    broker: BrokerAddrOpt = None,
    cluster: ClusterNameOpt = None,
    consume_enable: Annotated[str | None, typer.Option("-s", "--consumeEnable", help="true/false")] = None,
    from_min: Annotated[str | None, typer.Option("-m", "--consumeFromMinEnable", help="true/false")] = None,
    broadcast: Annotated[str | None, typer.Option("-d", "--consumeBroadcastEnable", help="true/false")] = None,
    orderly: Annotated[str | None, typer.Option("-o", "--consumeMessageOrderly", help="true/false")] = None,
    retry_queue_nums: Annotated[int, typer.Option("-q", "--retryQueueNums", help="retry queues", min=0, max=MAX_TOPIC_QUEUE_NUMS)] = 1,
    retry_max_times: Annotated[int, typer.Option("-r", "--retryMaxTimes", help="max retries", min=-1, max=MAX_RETRY_TIMES)] = 16,
    retry_policy: Annotated[str | None, typer.Option("-p", "--groupRetryPolicy", help="retry policy JSON")] = None,
    broker_id: Annotated[int, typer.Option("-i", "--brokerId", help="consume from broker id", min=0, max=JAVA_LONG_MAX)] = 0,
    slowly: Annotated[int, typer.Option("-w", "--whichBrokerWhenConsumeSlowly", help="broker id", min=0, max=JAVA_LONG_MAX)] = 1,
    notify: Annotated[str | None, typer.Option("-a", "--notifyConsumerIdsChanged", help="true/false")] = None,
    attributes: Annotated[str | None, typer.Option("--attributes", help="+a=b,+c=d,-e")] = None,
) -> None:
    policy: dict[str, object] | None = None
    if retry_policy is not None:
        try:
            parsed = json.loads(retry_policy)
        except json.JSONDecodeError as e:
            raise AdminError(f"invalid -p/--groupRetryPolicy JSON: {e.msg} at character {e.pos}") from None
        problem = retry_policy_problem(parsed)
        if problem is not None:
            raise AdminError(f"invalid -p/--groupRetryPolicy: {problem}")
        policy = parsed
    from mqadmin.commands.topic import parse_attributes
    from mqadmin.transport.base import SubscriptionGroupInfo

    attrs = parse_attributes(attributes)
    refused = unsupported_group_attributes(list(attrs))
    if refused is not None:
        # exit 1 as updateTopic's broker refusal of an unsupported key: the same rule, known here
        raise AdminError(f"invalid --attributes: {refused} (no subscription group attribute is supported)")
    config = SubscriptionGroupInfo(
        group, parse_bool(consume_enable, "-s", True), parse_bool(from_min, "-m", False),
        parse_bool(broadcast, "-d", False), parse_bool(orderly, "-o", False), retry_queue_nums, retry_max_times,
        policy, broker_id, slowly, parse_bool(notify, "-a", True), attrs)
    targets = _targets(cmd, cluster, broker)
    addrs = [b.broker_addr for b in targets]
    result = cmd.admin().update_sub_group(config, targets)

    def render() -> None:
        for a in addrs:
            cmd.print(f"create subscription group to {a} success.")
        cmd.print(group_config_text(result))

    cmd.emit({"brokers": addrs, "subscriptionGroupConfig": result.to_dict()}, render)


@register(app, "deleteSubGroup", "Delete a subscription group (and optionally its offsets).", writes=True)
def delete_sub_group(
    cmd: Cmd,
    group: GroupOpt,
    broker: BrokerAddrOpt = None,
    cluster: ClusterNameOpt = None,
    remove_offset: Annotated[str | None, typer.Option("-r", "--removeOffset", help="true/false")] = None,
) -> None:
    targets = _targets(cmd, cluster, broker)
    addrs = [b.broker_addr for b in targets]
    warnings = cmd.admin().delete_sub_group(group, parse_bool(remove_offset, "-r/--removeOffset", False),
                                            delete_retry_topics=cluster is not None, targets=targets)

    def render() -> None:
        for a in addrs:
            suffix = f" in cluster [{cluster}]" if cluster is not None else ""
            cmd.print(f"delete subscription group [{group}] from broker [{a}]{suffix} success.")

    cmd.emit({"brokers": addrs, "group": group, "warnings": warnings}, render)
    # exit 0 as Apache's (it prints the topic's failure and returns): the group asked for is deleted
    for w in warnings:
        typer.echo(f"mqadmin {cmd.name}: warning: {' '.join(w.splitlines())}", err=True)


@register(app, "consumerProgress", "Show a group's consume progress (or every group's summary).")
def consumer_progress(
    cmd: Cmd,
    group: Annotated[str | None, typer.Option("-g", "--groupName", help="consumer group",
                                              autocompletion=complete_group, callback=trimmed)] = None,
    topic: Annotated[str | None, typer.Option("-t", "--topicName", help="topic",
                                              autocompletion=complete_topic, callback=trimmed)] = None,
    show_client_ip: Annotated[str | None, typer.Option("-s", "--showClientIP", help="true/false")] = None,
    cluster: Annotated[str | None, typer.Option("-c", "--cluster", help="cluster name")] = None,
) -> None:
    admin = cmd.admin()
    if cluster is not None:
        admin.check_target(cluster_name=cluster)
    with_ip = parse_bool(show_client_ip, "-s/--showClientIP", False)
    if group is None:
        unanswered: list[str] = []  # brokers that did not answer: named after the others' figures
        rows = admin.group_summaries(unanswered)
        def render_groups() -> None:
            cmd.printf("%-64s  %-6s  %-24s %-5s  %-14s  %-7s  %s%n", "#Group", "#Count", "#Version", "#Type",
                       "#Model", "#TPS", "#Diff Total")
            for r in rows:
                cmd.printf("%-64s  %-6d  %-24s %-5s  %-14s  %-7d  %d%n", front(r.group, 64), r.count, r.version,
                           r.consume_type, r.message_model, int(r.consume_tps), r.diff_total)

        cmd.emit([r.to_dict() for r in rows], render_groups)
        if unanswered:
            raise SilentBrokersError(unanswered)
        return
    progress = admin.consumer_progress(group, topic, with_ip)
    rows, tps = progress.rows, progress.consume_tps

    def render() -> None:
        if with_ip:
            cmd.printf("%-64s  %-32s  %-4s  %-20s  %-20s  %-20s %-20s %-20s%s%n", "#Topic", "#Broker Name", "#QID",
                       "#Broker Offset", "#Consumer Offset", "#Client IP", "#Diff", "#Inflight", "#LastTime")
        else:
            cmd.printf("%-64s  %-32s  %-4s  %-20s  %-20s  %-20s %-20s%s%n", "#Topic", "#Broker Name", "#QID",
                       "#Broker Offset", "#Consumer Offset", "#Diff", "#Inflight", "#LastTime")
        for r in sorted(rows, key=lambda r: (r.topic, r.broker_name, r.queue_id)):
            last = seconds_text(r.last_timestamp) if r.last_timestamp else "N/A"
            if with_ip:
                cmd.printf("%-64s  %-32s  %-4d  %-20d  %-20d  %-20s %-20d %-20d %s%n", front(r.topic, 64),
                           front(r.broker_name, 32), r.queue_id, r.broker_offset, r.consumer_offset,
                           r.client_ip or "N/A", r.diff, r.inflight, last)
            else:
                cmd.printf("%-64s  %-32s  %-4d  %-20d  %-20d  %-20d %-20d %s%n", front(r.topic, 64),
                           front(r.broker_name, 32), r.queue_id, r.broker_offset, r.consumer_offset, r.diff,
                           r.inflight, last)
        cmd.print("")
        cmd.printf("Consume TPS: %.2f%n", tps)
        cmd.print(f"Consume Diff Total: {sum(r.diff for r in rows)}")
        cmd.print(f"Consume Inflight Total: {sum(r.inflight for r in rows)}")

    cmd.emit([r.to_dict() for r in rows], render)


def _config_values(g: SubscriptionGroupInfo) -> dict[str, str]:
    """Each SubscriptionGroupConfig field as Java's toString prints it (null as ''), declaration order."""
    return {k: "" if v is None else str(v) for k, v in _config_fields(g).items()}


@register(app, "getConsumerConfig", "Get consumer config by subscription group name.")
def get_consumer_config(cmd: Cmd, group: GroupOpt) -> None:
    found = cmd.admin().consumer_configs(group.strip())

    def render() -> None:
        for b, cfg in found:
            cmd.printf("=============================%s:%s=============================\n", b.cluster_name,
                       b.broker_name)
            for k, v in _config_values(cfg).items():
                cmd.printf("%s%-40s=  %s\n", "", k, v)

    cmd.emit([{"clusterName": b.cluster_name, "brokerName": b.broker_name, "config": cfg.to_dict()}
              for b, cfg in found], render)


@register(app, "updateSubGroupList", "Update or create subscription group in batch", writes=True)
def update_sub_group_list(
    cmd: Cmd,
    filename: Annotated[str, typer.Option("-f", "--filename", help="JSON file: a list of SubscriptionGroupConfig")],
    broker: BrokerAddrOpt = None,
    cluster: ClusterNameOpt = None,
) -> None:
    """Every field of each SubscriptionGroupConfig in the file is applied (as Java's body carries the
    whole config), and every entry is checked before the list is sent (one request a broker): a bad one
    changes nothing."""
    from mqadmin.commands.config_list import read_json_list, submit_config_list

    require_one_target(broker, cluster)
    wanted = [_group_from_file(where, obj) for where, obj in read_json_list(filename, "SubscriptionGroupConfig")]
    submit_config_list(cmd, broker, cluster, wanted,
                       lambda admin, gs, targets: admin.update_sub_group_list(gs, targets),
                       ("groups", [g.group_name for g in wanted]),
                       "subscription group" if cluster is not None else "group")


def _group_from_file(where: str, obj: dict[str, object]) -> SubscriptionGroupInfo:
    """One SubscriptionGroupConfig of an updateSubGroupList file, with Java's defaults for absent fields,
    or an error naming the entry and the field: the broker's ranges, the retry policy's shape, and
    attributes (RocketMQ supports no group attribute key)."""
    from broker_core.broker.topic_validator import validate_group
    from mqadmin.commands.config_list import field
    from mqadmin.transport.base import SubscriptionGroupInfo

    name = field(obj, "groupName", str, "", where)
    if not name:
        raise AdminError(f"{where}: groupName is required")
    bad = validate_group(name)
    if bad:
        raise AdminError(f"{where}: {bad}")

    def number(key: str, default: int, lo: int, hi: int) -> int:
        value = cast(int, field(obj, key, int, default, where))  # field() refused anything but an int
        if not lo <= value <= hi:
            raise AdminError(f"{where}: {key} must be {lo}..{hi}, got {value}")
        return value

    def flag(key: str, default: bool) -> bool:
        return bool(field(obj, key, bool, default, where))

    policy = obj.get("groupRetryPolicy")
    if policy is not None:
        problem = retry_policy_problem(policy)
        if problem is not None:
            raise AdminError(f"{where}: {problem}")
    subs = obj.get("subscriptionDataSet")
    if subs is not None and (not isinstance(subs, list) or not all(isinstance(d, dict) for d in subs)):
        raise AdminError(f"{where}: subscriptionDataSet must be a list of SimpleSubscriptionData objects, got {subs!r}")
    attrs = obj.get("attributes") or {}
    if not isinstance(attrs, dict):
        raise AdminError(f"{where}: attributes must be an object")
    refused = unsupported_group_attributes([str(k) for k in attrs])
    if refused is not None:
        raise AdminError(f"{where}: attributes: {refused} (no subscription group attribute is supported)")
    return SubscriptionGroupInfo(
        name, flag("consumeEnable", True), flag("consumeFromMinEnable", True), flag("consumeBroadcastEnable", True),
        flag("consumeMessageOrderly", False), number("retryQueueNums", 1, 0, MAX_TOPIC_QUEUE_NUMS),
        number("retryMaxTimes", 16, -1, MAX_RETRY_TIMES),
        dict(policy) if isinstance(policy, dict) else None, number("brokerId", 0, 0, JAVA_LONG_MAX),
        number("whichBrokerWhenConsumeSlowly", 1, 0, JAVA_LONG_MAX),
        flag("notifyConsumerIdsChangedEnable", True), {},
        number("groupSysFlag", 0, JAVA_INT_MIN, JAVA_INT_MAX),
        number("consumeTimeoutMinute", 15, JAVA_INT_MIN, JAVA_INT_MAX),
        None if subs is None else [dict(d) for d in subs])


@register(app, "setConsumeMode", "set consume mode", writes=True)
def set_consume_mode(
    cmd: Cmd,
    topic: Annotated[str, typer.Option("-t", "--topicName", help="topic name", autocompletion=complete_topic,
                                       callback=trimmed)],
    group: Annotated[str, typer.Option("-g", "--groupName", help="consumer group name", autocompletion=complete_group,
                                       callback=trimmed)],
    mode: Annotated[str, typer.Option("-m", "--mode", help="consume mode. PULL/POP")],
    broker_addr: Annotated[str | None, typer.Option("-b", "--brokerAddr", help="create subscription group to which broker")] = None,
    cluster: Annotated[str | None, typer.Option("-c", "--clusterName", help="create subscription group to which cluster")] = None,
    pop_share_queue_num: Annotated[int, typer.Option("-q", "--popShareQueueNum", min=-1, max=JAVA_INT_MAX,
                                                     help="num of queue which share in pop mode")] = 0,
) -> None:
    require_a_target(broker_addr, cluster)
    how = mode.strip()
    if how not in ("PULL", "POP"):
        raise UsageProblem(f"invalid -m/--mode {mode!r}: expected PULL or POP")
    t, g = topic.strip(), group.strip()
    addrs = cmd.admin().set_consume_mode(t, g, how, pop_share_queue_num, cluster.strip() if cluster else None,
                                         broker_addr.strip() if broker_addr else None)

    def render() -> None:
        for addr in addrs:
            cmd.printf("set consume mode to %s success.%n", addr)
        cmd.printf("topic[%s] group[%s] consume mode[%s] popShareQueueNum[%d]", t, g, how, pop_share_queue_num)

    cmd.emit({"brokerAddrs": addrs, "topic": t, "group": g, "mode": how, "popShareQueueNum": pop_share_queue_num},
             render)
