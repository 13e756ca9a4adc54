"""Actions over a store's data: offset resets (with their plan), verify, Spark rebuild, waiting for lag.

``offset.reset`` always computes the reset plan first (resetOffsetByTime --dry-run) and reports it,
queue by queue, so a playbook can ``register`` it and ``assert`` on it before a second step applies
it. ``store.rebuild`` is idempotent through ``verifyStore``: a store whose consume queues and index
already agree with the commitlog is left alone unless ``force: true``. Both refuse a path that is not
a store, and both take ``timeout:``, the deadline of the whole step on an SSH host (default 3600 s;
other Admin steps there get 600 s, or their own wait plus 600 s).
"""

from __future__ import annotations

import math
from typing import Any

from broker_core.store.store_dir import is_store_dir, not_a_store_reason
from mqadmin.admin import Admin
from mqadmin.errors import NotFoundError, UsageProblem
from mqadmin.timefmt import parse_timestamp
from playbooks.actions.base import (
    PLANNED_IN_CHECK,
    ActionContext,
    Change,
    Outcome,
    Param,
    Plan,
    PlannedAction,
    at_least,
    planned_in_check,
    planned_on,
    poll,
    seconds,
)
from playbooks.errors import StepError

MAX_ISSUES_REPORTED = 20


def _timestamp(value: str | int) -> str | int:
    """Checked as resetOffsetByTime reads it; kept as written (``now`` means the time the step runs)."""
    try:
        parse_timestamp(str(value), option="timestamp")
    except UsageProblem as e:
        raise ValueError(str(e).removeprefix("invalid timestamp ")) from None
    return value


class OffsetReset(PlannedAction):
    name = "offset.reset"
    params = {"group": Param((str,), required=True), "topic": Param((str,), required=True),
              "timestamp": Param((str, int), help="now, epoch millis or yyyy-MM-dd#HH:mm:ss:SSS",
                                 parse=_timestamp),
              "offset": Param((int,), help="reset to this queue offset instead of a time"),
              "queue_id": Param((int,), parse=at_least(0)), "force": Param((bool,), default=True)}

    @staticmethod
    def check_args(args: dict[str, Any]) -> None:
        """Judged on the step's arguments as written too (``playbook check``): a template counts as given."""
        if (args.get("timestamp") is None) == (args.get("offset") is None):
            raise StepError("offset.reset needs exactly one of timestamp: or offset:")

    def _reset(self, admin: Admin, args: dict[str, Any], dry_run: bool) -> Any:
        self.check_args(args)
        ts = -1
        if args.get("timestamp") is not None:
            ts = parse_timestamp(str(args["timestamp"]), option="timestamp")
        return admin.reset_offset_by_time(args["group"], args["topic"], ts, bool(args.get("force", True)),
                                          queue_id=args.get("queue_id"), offset=args.get("offset"), dry_run=dry_run)

    def plan(self, admin: Admin, args: dict[str, Any]) -> Plan:
        try:
            plan = self._reset(admin, args, dry_run=True)
        except NotFoundError:
            created = self._created_earlier(admin, args)
            if not created:
                raise
            # --check: an earlier step of this run creates the topic or group, so there is nothing to read
            # the queues from yet; the real run resets the new queues.
            what = f"offset {args['group']}@{args['topic']}"
            return Plan([Change(what, "consumerOffset", None, args.get("timestamp", args.get("offset")))],
                        {"plan": None, "reconsume": 0, "skip": 0, "queues": 0},
                        f"would reset {what} (its {' and '.join(created)} is created by an earlier step)")
        # Queue ids repeat on each broker of a cluster: with several, the label names the broker too.
        several = len({c.broker_name for c in plan.changes}) > 1
        changes = [Change(f"offset {plan.group}@{plan.topic}/{c.queue_id}" + (f" on broker {c.broker_name}"
                                                                             if several else ""),
                          "consumerOffset", c.consumer_offset, c.reset_offset)
                   for c in plan.changes if c.consumer_offset != c.reset_offset]
        rewind = sum(max(0, c.consumer_offset - c.reset_offset) for c in plan.changes if c.consumer_offset >= 0)
        skip = sum(max(0, c.reset_offset - max(c.consumer_offset, 0)) for c in plan.changes)
        return Plan(changes, {"plan": plan.to_dict(), "reconsume": rewind, "skip": skip, "queues": len(plan.changes)})

    @staticmethod
    def _created_earlier(admin: Admin, args: dict[str, Any]) -> list[str]:
        """--check, when the dry run found no topic or group: which of them earlier steps of this run
        create, if the real run then finds the topic and the group on every broker of the topic (the
        reset needs both there). Empty when it would not: an earlier group.ensure does not excuse a
        topic no step creates, the run fails "Topic ... does not exist" as --check then does."""
        topic, group = args["topic"], args["group"]
        t_what, g_what = f"topic {topic}", f"group {group}"
        with_topic = []
        for b in admin.brokers():
            try:
                admin.topic_info(topic, among=[b])
            except NotFoundError:
                if not planned_on(args, t_what, b.broker_name):
                    continue
            with_topic.append(b)
        try:
            have_group = {b.broker_name for b, _ in admin.consumer_configs(group)}
        except NotFoundError:
            have_group = set()
        if not with_topic or any(b.broker_name not in have_group and not planned_on(args, g_what, b.broker_name)
                                 for b in with_topic):
            return []
        return [w for w in (t_what, g_what) if planned_in_check(args, w)]

    def apply(self, admin: Admin, args: dict[str, Any], plan: Plan) -> None:
        self._reset(admin, args, dry_run=False)


