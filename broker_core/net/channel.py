"""Channel: one TCP connection of a remoting server (Netty's Channel).

Why a class of its own: besides answering requests, a broker *sends* requests to clients over the
connection they opened (CHECK_TRANSACTION_STATE, NOTIFY_CONSUMER_IDS_CHANGED, GET_CONSUMER_RUNNING_INFO,
spec B.9), from broker threads as well as from the event loop. The channel keeps the opaque ->
future table for those and the thread-safe entry points; the client registry keeps channels as the
handle of a live client.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import Callable
from dataclasses import dataclass

from broker_core.remoting import RemotingCommand, encode_frame
from broker_core.remoting.command import FLAG_ONEWAY

log = logging.getLogger("rmqops.net")
_ids = itertools.count(1)
_opaques = itertools.count(1)


class ChannelClosedError(ConnectionError):
    pass


@dataclass(slots=True)
class EncodedCommand(RemotingCommand):
    """A command whose frame was encoded ahead, on a worker thread (``encoded``).

    Why: a pull answer with a 4 MB body copied on the event loop held every other connection (the name
    server's too) for milliseconds per answer; ``Channel.write`` takes these bytes as they are. The frame
    is used only while opaque, flag and serialize type are the ones it was encoded with."""

    frame: bytes = b""
    frame_key: tuple[int, int, int] = (0, 0, 0)


def encoded(cmd: RemotingCommand) -> EncodedCommand:
    """``cmd`` with its frame encoded now (call it off the event loop)."""
    out = EncodedCommand(cmd.code, cmd.opaque, cmd.flag, cmd.remark, cmd.ext_fields, cmd.body, cmd.language,
                         cmd.version, cmd.serialize_type)
    out.frame = encode_frame(out)
    out.frame_key = _frame_key(out)
    return out


def _frame_key(cmd: RemotingCommand) -> tuple[int, int, int]:
    return cmd.opaque, cmd.flag, int(cmd.serialize_type)


def frame_of(cmd: RemotingCommand) -> bytes:
    """The frame of ``cmd``: the one encoded ahead when it still matches, else encoded now."""
    if isinstance(cmd, EncodedCommand) and cmd.frame and cmd.frame_key == _frame_key(cmd):
        return cmd.frame
    return encode_frame(cmd)


class Channel:
    __slots__ = ("id", "remote_addr", "local_addr", "_transport", "_loop", "_pending", "closed", "_on_close",
                 "last_activity", "_out", "_flush_scheduled", "__weakref__")

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop) -> None:
        peer = transport.get_extra_info("peername") or ("?", 0)
        sock = transport.get_extra_info("sockname") or ("?", 0)
        self.remote_addr = f"{peer[0]}:{peer[1]}"
        self.local_addr = f"{sock[0]}:{sock[1]}"
        self.id = f"{self.remote_addr}#{next(_ids)}"
        self._transport = transport
        self._loop = loop
        self._pending: dict[int, asyncio.Future[RemotingCommand]] = {}
        self.closed = False
        self._on_close: list[Callable[[Channel], None]] = []
        self.last_activity = loop.time()
        self._out: list[bytes] = []
        self._flush_scheduled = False

    @property
    def remote_ip(self) -> str:
        return self.remote_addr.rsplit(":", 1)[0]

    @property
    def write_buffer_size(self) -> int:
        """Bytes of answers and requests not yet handed to the kernel (the server's memory for this peer)."""
        return self._transport.get_write_buffer_size() + sum(map(len, self._out))

    def on_close(self, callback: Callable[[Channel], None]) -> None:
        self._on_close.append(callback)

    # -- event-loop side -------------------------------------------------------------------------
    def write(self, cmd: RemotingCommand) -> None:
        """Queue a frame; the frames written during one loop iteration go out in one send (pipelined
        clients get many answers per system call)."""
        if self.closed:
            return
        self._out.append(frame_of(cmd))
        if not self._flush_scheduled:
            self._flush_scheduled = True
            self._loop.call_soon(self._flush)

    def _flush(self) -> None:
        self._flush_scheduled = False
        if self._out and not self.closed:
            data = b"".join(self._out) if len(self._out) > 1 else self._out[0]
            self._out.clear()
            self._transport.write(data)
            self.last_activity = self._loop.time()

    def complete(self, response: RemotingCommand) -> None:
        """A response from the peer to a request we sent; unknown opaques are dropped (spec A.4)."""
        fut = self._pending.pop(response.opaque, None)
        if fut is None:
            log.debug("%s: response with unknown opaque %d dropped", self.remote_addr, response.opaque)
        elif not fut.done():
            fut.set_result(response)

    async def request(self, cmd: RemotingCommand, timeout: float) -> RemotingCommand:
        """Send a request to the peer and await its answer."""
        if self.closed:
            raise ChannelClosedError(f"channel {self.remote_addr} is closed")
        cmd.opaque = next(_opaques)
        fut: asyncio.Future[RemotingCommand] = self._loop.create_future()
        self._pending[cmd.opaque] = fut
        try:
            self.write(cmd)
            async with asyncio.timeout(timeout):
                return await fut
        finally:
            self._pending.pop(cmd.opaque, None)

    def close(self) -> None:
        if not self.closed:
            self._transport.close()

    def closed_by_transport(self) -> None:
        if self.closed:
            return
        self.closed = True
        for fut in self._pending.values():
            if not fut.done():
                fut.set_exception(ChannelClosedError(f"channel {self.remote_addr} closed"))
        self._pending.clear()
        for cb in self._on_close:
            try:
                cb(self)
            except Exception:
                log.exception("channel close listener failed")

    # -- any thread ------------------------------------------------------------------------------
    def send_oneway_threadsafe(self, cmd: RemotingCommand) -> None:
        """Send a oneway request from any thread (broker services run on their own threads)."""
        cmd.flag |= FLAG_ONEWAY
        cmd.opaque = next(_opaques)
        try:
            self._loop.call_soon_threadsafe(self.write, cmd)
        except RuntimeError:  # loop closed: the connection is gone
            pass

    def request_threadsafe(self, cmd: RemotingCommand, timeout: float) -> RemotingCommand:
        """Send a request from a non-loop thread and block for the answer."""
        return asyncio.run_coroutine_threadsafe(self.request(cmd, timeout), self._loop).result(timeout + 1)
