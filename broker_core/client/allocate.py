"""Queue allocation among the consumers of a group: Java's ``AllocateMessageQueueStrategy`` family.

Why the exact Java algorithms: Java, Go and JS clients of the same group each compute their share
locally from the same sorted inputs; a client that allocated differently would overlap or leave
queues unconsumed when it shares a group with them. Every strategy gets the queues and client ids
sorted, as Java's ``RebalanceImpl`` sorts them before calling ``allocate``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from broker_core.remoting.bodies import MessageQueue

from .consistent_hash import ConsistentHashRing


class AllocateStrategy(Protocol):
    """``allocate(current client id, all queues of a topic, all client ids of the group)``."""

    def __call__(self, current_cid: str, mq_all: Sequence[MessageQueue],
                 cid_all: Sequence[str]) -> list[MessageQueue]: ...


def java_mq_string(mq: MessageQueue) -> str:
    """``MessageQueue.toString()`` in Java: the key the consistent-hash strategy routes by."""
    return f"MessageQueue [topic={mq.topic}, brokerName={mq.broker_name}, queueId={mq.queue_id}]"


def _sorted_share(current_cid: str, mq_all: Sequence[MessageQueue],
                  cid_all: Sequence[str]) -> tuple[list[MessageQueue], int, int] | None:
    """The sorted queues, this client's index among the sorted clients and their number, as the
    averaging strategies deal them; None when there is nothing to share or this client is not listed."""
    mqs = sorted(mq_all)
    cids = sorted(cid_all)
    if not current_cid or not mqs or current_cid not in cids:
        return None
    return mqs, cids.index(current_cid), len(cids)


def allocate_averagely(current_cid: str, mq_all: Sequence[MessageQueue],
                       cid_all: Sequence[str]) -> list[MessageQueue]:
    """AVG: this client's contiguous share of the sorted queues; [] when it is not (yet) a consumer."""
    found = _sorted_share(current_cid, mq_all, cid_all)
    if found is None:
        return []
    mqs, index, n_cid = found
    n_mq = len(mqs)
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


def allocate_averagely_by_circle(current_cid: str, mq_all: Sequence[MessageQueue],
                                 cid_all: Sequence[str]) -> list[MessageQueue]:
    """AVG_BY_CIRCLE: queues dealt round-robin over the sorted clients, like cards."""
    found = _sorted_share(current_cid, mq_all, cid_all)
    if found is None:
        return []
    mqs, index, n_cid = found
    return mqs[index::n_cid]


class AllocateConsistentHash:
    """CONSISTENT_HASH: each queue goes to the ring node of its Java string; a client joining or
    leaving moves only the queues next to its points instead of reshuffling everyone's share."""

    name = "CONSISTENT_HASH"

    def __init__(self, virtual_nodes: int = 10) -> None:
        if virtual_nodes < 0:
            raise ValueError(f"illegal virtualNodeCnt: {virtual_nodes}")
        self.virtual_nodes = virtual_nodes

    def __call__(self, current_cid: str, mq_all: Sequence[MessageQueue],
                 cid_all: Sequence[str]) -> list[MessageQueue]:
        cids = sorted(cid_all)
        if not current_cid or not mq_all or current_cid not in cids:
            return []
        ring = ConsistentHashRing(cids, self.virtual_nodes)
        return [mq for mq in sorted(mq_all) if ring.route(java_mq_string(mq)) == current_cid]


class AllocateByConfig:
    """CONFIG: a fixed list of queues for this client whatever the group looks like (operators pin
    queues to hosts with it); queues of the list that the topic does not have are left out."""

    name = "CONFIG"

    def __init__(self, message_queues: Sequence[MessageQueue]) -> None:
        self.message_queues = list(message_queues)

    def __call__(self, current_cid: str, mq_all: Sequence[MessageQueue],
                 cid_all: Sequence[str]) -> list[MessageQueue]:
        present = set(mq_all)
        return [mq for mq in self.message_queues if mq in present]
