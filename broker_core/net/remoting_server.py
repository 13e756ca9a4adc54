"""The asyncio remoting server shared by the name server and the broker.

Why one server: framing, dispatch by request code, oneway handling, errors-to-response-codes and the
hostile-input policy are the same for both; each side only supplies a table ``code -> handler``.
Hostile input never takes the server down: an oversize frame, a header that does not decode, a
peer idle past ``idle_timeout`` (e.g. a half-sent frame that never completes) or a connection over
``max_connections`` closes *that* connection with one log line; every other client goes on.

Nor can one connection starve the others: each loop turn takes at most ``max_dispatch_per_turn``
requests from a connection (the rest wait in its buffer, and its socket is not read meanwhile, so
TCP pushes back), and blocking Broker calls take turns per connection (``fair_pool``). A client
pipelining 20,000 requests made another client wait seconds when a whole 256 KiB read (~1,500
requests) was dispatched at once and queued ahead of everyone in one FIFO.

Nor can a client that sends but never reads make the server hold its answers without bound: while
the transport's write buffer is over its high-water mark (asyncio's ``pause_writing``) that
connection is neither read nor dispatched (50,000 pipelined requests queued ~9 MB of answers and
growing before), and it goes on when the peer reads again.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from collections.abc import Awaitable, Callable, Collection, Mapping
from dataclasses import dataclass
from typing import cast

from broker_core.auth.errors import AuthError
from broker_core.broker.errors import BrokerError
from broker_core.remoting import (
    DEFAULT_FRAME_MAX_LENGTH,
    FrameDecoder,
    FrameError,
    RemotingCommand,
    RequestCode,
    ResponseCode,
)
from broker_core.remoting.codes import V5_3_1
from broker_core.remoting.errors import RequestDecodeError

from . import fd_limit
from .channel import Channel
from .fair_pool import ANSWER_EXPECTED, CURRENT_CONNECTION, CURRENT_REQUEST_CODE

log = logging.getLogger("rmqops.net")

Handler = Callable[[Channel, RemotingCommand], Awaitable[RemotingCommand | None]]
"""Answers one request; returns the response (ignored for oneway requests) or None for no answer."""
PreHandler = Callable[[Channel, RemotingCommand], Awaitable[RemotingCommand | None]]
"""Runs before the handler (ACL pipeline); a returned command is the answer and the handler is skipped."""


class RequestError(Exception):
    """A handler's refusal with a response code and remark (errors that are not the Broker's)."""

    def __init__(self, code: int, remark: str) -> None:
        super().__init__(remark)
        self.code = code
        self.remark = remark


@dataclass(slots=True)
class ServerConfig:
    """RocketMQ's netty server settings that matter here (names from NettyServerConfig / system properties)."""

    frame_max_length: int = DEFAULT_FRAME_MAX_LENGTH  # com.rocketmq.remoting.frameMaxLength
    idle_timeout: float = 120.0  # serverChannelMaxIdleTimeSeconds; 0 = idle connections stay open
    max_connections: int = 10_000
    max_inflight_per_connection: int = 1024  # at this, stop reading that connection until answers go out
    max_dispatch_per_turn: int = 16  # requests taken from one connection per event-loop turn (fairness)


