"""Conversions from the store's MessageExt to the Admin interface's MessageRecord.

Why a module: both transports (LocalBrokerClient reading the Broker in process, RemotingBrokerClient
decoding the same stored records from QUERY_MESSAGE / PULL bodies with the shared codec) must present
messages identically.
"""

from __future__ import annotations

import ipaddress

from broker_core.store.codec.compression import BodyDecompressError, decompressed_body
from broker_core.store.codec.message import MessageExt
from broker_core.store.codec.sys_flag import COMPRESSED_FLAG
from mqadmin.transport.base import MessageRecord


def java_host(host: tuple[str, int]) -> str:
    """``ip:port`` as Java prints a socket address: IPv6 in full groups without zero compression."""
    ip, port = host
    if ":" in ip:
        ip = ":".join(f"{g:x}" for g in _groups(ipaddress.IPv6Address(ip)))
    return f"{ip}:{port}"


def _groups(addr: ipaddress.IPv6Address) -> list[int]:
    raw = addr.packed
    return [int.from_bytes(raw[i:i + 2], "big") for i in range(0, 16, 2)]


def to_record(m: MessageExt) -> MessageRecord:
    """Java tools decode with deCompressBody: a body a producer compressed (over 4 KiB, ZLIB, LZ4 or ZSTD)
    is shown as sent, and its SYSFLAG without COMPRESSED_FLAG (MessageDecoder clears it once inflated,
    so Apache's queryMsgById prints ``System Flag: 0``); one that does not decompress keeps both."""
    props = dict(m.properties)
    sys_flag = m.sys_flag
    try:
        body, body_error = decompressed_body(m.body, sys_flag), None
        sys_flag &= ~COMPRESSED_FLAG
    except BodyDecompressError as e:
        body, body_error = bytes(m.body), f"stored compressed, not decompressed: {e}"
    return MessageRecord(
        msg_id=m.msg_id, uniq_key=props.get("UNIQ_KEY"), topic=m.topic, queue_id=m.queue_id,
        queue_offset=m.queue_offset, commit_log_offset=m.commit_log_offset, store_size=m.store_size,
        sys_flag=sys_flag, flag=m.flag, body_crc=m.body_crc, born_timestamp=m.born_timestamp,
        born_host=java_host(m.born_host), store_timestamp=m.store_timestamp,
        store_host=java_host(m.store_host), reconsume_times=m.reconsume_times,
        prepared_transaction_offset=m.prepared_transaction_offset, properties=props, body=body,
        body_error=body_error,
    )
