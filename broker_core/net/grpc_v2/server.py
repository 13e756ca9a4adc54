"""The gRPC v2 endpoint as a component of the mqbroker process: start on a loop, stop cleanly.

Why a class around grpc.aio: the broker process owns one asyncio loop for all its endpoints; this
binds the MessagingService to a port (plaintext, or TLS when a certificate and key are configured),
raises grpc's 4 MiB receive limit to a fixed transport bound above the broker's maxMessageSize
(spec §1; the service checks the live maxMessageSize per message), and runs the
housekeeping the protocol needs (auto-renewal of push consumers' messages, expiry of silent
clients) until it is stopped.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import grpc

from broker_core.broker.broker import Broker
from broker_core.broker.broker_config import BrokerConfig

from .cluster_route import ClusterRoutes
from .service import MessagingService
from .sessions import CHANNEL_EXPIRED_MS, GrpcChannel
from .stubs import add_messaging_service

log = logging.getLogger("rmqops.grpc")

HOUSEKEEPING_INTERVAL_S = 1.0
SESSION_SCAN_EVERY = 10  # housekeeping rounds between client expiry scans
RECEIVE_HEADROOM = 4 * 1024 * 1024  # properties and framing beyond the body
# grpc's cap on one inbound request is fixed when the server is built, so it is only the transport's
# generous bound (upstream proxy's grpcMaxInboundMessageSize, 130 MiB, or more for a broker started
# with a larger maxMessageSize). The real limit is the live maxMessageSize, which updateBrokerConfig
# may change at any time: SendMessage checks every body against it (MESSAGE_BODY_TOO_LARGE).
MAX_INBOUND_MESSAGE_SIZE = 130 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class GrpcServerConfig:
    host: str = "127.0.0.1"
    port: int = 8081  # grpcServerPort; 0 picks a free port
    tls_cert: Path | None = None
    tls_key: Path | None = None
    worker_threads: int = 64  # broker calls (long polling parks one while it waits)
    # a client without a heartbeat for this long is gone: its registrations end and the messages it
    # held for auto-renewal go back to its group
    channel_expired_ms: int = CHANNEL_EXPIRED_MS

    @classmethod
    def from_broker_config(cls, config: BrokerConfig, host: str = "127.0.0.1", port: int | None = None
                           ) -> GrpcServerConfig:
        """grpcServerPort / grpcTlsCertPath / grpcTlsKeyPath from the broker's configuration."""
        return cls(host=host, port=config.grpc_server_port if port is None else port,
                   tls_cert=Path(config.grpc_tls_cert_path) if config.grpc_tls_cert_path else None,
                   tls_key=Path(config.grpc_tls_key_path) if config.grpc_tls_key_path else None)


class GrpcEndpoint:
    """``await start()`` inside the process loop; ``port`` is the bound port afterwards."""

    def __init__(self, broker: Broker, config: GrpcServerConfig | None = None,
                 cluster_routes: ClusterRoutes | None = None) -> None:
        """``cluster_routes``: where QueryRoute/QueryAssignment learn the cluster's brokers (the name
        servers); without it they answer with this broker's queues alone."""
        self.broker = broker
        self.config = config or GrpcServerConfig()
        self.executor = ThreadPoolExecutor(self.config.worker_threads, thread_name_prefix="grpc-broker")
        self.cluster_routes = cluster_routes
        self.service = MessagingService(broker, self.executor, cluster_routes=cluster_routes,
                                        channel_expired_ms=self.config.channel_expired_ms)
        self.port = 0
        self._server: grpc.aio.Server | None = None
        self._housekeeping: asyncio.Task[None] | None = None

    async def start(self) -> int:
        limit = max(MAX_INBOUND_MESSAGE_SIZE, self.broker.config.store.max_message_size + RECEIVE_HEADROOM)
        server = grpc.aio.server(options=[("grpc.max_receive_message_length", limit),
                                          ("grpc.max_send_message_length", -1),
                                          ("grpc.so_reuseport", 0)])
        add_messaging_service(self.service, server)
        # gRPC's target syntax brackets an IPv6 literal ("[::1]:8081"; "::1:8081" is a lookup failure)
        host = self.config.host
        address = f"[{host}]:{self.config.port}" if ":" in host and not host.startswith("[") else \
            f"{host}:{self.config.port}"
        cert, key = self.config.tls_cert, self.config.tls_key
        creds: grpc.ServerCredentials | None = None
        if cert is not None or key is not None:
            if cert is None or key is None:
                raise ValueError("gRPC TLS needs both a certificate and a key (grpcTlsCertPath, grpcTlsKeyPath)")
            creds = grpc.ssl_server_credentials([(Path(key).read_bytes(), Path(cert).read_bytes())])
        try:
            self.port = server.add_secure_port(address, creds) if creds is not None else \
                server.add_insecure_port(address)
        except RuntimeError as e:  # grpcio raises (older versions answered port 0) on a port in use
            raise OSError(f"cannot listen for gRPC on {address}: {e}") from None
        if self.port == 0:
            raise OSError(f"cannot listen for gRPC on {address}")
        await server.start()
        self._server = server
        # GET_BROKER_CONFIG's grpcServerPort is where other brokers' routes send gRPC clients of this
        # broker: the port bound, not the configured one (0 = a free port, or the --grpc-port flag)
        self.broker.config.grpc_server_port = self.port
        self.service.attach(asyncio.get_running_loop())
        self._housekeeping = asyncio.ensure_future(self._run_housekeeping())
        log.info("gRPC v2 endpoint listening on %s:%d%s", self.config.host, self.port,
                 " (TLS)" if cert is not None else "")
        return self.port

    async def _run_housekeeping(self) -> None:
        rounds = 0
        while True:
            await asyncio.sleep(HOUSEKEEPING_INTERVAL_S)
            rounds += 1
            try:
                # expiry first: renew_due gives back what an expired client held instead of renewing it
                if rounds % SESSION_SCAN_EVERY == 0:
                    for gone in self.service.sessions.expire():
                        self.broker.client_registry.channel_closed(GrpcChannel(gone.client_id))
                await self.service.renew_due()
            except Exception:
                log.exception("gRPC housekeeping failed")

    async def stop(self, grace_s: float = 1.0) -> None:
        if self._housekeeping is not None:
            self._housekeeping.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._housekeeping
        for session in self.service.sessions.sessions():
            for channel in session.telemetry:
                channel.close()
        if self._server is not None:
            await self._server.stop(grace_s)
            self._server = None
        if self.cluster_routes is not None:
            await self.cluster_routes.close()
        # The Broker shuts down next: wait for calls still running on the workers (long polls wait on
        # the loop, not here, so these are short), without blocking the loop meanwhile.
        await asyncio.to_thread(self.executor.shutdown, wait=True, cancel_futures=True)
