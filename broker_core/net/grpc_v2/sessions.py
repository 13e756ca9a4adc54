"""gRPC client sessions: who is connected, with which Settings, and how to reach them.

Why the adapter keeps this (and not the Broker): a gRPC client is identified by its
``x-mq-client-id`` and reached only through its Telemetry stream; Settings, telemetry queues and
auto-renewed receipt handles are protocol state, like upstream's proxy keeps them. What operators
need to see (client id, group, language, version, address) is also reported to the Broker's client
registry when it has one, so mqadmin lists gRPC clients beside remoting ones.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

log = logging.getLogger("rmqops.grpc")

CHANNEL_EXPIRED_MS = 120_000  # channelExpiredTimeout: no heartbeat for this long -> the client is gone
TELEMETRY_BACKLOG = 64  # commands queued for a stream that nobody reads are dropped past this


@dataclass(frozen=True, slots=True)
class GrpcChannel:
    """The client registry's connection handle for a gRPC client (it is reached by client id)."""

    client_id: str


@dataclass
class ClientSession:
    client_id: str
    client_type: int = 0
    group: str = ""
    language: str = "PYTHON"
    version: str = ""
    address: str = ""
    publishing_topics: set[str] = field(default_factory=set)
    subscriptions: dict[str, tuple[int, str]] = field(default_factory=dict)  # topic -> (filter type, expression)
    last_heartbeat_ms: int = 0
    telemetry: list[TelemetryChannel] = field(default_factory=list)
    # Settings were accepted (GrpcClientSettingsManager holds them): until then Heartbeat and
    # NotifyClientTermination do not recognize the client, whatever type their request names
    has_settings: bool = False


class TelemetryChannel:
    """The server->client half of one Telemetry stream: a bounded queue a writer task drains.

    Why bounded and never awaited by producers of commands: a push consumer stops reading its stream
    after the first settings reply (client bug, spec 5.3); a broker thread must never block on it."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.queue: asyncio.Queue[object | None] = asyncio.Queue(TELEMETRY_BACKLOG)
        self.closed = False

    def offer(self, command: object) -> bool:
        """Queue a command from the event loop; False when the stream is closed or backed up."""
        if self.closed:
            return False
        try:
            self.queue.put_nowait(command)
        except asyncio.QueueFull:
            log.warning("telemetry stream backlog full; dropping a server command")
            return False
        return True

    def offer_threadsafe(self, command: object) -> None:
        self.loop.call_soon_threadsafe(self.offer, command)

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            try:
                self.queue.put_nowait(None)
            except asyncio.QueueFull:
                pass


class SessionRegistry:
    """Sessions by client id; safe to read from broker threads (transaction check-back)."""

    def __init__(self, clock: Callable[[], int], expired_ms: int = CHANNEL_EXPIRED_MS) -> None:
        self.clock = clock
        self.expired_ms = expired_ms
        self._sessions: dict[str, ClientSession] = {}
        self._lock = threading.Lock()

    def touch(self, client_id: str, language: str, version: str, address: str) -> ClientSession:
        with self._lock:
            s = self._sessions.get(client_id)
            if s is None:
                s = self._sessions[client_id] = ClientSession(client_id)
            s.language, s.version, s.address = language or s.language, version or s.version, address
            s.last_heartbeat_ms = self.clock()
            return s

    def get(self, client_id: str) -> ClientSession | None:
        with self._lock:
            return self._sessions.get(client_id)

    def remove(self, client_id: str) -> ClientSession | None:
        with self._lock:
            s = self._sessions.pop(client_id, None)
        if s is not None:
            for ch in s.telemetry:
                ch.close()
        return s

    def sessions(self) -> list[ClientSession]:
        with self._lock:
            return list(self._sessions.values())

    def expire(self) -> list[ClientSession]:
        """Drop clients silent for longer than channelExpiredTimeout (``expired_ms``)."""
        now = self.clock()
        with self._lock:
            gone = [s for s in self._sessions.values() if now - s.last_heartbeat_ms > self.expired_ms]
        for s in gone:
            log.info("gRPC client %s expired (no heartbeat for %d s)", s.client_id, self.expired_ms // 1000)
            self.remove(s.client_id)
        return gone

    def producers_of(self, topic: str) -> list[ClientSession]:
        """Live producers that publish ``topic`` and have an open telemetry stream (check-back targets)."""
        with self._lock:
            return [s for s in self._sessions.values()
                    if topic in s.publishing_topics and any(not ch.closed for ch in s.telemetry)]
