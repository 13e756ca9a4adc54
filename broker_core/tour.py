"""``make tour``: a short embedded tour of rmqops on a store directory, using the README's commands.

Why a subprocess per step: the tour must show (and run) exactly what an operator types, so each step
is a real ``mqadmin`` invocation — same parsing, same output, same exit codes — printed before it
runs. Re-running on an existing store is safe: the user is updated instead of created, the topic
update is idempotent, and each run adds one more message under the same key.
"""

from __future__ import annotations

import argparse
import os
import shlex
import subprocess
import sys
from pathlib import Path

from broker_core.store.store_dir import store_dir_from

TOPIC = "OrderEvents"
KEY = "order-42"


def _mqadmin(store: Path, config: str | None, *args: str, check: bool = True, quiet: bool = False) -> int:
    argv = ["mqadmin", *args]
    shown = " ".join(shlex.quote(a) for a in argv)
    if not quiet:
        print(f"\n$ {shown}", flush=True)
    env = dict(os.environ, RMQ_STORE=str(store))
    env.pop("NAMESRV_ADDR", None)
    extra = ["--config", config] if config else []
    proc = subprocess.run([sys.executable, "-m", "mqadmin.app", *args, *extra], env=env,
                          stdout=subprocess.DEVNULL if quiet else None, stderr=subprocess.DEVNULL if quiet else None)
    if check and proc.returncode != 0:
        print(f"tour stopped: `{shown}` exited with {proc.returncode}", file=sys.stderr)
        raise SystemExit(proc.returncode)
    return proc.returncode


def run_tour(store: Path, config: str | None = None) -> None:
    print(f"rmqops embedded tour on store {store} (export RMQ_STORE={store} to run these yourself)")
    store.mkdir(parents=True, exist_ok=True)
    exists = _mqadmin(store, config, "getUser", "-c", "DefaultCluster", "-u", "rocketmq", check=False, quiet=True) == 0
    if exists:
        print("\n# user rocketmq already exists (tour re-run): updating its password instead of creating it")
        _mqadmin(store, config, "updateUser", "-c", "DefaultCluster", "-u", "rocketmq", "-p", "rocketmq")
    else:
        _mqadmin(store, config, "createUser", "-c", "DefaultCluster", "-u", "rocketmq", "-p", "rocketmq", "-t", "Super",
                 "--create")  # make run's default ./store is built on purpose
    _mqadmin(store, config, "updateTopic", "-c", "DefaultCluster", "-t", TOPIC, "-r", "4", "-w", "4",
             "-a", "+queue.type=BatchCQ")
    _mqadmin(store, config, "sendMessage", "-t", TOPIC, "-p", '{"order": 42}', "-k", KEY, "-c", "TagA")
    _mqadmin(store, config, "sendMessage", "-t", TOPIC, "-p", '{"order": 43}', "-k", "order-43", "-c", "TagB")
    _mqadmin(store, config, "queryMsgByKey", "-t", TOPIC, "-k", KEY)
    _mqadmin(store, config, "topicStatus", "-t", TOPIC)
    _mqadmin(store, config, "verifyStore")
    print("\ntour done: every command above also takes --output json (or yaml); see README.md")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m broker_core.tour", description=__doc__.splitlines()[0])
    parser.add_argument("--store", default=str(store_dir_from(None)), help="store directory")
    parser.add_argument("--config", default=None, help="RocketMQ-style broker config file")
    args = parser.parse_args(argv)
    run_tour(Path(args.store), args.config)


if __name__ == "__main__":
    main()
