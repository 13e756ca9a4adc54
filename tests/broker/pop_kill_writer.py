"""The broker, producer and pop consumer the pop kill -9 loop kills (``python pop_kill_writer.py ROOT SEED``).

Why a script: the loop needs a process killed with SIGKILL while it sends, pops (the consumer offset
moves past a popped batch at once; a checkpoint keeps it in flight), acks most popped messages and
leaves the others to be revived. One line per acknowledged step, flushed before the next:
``sent <body>`` once the send returned, ``acking <body>`` before an ack, ``consumed <body>`` once it
returned OK.
"""

from __future__ import annotations

import random
import sys
from pathlib import Path

if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from broker_core.broker.broker import Broker  # noqa: E402
from broker_core.broker.broker_config import BrokerConfig  # noqa: E402
from broker_core.broker.pop import PopStatus  # noqa: E402
from broker_core.broker.send import SendStatus  # noqa: E402
from broker_core.store.codec.message import MessageExt  # noqa: E402
from broker_core.store.codec.properties import PROPERTY_POP_CK  # noqa: E402
from broker_core.store.store_config import StoreConfig  # noqa: E402

TOPIC, GROUP = "PopOrders", "G_pop_kill"
QUEUES = 2
INVISIBLE_MS = 300


def broker_config() -> BrokerConfig:
    # small files, offsets flushed every 100 ms, revive scans every 100 ms
    store = StoreConfig(mapped_file_size_commit_log=256 * 1024, mapped_file_size_consume_queue=20 * 64,
                        max_hash_slot_num=64, max_index_num=64, flush_interval_commit_log=20,
                        flush_interval_consume_queue=50)
    return BrokerConfig(store=store, flush_consumer_offset_interval=100, revive_queue_num=2,
                        properties={"reviveInterval": "100"})


def open_broker(root: str | Path) -> Broker:
    broker = Broker(root, broker_config()).start()
    broker.create_or_update_topic(TOPIC, QUEUES, QUEUES)
    broker.create_or_update_subscription_group(GROUP)
    return broker


def pop_and_ack(broker: Broker, rnd: random.Random, ack_share: float, say=lambda line: None) -> list[str]:  # noqa: ANN001
    """Pop up to 4 messages and ack about ``ack_share`` of them: the bodies acked. ``say`` gets
    ``acking <body>`` before each ack and ``consumed <body>`` right after one that succeeded (a kill
    between the two leaves that ack unknown)."""
    res = broker.pop_service.pop(GROUP, TOPIC, max_msgs=4, invisible_time_ms=INVISIBLE_MS)
    if res.status is not PopStatus.FOUND:
        return []
    done = []
    for m in res.messages:
        if rnd.random() < ack_share:
            say(f"acking {m.body.decode()}")
            if broker.pop_service.ack(GROUP, TOPIC, handle_of(m)).ok:
                say(f"consumed {m.body.decode()}")
                done.append(m.body.decode())
    return done


def handle_of(msg: MessageExt) -> str:
    return msg.properties[PROPERTY_POP_CK]


def main(root: str, seed: int) -> None:
    rnd = random.Random(seed)
    broker = open_broker(root)
    out = sys.stdout

    def say(line: str) -> None:
        out.write(line + "\n")
        out.flush()

    i = 0
    while True:
        body = f"P{seed}-{i}"
        r = broker.send_message(TOPIC, body.encode(), {"KEYS": body}, queue_id=rnd.randrange(QUEUES))
        out.write(f"sent {body}\n" if r.status is SendStatus.SEND_OK else f"fail send {r.status}\n")
        out.flush()
        i += 1
        pop_and_ack(broker, rnd, 0.8, say)


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