class _Connection(asyncio.Protocol):
    def __init__(self, server: RemotingServer) -> None:
        self.server = server
        self.decoder = FrameDecoder(server.config.frame_max_length)
        self.channel: Channel | None = None
        self._idle: asyncio.TimerHandle | None = None
        self._reason: str | None = None
        self._transport: asyncio.BaseTransport | None = None
        self.inflight = 0
        self._paused = False
        self._backlog = False  # the decoder may hold complete frames not dispatched yet
        self._write_paused = False  # the peer is not reading its answers: neither read nor dispatch
        self._drain_handle: asyncio.Handle | None = None
        # requests of ``RemotingServer.cancel_on_loss`` codes still running: cancelled when the peer is gone
        self.parked: set[asyncio.Task[None]] = set()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        loop = self.server.loop
        self._transport = transport
        # uvloop's transports are not asyncio.Transport subclasses but have the same methods
        ch = self.channel = Channel(cast(asyncio.Transport, transport), loop)
        srv = self.server
        if len(srv.channels) >= srv.config.max_connections:
            self._reject(f"{len(srv.channels)} connections open, the limit is {srv.config.max_connections}")
            return
        srv.channels.add(ch)
        self._arm_idle()
        sock = transport.get_extra_info("socket")
        if sock is not None:
            fd_limit.WATCH.accepted(sock.fileno())  # a warning when open files near RLIMIT_NOFILE

    def _arm_idle(self) -> None:
        if self._idle is not None:
            self._idle.cancel()
        if self.server.config.idle_timeout <= 0:  # 0: never closed for idleness (Netty's IdleStateHandler with 0)
            return
        self._idle = self.server.loop.call_later(self.server.config.idle_timeout, self._check_idle)

    def _check_idle(self) -> None:
        ch = self.channel
        if ch is None or ch.closed:
            return
        idle = self.server.loop.time() - ch.last_activity
        timeout = self.server.config.idle_timeout
        if idle + 0.001 < timeout:
            self._idle = self.server.loop.call_later(timeout - idle, self._check_idle)
            return
        extra = f" with {self.decoder.pending} bytes of an unfinished frame" if self.decoder.pending else ""
        self._reject(f"idle for {timeout:g}s{extra}")

    def _reject(self, reason: str) -> None:
        ch = self.channel
        assert ch is not None
        if self._reason is None:
            self._reason = reason
            log.warning("%s: closing connection %s: %s", self.server.name, ch.remote_addr, reason)
        ch.close()

    def data_received(self, data: bytes) -> None:
        ch = self.channel
        if ch is None or ch.closed or self._reason is not None:
            return
        ch.last_activity = self.server.loop.time()
        self._drain(data)

    def _drain(self, data: bytes = b"") -> None:
        """Dispatch this connection's next few requests. Why a few: the ready queue is FIFO, so
        everything dispatched now runs before any other client's next request; taking at most
        ``max_dispatch_per_turn`` (and never past ``max_inflight_per_connection``) and coming back on
        a later turn interleaves a pipelining client with the others instead of running ahead of them."""
        self._drain_handle = None
        ch = self.channel
        if ch is None or ch.closed or self._reason is not None:
            return
        cfg = self.server.config
        room = 0 if self._write_paused else \
            max(0, min(cfg.max_dispatch_per_turn, cfg.max_inflight_per_connection - self.inflight))
        try:
            commands = self.decoder.feed(data, max_commands=room)
        except FrameError as e:
            self._reject(str(e))
            return
        for cmd in commands:
            if cmd.is_response:
                ch.complete(cmd)
            else:
                self.inflight += 1
                self.server.dispatch(ch, cmd, self)
        self._backlog = len(commands) >= room  # capped: more complete frames may be buffered
        if self._backlog and self.inflight < cfg.max_inflight_per_connection and not self._write_paused:
            self._schedule_drain()
        # backpressure: a client that only sends cannot queue unbounded work
        self._set_reading(not self._backlog and not self._write_paused)

    def _schedule_drain(self) -> None:
        if self._drain_handle is None:
            self._drain_handle = self.server.loop.call_soon(self._drain)

    def _set_reading(self, on: bool) -> None:
        if on == (not self._paused) or self.channel is None or self.channel.closed:
            return
        self._paused = not on
        transport = cast(asyncio.ReadTransport, self._transport)
        if on:
            transport.resume_reading()
        else:
            transport.pause_reading()

    def request_done(self) -> None:
        self.inflight -= 1
        if self._backlog and self.inflight < self.server.config.max_inflight_per_connection \
                and not self._write_paused:
            self._schedule_drain()  # an answer went out: room for the frames still buffered

    def pause_writing(self) -> None:
        """The peer's answers pile up in the write buffer (over its high-water mark): stop taking its requests."""
        self._write_paused = True
        self._set_reading(False)

    def resume_writing(self) -> None:
        """The write buffer drained below its low-water mark: take requests again, buffered ones first."""
        self._write_paused = False
        self._schedule_drain()

    def connection_lost(self, exc: Exception | None) -> None:
        if self._idle is not None:
            self._idle.cancel()
        if self._drain_handle is not None:
            self._drain_handle.cancel()
        ch = self.channel
        if ch is not None:
            self.server.channels.discard(ch)
            ch.closed_by_transport()
        if self.parked:
            # a long-polling pull whose consumer is gone is dropped now, not woken later to read and encode
            # a message for nobody (500 of them, each woken by one 4 MB message, held the loop ~15 s)
            for task in list(self.parked):
                task.cancel()
            self.parked.clear()
        if self.server.on_connection_lost is not None:
            self.server.on_connection_lost(self)


