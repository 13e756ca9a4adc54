"""An outgoing remoting connection: what the broker uses to register with name servers.

Why here and not in the client package: the broker's calls to a name server (REGISTER_BROKER,
UNREGISTER_BROKER, spec B.1) are part of running a broker; they need only request/response by
opaque over one connection, which this small class gives on the server's own event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools

from broker_core.remoting import FrameDecoder, FrameError, RemotingCommand, encode_frame

_opaques = itertools.count(1)


class IllegalAddressError(ValueError):
    """A name server address that is not ``host:port`` with a port in [1, 65535]."""


def parse_address(addr: str) -> tuple[str, int]:
    """``host:port`` (``[v6]:port`` too) as NetworkUtil.string2SocketAddress splits it (at the last
    ``:``), with the port checked as InetSocketAddress checks it; IllegalAddressError says what is wrong.
    Port 0 is refused too: nothing can be reached there."""
    text = addr.strip()
    host, sep, port = text.rpartition(":")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    if not sep or not host:
        raise IllegalAddressError(f"{text!r} is not host:port")
    if not (port.isascii() and port.isdigit()) or not 1 <= int(port) <= 65535:
        raise IllegalAddressError(f"{text!r} has no valid port (1-65535)")
    return host, int(port)


def split_addresses(text: str) -> list[str]:
    """``host:port;host:port`` (RocketMQ's namesrvAddr) as a list; blank parts are skipped."""
    return [a.strip() for a in text.split(";") if a.strip()]


def checked_addresses(text: str) -> list[str]:
    """:func:`split_addresses`, every one checked by :func:`parse_address` (IllegalAddressError names the
    first that is not ``host:port``): what a broker is started with and what updateBrokerConfig sets."""
    addrs = split_addresses(text)
    for addr in addrs:
        parse_address(addr)
    return addrs


def failure_reason(e: BaseException, timeout_s: float) -> str:
    """What a warning or remark says after "failed: ": the str() of a TimeoutError (and of some other
    exceptions) is empty, which left the text ending in "failed: " with nothing to go on."""
    text = str(e)
    if text:
        return text
    if isinstance(e, TimeoutError):
        return f"no answer within {timeout_s:g} s"
    return type(e).__name__


class OutboundConnection:
    def __init__(self, addr: str) -> None:
        self.addr = addr
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._pending: dict[int, asyncio.Future[RemotingCommand]] = {}
        self._task: asyncio.Task[None] | None = None

    @property
    def connected(self) -> bool:
        return self._writer is not None and not self._writer.is_closing()

    async def connect(self, timeout: float = 3.0) -> None:
        try:
            host, port = parse_address(self.addr)
        except IllegalAddressError as e:  # an OSError, as every other failure to reach a name server
            raise ConnectionError(f"illegal name server address: {e}") from None
        self._reader, self._writer = await asyncio.wait_for(asyncio.open_connection(host, port), timeout)
        self._task = asyncio.get_running_loop().create_task(self._read_loop(self._reader))

    async def _read_loop(self, reader: asyncio.StreamReader) -> None:
        decoder = FrameDecoder()
        try:
            while data := await reader.read(65536):
                for cmd in decoder.feed(data):
                    fut = self._pending.pop(cmd.opaque, None) if cmd.is_response else None
                    if fut is not None and not fut.done():
                        fut.set_result(cmd)
        except (ConnectionError, FrameError):
            pass
        finally:
            self._fail_pending()

    def _fail_pending(self) -> None:
        for fut in self._pending.values():
            if not fut.done():
                fut.set_exception(ConnectionError(f"connection to {self.addr} closed"))
        self._pending.clear()
        if self._writer is not None:
            self._writer.close()

    async def request(self, cmd: RemotingCommand, timeout: float = 3.0) -> RemotingCommand:
        if not self.connected:
            await self.connect(timeout)
        assert self._writer is not None
        cmd.opaque = next(_opaques)
        fut: asyncio.Future[RemotingCommand] = asyncio.get_running_loop().create_future()
        self._pending[cmd.opaque] = fut
        try:
            self._writer.write(encode_frame(cmd))
            return await asyncio.wait_for(fut, timeout)
        finally:
            self._pending.pop(cmd.opaque, None)

    async def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
            with contextlib.suppress(Exception):
                await self._writer.wait_closed()
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task
