"""Cluster-mode rebalancing: which queues this consumer owns, and where it starts pulling each.

Why a state machine separate from the sockets: the rules (allocate from the sorted queue and client
id lists; drop queues no longer ours after persisting their offset and releasing their lock; in
orderly mode own a queue only while its broker lock is held; compute the first pull offset from the
stored offset or consumeFromWhere) are what makes several clients of a group cooperate, and they are
tested here without a network. The backend does the calls.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol

from broker_core.remoting.bodies import MessageQueue

from .allocate import AllocateStrategy, allocate_averagely
from .offset_store import OffsetStore
from .process_queue import ProcessQueue

log = logging.getLogger(__name__)

RETRY_GROUP_TOPIC_PREFIX = "%RETRY%"


class ConsumeFromWhere(StrEnum):
    CONSUME_FROM_LAST_OFFSET = "CONSUME_FROM_LAST_OFFSET"
    CONSUME_FROM_FIRST_OFFSET = "CONSUME_FROM_FIRST_OFFSET"
    CONSUME_FROM_TIMESTAMP = "CONSUME_FROM_TIMESTAMP"


class RebalanceBackend(Protocol):
    async def subscribe_queues(self, topic: str) -> list[MessageQueue]: ...

    async def find_consumer_ids(self, topic: str, group: str) -> list[str] | None:
        """The group's client ids; None when no broker could give them."""
        ...

    async def lock_batch(self, broker_name: str, mqs: list[MessageQueue]) -> set[MessageQueue]: ...

    async def unlock_batch(self, broker_name: str, mqs: list[MessageQueue], *, oneway: bool = False) -> None: ...

    async def max_offset(self, mq: MessageQueue) -> int: ...

    async def search_offset(self, mq: MessageQueue, timestamp_ms: int) -> int: ...


@dataclass
class PullRequest:
    """One queue to pull, the next offset to ask for and the queue's in-flight messages."""

    group: str
    mq: MessageQueue
    process_queue: ProcessQueue
    next_offset: int


