"""A stopping server answers GO_AWAY only to clients that know it (version above V5_3_1), as RocketMQ's
NettyRemotingAbstract does; an older client gets its request served, since GO_AWAY would read to it as an
unknown error code."""

from __future__ import annotations

import asyncio
import dataclasses
from typing import cast

from broker_core.net.channel import Channel
from broker_core.net.remoting_server import RemotingServer
from broker_core.remoting import RemotingCommand, RequestCode, ResponseCode
from broker_core.remoting.codes import V5_3_1


async def _served(ch: Channel, cmd: RemotingCommand) -> RemotingCommand:
    return cmd.response(remark="served")


def _answer(server: RemotingServer, version: int) -> RemotingCommand | None:
    cmd = dataclasses.replace(RemotingCommand.request(RequestCode.HEART_BEAT), version=version)
    return asyncio.run(server.process(cast(Channel, None), cmd))


def test_go_away_only_for_clients_newer_than_5_3_1() -> None:
    server = RemotingServer("test", {RequestCode.HEART_BEAT: _served})
    assert _answer(server, V5_3_1 + 1).remark == "served"  # running: everyone is served
    server.shutting_down = True
    got = _answer(server, V5_3_1 + 1)
    assert (got.code, got.remark) == (ResponseCode.GO_AWAY, "please go away")
    assert _answer(server, V5_3_1).remark == "served"
