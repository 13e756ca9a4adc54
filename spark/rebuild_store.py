"""spark-submit entry point: ``spark-submit spark/rebuild_store.py --store DIR [--config FILE]
[--parts cq,index,offsets] [--master local[*] | spark://host:port] [--verify]``.

Same arguments and behaviour as ``mqadmin rebuildStore``; both call :func:`spark.rebuild.run_rebuild`.
Run it with the venv's interpreter, e.g. ``PYSPARK_PYTHON=.venv/bin/python PYSPARK_DRIVER_PYTHON=.venv/bin/python
.venv/lib/python3.11/site-packages/pyspark/bin/spark-submit spark/rebuild_store.py --store DIR``.
``--verify`` writes nothing in the store: its exchange files go under ``$RMQOPS_SPARK_EXCHANGE_DIR`` or the
system temp directory (on a cluster of several machines: set it to a directory every executor sees).
Exit status: 0 done, 1 verify found mismatches or offsets out of range (consumer, delay level, timer), or intact data follows
a corrupt record or a gap between commitlog files (refused without ``--force``), or a commitlog file is
cut short (refused), or a file or directory of the store cannot be written or replaced (refused before
anything changed), or the --config file is missing or bad, or Spark could not start (no master answers,
no executor), 2 cannot run (bad option, malformed --master, store held by a broker), 130 interrupted.
"""

from __future__ import annotations

import argparse
import os
import sys

if __name__ == "__main__":
    # Run as a script (spark-submit): import the ``spark`` package from the repo root, not this dir.
    _here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != _here]
    sys.path.insert(0, os.path.dirname(_here))


def build_parser() -> argparse.ArgumentParser:
    from spark.args import split_mb

    p = argparse.ArgumentParser(prog="rebuild_store.py",
                                description="Rebuild or verify consume queues, BatchCQ, index files and "
                                            "offsets of a RocketMQ store from its commitlog, with Spark.")
    p.add_argument("--store", required=True, help="store root directory (holds commitlog/)")
    p.add_argument("--config", default=None, help="broker config (key=value) for file sizes")
    p.add_argument("--parts", default="cq,index,offsets", help="comma-separated: cq,index,offsets")
    p.add_argument("--master", default=os.environ.get("MASTER", "local[*]"),
                   help="local[*] or spark://host:port")
    p.add_argument("--verify", action="store_true", help="write nothing; report every mismatch")
    p.add_argument("--force", action="store_true",
                   help="rebuild even when intact data follows a corrupt commitlog record: up to that record, "
                        "as recovery would (the data after it is not dispatched)")
    p.add_argument("--split-mb", type=split_mb, default=64, help="bytes per decode task (MiB, default 64)")
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    from spark.master_url import master_exit

    status = master_exit(args.master, "rebuildStore")
    if status is not None:
        return status
    from rich.console import Console

    from broker_core.config_loader import ConfigError
    from spark.progress import rich_progress
    from spark.rebuild import (
        RebuildError,
        RebuildInterrupted,
        RebuildRefusedError,
        RebuildSparkError,
        RebuildWriteError,
        print_summary,
        run_rebuild,
    )

    console = Console(stderr=False)
    try:
        with rich_progress(console) as callback:
            summary = run_rebuild(args.store, args.config, parts=args.parts, master=args.master,
                                  verify=args.verify, progress=callback, split_bytes=args.split_mb << 20,
                                  force=args.force)
    except RebuildError as e:
        console.print(f"rebuildStore: {e}", style="red", markup=False, highlight=False, soft_wrap=True)
        if isinstance(e, RebuildInterrupted):
            return 130
        return 1 if isinstance(e, (RebuildRefusedError, RebuildSparkError, RebuildWriteError)) else 2
    except ConfigError as e:  # --config missing, unreadable or with a bad value: names the file (exit 1, as mqadmin)
        print(f"rebuildStore: {e}", file=sys.stderr)
        return 1
    print_summary(summary, console)
    if args.verify and (summary.mismatches or summary.offset_changes):
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
