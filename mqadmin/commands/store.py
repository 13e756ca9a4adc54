"""Store maintenance commands (ours): verifyStore (read-only check) and rebuildStore (Spark)."""

import dataclasses
from typing import Annotated

import typer

from broker_core.broker.limits import JAVA_INT_MAX
from mqadmin.cli import Cmd, register, split_list
from mqadmin.errors import AdminError, UsageProblem

app = typer.Typer()


@register(app, "verifyStore", "Check every CQ/BCQ unit and index entry against the commitlog (read-only).")
def verify_store(
    cmd: Cmd,
    max_issues: Annotated[int, typer.Option("--max-issues", help="list at most this many mismatches", min=0, max=JAVA_INT_MAX)] = 50,
    lost_found: Annotated[bool, typer.Option("--lostFound", help="list the intact records recovery kept in "
                                             "lost+found/ instead of checking the store")] = False,
) -> None:
    if lost_found:
        records = cmd.admin().lost_found_records()

        def render_lost() -> None:
            cmd.table(("#File", "#CommitLogOffset", "#Size", "#Topic", "#QueueId", "#QueueOffset", "#Keys",
                       "#UniqKey", "#StoreTimestamp"),
                      [(r.file, r.commit_log_offset, r.size, r.topic, r.queue_id, r.queue_offset, r.keys or "",
                        r.uniq_key or "", r.store_timestamp) for r in records])
            cmd.print(f"{len(records)} intact record(s) in lost+found")

        cmd.emit([dataclasses.asdict(r) for r in records], render_lost)
        return
    with cmd.progress("verifyStore") as update:
        report = cmd.admin().verify_store(update)

    def render() -> None:
        cmd.table(("#Item", "#Value"), [
            ("store", report.store),
            ("commitlog range", f"[{report.commit_log_min_offset}, {report.commit_log_max_offset})"),
            ("records", report.records), ("queues", report.queues), ("CQ units", report.cq_units),
            ("BCQ units", report.bcq_units), ("index files", report.index_files),
            ("index entries", report.index_entries), ("expired units", report.expired_units),
            ("not yet dispatched", report.undispatched_records),
            ("deleted-topic records", report.deleted_topic_records),
            *([("unused topics", f"{', '.join(report.unused_topics)} (queues without a topic config; "
                                 "cleanUnusedTopic removes them)")] if report.unused_topics else []),
            ("mismatches", report.mismatch_count), ("time (s)", f"{report.elapsed_seconds:.3f}")])
        if report.issues:
            cmd.print("")
            cmd.table(("#Kind", "#Where", "#Offset", "#Detail"),
                      [(i.kind, i.where, i.offset, i.detail) for i in report.issues[:max_issues]])
            more = report.mismatch_count - min(len(report.issues), max_issues)
            if more > 0:
                cmd.print(f"... {more} more mismatch(es)")
        cmd.print("")
        cmd.print("store OK" if report.ok else f"store has {report.mismatch_count} mismatch(es)")

    cmd.emit(report.to_dict(), render)
    if not report.ok:
        raise AdminError(f"verifyStore found {report.mismatch_count} mismatch(es) in {report.store}")


def _checked_parts(parts: str) -> list[str]:
    """``--parts`` checked before the store is opened: an unknown part is a usage error (exit 2)."""
    try:
        from spark.rebuild import RebuildUsageError, normalize_parts
    except ImportError as e:
        raise AdminError(f"rebuildStore needs PySpark and the spark/ jobs: {e}") from None
    try:
        return normalize_parts(split_list(parts) or [])
    except RebuildUsageError as e:
        raise UsageProblem(str(e)) from None


class RebuildInterruptedExit(AdminError):
    """Ctrl-C during rebuildStore: one line saying what became of the store, exit 130 (128 + SIGINT) as
    any interrupted command."""

    exit_code = 130


def _checked_master(master: str) -> None:
    """``--master`` checked before the store is opened: a malformed URL is a usage error (exit 2)."""
    try:
        from spark.master_url import MasterUrlUsageError, parse_master
    except ImportError as e:
        raise AdminError(f"rebuildStore needs PySpark and the spark/ jobs: {e}") from None
    try:
        parse_master(master)
    except MasterUrlUsageError as e:
        raise UsageProblem(str(e)) from None


@register(app, "rebuildStore", "Rebuild (or --verify) consume queues, index files and offsets with Spark.",
          writes=True)
def rebuild_store(
    cmd: Cmd,
    parts: Annotated[str, typer.Option("--parts", help="comma list of cq,index,offsets")] = "cq,index,offsets",
    master: Annotated[str, typer.Option("--master", help="local[*] or spark://host:port")] = "local[*]",
    verify: Annotated[bool, typer.Option("--verify", help="compare only, write nothing")] = False,
    force: Annotated[bool, typer.Option("--force", help="rebuild even when intact data follows a corrupt "
                                        "commitlog record: up to that record, as recovery would (the data "
                                        "after it is not dispatched)")] = False,
) -> None:
    wanted = _checked_parts(parts)
    _checked_master(master)
    admin = cmd.admin()
    try:
        with cmd.progress("rebuildStore") as update:
            summary = admin.rebuild_store(wanted, master, verify, cmd.opts.config,
                                          lambda phase, done, total: update(done, total), force)
    except KeyboardInterrupt as e:
        told = getattr(e, "message", None)  # the Spark rebuild says what became of the store
        if told:
            raise RebuildInterruptedExit(told) from None
        raise

    def render() -> None:
        from rich.console import Console

        from spark.rebuild import render_details, render_summary

        console = Console(markup=False, highlight=False)
        console.print(render_summary(summary))
        details = render_details(summary)
        if details is not None:
            console.print(details)

    cmd.emit(summary.to_dict(), render)
    if verify and summary.mismatch_count:
        raise AdminError(f"rebuildStore --verify found {summary.mismatch_count} mismatch(es)")
