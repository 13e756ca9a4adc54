"""Hostile input: each bad connection is closed with one log line, the server and other clients go on."""

from __future__ import annotations

import logging
import socket
import struct
import threading
import time

import pytest
from harness import Servers
from net_util import RawClient

from broker_core.net.remoting_server import ServerConfig
from broker_core.remoting import RemotingCommand, RequestCode, ResponseCode, encode_frame

LOGGER = "rmqops.net"


@pytest.fixture
def small(tmp_path):
    s = Servers(tmp_path, ServerConfig(frame_max_length=4096, idle_timeout=0.5, max_connections=400))
    try:
        yield s
    finally:
        s.close()


def closing_lines(caplog, count: int, timeout: float = 10.0) -> list[str]:
    deadline = time.time() + timeout
    while time.time() < deadline:
        lines = [r.getMessage() for r in caplog.records if r.name == LOGGER and "closing connection" in r.getMessage()]
        if len(lines) >= count:
            return lines
        time.sleep(0.02)
    return [r.getMessage() for r in caplog.records if r.name == LOGGER and "closing connection" in r.getMessage()]


def healthy(addr: str) -> bool:
    c = RawClient(addr)
    try:
        return c.call(RequestCode.GET_BROKER_RUNTIME_INFO).code == ResponseCode.SUCCESS
    finally:
        c.close()


@pytest.mark.parametrize("payload, expect", [
    (struct.pack(">i", 5000), "length 5000 exceeds the frame limit 4096"),
    (struct.pack(">ii", 12, 8) + b"not json", "JSON header is not valid UTF-8 JSON"),
    (struct.pack(">ii", 2, 0), "below the 4-byte header mark"),
    (struct.pack(">ii", 30, (1 << 24) | 26) + b"\0" * 26, "ROCKETMQ header"),
])
def test_bad_frames_close_only_that_connection(small, caplog, payload, expect):
    caplog.set_level(logging.WARNING, LOGGER)
    good = RawClient(small.namesrv_addr)
    bad = RawClient(small.namesrv_addr)
    try:
        assert good.call(RequestCode.GET_BROKER_CLUSTER_INFO).code == ResponseCode.SUCCESS
        bad.send_raw(payload)
        assert bad.closed_by_peer()
        lines = closing_lines(caplog, 1)
        assert len(lines) == 1 and expect in lines[0] and "namesrv" in lines[0]
        assert good.call(RequestCode.GET_BROKER_CLUSTER_INFO).code == ResponseCode.SUCCESS
    finally:
        good.close()
        bad.close()


def test_half_frame_is_closed_after_the_idle_timeout(small, caplog):
    caplog.set_level(logging.WARNING, LOGGER)
    _, _, addr = small.add_broker()
    half = RawClient(addr)
    try:
        half.send_raw(struct.pack(">ii", 200, 100) + b'{"code":')
        start = time.monotonic()
        assert half.closed_by_peer(5)
        assert 0.3 < time.monotonic() - start < 4
        (line,) = [ln for ln in closing_lines(caplog, 1) if ln.startswith("broker:")]
        assert "idle for 0.5s with 16 bytes of an unfinished frame" in line
        assert healthy(addr)
    finally:
        half.close()


def test_many_bad_connections_each_closed_once_while_a_client_goes_on(small, caplog):
    caplog.set_level(logging.WARNING, LOGGER)
    n = 300
    good = RawClient(small.namesrv_addr)
    socks = []
    try:
        for i in range(n):
            s = socket.create_connection(("127.0.0.1", small.namesrv.port), timeout=10)
            socks.append(s)
            s.sendall(struct.pack(">i", 10**9) if i % 2 else struct.pack(">ii", 6, 2) + b"[]")
            if i % 50 == 0:
                assert good.call(RequestCode.GET_BROKER_CLUSTER_INFO).code == ResponseCode.SUCCESS
        for s in socks:
            s.settimeout(10)
            assert s.recv(10) == b""  # closed by the server
        lines = closing_lines(caplog, n)
        assert len(lines) == n  # exactly one line per bad connection
        assert good.call(RequestCode.GET_BROKER_CLUSTER_INFO).code == ResponseCode.SUCCESS
    finally:
        for s in socks:
            s.close()
        good.close()


