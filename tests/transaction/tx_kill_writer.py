"""The producer and broker the transaction kill -9 loop kills (``python tx_kill_writer.py ROOT SEED``).

Why a script: the loop needs a process killed with SIGKILL while it prepares half messages, ends
some of them at once, and its check service asks the producer about the others (and writes op
markers in batches). Every decision is ``decision(uniqKey)``, so the producer's answer after any
crash is the one it gave before. One line per acknowledged step, flushed before the next:
``prep <uniqKey> <queueId>`` and ``end <uniqKey>``.
"""

from __future__ import annotations

import random
import sys
import time
import zlib
from pathlib import Path

if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from hooked_store import broker_put  # noqa: E402

from broker_core.broker.transaction import (  # noqa: E402
    TransactionalMessageCheckService,
    TransactionalMessageService,
    TransactionConfig,
)
from broker_core.store.codec.message import MessageExt, MessageInner  # noqa: E402
from broker_core.store.codec.sys_flag import TRANSACTION_COMMIT_TYPE, TRANSACTION_ROLLBACK_TYPE  # noqa: E402
from broker_core.store.message_store import MessageStore  # noqa: E402
from broker_core.store.store_config import StoreConfig  # noqa: E402

TOPIC, GROUP = "TxOrders", "PG_TX"
QUEUES = 2
UNKNOWN = 0


def decision(uniq: str) -> int:
    """The producer's local transaction outcome: the same in every process."""
    return TRANSACTION_COMMIT_TYPE if zlib.crc32(uniq.encode()) % 2 else TRANSACTION_ROLLBACK_TYPE


def body_of(uniq: str) -> bytes:
    return f"payment-{uniq}".encode()


def store_config() -> StoreConfig:
    return StoreConfig(mapped_file_size_commit_log=256 * 1024, mapped_file_size_consume_queue=20 * 64,
                       max_hash_slot_num=64, max_index_num=64, flush_interval_commit_log=20,
                       flush_interval_consume_queue=50)


def tx_config() -> TransactionConfig:
    # check-backs 150 ms after the prepare, every 100 ms; op markers batched for 50 ms
    return TransactionConfig(transaction_timeout=150, transaction_check_interval=100, transaction_op_batch_interval=50,
                             transaction_metric_flush_interval=200)


class Producer:
    """The producer's TransactionChecker: the first check of every fifth transaction in this process
    is answered UNKNOWN (the half is checked again later), every other one with ``decision``."""

    def __init__(self) -> None:
        self.service: TransactionalMessageService | None = None
        self.asked: set[str] = set()

    def __call__(self, half: MessageExt, group: str) -> None:
        uniq = half.uniq_key or ""
        answer = decision(uniq)
        if uniq not in self.asked and uniq.endswith(("0", "5")):
            answer = UNKNOWN
        self.asked.add(uniq)
        assert self.service is not None
        self.service.end_transaction(group, half.queue_offset, half.commit_log_offset, uniq,
                                     half.get_property("__transactionId__"), answer, True)


def open_broker(root: str | Path) -> tuple[MessageStore, TransactionalMessageService, TransactionalMessageCheckService]:
    store = MessageStore(root, store_config()).open().start()
    producer = Producer()
    svc = TransactionalMessageService(store, broker_put(store, store.clock), config=tx_config(),
                                      check_listener=producer)
    producer.service = svc
    svc.load()
    return store, svc, TransactionalMessageCheckService(svc, poll_interval_ms=10).start()


def tx_msg(uniq: str, queue_id: int) -> MessageInner:
    properties = {"TRAN_MSG": "true", "PGROUP": GROUP, "UNIQ_KEY": uniq, "KEYS": f"k{uniq}"}
    return MessageInner(topic=TOPIC, body=body_of(uniq), properties=properties, queue_id=queue_id, sys_flag=0x4,
                        born_timestamp=int(time.time() * 1000), born_host=("10.0.0.7", 40000))


def main(root: str, seed: int) -> None:
    rnd = random.Random(seed)
    store, svc, _checker = open_broker(root)
    out = sys.stdout
    i = 0
    while True:
        uniq = f"X{seed}-{i}"
        qid = rnd.randrange(QUEUES)
        r = svc.prepare_message(tx_msg(uniq, qid))
        if not r.ok:
            out.write(f"fail prepare {r.status}\n")
            out.flush()
            continue
        out.write(f"prep {uniq} {qid}\n")
        out.flush()
        if rnd.random() < 0.6:  # ended at once; the others wait for a check-back
            e = svc.end_transaction(GROUP, r.queue_offset, r.wrote_offset, uniq, uniq, decision(uniq), False)
            if e.ok:
                out.write(f"end {uniq}\n")
                out.flush()
        i += 1
        if rnd.random() < 0.2:
            time.sleep(rnd.uniform(0.001, 0.02))


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
