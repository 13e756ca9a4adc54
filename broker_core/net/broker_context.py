"""What every broker request handler shares: the Broker, a worker pool for its blocking calls, the
per-request ACL context, and the "re-register with the name servers now" step.

Why: handlers stay one-liners over Broker calls; how a call leaves the event loop (a worker thread,
because the store writes and fsyncs; the workers are shared round-robin by connection, see
``fair_pool``) and how a request's identity becomes a ``RequestContext`` is decided once here.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from typing import ParamSpec, TypeVar

from broker_core.broker.broker import Broker
from broker_core.broker.request_context import RequestContext
from broker_core.remoting import RemotingCommand

from .channel import Channel
from .fair_pool import FairPool

P = ParamSpec("P")
T = TypeVar("T")
BrokerHandler = Callable[[Channel, RemotingCommand, RequestContext], Awaitable[RemotingCommand | None]]
"""A broker request handler: the request plus the caller's authenticated identity for authorization."""


class BrokerContext:
    def __init__(self, broker: Broker, workers: int = 8,
                 register: Callable[[], Awaitable[None]] | None = None) -> None:
        self.broker = broker
        self.pool = FairPool(workers, "remoting-broker")
        self._register = register

    async def run(self, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        """Run a (possibly blocking) Broker call on a worker thread, taking turns with other connections."""
        return await self.pool.run(functools.partial(fn, *args, **kwargs))

    async def register_now(self) -> None:
        """Push the topic table to every name server before answering (spec F.1 "Must also")."""
        if self._register is not None:
            await self._register()

    def close(self) -> None:
        self.pool.shutdown()
