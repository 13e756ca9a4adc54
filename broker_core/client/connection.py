"""One TCP connection to a name server or broker: requests matched to responses by opaque.

Why asyncio protocol callbacks: the benchmark pushes tens of thousands of frames a second through
one connection; ``data_received`` feeds the protocol package's incremental decoder and completes
futures directly, with no reader task hop. The same connection carries requests the broker sends to
us (CHECK_TRANSACTION_STATE, NOTIFY_CONSUMER_IDS_CHANGED...), handed to ``on_request``; their answer,
if not oneway, is written back with the request's opaque.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import Awaitable, Callable

from broker_core.remoting import FrameDecoder, FrameError, RemotingCommand, ResponseCode, encode_frame
from broker_core.remoting.codes import LanguageCode

from .credentials import SessionCredentials

log = logging.getLogger(__name__)

RequestHandler = Callable[["RemotingConnection", RemotingCommand], Awaitable[RemotingCommand | None]]

_opaques = itertools.count(1)


class RemotingError(Exception):
    """A call failed on the client side (connect, timeout, closed connection)."""


class RemotingTimeoutError(RemotingError):
    pass


class RemotingConnectError(RemotingError):
    """No connection to ``addr``; ``reason`` is the OS's answer in words ("connection refused")."""

    def __init__(self, addr: str, reason: str, peer: str = "") -> None:
        super().__init__(f"cannot connect to {peer + ' ' if peer else ''}{addr}: {reason}")
        self.addr = addr
        self.reason = reason


def connect_failure_reason(e: BaseException, timeout: float) -> str:
    """Why a connect failed, as an operator says it: never "[Errno 111] Connect call failed (...)"."""
    import socket

    if isinstance(e, ConnectionRefusedError):
        return "connection refused"
    if isinstance(e, TimeoutError):
        return f"no answer within {timeout:g}s"
    if isinstance(e, socket.gaierror):
        return "unknown host"
    if isinstance(e, OSError) and e.strerror:
        return e.strerror.lower()
    return str(e) or type(e).__name__


