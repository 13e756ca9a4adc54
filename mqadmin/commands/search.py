"""Commitlog search commands (ours, with Spark): searchMessages, exportMessages, statsMessages.

Why not through the Admin interface: these read store directories (one per broker) straight from
their commitlog files in parallel, read-only, as ``spark-submit spark/*_messages.py`` does; a
running broker is never asked. Both front ends call :mod:`spark.search`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import typer

from mqadmin.cli import Cmd, register, split_list
from mqadmin.errors import AdminError, NotFoundError, UsageProblem

if TYPE_CHECKING:
    from rich.console import Console

    from spark.search import ScanSummary
    from spark.search_query import ScanQuery

app = typer.Typer()
R = TypeVar("R")

Topic = Annotated[str | None, typer.Option("-t", "--topic", help="only this topic")]
Stores = Annotated[str | None, typer.Option("--stores", help="comma list of store directories (one per broker)")]
Begin = Annotated[str | None, typer.Option("--begin", help="store time from: epoch ms, now, "
                                                          "yyyy-MM-dd#HH:mm:ss:SSS or ISO local time")]
End = Annotated[str | None, typer.Option("--end", help="store time to, inclusive (same formats)")]
Where = Annotated[str | None, typer.Option("--where", help="SQL92 over TAGS, KEYS and user properties "
                                                          "(the broker's filter)")]
BodyContains = Annotated[str | None, typer.Option("--body-contains", help="body holds this text (UTF-8)")]
Master = Annotated[str, typer.Option("--master", help="local[*] or spark://host:port")]
SplitMb = Annotated[int, typer.Option("--split-mb", help="commitlog MiB per scan task")]


def _run(cmd: Cmd, stores: str | None, fn: Callable[..., R], *args: Any, **kwargs: Any) -> R:
    """Run a spark.search job: store list, progress bar on stderr, errors as one line."""
    try:
        from spark.search import SearchError, SearchUsageError, StoreNotFoundError
    except ImportError as e:
        raise AdminError(f"{cmd.name} needs PySpark and the spark/ jobs: {e}") from None
    dirs = split_list(stores) if stores else [str(cmd.opts.store_dir)]
    if stores and cmd.opts.store:
        raise UsageProblem("give either --store or --stores, not both")
    if cmd.opts.namesrv_addr:
        raise UsageProblem(f"{cmd.name} reads store directories (--store/--stores), not a cluster: -n does not apply")
    if kwargs.get("split_bytes", 1) < 1:
        raise UsageProblem(f"--split-mb must be at least 1, got {kwargs['split_bytes'] >> 20}")
    if kwargs.get("limit", 0) < 0:
        raise UsageProblem(f"--limit must be >= 0, got {kwargs['limit']}")
    _check_master(kwargs.get("master", "local[*]"))
    try:
        with cmd.progress(cmd.name) as update:
            return fn(dirs, *args, config_file=cmd.opts.config,
                      progress=lambda phase, done, total: update(done, total), **kwargs)
    except StoreNotFoundError as e:
        raise NotFoundError(str(e)) from None
    except SearchUsageError as e:  # --format csv, --out that exists, a store given twice: exit 2
        raise UsageProblem(str(e)) from None
    except SearchError as e:
        raise AdminError(str(e)) from None


def _check_master(master: str) -> None:
    """A malformed --master is a usage error (exit 2), one where nothing answers a failure (exit 1),
    both one line before Spark starts (``in-process`` is the benchmark's no-Spark baseline)."""
    from spark.master_url import MasterUrlError, MasterUrlUsageError, check_master
    from spark.search import IN_PROCESS

    if master == IN_PROCESS:
        return
    try:
        check_master(master)
    except MasterUrlUsageError as e:
        raise UsageProblem(str(e)) from None
    except MasterUrlError as e:
        raise AdminError(str(e)) from None


def _query(topic: str | None, begin: str | None, end: str | None, where: str | None, body_contains: str | None,
           by: str = "topic,minute") -> ScanQuery:
    """Checked before Spark starts: bad SQL is the parser's one line (exit 2)."""
    from spark.search import SearchError, build_query, parse_time

    try:
        return build_query(topic, parse_time(begin, "--begin"), parse_time(end, "--end"), where, body_contains, by)
    except SearchError as e:
        raise UsageProblem(str(e)) from None


def _console() -> Console:
    from rich.console import Console

    return Console(markup=False, highlight=False, width=4096 if not Console().is_terminal else None)


def _check_stops(cmd: Cmd, summary: ScanSummary) -> None:
    """Exit 1 when data is missing from the results: a gap between commitlog files (a file missing from
    the middle), or files whose data ends at torn or corrupt records; one line naming the first."""
    problems = []
    if summary.gaps:
        more = f" (and {len(summary.gaps) - 1} more gap(s))" if len(summary.gaps) > 1 else ""
        problems.append(f"{summary.gaps[0]}{more}; the messages stored there are missing from the results")
    if summary.stops:
        problems.append(f"{len(summary.stops)} commitlog file(s) end at torn or corrupt data "
                        f"(first: {summary.stops[0].file} at offset {summary.stops[0].offset}: "
                        f"{summary.stops[0].reason}); results cover the data before it")
    if problems:
        raise AdminError("; ".join(problems))


@register(app, "searchMessages", "Search messages in commitlog files with Spark (SQL92, time, body text).")
def search_messages(
    cmd: Cmd,
    topic: Topic = None,
    stores: Stores = None,
    begin: Begin = None,
    end: End = None,
    where: Where = None,
    body_contains: BodyContains = None,
    limit: Annotated[int, typer.Option("--limit", help="show the earliest N matches by store time (0: all)")] = 1000,
    master: Master = "local[*]",
    split_mb: SplitMb = 64,
) -> None:
    from spark.search import run_search
    from spark.search_render import print_search, search_json

    query = _query(topic, begin, end, where, body_contains)
    result = _run(cmd, stores, run_search, query, limit=limit, master=master, split_bytes=split_mb << 20)
    cmd.emit(search_json(result), lambda: print_search(result, _console()))
    _check_stops(cmd, result.summary)


@register(app, "exportMessages", "Export messages from commitlog files as Parquet or JSON lines (Spark).")
def export_messages(
    cmd: Cmd,
    out: Annotated[str, typer.Option("--out", help="output directory (must not exist; written atomically)")],
    fmt: Annotated[str, typer.Option("--format", help="parquet or jsonl")] = "parquet",
    partition_by: Annotated[str, typer.Option("--partition-by", help="comma list of topic,date")] = "",
    topic: Topic = None,
    stores: Stores = None,
    begin: Begin = None,
    end: End = None,
    where: Where = None,
    body_contains: BodyContains = None,
    master: Master = "local[*]",
    split_mb: SplitMb = 64,
) -> None:
    from spark.search import run_export
    from spark.search_render import print_export

    query = _query(topic, begin, end, where, body_contains)
    result = _run(cmd, stores, run_export, query, out, fmt=fmt, partition_by=partition_by, master=master,
                  split_bytes=split_mb << 20)
    cmd.emit(result.to_dict(), lambda: print_export(result, _console()))
    _check_stops(cmd, result.summary)


@register(app, "statsMessages", "Messages and bytes per topic per time bucket, from commitlog files (Spark).")
def stats_messages(
    cmd: Cmd,
    by: Annotated[str, typer.Option("--by", help="topic,queue and one of minute,hour,day")] = "topic,minute",
    plot: Annotated[bool, typer.Option("--plot", help="a small bar plot in the terminal instead of the table")]
    = False,
    topic: Topic = None,
    stores: Stores = None,
    begin: Begin = None,
    end: End = None,
    where: Where = None,
    body_contains: BodyContains = None,
    master: Master = "local[*]",
    split_mb: SplitMb = 64,
) -> None:
    from spark.search import run_stats
    from spark.search_render import print_stats

    query = _query(topic, begin, end, where, body_contains, by)
    result = _run(cmd, stores, run_stats, query, master=master, split_bytes=split_mb << 20)
    cmd.emit(result.to_dict(), lambda: print_stats(result, _console(), plot=plot))
    _check_stops(cmd, result.summary)
