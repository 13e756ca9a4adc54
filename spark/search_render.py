"""Terminal output of searchMessages / exportMessages / statsMessages (rich), and their JSON shapes.

One module so ``mqadmin`` and the ``spark-submit`` scripts print the same tables, the same small
bar plot and the same JSON (bodies as base64 there: JSON has no bytes).
"""

from __future__ import annotations

import base64
from datetime import datetime

from .search import ExportResult, ScanSummary, SearchResult, StatsResult, render_summary
from .search_query import TIME_BUCKETS_MS

PLOT_WIDTH = 40


def local_time(ms: int) -> str:
    """``yyyy-MM-dd HH:mm:ss,SSS`` in local time, as mqadmin prints store times."""
    return datetime.fromtimestamp(ms / 1000).strftime("%Y-%m-%d %H:%M:%S") + f",{ms % 1000:03d}"


def json_message(m: dict) -> dict:
    """A message for JSON/YAML: body as base64, everything else as is."""
    out = dict(m)
    out["body"] = base64.b64encode(m["body"]).decode("ascii") if m["body"] is not None else None
    return out


def search_json(result: SearchResult) -> dict:
    d = result.to_dict()
    d["messages"] = [json_message(m) for m in result.messages]
    return d


def messages_table(result: SearchResult):
    """The matches as mqadmin's message table (one line per message, store time order)."""
    from rich.table import Table

    t = Table(box=None, show_edge=False, pad_edge=False, header_style="bold")
    multi = len(result.summary.stores) > 1
    for h in (["#Store"] if multi else []) + ["#MsgId", "#Topic", "#QueueId", "#QueueOffset", "#StoreTime",
                                               "#Tags", "#Keys", "#BodyLen"]:
        t.add_column(h, no_wrap=True)
    for m in result.messages:
        t.add_row(*([m["store"]] if multi else []), m["msgId"], m["topic"], str(m["queueId"]),
                  str(m["queueOffset"]), local_time(m["storeTimestamp"]), m["tags"] or "", m["keys"] or "",
                  str(len(m["body"])))
    return t


def scan_line(summary: ScanSummary) -> str:
    """One line with the exact figures every mode reports."""
    return (f"records scanned: {summary.records_scanned}, messages matched: {summary.messages_matched}, "
            f"files scanned: {summary.files_scanned}/{summary.files_total} "
            f"({summary.files_pruned} pruned by time), {summary.elapsed_seconds:.2f}s")


def bucket_label(dim: str, value: object) -> str:
    if dim in TIME_BUCKETS_MS:
        fmt = {"minute": "%Y-%m-%d %H:%M", "hour": "%Y-%m-%d %H:00", "day": "%Y-%m-%d"}[dim]
        return datetime.fromtimestamp(int(value) / 1000).strftime(fmt)  # type: ignore[arg-type]
    return str(value)


def stats_table(result: StatsResult):
    from rich.table import Table

    t = Table(box=None, show_edge=False, pad_edge=False, header_style="bold")
    for dim in result.by:
        t.add_column("#" + dim.capitalize(), no_wrap=True)
    for h in ("#Messages", "#Records", "#Bytes"):
        t.add_column(h, justify="right", no_wrap=True)
    for b in result.buckets:
        t.add_row(*[bucket_label(d, b[d]) for d in result.by], str(b["messages"]), str(b["records"]),
                  str(b["bytes"]))
    return t


def stats_plot(result: StatsResult, width: int = PLOT_WIDTH):
    """A small horizontal bar plot: one bar per bucket row, length proportional to its messages."""
    from rich.table import Table
    from rich.text import Text

    t = Table(box=None, show_edge=False, pad_edge=False, header_style="bold", title="messages")
    t.add_column(" ".join("#" + d.capitalize() for d in result.by), no_wrap=True)
    t.add_column("", no_wrap=True)
    t.add_column("#Messages", justify="right", no_wrap=True)
    peak = max((b["messages"] for b in result.buckets), default=0)
    for b in result.buckets:
        n = b["messages"]
        length = 0 if peak == 0 else max(1 if n else 0, round(n * width / peak))
        t.add_row(" ".join(bucket_label(d, b[d]) for d in result.by), Text("█" * length, style="cyan"), str(n))
    return t


def export_lines(result: ExportResult) -> list[str]:
    parts = f" partitioned by {','.join(result.partition_by)}" if result.partition_by else ""
    return [f"exported {result.rows_written} message(s) as {result.format}{parts} to {result.out}"]


def print_search(result: SearchResult, console) -> None:
    console.print(messages_table(result))
    if result.truncated:
        console.print(f"... showing the first {len(result.messages)} of {result.summary.messages_matched} "
                      f"matches by store time (--limit)")
    _print_footer(result.summary, "searchMessages", console)


def print_stats(result: StatsResult, console, plot: bool = False) -> None:
    console.print(stats_plot(result) if plot else stats_table(result))
    _print_footer(result.summary, "statsMessages", console)


def print_export(result: ExportResult, console) -> None:
    for line in export_lines(result):
        console.print(line)
    _print_footer(result.summary, "exportMessages", console)


def _print_footer(summary: ScanSummary, title: str, console) -> None:
    console.print(scan_line(summary))
    for g in summary.gaps:
        console.print(f"GAP {g} (the messages stored there are missing from these results)")
    for s in summary.stops:
        console.print(f"STOPPED {s.store}/commitlog/{s.file} at offset {s.offset}: {s.reason} "
                      f"(recovery stops there too; later records of that file were not scanned)")
    for w in summary.warnings:
        console.print(f"warning: {w}")


__all__ = ["render_summary", "print_search", "print_stats", "print_export", "search_json", "stats_table",
           "stats_plot", "messages_table", "scan_line"]