class RemotingConnection(asyncio.Protocol):
    def __init__(self, addr: str, on_request: RequestHandler | None = None,
                 credentials: SessionCredentials | None = None,
                 language: LanguageCode = LanguageCode.PYTHON) -> None:
        self.addr = addr
        self._on_request = on_request
        self._credentials = credentials
        self._language = language
        self._decoder = FrameDecoder()
        self._pending: dict[int, asyncio.Future[RemotingCommand]] = {}
        self._transport: asyncio.Transport | None = None
        self._closed = asyncio.Event()
        self._tasks: set[asyncio.Task[None]] = set()

    # -------------------------------------------------------------------- lifecycle
    @classmethod
    async def open(cls, addr: str, on_request: RequestHandler | None = None,
                   credentials: SessionCredentials | None = None, timeout: float = 3.0,
                   language: LanguageCode = LanguageCode.PYTHON) -> RemotingConnection:
        host, _, port = addr.rpartition(":")  # at the last ":", as Apache's client: "::1:9876" is ::1
        if len(host) > 2 and host[0] == "[" and host[-1] == "]":  # "[::1]:9876", which Java's resolver takes
            host = host[1:-1]
        if not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise RemotingConnectError(addr, "bad address (expected host:port, port 1-65535)")
        loop = asyncio.get_running_loop()
        try:
            # asyncio.timeout, not wait_for: Python 3.11's wait_for returns the connection when the caller
            # is cancelled in the turn it is made, so a cancelled open went on with an open connection
            async with asyncio.timeout(timeout):
                _, proto = await loop.create_connection(lambda: cls(addr, on_request, credentials, language),
                                                        host, int(port))
        except (OSError, TimeoutError) as e:
            raise RemotingConnectError(addr, connect_failure_reason(e, timeout)) from None
        return proto

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self._transport = transport

    def connection_lost(self, exc: Exception | None) -> None:
        self._transport = None
        self._closed.set()
        err = RemotingError(f"connection to {self.addr} closed" + (f": {exc}" if exc else ""))
        for fut in self._pending.values():
            if not fut.done():
                fut.set_exception(err)
        self._pending.clear()

    @property
    def is_open(self) -> bool:
        return self._transport is not None and not self._transport.is_closing()

    def close(self) -> None:
        if self._transport is not None:
            self._transport.close()

    async def wait_closed(self) -> None:
        await self._closed.wait()

    # -------------------------------------------------------------------- sending
    def _prepare(self, cmd: RemotingCommand) -> bytes:
        cmd.language = self._language
        if self._credentials is not None and not cmd.is_response:
            cmd.ext_fields = self._credentials.sign(cmd.ext_fields, cmd.body)
        return encode_frame(cmd)

    def _write(self, data: bytes) -> None:
        if self._transport is None or self._transport.is_closing():
            raise RemotingError(f"connection to {self.addr} is closed")
        self._transport.write(data)

    async def invoke(self, cmd: RemotingCommand, timeout: float = 5.0) -> RemotingCommand:
        return await self.wait_response(cmd, self.write_request(cmd), timeout)

    def write_request(self, cmd: RemotingCommand) -> asyncio.Future[RemotingCommand]:
        """Write ``cmd`` now, before this call returns; its response completes the returned future, to
        be awaited with wait_response. Why apart from invoke: a request that must be on the wire ahead
        of any other on this connection (the heartbeat of a new connection) cannot wait for a task to
        get its turn, yet its answer is waited for elsewhere."""
        cmd.opaque = next(_opaques)
        fut: asyncio.Future[RemotingCommand] = asyncio.get_running_loop().create_future()
        self._pending[cmd.opaque] = fut
        try:
            self._write(self._prepare(cmd))
        except BaseException:
            self._pending.pop(cmd.opaque, None)
            raise
        return fut

    async def wait_response(self, cmd: RemotingCommand, fut: asyncio.Future[RemotingCommand],
                            timeout: float) -> RemotingCommand:
        """The response to ``cmd``, written by write_request, within ``timeout`` seconds."""
        try:
            # asyncio.timeout, not wait_for: Python 3.11's wait_for returns the response when the caller
            # is cancelled in the turn it arrives, so a cancelled invoke did not raise CancelledError
            async with asyncio.timeout(timeout):
                return await fut
        except TimeoutError:
            raise RemotingTimeoutError(f"wait response from {self.addr} timed out after {timeout:.1f}s "
                                       f"(code {cmd.code}, opaque {cmd.opaque})") from None
        finally:
            self._pending.pop(cmd.opaque, None)

    def invoke_oneway(self, cmd: RemotingCommand) -> None:
        cmd.opaque = next(_opaques)
        cmd.flag |= 0x2
        self._write(self._prepare(cmd))

    # -------------------------------------------------------------------- receiving
    def data_received(self, data: bytes) -> None:
        try:
            cmds = self._decoder.feed(data)
        except FrameError as e:
            log.warning("closing connection to %s: %s", self.addr, e)
            self.close()
            return
        for cmd in cmds:
            if cmd.is_response:
                fut = self._pending.pop(cmd.opaque, None)
                if fut is not None and not fut.done():
                    fut.set_result(cmd)
                elif fut is None:
                    log.debug("response from %s with unknown opaque %d dropped", self.addr, cmd.opaque)
            else:
                task = asyncio.get_running_loop().create_task(self._serve(cmd))
                self._tasks.add(task)
                task.add_done_callback(self._tasks.discard)

    async def _serve(self, req: RemotingCommand) -> None:
        """Answer a request the peer sent us; unknown codes get REQUEST_CODE_NOT_SUPPORTED."""
        try:
            if self._on_request is None:
                resp: RemotingCommand | None = req.response(ResponseCode.REQUEST_CODE_NOT_SUPPORTED,
                                                            f" request type {req.code} not supported")
            else:
                resp = await self._on_request(self, req)
        except Exception as e:  # the peer gets SYSTEM_ERROR; the connection goes on
            log.exception("handling request code %d from %s failed", req.code, self.addr)
            resp = req.response(ResponseCode.SYSTEM_ERROR, f"{type(e).__name__}: {e}")
        if resp is not None and not req.is_oneway and self.is_open:
            resp.opaque = req.opaque
            resp.language = self._language
            self._write(encode_frame(resp))
