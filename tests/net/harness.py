"""In-process servers for the network tests: a name server and brokers on one asyncio loop thread,
on free ports of 127.0.0.1, always stopped at the end of the test."""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import Coroutine
from pathlib import Path
from typing import Any, TypeVar

from broker_core.broker.broker import Broker
from broker_core.broker.broker_config import BrokerConfig
from broker_core.net.broker_server import BrokerRemotingServer
from broker_core.net.namesrv import NameServer, NamesrvConfig
from broker_core.net.remoting_server import ServerConfig

T = TypeVar("T")


class LoopThread:
    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True, name="test-loop")
        self.thread.start()

    def run(self, coro: Coroutine[Any, Any, T], timeout: float = 30) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()


def bound_socket() -> socket.socket:
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)
    sock.setblocking(False)
    return sock


class Servers:
    """One name server plus any number of brokers, each broker on its own store directory."""

    def __init__(self, root: Path, server_config: ServerConfig | None = None,
                 namesrv_config: NamesrvConfig | None = None) -> None:
        self.root = root
        self.server_config = server_config or ServerConfig()
        self.loop = LoopThread()
        self.namesrv = NameServer(namesrv_config or NamesrvConfig(listen_port=0), self.server_config)
        self.loop.run(self.namesrv.start())
        self.namesrv_addr = f"127.0.0.1:{self.namesrv.port}"
        self.brokers: list[tuple[Broker, BrokerRemotingServer]] = []

    def add_broker(self, name: str = "broker-a", props: dict[str, str] | None = None,
                   register_period_ms: int = 30_000) -> tuple[Broker, BrokerRemotingServer, str]:
        sock = bound_socket()
        port = sock.getsockname()[1]
        config = BrokerConfig.from_properties({"brokerName": name, "listenPort": str(port), **(props or {})},
                                              self.root / name)
        broker = Broker(self.root / name, config).start()
        server = BrokerRemotingServer(broker, [self.namesrv_addr], register_period_ms=register_period_ms,
                                      server_config=self.server_config)
        try:
            self.loop.run(server.start(sock=sock))
        except BaseException:
            broker.shutdown()
            raise
        self.brokers.append((broker, server))
        return broker, server, f"127.0.0.1:{port}"

    def close(self) -> None:
        try:
            for broker, server in self.brokers:
                try:
                    self.loop.run(server.stop())
                finally:
                    broker.shutdown()
            self.loop.run(self.namesrv.stop())
        finally:
            self.loop.close()
