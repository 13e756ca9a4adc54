"""A real Broker with the gRPC v2 endpoint on 127.0.0.1 (free port), and the official Python client
run in child processes (it cannot share a process with nothing else here, and it writes its logs
under $HOME, which each run points at a temporary directory)."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import grpc
import pytest

from broker_core.broker.broker import Broker
from broker_core.broker.broker_config import BrokerConfig
from broker_core.net.grpc_v2.server import GrpcEndpoint, GrpcServerConfig
from broker_core.net.grpc_v2.stubs import service_pb2_grpc

SCENARIOS = Path(__file__).with_name("client_scenarios.py")


@dataclass
class RunningGrpcBroker:
    broker: Broker
    endpoint: GrpcEndpoint
    port: int
    home: Path

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def client_log(self) -> str:
        """What the official client logged (it reports refused RPCs with their status code there)."""
        logs = self.home / "logs" / "rocketmq_python"
        return "\n".join(p.read_text(errors="replace") for p in sorted(logs.glob("*.log"))) if logs.is_dir() else ""

    def client(self, scenario: str, *, limit: float = 90, **args: object) -> dict:
        return run_scenario(self.address, self.home, scenario, limit=limit, **args)


def run_scenario(address: str, home: Path, scenario: str, *, limit: float = 90, **args: object) -> dict:
    """Run one official-client scenario in a child process; its last stdout line is JSON."""
    env = dict(os.environ, HOME=str(home), PYTHONPATH=str(Path(__file__).resolve().parents[2]))
    proc = subprocess.run([sys.executable, str(SCENARIOS), scenario, address, json.dumps(args)],
                          capture_output=True, text=True, timeout=limit, env=env)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if proc.returncode != 0 or not lines:
        raise AssertionError(f"client scenario {scenario} failed (rc={proc.returncode}):\n"
                             f"stdout: {proc.stdout[-3000:]}\nstderr: {proc.stderr[-3000:]}")
    return json.loads(lines[-1])


def start_grpc_broker(store: Path, home: Path, props: dict[str, str] | None = None,
                      channel_expired_ms: int | None = None, port: int = 0) -> RunningGrpcBroker:
    """``channel_expired_ms``: a shorter client expiry than the 120 s default (clients that stop sending
    heartbeats). ``port``: a fixed port (a broker restarted where its clients will reconnect), else a free one."""
    config = BrokerConfig.from_properties({"transactionTimeOut": "3000", "transactionCheckInterval": "1000",
                                           **(props or {})}, store)
    broker = Broker(store, config).start()
    server_config = GrpcServerConfig.from_broker_config(config, port=port)
    if channel_expired_ms is not None:
        server_config = dataclasses.replace(server_config, channel_expired_ms=channel_expired_ms)
    endpoint = GrpcEndpoint(broker, server_config)
    loop = asyncio.new_event_loop()
    started = threading.Event()
    failure: list[BaseException] = []

    def run() -> None:
        asyncio.set_event_loop(loop)
        try:
            loop.run_until_complete(endpoint.start())
        except BaseException as e:  # pragma: no cover - reported below
            failure.append(e)
            started.set()
            return
        started.set()
        loop.run_forever()

    thread = threading.Thread(target=run, name="grpc-test-loop", daemon=True)
    thread.start()
    started.wait(30)
    if failure:
        broker.shutdown()
        raise failure[0]
    running = RunningGrpcBroker(broker, endpoint, endpoint.port, home)
    running._loop, running._thread = loop, thread  # type: ignore[attr-defined]
    return running


def stop_grpc_broker(running: RunningGrpcBroker) -> None:
    loop = running._loop  # type: ignore[attr-defined]
    asyncio.run_coroutine_threadsafe(running.endpoint.stop(0.5), loop).result(30)
    loop.call_soon_threadsafe(loop.stop)
    running._thread.join(30)  # type: ignore[attr-defined]
    running.broker.shutdown()


@contextmanager
def grpc_broker_running(root: Path, props: dict[str, str] | None = None) -> Iterator[RunningGrpcBroker]:
    """A broker and its gRPC endpoint on ``root``/store (``root``/home for the official client's logs),
    stopped however the block ends."""
    home = root / "home"
    home.mkdir(exist_ok=True)
    running = start_grpc_broker(root / "store", home, props)
    try:
        yield running
    finally:
        stop_grpc_broker(running)


def messaging_stub(running: RunningGrpcBroker) -> service_pb2_grpc.MessagingServiceStub:
    """A raw MessagingService stub on the endpoint: requests the official clients would never send."""
    return service_pb2_grpc.MessagingServiceStub(grpc.insecure_channel(running.address))


@pytest.fixture
def grpc_broker(tmp_path: Path) -> Iterator[RunningGrpcBroker]:
    with grpc_broker_running(tmp_path) as running:
        yield running
