"""Offset commands (spec E.5): resetOffsetByTime, skipAccumulatedMessage, cloneGroupOffset."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from broker_core.broker.limits import JAVA_INT_MAX, JAVA_LONG_MAX
from mqadmin.cli import Cmd, TopicOpt, complete_group, parse_bool, register, trimmed
from mqadmin.errors import UsageProblem
from mqadmin.timefmt import parse_timestamp

if TYPE_CHECKING:  # start-up: mqadmin.admin loads when a command runs
    from mqadmin.reports import ResetPlan

app = typer.Typer()

# trimmed as Apache's getOptionValue(..).trim(): -g " G " resets group G, not a group that cannot exist
GroupOpt = Annotated[str, typer.Option("-g", "--group", help="consumer group", autocompletion=complete_group,
                                       callback=trimmed)]
ForceOpt = Annotated[str | None, typer.Option("-f", "--force", help="true/false (default true)")]
DryRunOpt = Annotated[bool, typer.Option("--dry-run", help="print the plan, change nothing")]
PLAN_HEADERS = ("#brokerName", "#queueId", "#brokerOffset", "#consumerOffset", "#timestampOffset", "#resetOffset")


def _render_plan(cmd: Cmd, plan: ResetPlan, dry_run: bool) -> None:
    if dry_run:
        cmd.print("[dry-run] nothing changed; the reset would move these queues:")
        cmd.printf("%-20s  %-20s  %-20s  %-20s  %-20s  %-20s%n", *PLAN_HEADERS)
        for c in plan.changes:
            cmd.printf("%-20s  %-20d  %-20d  %-20d  %-20d  %-20d%n", c.broker_name, c.queue_id, c.broker_offset,
                       c.consumer_offset, c.timestamp_offset, c.reset_offset)
        return
    cmd.printf("%-40s  %-40s  %-40s%n", "#brokerName", "#queueId", "#offset")
    for c in plan.changes:
        cmd.printf("%-40s  %-40d  %-40d%n", c.broker_name, c.queue_id, c.reset_offset)


@register(app, "resetOffsetByTime", "Reset a group's consume offsets to a point in time.", writes=True)
def reset_offset_by_time(
    cmd: Cmd,
    group: GroupOpt,
    topic: TopicOpt,
    timestamp: Annotated[str, typer.Option("-s", "--timestamp", help="now | ms | yyyy-MM-dd#HH:mm:ss:SSS")],
    force: ForceOpt = None,
    cluster: Annotated[str | None, typer.Option("-c", "--cluster", help="cluster name")] = None,
    broker: Annotated[str | None, typer.Option("-b", "--broker", help="broker address (with -q)")] = None,
    queue_id: Annotated[int | None, typer.Option("-q", "--queue", help="queue id (with -b)", min=0, max=JAVA_INT_MAX)] = None,
    offset: Annotated[int | None, typer.Option("-o", "--offset", help="exact offset (with -b and -q)", min=0, max=JAVA_LONG_MAX)] = None,
    dry_run: DryRunOpt = False,
) -> None:
    cmd.writes = not dry_run  # a dry run opens the store read-only: it cannot change anything
    is_force = parse_bool(force, "-f/--force", True)
    if queue_id is not None and broker is None:
        raise UsageProblem("-q/--queue needs -b/--broker")
    if offset is not None and queue_id is None:
        raise UsageProblem("-o/--offset needs -b/--broker and -q/--queue")
    ts = parse_timestamp(timestamp, lambda: cmd.admin().clock(), "-s/--timestamp", allow_minus_one=True)
    admin = cmd.admin()
    admin.check_target(cluster_name=cluster, broker_addr=broker)
    plan = admin.reset_offset_by_time(group, topic, ts, is_force, queue_id, offset, dry_run=dry_run,
                                      broker_addr=broker)

    def render() -> None:
        if queue_id is not None:
            cmd.print(f"start reset consumer offset by specified, group[{group}], topic[{topic}], queueId[{queue_id}], "
                      f"broker[{broker}], timestamp(string)[{timestamp}], timestamp(long)[{ts}]")
            if dry_run:
                _render_plan(cmd, plan, True)
            else:
                cmd.print(f"reset consumer offset to {plan.changes[0].reset_offset if plan.changes else -1}")
            return
        cmd.print(f"start reset consumer offset by specified, group[{group}], topic[{topic}], "
                  f"force[{'true' if is_force else 'false'}], timestamp(string)[{timestamp}], timestamp(long)[{ts}]")
        _render_plan(cmd, plan, dry_run)

    cmd.emit(plan.to_dict(), render)


@register(app, "skipAccumulatedMessage", "Move a group's offsets to the end of every queue.", writes=True)
def skip_accumulated_message(
    cmd: Cmd,
    group: GroupOpt,
    topic: TopicOpt,
    force: ForceOpt = None,
    cluster: Annotated[str | None, typer.Option("-c", "--cluster", help="cluster name")] = None,
    dry_run: DryRunOpt = False,
) -> None:
    cmd.writes = not dry_run  # a dry run opens the store read-only: it cannot change anything
    is_force = parse_bool(force, "-f/--force", True)
    admin = cmd.admin()
    if cluster is not None:
        admin.check_target(cluster_name=cluster)
    plan = admin.skip_accumulated_message(group, topic, is_force, dry_run=dry_run)
    cmd.emit(plan.to_dict(), lambda: _render_plan(cmd, plan, dry_run))


@register(app, "cloneGroupOffset", "Copy one group's offsets on a topic to another group.", writes=True)
def clone_group_offset(
    cmd: Cmd,
    src_group: Annotated[str, typer.Option("-s", "--srcGroup", help="source group", autocompletion=complete_group,
                                                      callback=trimmed)],
    dest_group: Annotated[str, typer.Option("-d", "--destGroup", help="destination group", callback=trimmed)],
    topic: TopicOpt,
    offline: Annotated[str | None, typer.Option("-o", "--offline", help="parsed, unused (as mqadmin)")] = None,
) -> None:
    plan = cmd.admin().clone_group_offset(src_group, dest_group, topic)
    names = f"srcGroup[{src_group}], destGroup=[{dest_group}], topic[{topic}]"

    def render() -> None:
        if plan.applied:
            cmd.print(f"clone group offset success. {names}")
            return
        cmd.print(f"clone group offset not applied to every queue. {names}")
        cmd.printf("%-32s  %-10s  %-20s  %-20s  %-12s%n", "#brokerName", "#queueId", "#srcOffset", "#destOffset",
                   "#status")
        for c in plan.changes:
            cmd.printf("%-32s  %-10d  %-20d  %-20d  %-12s%n", c.broker_name, c.queue_id, c.timestamp_offset,
                       c.reset_offset, c.status)

    cmd.emit(plan.to_dict(), render)
    unread = [c for c in plan.changes if c.status == "notReadBack"]
    if unread:  # Update without Get on the destination: cloned, but not confirmed (one line, exit 0)
        where = sorted({c.broker_name for c in unread})
        typer.echo(f"mqadmin {cmd.name}: warning: cloned, but {dest_group}'s offsets could not be read back "
                   f"(no permission to Get group {dest_group}) on {len(unread)} queue(s) of {', '.join(where)}; "
                   f"not confirmed as applied", err=True)
    for c in plan.changes:  # on stderr in every output format: a script reading JSON sees it too
        if c.status == "notApplied":
            typer.echo(f"mqadmin {cmd.name}: warning: {c.broker_name} queue {c.queue_id}: group {dest_group} holds "
                       f"offset {c.reset_offset}, not {src_group}'s {c.timestamp_offset} (the broker answers a "
                       f"pending reset of {dest_group} first, e.g. resetOffsetByTime with no consumer online); its "
                       f"consumers start at {c.reset_offset}", err=True)