class RemotingServer:
    def __init__(self, name: str, handlers: Mapping[int, Handler], config: ServerConfig | None = None,
                 pre_handler: PreHandler | None = None,
                 on_connection_lost: Callable[[object], object] | None = None,
                 cancel_on_loss: Collection[int] = ()) -> None:
        self.name = name
        self.cancel_on_loss = frozenset(cancel_on_loss)
        """Request codes whose running requests are cancelled when their connection is lost: the ones
        that may stay parked for long (long-polling PULL_MESSAGE, POP_MESSAGE) and whose answer nobody
        would read. Other requests run to their end (a send is stored even if its producer hung up)."""
        self.on_connection_lost = on_connection_lost
        """Told of each connection that is gone (the key its requests wait under: ``CURRENT_CONNECTION``)."""
        self.handlers = dict(handlers)
        self.config = config or ServerConfig()
        self.pre_handler = pre_handler
        self.channels: set[Channel] = set()
        self._server: asyncio.base_events.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self.port = 0
        self.shutting_down = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._fd_check: asyncio.TimerHandle | None = None

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        assert self._loop is not None
        return self._loop

    async def start(self, host: str, port: int, sock: socket.socket | None = None) -> int:
        """Listen on host:port (0 = a free port) or on an already bound ``sock``; returns the bound port."""
        self._loop = asyncio.get_running_loop()
        if sock is not None:
            self._server = await self._loop.create_server(lambda: _Connection(self), sock=sock, backlog=1024)
        else:
            self._server = await self._loop.create_server(lambda: _Connection(self), host, port, reuse_address=True,
                                                          backlog=1024)
        self.port = self._server.sockets[0].getsockname()[1]
        self._fd_check = self._loop.call_later(fd_limit.CHECK_INTERVAL_S, self._check_fds)
        return self.port

    def _check_fds(self) -> None:
        """At RLIMIT_NOFILE no connection is made (the loop closes it unseen), so look now and then too."""
        fd_limit.WATCH.check()
        if not self.shutting_down:
            self._fd_check = self.loop.call_later(fd_limit.CHECK_INTERVAL_S, self._check_fds)

    async def stop(self) -> None:
        self.shutting_down = True
        if self._fd_check is not None:
            self._fd_check.cancel()
        if self._server is not None:
            self._server.close()
        for ch in list(self.channels):
            ch.close()
        if self._tasks:
            for t in list(self._tasks):
                t.cancel()
            await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._server is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 2)

    def dispatch(self, ch: Channel, cmd: RemotingCommand, conn: _Connection) -> None:
        task = self.loop.create_task(self._handle(ch, cmd, conn))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        if cmd.code in self.cancel_on_loss and not cmd.is_oneway:
            conn.parked.add(task)
            task.add_done_callback(conn.parked.discard)

    async def _handle(self, ch: Channel, cmd: RemotingCommand, conn: _Connection) -> None:
        CURRENT_CONNECTION.set(conn)  # this task's own context: worker threads are shared by turns per connection
        CURRENT_REQUEST_CODE.set(cmd.code)
        ANSWER_EXPECTED.set(not cmd.is_oneway)
        try:
            response = await self.process(ch, cmd)
        finally:
            conn.request_done()
        if response is not None and not cmd.is_oneway:
            response.opaque = cmd.opaque
            response.flag |= 0x1
            response.serialize_type = cmd.serialize_type
            ch.write(response)

    async def process(self, ch: Channel, cmd: RemotingCommand) -> RemotingCommand | None:
        """The answer to one request (spec A.5), before the oneway rule is applied."""
        if self.shutting_down and cmd.version > V5_3_1:  # older clients do not know GO_AWAY
            return cmd.response(ResponseCode.GO_AWAY, "please go away")
        handler = self.handlers.get(cmd.code)
        if handler is None:
            return cmd.response(ResponseCode.REQUEST_CODE_NOT_SUPPORTED, f" request type {cmd.code} not supported")
        try:
            if self.pre_handler is not None:
                refused = await self.pre_handler(ch, cmd)
                if refused is not None:
                    return refused
            return await handler(ch, cmd)
        except asyncio.CancelledError:
            raise
        except RequestDecodeError as e:  # a header field or body that does not read as its type (any handler)
            return cmd.response(ResponseCode.SYSTEM_ERROR, str(e))
        except (RequestError, BrokerError, AuthError) as e:  # each carries RocketMQ's response code
            return cmd.response(e.code, e.remark)
        except Exception as e:
            log.exception("%s: %s from %s failed", self.name, RequestCode.name_of(cmd.code), ch.remote_addr)
            return cmd.response(ResponseCode.SYSTEM_ERROR, f"{type(e).__name__}: {e}")
