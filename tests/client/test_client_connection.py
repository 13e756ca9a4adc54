"""The client connection against misbehaving peers (real sockets on loopback): no hang, clear errors."""

from __future__ import annotations

import asyncio

import pytest

from broker_core.client.connection import (
    RemotingConnectError,
    RemotingConnection,
    RemotingError,
    RemotingTimeoutError,
)
from broker_core.remoting import RemotingCommand, RequestCode, ResponseCode, encode_frame
from broker_core.remoting.frame import FrameDecoder


async def _server(handler) -> tuple[asyncio.Server, str]:
    server = await asyncio.start_server(handler, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    return server, f"127.0.0.1:{port}"


def test_garbage_from_the_peer_fails_pending_calls_and_closes() -> None:
    async def go():
        async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            await reader.read(100)
            writer.write(b"\x00\x00\x00\x02\xff\xff")  # length 2 < the 4-byte header mark
            await writer.drain()
            await asyncio.sleep(1)
            writer.close()

        server, addr = await _server(handler)
        conn = await RemotingConnection.open(addr)
        with pytest.raises(RemotingError, match="closed"):
            await conn.invoke(RemotingCommand.request(RequestCode.HEART_BEAT), timeout=5)
        assert not conn.is_open
        server.close()

    asyncio.run(asyncio.wait_for(go(), 20))


def test_silent_peer_times_out_and_unknown_requests_are_refused() -> None:
    async def go():
        got: list[RemotingCommand] = []

        async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            dec = FrameDecoder()
            # ask the client something it does not serve, then never answer its request
            writer.write(encode_frame(RemotingCommand.request(9999, opaque=77)))
            while data := await reader.read(4096):
                got.extend(dec.feed(data))

        server, addr = await _server(handler)
        conn = await RemotingConnection.open(addr)
        with pytest.raises(RemotingTimeoutError, match="timed out"):
            await conn.invoke(RemotingCommand.request(RequestCode.GET_MAX_OFFSET), timeout=0.5)
        conn.close()
        await conn.wait_closed()
        server.close()
        return got

    got = asyncio.run(asyncio.wait_for(go(), 20))
    answers = [c for c in got if c.is_response]
    assert [(c.opaque, c.code) for c in answers] == [(77, ResponseCode.REQUEST_CODE_NOT_SUPPORTED)]


def test_connect_failure_names_the_address() -> None:
    async def go():
        with pytest.raises(RemotingConnectError, match="127.0.0.1:1"):
            await RemotingConnection.open("127.0.0.1:1")
        with pytest.raises(RemotingConnectError, match="bad address"):
            await RemotingConnection.open("no-port")

    asyncio.run(go())
