"""decodeMessageId: what a message id says about its producer (no store or network needed).

Why a module: the CLI decodes ids without opening any target (mqadmin's DecodeMessageId connects to
nothing), and Admin.decode_message_id answers the same question over any transport.
"""

from __future__ import annotations

from collections.abc import Callable

from broker_core.store.codec.hosts import format_host
from broker_core.store.codec.message_id import decode_offset_msg_id, decode_uniq_key
from mqadmin.errors import AdminError
from mqadmin.reports import DecodedMessageId
from mqadmin.timefmt import nearly_time_from_span, now_ms


def decode_message_id(msg_id: str, clock: Callable[[], int] = now_ms) -> DecodedMessageId:
    """Client ip and approximate send time of a unique id; also its offset-id reading when it has one."""
    text = msg_id.strip()
    try:
        info = decode_uniq_key(text)
    except ValueError as e:
        raise AdminError(str(e)) from None
    store_host = phy = None
    try:
        off = decode_offset_msg_id(text)
        store_host, phy = format_host(off.store_host), off.commit_log_offset
    except ValueError:
        pass
    return DecodedMessageId(info.ip, nearly_time_from_span(info.time_since_month_start_ms, clock()),
                            info.pid, store_host, phy)