def test_connections_over_the_limit_are_refused_one_by_one(tmp_path, caplog):
    caplog.set_level(logging.WARNING, LOGGER)
    s = Servers(tmp_path, ServerConfig(max_connections=5))
    clients: list[RawClient] = []
    try:
        clients = [RawClient(s.namesrv_addr) for _ in range(5)]
        assert all(c.call(RequestCode.GET_BROKER_CLUSTER_INFO).code == ResponseCode.SUCCESS for c in clients)
        extra = RawClient(s.namesrv_addr)
        clients.append(extra)
        assert extra.closed_by_peer()
        (line,) = closing_lines(caplog, 1)
        assert "5 connections open, the limit is 5" in line
        assert clients[0].call(RequestCode.GET_BROKER_CLUSTER_INFO).code == ResponseCode.SUCCESS
    finally:
        for c in clients:
            c.close()
        s.close()


def test_a_flood_of_pipelined_requests_is_throttled_not_dropped(tmp_path):
    s = Servers(tmp_path, ServerConfig(max_inflight_per_connection=16))
    flood = RawClient(s.namesrv_addr)
    other = RawClient(s.namesrv_addr)
    try:
        n = 3000
        flood.send_raw(b"".join(encode_frame(RemotingCommand.request(RequestCode.GET_BROKER_CLUSTER_INFO, opaque=i))
                                for i in range(n)))
        assert other.call(RequestCode.GET_BROKER_CLUSTER_INFO).code == ResponseCode.SUCCESS
        got = {flood.recv(10).opaque for _ in range(n)}
        assert got == set(range(n))
    finally:
        flood.close()
        other.close()
        s.close()


def _queued_answer_bytes(servers: Servers) -> int:
    """Bytes the name server's connections hold in their transports' write buffers, read on its loop."""

    async def total() -> int:
        return sum(ch.write_buffer_size for ch in servers.namesrv.server.channels)

    return servers.loop.run(total())


def test_a_client_that_sends_but_never_reads_holds_a_bounded_answer_buffer(tmp_path):
    # A client pipelining requests without reading its answers made the server queue every answer in
    # memory (50,000 requests: ~9 MB and growing); it must stop reading that client instead, as TCP
    # would push back, and still answer everything once the client reads.
    s = Servers(tmp_path)
    flood = RawClient(s.namesrv_addr)
    # small, so TCP pushes back soon, but above the loopback MSS (~64 KiB): a receive buffer below one
    # segment never opens a window the sender may use, and the answers then came by zero-window probes
    # whose backoff made this test take minutes
    flood.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 17)
    other = RawClient(s.namesrv_addr)
    n = 50_000
    frames = b"".join(encode_frame(RemotingCommand.request(RequestCode.GET_BROKER_CLUSTER_INFO, opaque=i))
                      for i in range(n))
    sender = threading.Thread(target=flood.send_raw, args=(frames,), daemon=True)
    try:
        sender.start()
        peak = 0
        deadline = time.monotonic() + 3
        while time.monotonic() < deadline:
            peak = max(peak, _queued_answer_bytes(s))
            time.sleep(0.05)
        assert peak < 1 << 20, f"{peak} bytes of answers queued for a client that does not read"
        assert other.call(RequestCode.GET_BROKER_CLUSTER_INFO).code == ResponseCode.SUCCESS
        got = {flood.recv(10).opaque for _ in range(n)}
        assert got == set(range(n))
        sender.join(10)
    finally:
        flood.close()
        other.close()
        s.close()