class Rebalancer:
    def __init__(self, group: str, client_id: str, backend: RebalanceBackend, offsets: OffsetStore,
                 *, orderly: bool = False, broadcasting: bool = False,
                 consume_from: ConsumeFromWhere = ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET,
                 consume_timestamp_ms: int | None = None,
                 allocate: AllocateStrategy = allocate_averagely
                 ) -> None:
        self.group = group
        self.client_id = client_id
        self.orderly = orderly
        self.broadcasting = broadcasting  # BROADCASTING: every consumer owns every queue, no allocation
        self._backend = backend
        self._offsets = offsets
        self._consume_from = consume_from
        self._consume_ts = consume_timestamp_ms
        self._allocate = allocate
        self.process_queues: dict[MessageQueue, ProcessQueue] = {}
        # subscribed topics the name server had no route for in the last round (e.g. a retry topic the
        # broker has not registered yet): the consumer rebalances again soon instead of in 20 s
        self.topics_without_route: list[str] = []

    async def rebalance(self, topics: list[str]) -> list[PullRequest]:
        """One round over every subscribed topic; returns pull requests for newly owned queues."""
        new: list[PullRequest] = []
        wanted: set[MessageQueue] = set()
        self.topics_without_route = []
        for topic in topics:
            mqs = await self._backend.subscribe_queues(topic)
            if not mqs:
                self.topics_without_route.append(topic)
                continue
            if self.broadcasting:
                wanted.update(mqs)
                continue
            cids = await self._backend.find_consumer_ids(topic, self.group)
            if not cids:
                # as Java's rebalanceByTopic with cidAll null: no change to the topic's queues. Dropping
                # them all because a restarted broker had no heartbeat of the group yet stopped the
                # consumption (and released orderly locks) until the next round
                log.warning("rebalance of %s, topic %s: no consumer id list, its queues stay as they are",
                            self.group, topic)
                wanted.update(mq for mq in self.process_queues if mq.topic == topic)
                continue
            wanted.update(self._allocate(self.client_id, mqs, cids))
        topics_set = set(topics)
        for mq in [mq for mq in self.process_queues if mq.topic in topics_set and mq not in wanted]:
            await self._drop(mq)
        for mq in [mq for mq in self.process_queues if mq.topic not in topics_set]:
            await self._drop(mq)
        for mq in sorted(wanted - set(self.process_queues)):
            if self.orderly and not await self.lock(mq):
                continue  # another client still holds it; retried next round
            offset = await self.compute_pull_from_where(mq)
            if offset < 0:
                continue
            pq = ProcessQueue()
            if self.orderly:
                pq.locked = True
                pq.last_lock_ms = int(time.time() * 1000)
            self.process_queues[mq] = pq
            new.append(PullRequest(self.group, mq, pq, offset))
        return new

    async def remove_process_queue(self, mq: MessageQueue, pq: ProcessQueue) -> bool:
        """RebalanceImpl.removeProcessQueue: give up ``pq`` (the broker moved its offset, OFFSET_ILLEGAL)
        as a dropped queue is given up: its offset persisted then forgotten, its lock released once a
        batch in the listener has finished. The next round takes the queue again, at its stored offset.
        False when ``mq`` is no longer owned through ``pq`` (a round dropped or replaced it meanwhile)."""
        pq.dropped = True
        if self.process_queues.get(mq) is not pq:
            return False
        await self._drop(mq)
        return True

    async def _drop(self, mq: MessageQueue) -> None:
        pq = self.process_queues.pop(mq)
        pq.dropped = True
        await self._offsets.persist(mq)
        self._offsets.remove(mq)
        if self.orderly and pq.locked:
            # wait for a batch being consumed to finish before the lock is released; oneway, as Java's
            # RebalanceImpl.unlock(mq, true): waiting for the answer held the round (under the rebalance
            # lock) up by a timeout per queue when the broker stopped answering
            async with pq.consume_lock:
                try:
                    await self._backend.unlock_batch(mq.broker_name, [mq], oneway=True)
                except Exception as e:  # noqa: BLE001 - a dead broker's lock expires there by itself
                    log.warning("unlocking %s failed: %s", mq, e)
            pq.locked = False

    async def lock(self, mq: MessageQueue) -> bool:
        got = await self._backend.lock_batch(mq.broker_name, [mq])
        pq = self.process_queues.get(mq)
        if pq is not None:
            pq.locked = mq in got
            if pq.locked:
                pq.last_lock_ms = int(time.time() * 1000)
        return mq in got

    async def lock_all(self) -> None:
        """Renew the locks of every owned queue (every 20 s in Java), per broker in one request."""
        by_broker: dict[str, list[MessageQueue]] = {}
        for mq in self.process_queues:
            by_broker.setdefault(mq.broker_name, []).append(mq)
        now = int(time.time() * 1000)
        for broker, mqs in by_broker.items():
            got = await self._backend.lock_batch(broker, mqs)
            for mq in mqs:
                pq = self.process_queues.get(mq)
                if pq is None:
                    continue
                pq.locked = mq in got
                if pq.locked:
                    pq.last_lock_ms = now

    async def unlock_all(self) -> None:
        """Java's unlockAll(false) at shutdown: one request per broker, its answer waited for; a broker
        that fails is logged and the others are still unlocked (its locks expire there by themselves)."""
        by_broker: dict[str, list[MessageQueue]] = {}
        for mq, pq in self.process_queues.items():
            if pq.locked:
                by_broker.setdefault(mq.broker_name, []).append(mq)
        for broker, mqs in by_broker.items():
            try:
                await self._backend.unlock_batch(broker, mqs)
            except Exception as e:  # noqa: BLE001 - as Java's unlockAll: logged, the next broker still asked
                log.warning("unlocking %s failed: %s", mqs, e)
                continue
            for mq in mqs:
                self.process_queues[mq].locked = False

    async def compute_pull_from_where(self, mq: MessageQueue) -> int:
        """Stored offset if any; else by consumeFromWhere (retry topics always start at 0)."""
        stored = await self._offsets.read_store(mq)
        if stored is not None and stored >= 0:
            return stored
        if mq.topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
            return 0
        if self._consume_from == ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET:
            return 0
        if self._consume_from == ConsumeFromWhere.CONSUME_FROM_TIMESTAMP:
            ts = self._consume_ts if self._consume_ts is not None else int(time.time() * 1000) - 30 * 60_000
            return await self._backend.search_offset(mq, ts)
        return await self._backend.max_offset(mq)

    async def shutdown(self) -> None:
        await self._offsets.persist_all()
        if self.orderly:
            await self.unlock_all()
        for pq in self.process_queues.values():
            pq.dropped = True
        self.process_queues.clear()
