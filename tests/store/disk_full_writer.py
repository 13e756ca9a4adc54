"""Writer for the disk-full test (``python disk_full_writer.py ROOT WARNING_RATIO``).

Puts messages (some small, some large enough for the vectored-write path) until the store refuses
several in a row, printing ``ack <topic> <qid> <offset> <key>`` per acknowledged put and
``refused <status> <remark>`` per refusal; then reads every acked message back by queue while the
disk is still full and prints ``read <n>``. A SIGBUS would end it with a signal instead.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from store_util import make_msg, small_config  # noqa: E402

from broker_core.store.message_store import MessageStore  # noqa: E402


def config(ratio: int):  # noqa: ANN201 - StoreConfig
    # clean_resource_interval: retention (the flush thread, every cleanResourceInterval) would delete
    # the oldest commitlog files past diskSpaceCleanForciblyRatio (85%) once the puts take longer
    # than one interval (a loaded machine), and acknowledged messages with them: RocketMQ's policy,
    # not what this test is about (refusal on a full disk), so it runs no retention.
    return small_config(mapped_file_size_commit_log=256 * 1024, flush_disk_type="SYNC_FLUSH",
                        disk_space_warning_level_ratio=ratio, disk_max_used_space_ratio=min(ratio, 75),
                        clean_resource_interval=10**9)


def main(root: str, ratio: int) -> None:
    store = MessageStore(root, config(ratio)).open()
    store.start()
    acked: list[tuple[str, int, int]] = []
    refused = 0
    i = 0
    while refused < 5 and i < 100_000:
        topic, qid = ("DiskA", i % 2) if i % 3 else ("DiskB", 0)
        body = b"%06d" % i * (1200 if i % 7 == 0 else 60)  # ~7 KiB (pwritev) or ~360 B (mapped copy)
        r = store.put_message(make_msg(topic, qid, body, key=f"dk{i}"))
        if r.ok:
            acked.append((topic, qid, r.queue_offset))
            print(f"ack {topic} {qid} {r.queue_offset} dk{i}", flush=True)
        else:
            refused += 1
            print(f"refused {r.status} {r.remark}", flush=True)
        i += 1
    # the reput thread dispatches behind the puts; on a loaded machine that takes seconds, so wait for
    # it (bounded) and say so if it never catches up rather than reporting a short read count
    if not store.wait_for_dispatch(90):
        print(f"dispatch still {store.dispatch_behind_bytes()} bytes behind after 90 s", flush=True)
    n = sum(1 for t, q, o in acked if store.get_messages(t, q, o, 1).messages)
    print(f"read {n}", flush=True)
    store.shutdown()


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
