"""A running broker for the live dashboard test, in its own process: it owns the store (lock, flush,
dispatch, offset persistence), a producer sends for a while, and a slow consumer falls behind, then
catches up once the producer stops. It prints one JSON line per phase and exits on SIGTERM.

Usage: python live_broker.py STORE CONF TOPIC GROUP PRODUCE_S PRODUCE_TPS SLOW_TPS FAST_TPS
"""

from __future__ import annotations

import json
import signal
import sys
import threading
import time
from pathlib import Path

from broker_core.broker.broker import Broker
from broker_core.broker.broker_config import BrokerConfig
from broker_core.config_loader import read_properties_file


def main() -> int:
    store, conf, topic, group = sys.argv[1:5]
    produce_s, produce_tps, slow_tps, fast_tps = (float(x) for x in sys.argv[5:9])
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    broker = Broker(Path(store), BrokerConfig.from_properties(read_properties_file(conf), Path(store))).start()
    try:
        broker.create_or_update_topic(topic, 2, 2)
        broker.create_or_update_subscription_group(group)
        for qid in range(2):
            broker.commit_offset(group, topic, qid, 0)
        print(json.dumps({"phase": "ready"}), flush=True)
        producing = threading.Event()
        producing.set()

        def produce() -> None:
            end = time.monotonic() + produce_s
            n = 0
            while time.monotonic() < end and not stop.is_set():
                broker.send_message(topic, f"live-{n}".encode(), {"KEYS": f"live-{n}"})
                n += 1
                time.sleep(1 / produce_tps)
            producing.clear()
            print(json.dumps({"phase": "produced", "messages": n}), flush=True)

        threading.Thread(target=produce, daemon=True).start()
        offsets = [0, 0]
        drained_reported = False
        while not stop.is_set():
            rate = slow_tps if producing.is_set() else fast_tps
            for qid in range(2):
                r = broker.pull_message(group, topic, qid, offsets[qid], max_msgs=1)
                if r.messages:
                    offsets[qid] = r.next_begin_offset
                    broker.commit_offset(group, topic, qid, offsets[qid])
            lag = sum(broker.get_max_offset(topic, q) - offsets[q] for q in range(2))
            if not producing.is_set() and lag == 0 and not drained_reported:
                drained_reported = True
                print(json.dumps({"phase": "drained"}), flush=True)
            time.sleep(2 / rate)
    finally:
        broker.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
