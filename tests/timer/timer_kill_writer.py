"""The writer the timer kill -9 loop kills (run as ``python timer_kill_writer.py ROOT SEED``).

Why a script: the loop needs a process killed with SIGKILL while it puts delayed messages *and* its
timer service enqueues and delivers earlier ones. It prints one line per acknowledged put, flushed
before the next put: ``ack <uniqKey> <queueId> <deliverMs>``.
"""

from __future__ import annotations

import random
import sys
import time
from pathlib import Path

if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from broker_core.store.codec.message import MessageInner  # noqa: E402
from broker_core.store.message_store import MessageStore  # noqa: E402
from broker_core.store.store_config import StoreConfig  # noqa: E402
from broker_core.store.timer import convert_to_timer_message  # noqa: E402
from broker_core.store.timer.timer_message_store import TimerMessageStore  # noqa: E402

TOPIC = "DelayedOrders"
PRECISION_MS = 100
QUEUES = 2


def config() -> StoreConfig:
    # small files (rolls of commitlog, queues and timer log within a cycle), quick flushes and a
    # 100 ms wheel: deliveries happen while the writer still puts
    return StoreConfig(mapped_file_size_commit_log=256 * 1024, mapped_file_size_consume_queue=20 * 64,
                       mapped_file_size_timer_log=8 * 1024, max_hash_slot_num=64, max_index_num=64,
                       timer_precision_ms=PRECISION_MS, timer_flush_interval_ms=50, flush_interval_commit_log=20,
                       flush_interval_consume_queue=50)


def body_of(uniq: str) -> bytes:
    return f"order-{uniq}".encode()


def main(root: str, seed: int) -> None:
    rnd = random.Random(seed)
    store = MessageStore(root, config()).open().start()
    TimerMessageStore(store).start(interval_s=0.01)  # delivering while this process puts
    out = sys.stdout
    i = 0
    while True:
        uniq = f"T{seed}-{i}"
        now = int(time.time() * 1000)
        deliver = now + rnd.randrange(20, 1500)
        qid = rnd.randrange(QUEUES)
        msg = MessageInner(topic=TOPIC, body=body_of(uniq), queue_id=qid,
                           properties={"UNIQ_KEY": uniq, "KEYS": f"k{uniq}", "TIMER_DELIVER_MS": str(deliver)},
                           born_timestamp=now, born_host=("10.0.0.7", 40000))
        converted = convert_to_timer_message(msg, now, PRECISION_MS)
        r = store.put_message(converted if converted is not None else msg)
        if not r.ok:
            out.write(f"fail {r.status} {r.remark}\n")
        else:
            out.write(f"ack {uniq} {qid} {deliver}\n")
        out.flush()
        i += 1
        if rnd.random() < 0.2:
            time.sleep(rnd.uniform(0.001, 0.02))  # let the timer thread run between puts


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
