"""What PULL / POP / QUERY / VIEW bodies carry: a stored message re-encoded to exactly the bytes the
store holds (spec B.2.3), for v1 and v2 (long topic) records, IPv4 and IPv6 hosts."""

from __future__ import annotations

import pytest

from broker_core.store.codec.message import MessageInner, decode_record, encode_record
from broker_core.store.codec.wire_record import message_ext_to_record, records_body


@pytest.mark.parametrize("topic, born, store", [
    ("T", ("10.0.0.5", 5555), ("127.0.0.1", 10911)),
    ("x" * 200, ("10.0.0.5", 5555), ("127.0.0.1", 10911)),
    ("T6", ("::1", 40000), ("fe80::1", 10911)),
])
def test_stored_record_round_trips(topic, born, store):
    msg = MessageInner(topic=topic, body=b"\x00body\xff", properties={"TAGS": "a", "KEYS": "k1 k2"}, queue_id=3,
                       flag=7, born_timestamp=1700000000000, born_host=born, store_host=store, reconsume_times=2,
                       store_timestamp=1700000000123)
    raw = bytes(encode_record(msg, 42, 4096, 1700000000123))
    ext = decode_record(raw)
    assert message_ext_to_record(ext) == raw
    assert records_body([ext, ext]) == raw + raw
