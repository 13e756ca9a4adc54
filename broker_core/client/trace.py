"""Message trace (Java's AsyncTraceDispatcher): what a traced producer or consumer did with each
message, written as trace data to RMQ_SYS_TRACE_TOPIC for mqadmin queryMsgTraceById.

Why asynchronous: tracing must not slow the traced send or consume. Contexts are queued and a
background task sends them every ``flush_interval`` seconds, several contexts per trace message (up
to ``max_body`` bytes), through an internal producer of its own group so the trace sends are not
traced themselves. The body layout is the codec's (``broker_core.store.codec.trace_data``); the
trace message is keyed by the traced msgIds and keys, so a key query on the trace topic finds it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import TYPE_CHECKING

from broker_core.store.codec.trace_data import TraceContext, encode_context

from .connection import RemotingError
from .instance import BrokerError, MQClientInstance
from .message import Message
from .tasks import cancel_and_wait

if TYPE_CHECKING:
    from .producer import Producer

log = logging.getLogger(__name__)

RMQ_SYS_TRACE_TOPIC = "RMQ_SYS_TRACE_TOPIC"
TRACE_PRODUCER_GROUP = "_INNER_TRACE_PRODUCER"
DEFAULT_REGION = "DefaultRegion"


class TraceDispatcher:
    """Queues trace contexts and sends them to the trace topic in the background."""

    def __init__(self, instance: MQClientInstance, owner_group: str, trace_topic: str | None = None,
                 flush_interval: float = 0.1, max_body: int = 128 * 1024) -> None:
        self.instance = instance
        self.trace_topic = trace_topic or RMQ_SYS_TRACE_TOPIC
        self.group = f"{TRACE_PRODUCER_GROUP}-{owner_group}"
        self.flush_interval = flush_interval
        self.max_body = max_body
        self._queue: list[TraceContext] = []
        self._producer: Producer | None = None
        self._task: asyncio.Task[None] | None = None
        self._wake = asyncio.Event()

    async def start(self) -> None:
        from .producer import Producer  # the producer module imports this one for its trace hook

        if self._producer is None:
            self._producer = Producer(self.group, self.instance)
            await self._producer.start()
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._loop())

    def append(self, ctx: TraceContext) -> None:
        self._queue.append(ctx)
        if len(self._queue) >= 64:
            self._wake.set()

    async def _loop(self) -> None:
        while True:  # ended only by shutdown()'s cancel, so that cancel must never be lost
            # asyncio.timeout, not wait_for: Python 3.11's wait_for returns the wake-up when the task is
            # cancelled in the turn the wake-up lands, and the loop (and shutdown() waiting for it) ran on
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.flush_interval):
                    await self._wake.wait()
            self._wake.clear()
            await self.flush()

    async def flush(self) -> None:
        """Send everything queued; a failed trace send is logged and dropped (tracing never blocks)."""
        while self._queue and self._producer is not None:
            body: list[str] = []
            keys: list[str] = []
            size = 0
            while self._queue:
                text, ctx_keys = encode_context(self._queue[0])
                if body and size + len(text) > self.max_body:
                    break
                self._queue.pop(0)
                body.append(text)
                keys.extend(ctx_keys)
                size += len(text)
            msg = Message(self.trace_topic, "".join(body).encode("utf-8"), keys=" ".join(dict.fromkeys(keys)))
            try:
                await self._producer.send(msg)
            except (RemotingError, BrokerError) as e:
                log.warning("sending trace data to %s failed: %s", self.trace_topic, e)

    async def shutdown(self) -> None:
        if self._task is not None:
            task, self._task = self._task, None
            await cancel_and_wait(task)  # a cancel of the caller raises here: no flush, no producer shutdown
        await self.flush()
        if self._producer is not None:
            await self._producer.shutdown()
            self._producer = None
