"""The broker the concurrency kill -9 loop kills (``python traffic_kill_writer.py ROOT SEED WRITE_BUFFER RETENTION``).

Why a script: the loop needs a process killed with SIGKILL while ``traffic_mix``'s threads send,
consume and delete and recreate topics on it. One line per acknowledged send on a stable topic,
flushed at once: ``ack <topic> <queueId> <queueOffset> <body> <commitlogOffset>``; ``fail <text>`` for an operation
that failed with anything but a broker refusal.
"""

from __future__ import annotations

import sys
import threading
from pathlib import Path

if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    sys.path.insert(0, str(Path(__file__).resolve().parent))

from traffic_mix import Ack, Run, broker_config, create_resources, run_threads  # noqa: E402

from broker_core.broker.broker import Broker  # noqa: E402

THREADS = 4


def main(root: str, seed: int, write_buffer: bool, retention: bool) -> None:
    broker = Broker(root, broker_config(write_buffer)).start()
    create_resources(broker)
    out = sys.stdout
    lock = threading.Lock()

    def say(line: str) -> None:
        with lock:
            out.write(line + "\n")
            out.flush()

    def on_ack(ack: Ack) -> None:
        topic, qid, offset, body, phy = ack
        say(f"ack {topic} {qid} {offset} {body.decode()} {phy}")

    def on_failure(text: str) -> None:
        say("fail " + " | ".join(text.strip().splitlines()[-3:]))

    run_threads(Run(broker, on_ack, on_failure, retention), seed, THREADS, 3600.0)  # until killed


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), sys.argv[3] == "1", sys.argv[4] == "1")
