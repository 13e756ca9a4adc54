"""The ``spark-submit`` front end of searchMessages / exportMessages / statsMessages (argparse).

``spark/search_messages.py``, ``spark/export_messages.py`` and ``spark/stats_messages.py`` are thin
scripts over :func:`main`; the options and behaviour are those of the mqadmin commands of the same
names (both call :mod:`spark.search`). Exit status: 0 done, 1 a file's data ended at torn or corrupt
records or a commitlog file is missing between others (reported) or the job failed (e.g. --out not writable)
or the --config file is missing or bad or no Spark master answers at --master, 2 cannot run (bad SQL, bad
option, malformed --master, missing store, existing output), as mqadmin's usage errors.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

SEARCH, EXPORT, STATS = "searchMessages", "exportMessages", "statsMessages"


def build_parser(kind: str) -> argparse.ArgumentParser:
    from spark.args import split_mb

    p = argparse.ArgumentParser(prog=f"spark-submit spark/{kind[:-8]}_messages.py",
                                description=f"{kind}: scan RocketMQ commitlog files with Spark.")
    stores = p.add_mutually_exclusive_group(required=True)
    stores.add_argument("--store", help="store root directory (holds commitlog/)")
    stores.add_argument("--stores", help="comma-separated store directories (one per broker), one job")
    p.add_argument("--config", default=None, help="broker config (key=value) for storePathCommitLog etc.")
    p.add_argument("-t", "--topic", default=None, help="only this topic")
    p.add_argument("--begin", default=None, help="store time from (epoch ms, now, yyyy-MM-dd#HH:mm:ss:SSS, ISO)")
    p.add_argument("--end", default=None, help="store time to, inclusive (same formats)")
    p.add_argument("--where", default=None, help="SQL92 over TAGS, KEYS and user properties (broker filter)")
    p.add_argument("--body-contains", default=None, help="body holds this text (UTF-8 bytes)")
    p.add_argument("--master", default=os.environ.get("MASTER", "local[*]"), help="local[*] or spark://host:port")
    p.add_argument("--split-mb", type=split_mb, default=64, help="bytes per scan task (MiB, default 64)")
    p.add_argument("--output", choices=("table", "json"), default="table")
    if kind == SEARCH:
        p.add_argument("--limit", type=int, default=1000, help="show the earliest N matches (0: all)")
    elif kind == EXPORT:
        p.add_argument("--format", default="parquet", choices=("parquet", "jsonl"))
        p.add_argument("--out", required=True, help="output directory (must not exist)")
        p.add_argument("--partition-by", default="", help="comma list of topic,date")
    else:
        p.add_argument("--by", default="topic,minute", help="topic,queue and one of minute,hour,day")
        p.add_argument("--plot", action="store_true", help="a small bar plot instead of the table")
    return p


def store_list(store: str | None, stores: str | None) -> list[str]:
    if stores:
        return [s.strip() for s in stores.split(",") if s.strip()]
    return [store] if store else []


def main(kind: str, argv: list[str] | None = None) -> int:
    args = build_parser(kind).parse_args(argv)
    from spark.master_url import master_exit
    from spark.search import IN_PROCESS

    status = None if args.master == IN_PROCESS else master_exit(args.master, kind)
    if status is not None:
        return status
    from rich.console import Console

    from spark.progress import rich_progress
    from spark.search import (
        SearchError,
        SearchUsageError,
        StoreNotFoundError,
        build_query,
        parse_time,
        run_export,
        run_search,
        run_stats,
    )
    from spark.search_render import print_export, print_search, print_stats, search_json

    console = Console(stderr=False)
    err = Console(stderr=True)
    try:
        query = build_query(args.topic, parse_time(args.begin, "--begin"), parse_time(args.end, "--end"),
                            args.where, args.body_contains, getattr(args, "by", "topic,minute"))
        dirs = store_list(args.store, args.stores)
        common = dict(config_file=args.config, master=args.master, split_bytes=args.split_mb << 20)
        with rich_progress(err) as callback:
            if kind == SEARCH:
                result = run_search(dirs, query, limit=args.limit, progress=callback, **common)
            elif kind == EXPORT:
                result = run_export(dirs, query, args.out, fmt=args.format, partition_by=args.partition_by,
                                    progress=callback, **common)
            else:
                result = run_stats(dirs, query, progress=callback, **common)
    except SearchError as e:
        err.print(f"{kind}: {e}", markup=False, highlight=False, soft_wrap=True)
        return 2 if isinstance(e, (SearchUsageError, StoreNotFoundError)) else 1
    if args.output == "json":
        data = search_json(result) if kind == SEARCH else result.to_dict()
        print(json.dumps(data, ensure_ascii=False, indent=2))
    elif kind == SEARCH:
        print_search(result, console)
    elif kind == EXPORT:
        print_export(result, console)
    else:
        print_stats(result, console, plot=args.plot)
    return 1 if result.summary.stops or result.summary.gaps else 0


def script_main(kind: str) -> None:
    sys.exit(main(kind))