STORE_STEP_TIMEOUT = 3600
"""Default deadline of store.verify / store.rebuild on an SSH host: both read every commitlog file."""


def _deadline_param() -> Param:
    return Param((int, float), default=STORE_STEP_TIMEOUT, parse=seconds,
                 help="seconds the whole step may take on an SSH host before it is stopped there")


def require_store(ctx: ActionContext) -> None:
    """Refuse a path that is not a store, before an Admin opens it. Why: a read-only Admin on a missing
    directory plans against an empty store (right for topic.ensure, which creates it), and an empty
    store verifies clean: a typo in ``store:`` must not read as "store OK"."""
    if ctx.store_dir is not None and not is_store_dir(ctx.store_dir):
        raise StepError(not_a_store_reason(ctx.store_dir))


class StoreVerify:
    """verifyStore: every CQ/BCQ unit and index entry against the commitlog; fails on a mismatch."""

    name = "store.verify"
    params: dict[str, Param] = {"timeout": _deadline_param()}
    placement = "admin"

    def run(self, ctx: ActionContext, args: dict[str, Any], check: bool) -> Outcome:
        if check and args.get(PLANNED_IN_CHECK) and ctx.store_dir is not None and not ctx.store_dir.exists():
            # --check: an earlier step of this run creates the store (topic.ensure on a new directory)
            return Outcome("ok", message=f"the store {ctx.store_dir} is created by an earlier step; "
                                         "the real run verifies it then")
        require_store(ctx)
        with ctx.admin(writes=False) as admin:
            report = admin.verify_store()
        data = _verify_data(report)
        if report.ok:
            return Outcome("ok", message=f"store OK: {report.records} records, {report.queues} queues", data=data)
        return Outcome("failed", message=f"verifyStore found {report.mismatch_count} mismatch(es) in {report.store}",
                       data=data)


def _verify_data(report: Any) -> dict[str, Any]:
    d = report.to_dict()
    d["issues"] = d.get("issues", [])[:MAX_ISSUES_REPORTED]
    return d


REBUILD_PARTS = ("cq", "index", "offsets")  # spark.rebuild.ALL_PARTS (not imported: it loads Spark's code)


