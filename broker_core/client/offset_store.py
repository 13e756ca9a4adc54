"""Consumer offsets kept on the broker (cluster mode), cached in memory between persists.

Why a cache: a push consumer commits after every consumed batch; sending each commit would double the
traffic, so commits update memory and a timer (and shutdown/rebalance) persists them with
UPDATE_CONSUMER_OFFSET, as RocketMQ's RemoteBrokerOffsetStore does.
"""

from __future__ import annotations

import logging
from typing import Protocol

from broker_core.remoting.bodies import MessageQueue

log = logging.getLogger(__name__)


class OffsetBackend(Protocol):
    async def query_consumer_offset(self, mq: MessageQueue) -> int | None:
        """The stored offset, None when the broker has none (QUERY_NOT_FOUND)."""
        ...

    async def update_consumer_offset(self, mq: MessageQueue, offset: int) -> None: ...


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
        self._persisted: dict[MessageQueue, int] = {}

    async def read_store(self, mq: MessageQueue) -> int | None:
        off = await self._backend.query_consumer_offset(mq)
        if off is not None:
            self.update(mq, off, increase_only=False)
            self._persisted[mq] = off
        return off

    async def persist(self, mq: MessageQueue) -> None:
        """Send ``mq``'s offset if it moved since the last send. A failure is logged, not raised, as
        Java's persist does: a dead broker's queue must not stop a rebalance from dropping the other
        queues of that broker (one was let go per 20 s round) nor the offsets of every other queue."""
        off = self._table.get(mq)
        if off is not None and self._persisted.get(mq) != off:
            try:
                await self._backend.update_consumer_offset(mq, off)
            except Exception as e:  # noqa: BLE001 - any failure of one broker: the next persist tries again
                log.warning("persisting offset %d of %s failed: %s", off, mq, e)
                return
            self._persisted[mq] = off

    async def persist_all(self, mqs: set[MessageQueue] | None = None) -> None:
        for mq in list(self._table):
            if mqs is None or mq in mqs:
                await self.persist(mq)

    def remove(self, mq: MessageQueue) -> None:
        self._table.pop(mq, None)
        self._persisted.pop(mq, None)


class OffsetStore(Protocol):
    """What the rebalancer and the push consumer need of an offset store (remote or local file)."""

    def update(self, mq: MessageQueue, offset: int, increase_only: bool = True) -> None: ...

    def read_memory(self, mq: MessageQueue) -> int | None: ...

    async def read_store(self, mq: MessageQueue) -> int | None: ...

    async def persist(self, mq: MessageQueue) -> None: ...

    async def persist_all(self, mqs: set[MessageQueue] | None = None) -> None: ...

    def remove(self, mq: MessageQueue) -> None: ...
