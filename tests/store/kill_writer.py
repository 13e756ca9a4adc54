"""The writer the kill -9 loop test kills (run as ``python kill_writer.py ROOT SYNC|ASYNC|WBUF SEED``).

Why a script: the loop needs a separate process that is killed with SIGKILL mid-write. It writes,
round-robin, single sends and exploded batches to a SimpleCQ topic and inner batches to a BatchCQ
topic, and prints one line per acknowledged put, flushed before the next put, so the parent knows
exactly what was acknowledged:
``ack <topic> <queueId> <firstQueueOffset> <count> <key>,... <uniqKey>,...`` (one key/uniq per message
of an exploded batch; one each for an inner-batch record, which holds ``count`` messages).
"""

from __future__ import annotations

import random
import sys
from pathlib import Path

if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    sys.path.insert(0, str(Path(__file__).resolve().parent))

from store_util import make_msg, small_config  # noqa: E402

from broker_core.store.codec.batch import BatchItem, encode_batch  # noqa: E402
from broker_core.store.message_store import MessageStore  # noqa: E402
from broker_core.store.topic_config import TopicConfig  # noqa: E402

SIMPLE, BATCH = "KillSimple", "KillBatch"


# The writer's modes: SYNC and ASYNC flush, and WBUF, ASYNC with the write buffer
# (transientStorePoolEnable), where an inner batch is acknowledged before it is in the file.
WRITE_BUFFER = "WBUF"


def config(flush: str):  # noqa: ANN201 - StoreConfig
    # flush services quicker than the defaults: a short cycle should see checkpoints move
    if flush == WRITE_BUFFER:
        return small_config(flush_disk_type="ASYNC_FLUSH", transient_store_pool_enable=True,
                            mapped_file_size_commit_log=64 * 1024, commit_interval_commit_log=20,
                            flush_interval_commit_log=20, flush_interval_consume_queue=50)
    return small_config(flush_disk_type=f"{flush}_FLUSH", flush_interval_commit_log=20,
                        flush_interval_consume_queue=50)


def main(root: str, flush: str, seed: int) -> None:
    rnd = random.Random(seed)
    store = MessageStore(root, config(flush)).open()
    if store.topic_table.get(BATCH) is None:
        store.topic_table.put(TopicConfig(BATCH, 2, 2, attributes={"queue.type": "BatchCQ"}), 0)
        store.topic_table.persist()
    store.start()
    out = sys.stdout
    i = 0
    while True:
        tag = f"{seed}-{i}"
        # with the write buffer mostly inner batches, so that several are buffered at a kill
        kind = (0, 2, 2, 1, 2, 2)[i % 6] if flush == WRITE_BUFFER else i % 3
        qid = rnd.randrange(2)
        if kind == 0:
            key, uniq = f"k{tag}", f"U{tag}"
            r = store.put_message(make_msg(SIMPLE, qid, rnd.randbytes(rnd.randrange(1, 300)), key=key, uniq=uniq,
                                           tags=f"t{i % 4}"))
            keys, uniqs, count = [key], [uniq], 1
        elif kind == 1:
            count = rnd.randrange(2, 5)
            keys = [f"k{tag}.{j}" for j in range(count)]
            uniqs = [f"U{tag}.{j}" for j in range(count)]
            r = store.put_messages([make_msg(SIMPLE, qid, b"batch-%d" % j, key=k, uniq=u)
                                    for j, (k, u) in enumerate(zip(keys, uniqs, strict=True))])
        else:
            count = rnd.randrange(2, 6)
            keys, uniqs = [f"k{tag}"], [f"U{tag}"]
            body = encode_batch([BatchItem(f"inner-{tag}-{j}".encode()) for j in range(count)])
            r = store.put_inner_batch(make_msg(BATCH, qid, body, key=keys[0], uniq=uniqs[0]), count)
        if not r.ok:
            out.write(f"fail {r.status} {r.remark}\n")
            out.flush()
            continue
        topic = BATCH if kind == 2 else SIMPLE
        out.write(f"ack {topic} {qid} {r.queue_offset} {count} {','.join(keys)} {','.join(uniqs)}\n")
        out.flush()
        i += 1


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]))
