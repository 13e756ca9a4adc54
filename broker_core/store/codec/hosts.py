"""Socket addresses as records store them: raw IPv4/IPv6 bytes followed by an i32 port."""

from __future__ import annotations

import ipaddress
import socket
from functools import lru_cache

Host = tuple[str, int]


@lru_cache(maxsize=4096)
def encode_host(host: Host) -> bytes:
    ip, port = host
    if ":" in ip:
        raw = socket.inet_pton(socket.AF_INET6, ip)
    else:
        raw = socket.inet_aton(ip)
    return raw + port.to_bytes(4, "big", signed=True)


def is_ipv6(host: Host) -> bool:
    return ":" in host[0]


def decode_host(raw: bytes | memoryview) -> Host:
    return _decode_host(bytes(raw))


@lru_cache(maxsize=4096)
def _decode_host(raw: bytes) -> Host:
    """Cached: every decoded record carries two hosts and a store sees few distinct ones."""
    if len(raw) == 8:
        return socket.inet_ntoa(raw[:4]), int.from_bytes(raw[4:], "big", signed=True)
    return socket.inet_ntop(socket.AF_INET6, raw[:16]), int.from_bytes(raw[16:], "big", signed=True)


def format_host(host: Host) -> str:
    """``ip:port`` the way Java prints a socket address (no brackets, ``::1``-style compression)."""
    ip, port = host
    if ":" in ip:
        ip = str(ipaddress.IPv6Address(ip))
    return f"{ip}:{port}"


def parse_host(text: str) -> Host:
    """Accept ``ip:port``, ``[v6]:port`` and Java's unbracketed ``v6:port``."""
    text = text.strip()
    if text.startswith("["):
        ip, _, port = text[1:].partition("]:")
        return ip, int(port)
    ip, _, port = text.rpartition(":")
    if not ip:
        raise ValueError(f"not an address with a port: {text!r}")
    ipaddress.ip_address(ip)
    return ip, int(port)
