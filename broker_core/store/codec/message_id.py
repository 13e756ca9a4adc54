"""Message ids (spec §3): offset msgIds (store host + commitlog offset) and client UNIQ_KEY ids."""

from __future__ import annotations

import os
import random
import socket
import struct
import threading
import time
from dataclasses import dataclass
from datetime import datetime

from .hosts import Host, decode_host, encode_host

_I64 = struct.Struct(">q")


def create_offset_msg_id(store_host: Host, commit_log_offset: int) -> str:
    return (encode_host(store_host) + _I64.pack(commit_log_offset)).hex().upper()


@dataclass(frozen=True, slots=True)
class OffsetMessageId:
    store_host: Host
    commit_log_offset: int


def decode_offset_msg_id(msg_id: str) -> OffsetMessageId:
    """Split an offset msgId into store address and commitlog offset; ValueError if malformed."""
    text = msg_id.strip().upper()
    if len(text) not in (32, 56):
        raise ValueError(f"not an offset message id (32 or 56 hex chars): {msg_id!r}")
    try:
        raw = bytes.fromhex(text)
    except ValueError as e:
        raise ValueError(f"not an offset message id (not hex): {msg_id!r}") from e
    host_len = 8 if len(raw) == 16 else 20
    return OffsetMessageId(decode_host(raw[:host_len]), _I64.unpack_from(raw, host_len)[0])


@dataclass(frozen=True, slots=True)
class UniqKeyInfo:
    ip: str
    pid: int
    class_loader_hash: int
    time_since_month_start_ms: int
    counter: int


def decode_uniq_key(uniq_key: str) -> UniqKeyInfo:
    """Best-effort decode of a MessageClientIDSetter id (IPv4: 32 hex chars, IPv6: 56)."""
    text = uniq_key.strip()
    if len(text) not in (32, 56):
        raise ValueError(f"not a unique message id (32 or 56 hex chars): {uniq_key!r}")
    raw = bytes.fromhex(text)
    ip_len = 4 if len(raw) == 16 else 16
    ip = socket.inet_ntoa(raw[:4]) if ip_len == 4 else socket.inet_ntop(socket.AF_INET6, raw[:16])
    p = ip_len
    pid = int.from_bytes(raw[p:p + 2], "big")
    cl = int.from_bytes(raw[p + 2:p + 6], "big", signed=True)
    # unsigned, as Java's getNearlyTimeFromID reads it (four zero bytes, then getLong): the generator
    # writes an int that wraps past 2**31 ms, about day 25 of a month
    t = int.from_bytes(raw[p + 6:p + 10], "big")
    counter = int.from_bytes(raw[p + 10:p + 12], "big")
    return UniqKeyInfo(ip, pid, cl, t, counter)


def _start_of_month_ms(now_ms: int) -> int:
    dt = datetime.fromtimestamp(now_ms / 1000).replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    return int(dt.timestamp() * 1000)


class UniqKeyGenerator:
    """Generates ids with MessageClientIDSetter's layout: ip, pid, a per-process constant, time, counter."""

    def __init__(self, ip: str = "127.0.0.1", clock=lambda: int(time.time() * 1000)) -> None:
        ip_raw = socket.inet_pton(socket.AF_INET6, ip) if ":" in ip else socket.inet_aton(ip)
        self._prefix = (ip_raw + (os.getpid() & 0xFFFF).to_bytes(2, "big")
                        + random.getrandbits(31).to_bytes(4, "big")).hex().upper()
        self._clock = clock
        self._lock = threading.Lock()
        self._counter = 0
        self._month_start = 0
        self._next_month_start = 0

    def next_id(self) -> str:
        now = self._clock()
        with self._lock:
            if now >= self._next_month_start or now < self._month_start:
                self._month_start = _start_of_month_ms(now)
                self._next_month_start = _start_of_month_ms(self._month_start + 32 * 86400 * 1000)
            counter = self._counter
            self._counter = (counter + 1) & 0xFFFF
        diff = (now - self._month_start) & 0xFFFFFFFF
        return self._prefix + f"{diff:08X}{counter:04X}"
