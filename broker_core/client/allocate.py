"""Queue allocation among the consumers of a group (AllocateMessageQueueAveragely).

Why the exact Java algorithm: Java, Go and JS clients of the same group each compute their share
locally from the same sorted inputs; a client that allocated differently would overlap or leave
queues unconsumed when it shares a group with them.
"""

from __future__ import annotations

from collections.abc import Sequence

from broker_core.remoting.bodies import MessageQueue


def allocate_averagely(current_cid: str, mq_all: Sequence[MessageQueue],
                       cid_all: Sequence[str]) -> list[MessageQueue]:
    """This client's contiguous share of the sorted queues; [] when it is not (yet) among the consumers."""
    mqs = sorted(mq_all)
    cids = sorted(cid_all)
    if not current_cid or not mqs or current_cid not in cids:
        return []
    index = cids.index(current_cid)
    n_mq, n_cid = len(mqs), len(cids)
    mod = n_mq % n_cid
    if n_mq <= n_cid:
        average = 1
    elif mod > 0 and index < mod:
        average = n_mq // n_cid + 1
    else:
        average = n_mq // n_cid
    start = index * average if (mod > 0 and index < mod) else index * average + mod
    size = min(average, n_mq - start)
    return [mqs[(start + i) % n_mq] for i in range(max(size, 0))]
