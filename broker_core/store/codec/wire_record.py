"""A stored message as the raw record bytes PULL / POP / QUERY / VIEW bodies carry (spec B.2.3).

Why in the codec: the record layout is the store's; the remoting adapter must not know it. A
MessageExt read from the store is encoded back to exactly the layout it was read from (same queue
offset, physical offset and store timestamp), so a Java client decodes it as the stored record.
"""

from __future__ import annotations

from .message import MessageExt, MessageInner, encode_record


def message_ext_to_record(m: MessageExt) -> bytes:
    inner = MessageInner(topic=m.topic, body=m.body, queue_id=m.queue_id, flag=m.flag, sys_flag=m.sys_flag,
                         born_timestamp=m.born_timestamp, born_host=m.born_host, store_host=m.store_host,
                         reconsume_times=m.reconsume_times, prepared_transaction_offset=m.prepared_transaction_offset,
                         store_timestamp=m.store_timestamp, keep_store_timestamp=True)
    return bytes(encode_record(inner, m.queue_offset, m.commit_log_offset, m.store_timestamp,
                               properties_string=m.properties_string, max_message_size=1 << 31))


def records_body(messages: list[MessageExt]) -> bytes:
    return b"".join(message_ext_to_record(m) for m in messages)