def _parts(value: str | list[Any]) -> str | list[Any]:
    items = [p.strip() for p in value.split(",")] if isinstance(value, str) else [str(p) for p in value]
    unknown = [p for p in items if p not in REBUILD_PARTS]
    if unknown or not items:
        raise ValueError(f"must be a list of {', '.join(REBUILD_PARTS)}, got {value!r}")
    return value


class StoreRebuild:
    """rebuildStore with Spark, only when verifyStore finds a mismatch (or ``force: true``)."""

    name = "store.rebuild"
    params = {"parts": Param((list, str), default=list(REBUILD_PARTS), parse=_parts),
              "master": Param((str,), default="local[*]"), "force": Param((bool,), default=False),
              "timeout": _deadline_param()}
    placement = "admin"

    def run(self, ctx: ActionContext, args: dict[str, Any], check: bool) -> Outcome:
        require_store(ctx)
        parts = args.get("parts") or ["cq", "index", "offsets"]
        parts = [p.strip() for p in parts.split(",")] if isinstance(parts, str) else [str(p) for p in parts]
        with ctx.admin(writes=False) as admin:
            report = admin.verify_store()
        if report.ok and not args.get("force"):
            return Outcome("ok", message="verifyStore finds nothing to rebuild", data={"verify": _verify_data(report)})
        why = "forced" if report.ok else f"{report.mismatch_count} mismatch(es)"
        change = Change("store", "rebuild", why, ",".join(parts))
        if check:
            return Outcome("changed", [change], f"would rebuild {','.join(parts)} ({why})",
                           {"verify": _verify_data(report)})
        with ctx.admin(writes=True) as admin:
            summary = admin.rebuild_store(parts, str(args.get("master") or "local[*]"), False, ctx.config_file)
        return Outcome("changed", [change], f"rebuilt {','.join(parts)} with Spark ({why})",
                       {"verify": _verify_data(report), "rebuild": summary.to_dict()})


STEP_DEADLINE_ACTIONS = (StoreVerify.name, StoreRebuild.name)
"""Actions whose ``timeout:`` bounds the whole step (for the others that take one, it is a wait)."""


def _interval(value: float) -> float:
    if not (math.isfinite(value) and value > 0):
        raise ValueError(f"must be a finite number of seconds > 0, got {value!r}")
    return value


class WaitLag:
    """Wait until a group's lag (broker offset - consumer offset, summed) is at most ``max_lag``."""

    name = "wait.lag"
    params = {"group": Param((str, list), required=True, help="a group or a list of groups (lags summed)"),
              "topic": Param((str,)), "max_lag": Param((int,), default=0, parse=at_least(0)),
              "timeout": Param((int, float), default=60, parse=seconds),
              "interval": Param((int, float), default=1, parse=_interval)}
    placement = "admin"

    def run(self, ctx: ActionContext, args: dict[str, Any], check: bool) -> Outcome:
        groups = [args["group"]] if isinstance(args["group"], str) else [str(g) for g in args["group"]]
        topic = args.get("topic")
        group = ", ".join(groups)
        max_lag = int(args.get("max_lag") or 0)
        state: dict[str, Any] = {"lag": None}

        def probe() -> tuple[bool, str]:
            lag = 0
            try:
                with ctx.admin(writes=False) as admin:
                    for g in groups:
                        lag += sum(max(0, r.diff) for r in admin.consumer_progress(g, topic).rows)
            except NotFoundError as e:
                return False, e.message
            state["lag"] = lag
            return lag <= max_lag, f"lag of {group} is {lag} (want <= {max_lag})"

        done, message = poll(ctx, float(args.get("timeout", 60)), float(args.get("interval", 1)), probe)
        data = {"lag": state["lag"], "group": group, "topic": topic}
        if done:
            return Outcome("ok", message=message, data=data)
        return Outcome("failed", message=f"timed out after {args.get('timeout', 60)}s: {message}", data=data)
