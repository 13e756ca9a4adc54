"""Benchmark: what one ``mqadmin`` invocation costs before (and with) its work, in CPU seconds.

Measures, in the same run and ``--rounds`` times each (median reported):
1. ``python -c pass`` — the interpreter alone (the floor);
2. ``mqadmin --help`` — the CLI's start-up (imports, command table);
3. ``mqadmin topicStatus -t Small`` on a small store made beforehand (a topic of 4 queues, 3
   messages) — a read command end to end: CLI, Admin, the Broker opened read-only, one answer.

CPU seconds (user + sys of the child, from ``os.wait4``) are used, not wall time: the machine is
shared and wall time depends on the other processes. Bytecode is written and warmed first (one
untimed run of each), as an installed tool runs with its ``__pycache__`` in place.
Ends with one JSON line; ratios to ``python -c pass`` are named ``..._ratio``. Targets (issue 16):
help <= 0.15 s, topicStatus <= 0.3 s. Not part of the test suite.
Example: ``.venv/bin/python bench/cli_start.py --rounds 7``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from _args import positive_int

REPO = Path(__file__).resolve().parent.parent


def _cpu_seconds(argv: list[str], env: dict[str, str]) -> float:
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    err = proc.stderr.read().decode() if proc.stderr else ""
    if proc.stderr:
        proc.stderr.close()
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} exited with {proc.returncode}: {err.strip()}")
    return usage.ru_utime + usage.ru_stime


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=positive_int, default=7)
    args = ap.parse_args()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "NAMESRV_ADDR", "RMQ_STORE")}
    env["PYTHONPATH"] = str(REPO) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    py = sys.executable
    mqadmin = [py, "-m", "mqadmin.app"]
    with tempfile.TemporaryDirectory(prefix="cli-start-") as tmp:
        store = str(Path(tmp) / "store")
        subprocess.run([*mqadmin, "updateTopic", "-c", "DefaultCluster", "-t", "Small", "-r", "4", "-w", "4",
                        "--store", store, "--create"], env=env, check=True, stdout=subprocess.DEVNULL)
        for i in range(3):
            subprocess.run([*mqadmin, "sendMessage", "-t", "Small", "-p", f"m{i}", "--store", store], env=env,
                           check=True, stdout=subprocess.DEVNULL)
        cases = {
            "python_pass": [py, "-c", "pass"],
            "mqadmin_help": [*mqadmin, "--help"],
            "topic_status": [*mqadmin, "topicStatus", "-t", "Small", "--store", store],
        }
        for argv in cases.values():  # warm-up: bytecode written, page cache warm
            _cpu_seconds(argv, env)
        samples: dict[str, list[float]] = {k: [] for k in cases}
        for _ in range(args.rounds):
            for name, argv in cases.items():
                samples[name].append(_cpu_seconds(argv, env))
    med = {k: statistics.median(v) for k, v in samples.items()}
    floor = med["python_pass"] or 1e-3
    print(json.dumps({
        "rounds": args.rounds,
        "python_pass_cpu_s": round(med["python_pass"], 3),
        "mqadmin_help_cpu_s": round(med["mqadmin_help"], 3),
        "topic_status_cpu_s": round(med["topic_status"], 3),
        "mqadmin_help_max_cpu_s": round(max(samples["mqadmin_help"]), 3),
        "topic_status_max_cpu_s": round(max(samples["topic_status"]), 3),
        "mqadmin_help_vs_python_ratio": round(med["mqadmin_help"] / floor, 2),
        "topic_status_vs_python_ratio": round(med["topic_status"] / floor, 2),
    }))


if __name__ == "__main__":
    main()
