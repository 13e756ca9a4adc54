"""What every broker request handler shares: the Broker, the worker pools for its blocking calls, the
per-request ACL context, and the "re-register with the name servers now" step.

Why: handlers stay one-liners over Broker calls; how a call leaves the event loop (a worker thread,
because the store writes and fsyncs; each lane's workers are shared round-robin by connection, see
``fair_pool``) and how a request's identity becomes a ``RequestContext`` is decided once here.

Why lanes: Apache runs sends, pulls, client management and admin requests on executors of their own
(``BrokerController.registerProcessor``: sendMessageExecutor, pullMessageExecutor, ...), so no flood of
one kind delays another. With one shared pool, 2,000 slow GET_BROKER_RUNTIME_INFOs held a producer's
send for ~30 s. The request code picks the lane (``CURRENT_REQUEST_CODE``, set by the server for each
request's task); a code not listed is admin work.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable, Collection
from typing import ParamSpec, TypeVar

from broker_core.broker.broker import Broker
from broker_core.broker.request_context import RequestContext
from broker_core.remoting import RemotingCommand, RequestCode

from .channel import Channel
from .fair_pool import CURRENT_REQUEST_CODE, FairPool

P = ParamSpec("P")
T = TypeVar("T")
BrokerHandler = Callable[[Channel, RemotingCommand, RequestContext], Awaitable[RemotingCommand | None]]
"""A broker request handler: the request plus the caller's authenticated identity for authorization."""

RC = RequestCode
LANE_OF_CODE: dict[int, str] = {
    # sendMessageExecutor (+ endTransaction's and reply's): a send holds its worker until it is stored
    # (and flushed, SYNC_FLUSH), so this lane has as many workers as the one shared pool had
    **dict.fromkeys((RC.SEND_MESSAGE, RC.SEND_MESSAGE_V2, RC.SEND_BATCH_MESSAGE, RC.CONSUMER_SEND_MSG_BACK,
                     RC.END_TRANSACTION, RC.SEND_REPLY_MESSAGE, RC.SEND_REPLY_MESSAGE_V2), "send"),
    # pullMessageExecutor and ackMessageExecutor: 4.x pull and 5.x pop, ack and invisible time
    **dict.fromkeys((RC.PULL_MESSAGE, RC.POP_MESSAGE, RC.ACK_MESSAGE, RC.BATCH_ACK_MESSAGE,
                     RC.CHANGE_MESSAGE_INVISIBLETIME, RC.NOTIFICATION, RC.POLLING_INFO), "pull"),
    # heartbeatExecutor, clientManageExecutor, consumerManageExecutor: what keeps clients online and
    # their offsets moving (a missed heartbeat window drops a consumer and rebalances its group)
    **dict.fromkeys((RC.HEART_BEAT, RC.UNREGISTER_CLIENT, RC.CHECK_CLIENT_CONFIG, RC.GET_CONSUMER_LIST_BY_GROUP,
                     RC.QUERY_CONSUMER_OFFSET, RC.UPDATE_CONSUMER_OFFSET), "client"),
}
LANE_WORKERS = {"send": 8, "pull": 8, "client": 4, "admin": 4}
"""Threads a lane. The calls hold the GIL for their Python work and release it for file I/O and fsync, so
more threads than this would only queue on the GIL; send keeps the 8 the one pool had (SYNC_FLUSH sends
wait in their worker for the group commit, which batches every waiting send into one fsync)."""


class BrokerContext:
    def __init__(self, broker: Broker, workers: int | None = None,
                 register: Callable[[Collection[str]], Awaitable[None]] | None = None,
                 register_all: Callable[[bool], Awaitable[None]] | None = None) -> None:
        """``workers``: one count for every lane (tests), else ``LANE_WORKERS``. ``register(topics)``
        sends the topic changes (and ``topics``) to the name servers, ``register_all(new_version)`` the
        whole topic table."""
        self.broker = broker
        self.pools = {lane: FairPool(workers or n, f"remoting-{lane}") for lane, n in LANE_WORKERS.items()}
        self._register = register
        self._register_all = register_all

    async def run(self, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        """Run a (possibly blocking) Broker call on a worker thread of the current request's lane, taking
        turns with other connections."""
        code = CURRENT_REQUEST_CODE.get()
        pool = self.pools[LANE_OF_CODE.get(code, "admin") if code is not None else "admin"]
        return await pool.run(functools.partial(fn, *args, **kwargs))

    def drop_waiting(self, connection: object) -> int:
        """``connection`` is lost: its calls still waiting for a worker that expect an answer end unrun."""
        return sum(pool.drop_waiting(connection) for pool in self.pools.values())

    async def register_now(self, *topics: str) -> None:
        """Push the topic changes not registered yet, and ``topics``, to every name server before
        answering (spec F.1 "Must also"): a route of a topic just created is there when the caller is
        answered. Only these topics (Apache's registerIncrementBrokerData), not the whole table: the
        name servers rewrite every topic of a registration that carries a new DataVersion, and a
        wipeWritePerm of the broker's other topics would be undone."""
        if self._register is not None:
            await self._register(topics)

    async def register_all_now(self, new_version: bool) -> None:
        """Push the whole topic table to every name server before answering. ``new_version``: what the
        routes advertise of every topic changed (brokerPermission), so the registration carries the
        table's new DataVersion and the name servers rewrite every topic (Apache's
        registerBrokerAll after updateBrokerConfig)."""
        if self._register_all is not None:
            await self._register_all(new_version)

    def close(self) -> None:
        for pool in self.pools.values():
            pool.shutdown()
