"""``mqbroker``: run the embedded broker as a process that owns a store directory.

It takes the store lock (so ``mqadmin`` state changes on that store are refused and name ``-n``),
runs the broker's background services (flush, dispatch, timers, delay levels, pop revive,
transaction checks, offset persistence) and shuts down cleanly on SIGTERM/SIGINT, leaving no
``abort`` file. The network endpoints (name server 9876, remoting 10911, gRPC 8081) are not part of
this build yet; the process says so when it starts.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
from pathlib import Path

from broker_core.broker.broker import Broker
from broker_core.broker.broker_config import BrokerConfig
from broker_core.config_loader import ConfigError, read_properties_file
from broker_core.store.store_lock import StoreLockedError


def _parse(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="mqbroker", description=__doc__.splitlines()[0])
    ap.add_argument("-c", "--configFile", dest="config", help="broker config (key=value or YAML, RocketMQ keys)")
    ap.add_argument("--store", default=None, help="store root (default: $RMQ_STORE, else storePathRootDir, else ./store)")
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = _parse(argv)
    try:
        props = read_properties_file(args.config) if args.config else {}
        root = Path(args.store or os.environ.get("RMQ_STORE") or props.get("storePathRootDir") or "./store")
        config = BrokerConfig.from_properties(props, root)
    except ConfigError as e:
        print(f"mqbroker: {e}", file=sys.stderr)
        return 1
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    try:
        broker = Broker(root, config)
    except StoreLockedError as e:
        print(f"mqbroker: {e}", file=sys.stderr)
        return 1
    except (OSError, ValueError) as e:
        print(f"mqbroker: cannot open store {root}: {e}", file=sys.stderr)
        return 1
    broker.start()
    print(f"The broker[{config.broker_name}, cluster {config.broker_cluster_name}] boot success on store "
          f"{root.resolve()} (pid {os.getpid()}); network endpoints are not available in this build: "
          f"inspect it with `mqadmin <command> --store {root}`", flush=True)
    try:
        stop.wait()
    finally:
        broker.shutdown()
    print("The broker shut down cleanly.", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
