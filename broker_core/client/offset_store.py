"""Consumer offsets kept on the broker (cluster mode), cached in memory between persists.

Why a cache: a push consumer commits after every consumed batch; sending each commit would double the
traffic, so commits update memory and a timer (and shutdown/rebalance) persists them with
UPDATE_CONSUMER_OFFSET, as RocketMQ's RemoteBrokerOffsetStore does.

Why oneway: Java's persist and persistAll send UPDATE_CONSUMER_OFFSET oneway
(updateConsumeOffsetToBroker(mq, offset, isOneway=true)) and wait for no answer. Waiting for each
queue's answer made a broker that stops answering (stopped, overloaded, cut off) cost the request
timeout per queue in turn: a shutdown took 5 s per queue (83 s for 16 queues), the 5 s persist round
held up the other brokers' queues, and a rebalance dropping queues held its lock as long.

Why every offset on every round, moved or not: as Java's persistAll. A oneway send counts as done once
written to the connection, which proves nothing: written to a stopped broker's socket buffer and lost
with the broker, an offset remembered as sent was never sent again while its queue stayed quiet, and
the consumed messages came again after the broker's restart.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Protocol

from broker_core.remoting import RequestCode
from broker_core.remoting.bodies import MessageQueue
from broker_core.remoting.headers import UpdateConsumerOffsetRequestHeader

if TYPE_CHECKING:
    from .instance import MQClientInstance

log = logging.getLogger(__name__)


class OffsetBackend(Protocol):
    """What the store needs of a consumer's API (ConsumerApi): the query, and the client instance and
    group its oneway updates go out with."""

    instance: MQClientInstance
    group: str

    async def query_consumer_offset(self, mq: MessageQueue) -> int | None:
        """The stored offset, None when the broker has none (QUERY_NOT_FOUND)."""
        ...


class OffsetTable:
    """The in-memory ``offsetTable`` every offset store keeps (remote or local file): commits land here
    first, and only ever move an offset forward unless the caller says otherwise (a reset, a load)."""

    def __init__(self) -> None:
        self._table: dict[MessageQueue, int] = {}

    def update(self, mq: MessageQueue, offset: int, increase_only: bool = True) -> None:
        if offset < 0:
            return
        cur = self._table.get(mq)
        if cur is None or not increase_only or offset > cur:
            self._table[mq] = offset

    def read_memory(self, mq: MessageQueue) -> int | None:
        return self._table.get(mq)


class RemoteBrokerOffsetStore(OffsetTable):
    def __init__(self, backend: OffsetBackend) -> None:
        super().__init__()
        self._backend = backend

    async def read_store(self, mq: MessageQueue) -> int | None:
        off = await self._backend.query_consumer_offset(mq)
        if off is not None:
            self.update(mq, off, increase_only=False)
        return off

    async def persist(self, mq: MessageQueue) -> None:
        """Send ``mq``'s offset (if it has one), moved since the last send or not. A failure is logged,
        not raised, as Java's persist does: a dead broker's queue must not stop a rebalance from dropping
        the other queues of that broker (one was let go per 20 s round) nor the offsets of every other
        queue."""
        await self._persist(mq)

    async def persist_all(self, mqs: set[MessageQueue] | None = None) -> None:
        """Send every offset (of ``mqs`` when given), moved or not, as Java's persistAll. A broker whose
        first send failed (no connection, no address) gets no further try this round: each would fail
        the same way, a connect to a blackholed host after its own timeout."""
        unreachable: set[str] = set()
        for mq in list(self._table):
            if (mqs is None or mq in mqs) and mq.broker_name not in unreachable:
                if not await self._persist(mq):
                    unreachable.add(mq.broker_name)

    async def _persist(self, mq: MessageQueue) -> bool:
        """persist(mq); False when the offset could not be sent."""
        off = self._table.get(mq)
        if off is None:
            return True
        try:
            await self._update_consumer_offset_oneway(mq, off)
        except Exception as e:  # noqa: BLE001 - any failure of one broker: the next persist tries again
            log.warning("persisting offset %d of %s failed: %s", off, mq, e)
            return False
        return True

    async def _update_consumer_offset_oneway(self, mq: MessageQueue, offset: int) -> None:
        """updateConsumeOffsetToBroker(mq, offset, true): written to the broker's connection, no answer
        waited for. Only an address that cannot be found or a connection that cannot be made or
        written to fails it."""
        instance = self._backend.instance
        addr = await instance.find_broker_addr(mq)
        header = UpdateConsumerOffsetRequestHeader(consumer_group=self._backend.group, topic=mq.topic,
                                                   queue_id=mq.queue_id, commit_offset=offset)
        await instance.invoke_oneway(addr, RequestCode.UPDATE_CONSUMER_OFFSET, header)

    def remove(self, mq: MessageQueue) -> None:
        self._table.pop(mq, None)


class OffsetStore(Protocol):
    """What the rebalancer and the push consumer need of an offset store (remote or local file)."""

    def update(self, mq: MessageQueue, offset: int, increase_only: bool = True) -> None: ...

    def read_memory(self, mq: MessageQueue) -> int | None: ...

    async def read_store(self, mq: MessageQueue) -> int | None: ...

    async def persist(self, mq: MessageQueue) -> None: ...

    async def persist_all(self, mqs: set[MessageQueue] | None = None) -> None: ...

    def remove(self, mq: MessageQueue) -> None: ...
