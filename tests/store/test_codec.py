"""Record codec against the spec's §13 vectors, host/version variants, properties rules, ids.

Why: every byte the store, the Spark jobs and the protocol adapters write goes through the codec;
these vectors were recomputed independently from Java's output, so any drift shows up here first.
"""

from __future__ import annotations

import ipaddress
import os
import struct
import zlib
from datetime import datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from broker_core.store.checkpoint import StoreCheckpoint
from broker_core.store.codec.batch import BatchItem, decode_batch, encode_batch, encode_batch_item
from broker_core.store.codec.cq_unit import pack_bcq_unit, pack_cq_unit
from broker_core.store.codec.hashing import index_key_hash, java_string_hash, rmq_crc32, tags_code
from broker_core.store.codec.hosts import decode_host, encode_host, format_host, parse_host
from broker_core.store.codec.message import (
    BLANK_MAGIC_CODE,
    MESSAGE_MAGIC_CODE_V1,
    MESSAGE_MAGIC_CODE_V2,
    RECORD_BLANK,
    RECORD_INVALID,
    RECORD_VALID,
    MessageInner,
    RecordError,
    check_record,
    decode_record,
    encode_blank,
    encode_record,
    patch_record,
    verify_prop_crc,
)
from broker_core.store.codec.message_id import (
    UniqKeyGenerator,
    create_offset_msg_id,
    decode_offset_msg_id,
    decode_uniq_key,
)
from broker_core.store.codec.properties import decode_properties, encode_properties, get_property
from broker_core.store.dispatch import SCHEDULE_TOPIC, build_dispatch_request
from broker_core.store.store_config import DEFAULT_DELAY_LEVELS, parse_delay_levels

BORN_TS = 1700000000000
STORE_TS = 1700000000123
PROPS_13_5 = {
    "UNIQ_KEY": "C0A8000A12341B6D3586000000640000",
    "CLUSTER": "DefaultCluster",
    "TAGS": "TagA",
    "KEYS": "KEY0",
    "WAIT": "true",
}
RECORD_13_5 = bytes.fromhex(
    "000000d3daa320a7248c774f000000010000000000000000000000000000000000000000000000000000018bcfe56800"
    "c0a8000a0000d4310000018bcfe5687bc0a8000100002a9f0000000000000000000000000000001048656c6c6f20526f"
    "636b65744d51203009546f70696354657374005f554e49515f4b455901433041383030304131323334314236443335"
    "383630303030303036343030303002434c55535445520144656661756c74436c757374657202544147530154616741"
    "024b455953014b4559300257414954017472756502")
RECORD_13_10 = bytes.fromhex(
    "000000e7daa320a7248c774f000000010000000000000000000000000000000000000000000000000000018bcfe56800"
    "c0a8000a0000d4310000018bcfe5687bc0a8000100002a9f0000000000000000000000000000001048656c6c6f20526f"
    "636b65744d51203009546f706963546573740073554e49515f4b455901433041383030304131323334314236443335"
    "383630303030303036343030303002434c55535445520144656661756c74436c757374657202544147530154616741"
    "024b455953014b45593002574149540174727565025f5f435243333223013231323439343834373002")
DELAY_LEVELS = parse_delay_levels(DEFAULT_DELAY_LEVELS)


def msg_13_5(**over) -> MessageInner:
    kw = dict(topic="TopicTest", body=b"Hello RocketMQ 0", properties=dict(PROPS_13_5), queue_id=1,
              born_timestamp=BORN_TS, born_host=("192.168.0.10", 54321), store_host=("192.168.0.1", 10911))
    kw.update(over)
    return MessageInner(**kw)


# ---------------------------------------------------------------- §13.2 - §13.4


def test_constants_13_2() -> None:
    assert struct.pack(">i", MESSAGE_MAGIC_CODE_V1).hex() == "daa320a7"
    assert struct.pack(">i", MESSAGE_MAGIC_CODE_V2).hex() == "daa320ab"
    assert struct.pack(">i", BLANK_MAGIC_CODE).hex() == "cbd43194"


@pytest.mark.parametrize("text,expected", [
    ("TagA", 2598919),
    ("TopicTest#KEY1", -1656969516),
    ("TopicTest#KEY0", -1656969517),
    ("TopicTest#C0A8000A12341B6D3586000000640000", -356105514),
    ("TopicTest", -1902610879),
    ("", 0),
])
def test_java_hash_13_3(text: str, expected: int) -> None:
    assert java_string_hash(text) == expected


def test_index_key_hash_and_slots_13_3() -> None:
    assert index_key_hash("TopicTest#KEY1") == 1656969516
    assert 40 + 4 * (index_key_hash("TopicTest#KEY1") % 5_000_000) == 7_878_104
    assert index_key_hash("TopicTest#KEY0") == 0x62C3592D
    assert 40 + 4 * (index_key_hash("TopicTest#KEY0") % 5_000_000) == 7_878_108
    k = "TopicTest#C0A8000A12341B6D3586000000640000"
    assert index_key_hash(k) == 0x1539BD2A and 40 + 4 * (index_key_hash(k) % 5_000_000) == 4_422_096


def test_java_hash_non_ascii_uses_utf16_units() -> None:
    # Java: "中" is one UTF-16 unit 0x4E2D; an astral char is a surrogate pair (two units).
    assert java_string_hash("中") == 0x4E2D
    assert java_string_hash("a中") == 31 * 97 + 0x4E2D
    assert java_string_hash("\U0001F600") == 31 * 0xD83D + 0xDE00


def test_index_key_hash_min_int_is_zero() -> None:
    # "polygenelubricants" hashes to Integer.MIN_VALUE in Java; abs() overflows -> 0.
    assert java_string_hash("polygenelubricants") == -(2 ** 31)
    assert index_key_hash("polygenelubricants") == 0


def test_tags_code() -> None:
    assert tags_code("TagA") == 2598919
    assert tags_code(None) == 0 and tags_code("") == 0
    assert pack_cq_unit(0, 1, tags_code("TopicTest"))[12:].hex() == "ffffffff8e987641"  # sign-extended


def test_body_crc_13_4() -> None:
    assert rmq_crc32(b"Hello RocketMQ 0") == 613185359
    assert rmq_crc32(b"Hello RocketMQ 2") == 1250039395
    assert rmq_crc32(b"") == 0


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=200_000))
def test_body_crc_backend_is_zlib_crc32(data: bytes) -> None:
    """BODYCRC may come from ISA-L (fast) or zlib (fallback): both must give Java's CRC32 value."""
    assert rmq_crc32(data) == zlib.crc32(data) & 0x7FFFFFFF
    assert rmq_crc32(memoryview(data)[1:]) == zlib.crc32(data[1:]) & 0x7FFFFFFF


# ---------------------------------------------------------------- §13.5 record + derived


def test_record_13_5_bytes() -> None:
    buf = encode_record(msg_13_5(), 0, 0, STORE_TS)
    assert bytes(buf) == RECORD_13_5
    assert len(buf) == 211


def test_record_13_5_patch_path_gives_same_bytes() -> None:
    """The append path encodes with zeros and patches inside the lock; the result must match."""
    buf = encode_record(msg_13_5(), 0, 0, 0)
    patch_record(buf, 0, 0, 0, STORE_TS)
    assert bytes(buf) == RECORD_13_5
    buf2 = encode_record(msg_13_5(), 7, 4242, STORE_TS)
    m = decode_record(buf2)
    assert (m.queue_offset, m.commit_log_offset) == (7, 4242)


def test_record_13_5_decode() -> None:
    m = decode_record(RECORD_13_5)
    assert m.store_size == 211 and m.magic_code == MESSAGE_MAGIC_CODE_V1
    assert m.body_crc == 613185359 and m.queue_id == 1 and m.flag == 0
    assert m.queue_offset == 0 and m.commit_log_offset == 0 and m.sys_flag == 0
    assert m.born_timestamp == BORN_TS and m.born_host == ("192.168.0.10", 54321)
    assert m.store_timestamp == STORE_TS and m.store_host == ("192.168.0.1", 10911)
    assert m.reconsume_times == 0 and m.prepared_transaction_offset == 0
    assert m.body == b"Hello RocketMQ 0" and m.topic == "TopicTest"
    assert m.properties == PROPS_13_5 and list(m.properties) == list(PROPS_13_5)
    assert m.tags == "TagA" and m.keys == "KEY0" and m.uniq_key == PROPS_13_5["UNIQ_KEY"]
    rc = check_record(RECORD_13_5, 0, len(RECORD_13_5))
    assert rc.kind == RECORD_VALID and rc.size == 211


def test_record_13_5_derived_artefacts() -> None:
    m = decode_record(RECORD_13_5)
    assert m.msg_id == "C0A8000100002A9F0000000000000000"
    assert create_offset_msg_id(("192.168.0.1", 10911), 0) == "C0A8000100002A9F0000000000000000"
    req = build_dispatch_request(m, DELAY_LEVELS)
    assert pack_cq_unit(req.commit_log_offset, req.msg_size, req.tags_code).hex() == \
        "0000000000000000" "000000d3" "000000000027a807"
    bcq = pack_bcq_unit(req.commit_log_offset, req.msg_size, req.tags_code, req.store_timestamp,
                        req.msg_base_offset, req.batch_size)
    assert bcq.hex() == ("0000000000000000" "000000d3" "000000000027a807" "0000018bcfe5687b"
                         "0000000000000000" "0001" "ffffffff" "00000000")
    assert len(bcq) == 46
    assert m.commit_log_offset + m.store_size == 211  # next record's PHYSICALOFFSET


def test_schedule_topic_tags_code_13_5() -> None:
    props = dict(PROPS_13_5, DELAY="3")
    m = decode_record(encode_record(msg_13_5(topic=SCHEDULE_TOPIC, properties=props, queue_id=2), 0, 0, STORE_TS))
    assert build_dispatch_request(m, DELAY_LEVELS).tags_code == 1700000010123
    # level above the table is clamped to the max level (2h); level 0 means a plain tag hash
    m = decode_record(encode_record(msg_13_5(topic=SCHEDULE_TOPIC, properties=dict(PROPS_13_5, DELAY="99")),
                                    0, 0, STORE_TS))
    assert build_dispatch_request(m, DELAY_LEVELS).tags_code == STORE_TS + 7_200_000
    m = decode_record(encode_record(msg_13_5(topic=SCHEDULE_TOPIC, properties=dict(PROPS_13_5, DELAY="0")),
                                    0, 0, STORE_TS))
    assert build_dispatch_request(m, DELAY_LEVELS).tags_code == 2598919
    # outside SCHEDULE_TOPIC_XXXX a DELAY property does not change tagsCode
    m = decode_record(encode_record(msg_13_5(properties=props), 0, 0, STORE_TS))
    assert build_dispatch_request(m, DELAY_LEVELS).tags_code == 2598919


# ---------------------------------------------------------------- §13.7 blank, §13.9 checkpoint


def test_blank_13_7() -> None:
    assert encode_blank(100).hex() == "00000064cbd43194"
    buf = bytes(92) + encode_blank(100) + bytes(92)
    rc = check_record(buf, 92, len(buf))
    assert rc.kind == RECORD_BLANK


def test_checkpoint_13_9(tmp_path) -> None:
    cp = StoreCheckpoint(tmp_path / "checkpoint")
    cp.physic_msg_timestamp = cp.logics_msg_timestamp = cp.index_msg_timestamp = STORE_TS
    cp.master_flushed_offset = 0
    cp.confirm_phy_offset = 211
    cp.shutdown()
    data = (tmp_path / "checkpoint").read_bytes()
    assert len(data) == 4096
    assert data[:40].hex() == ("0000018bcfe5687b" "0000018bcfe5687b" "0000018bcfe5687b" "0000000000000000"
                               "00000000000000d3")
    assert data[40:] == bytes(4056)
    again = StoreCheckpoint(tmp_path / "checkpoint", read_only=True)
    assert (again.physic_msg_timestamp, again.confirm_phy_offset) == (STORE_TS, 211)
    assert again.min_timestamp == STORE_TS - 3000


# ---------------------------------------------------------------- §13.10 whole-record CRC


def test_prop_crc_13_10() -> None:
    buf = encode_record(msg_13_5(), 0, 0, STORE_TS, append_prop_crc=True)
    assert bytes(buf) == RECORD_13_10
    assert len(buf) == 231
    assert bytes(buf[-20:]).hex() == "5f5f435243333223" "01" "32313234393438343730" "02"
    assert verify_prop_crc(buf, 0, len(buf))
    assert rmq_crc32(RECORD_13_10[:211]) == 748494212
    m = decode_record(buf)
    assert m.properties["__CRC32#"] == "2124948470"


def test_prop_crc_refreshed_by_patch_and_detects_damage() -> None:
    buf = encode_record(msg_13_5(), 0, 0, 0, append_prop_crc=True)
    patch_record(buf, 0, 0, 0, STORE_TS, prop_crc=True)
    assert bytes(buf) == RECORD_13_10
    patch_record(buf, 0, 5, 999, STORE_TS)  # patched without refreshing: the CRC no longer matches
    assert not verify_prop_crc(buf, 0, len(buf))
    patch_record(buf, 0, 5, 999, STORE_TS, prop_crc=True)
    assert verify_prop_crc(buf, 0, len(buf))
    assert not verify_prop_crc(RECORD_13_5, 0, len(RECORD_13_5))


def test_prop_crc_inserts_separator_when_missing() -> None:
    buf = encode_record(msg_13_5(properties={}), 0, 0, STORE_TS, properties_string="TAGS\x01TagA",
                        append_prop_crc=True)
    m = decode_record(buf)
    assert m.properties_string.startswith("TAGS\x01TagA\x02__CRC32#\x01")
    assert len(m.properties_string) == len("TAGS\x01TagA\x02") + 20
    assert verify_prop_crc(buf, 0, len(buf))
    empty = encode_record(msg_13_5(properties={}), 0, 0, STORE_TS, append_prop_crc=True)
    assert decode_record(empty).properties_string.startswith("__CRC32#\x01")  # no leading separator


# ---------------------------------------------------------------- §13.11 batch item


def test_batch_item_13_11() -> None:
    item = encode_batch_item(BatchItem(b"Hello RocketMQ 0", {"TAGS": "TagA"}, 0))
    assert item.hex() == "000000300000000000000000000000000000001048656c6c6f20526f636b65744d512030000a54414753015461674102"
    assert decode_batch(item) == [BatchItem(b"Hello RocketMQ 0", {"TAGS": "TagA"}, 0)]


def test_batch_rejects_truncation() -> None:
    body = encode_batch([BatchItem(b"abc", {"K": "v"}, 1), BatchItem(b"", {}, 2)])
    assert len(decode_batch(body)) == 2
    with pytest.raises(RecordError):
        decode_batch(body[:-3])
    bad = bytearray(body)
    struct.pack_into(">h", bad, 20 + 3, 99)  # props length no longer adds up
    with pytest.raises(RecordError):
        decode_batch(bytes(bad))


# ---------------------------------------------------------------- hosts, V2 records


def test_ipv6_hosts() -> None:
    msg = msg_13_5(born_host=("::1", 40000), store_host=("fe80::1", 10911))
    buf = encode_record(msg, 3, 500, STORE_TS)
    assert len(buf) == 211 + 12 + 12
    sys_flag = struct.unpack_from(">i", buf, 36)[0]
    assert sys_flag == 0x30
    assert bytes(buf[48:68]) == bytes(15) + b"\x01" + (40000).to_bytes(4, "big")
    assert struct.unpack_from(">q", buf, 68)[0] == STORE_TS  # STORETIMESTAMP at 48 + 20
    assert struct.unpack_from(">i", buf, 56 + 20 + 20 + 12)[0] == 16  # BODY length at 68 + BH + SH
    m = decode_record(buf)
    assert m.born_host == ("::1", 40000) and m.store_host == ("fe80::1", 10911)
    assert m.store_timestamp == STORE_TS and m.body == msg.body and m.properties == PROPS_13_5
    assert len(m.msg_id) == 56
    dec = decode_offset_msg_id(m.msg_id)
    assert dec.store_host == ("fe80::1", 10911) and dec.commit_log_offset == 500


def test_only_born_host_v6() -> None:
    buf = encode_record(msg_13_5(born_host=("2001:db8::7", 1)), 0, 0, STORE_TS)
    assert struct.unpack_from(">i", buf, 36)[0] == 0x10
    m = decode_record(buf)
    assert m.born_host == ("2001:db8::7", 1) and m.store_host == ("192.168.0.1", 10911)
    assert len(m.msg_id) == 32


def test_sys_flag_host_bits_follow_the_addresses() -> None:
    # A stale v6 bit from the caller is cleared when the address is IPv4.
    m = decode_record(encode_record(msg_13_5(sys_flag=0x30 | 0x8), 0, 0, STORE_TS))
    assert m.sys_flag == 0x8 and m.born_host == ("192.168.0.10", 54321)


@pytest.mark.parametrize("text,host", [
    ("127.0.0.1:10911", ("127.0.0.1", 10911)),
    ("[::1]:80", ("::1", 80)),
    ("::1:80", ("::1", 80)),
    ("0:0:0:0:0:0:0:1:9876", ("0:0:0:0:0:0:0:1", 9876)),
])
def test_parse_host(text: str, host: tuple[str, int]) -> None:
    assert parse_host(text) == host
    assert same_host(decode_host(encode_host(host)), host)


def test_format_host_java_style() -> None:
    assert format_host(("0:0:0:0:0:0:0:1", 5)) == "::1:5"
    with pytest.raises(ValueError):
        parse_host("no-port")


@pytest.mark.parametrize("topic_len,magic,tl", [(127, MESSAGE_MAGIC_CODE_V1, 1), (128, MESSAGE_MAGIC_CODE_V2, 2),
                                                 (300, MESSAGE_MAGIC_CODE_V2, 2)])
def test_v1_v2_by_topic_length(topic_len: int, magic: int, tl: int) -> None:
    topic = ("T" * topic_len)
    msg = msg_13_5(topic=topic)
    buf = encode_record(msg, 0, 0, STORE_TS)
    assert struct.unpack_from(">i", buf, 4)[0] == magic
    assert len(buf) == 74 + 8 + 8 + 16 + tl + topic_len + 95  # spec §1.1 formula
    body_end = 88 + 16
    if tl == 2:
        assert struct.unpack_from(">h", buf, body_end)[0] == topic_len
    else:
        assert buf[body_end] == topic_len
    m = decode_record(buf)
    assert m.topic == topic and m.magic_code == magic and m.properties == PROPS_13_5


def test_v1_topic_length_read_signed() -> None:
    """A V1 record whose length byte is >= 0x80 is corrupt (Java reads it signed)."""
    buf = bytearray(encode_record(msg_13_5(), 0, 0, STORE_TS))
    buf[88 + 16] = 0x89
    with pytest.raises(RecordError):
        decode_record(buf)
    assert check_record(buf, 0, len(buf)).kind == RECORD_INVALID


def test_check_record_rejects_crc_and_size_damage() -> None:
    buf = bytearray(RECORD_13_5)
    buf[90] ^= 0xFF
    rc = check_record(buf, 0, len(buf))
    assert rc.kind == RECORD_INVALID and "CRC" in rc.reason
    assert check_record(buf, 0, len(buf), check_crc=False).kind == RECORD_VALID
    assert check_record(RECORD_13_5[:150], 0, 150).kind == RECORD_INVALID
    assert check_record(bytes(64), 0, 64).kind == RECORD_INVALID
    assert check_record(RECORD_13_5, 0, 4).kind == RECORD_INVALID


def test_limits() -> None:
    with pytest.raises(RecordError):
        encode_record(msg_13_5(body=b"x" * 101), 0, 0, 0, max_message_size=100)
    with pytest.raises(RecordError, match="properties"):
        encode_record(msg_13_5(properties={"k": "v" * 32767}), 0, 0, 0)
    encode_record(msg_13_5(body=b"x" * 100), 0, 0, 0, max_message_size=100)


# ---------------------------------------------------------------- properties (§2.1)


def test_properties_decode_rules() -> None:
    assert decode_properties("") == {}
    # segments shorter than 3 chars are ignored; empty key / empty value segments are ignored
    assert decode_properties("a\x01\x02b\x01c\x02\x01v\x02k\x01\x02") == {"b": "c"}
    assert decode_properties("ab\x02x\x01y\x02") == {"x": "y"}
    # last occurrence wins
    assert decode_properties("K\x011\x02K\x012\x02") == {"K": "2"}
    assert get_property("K\x011\x02K\x012\x02", "K") == "2"
    # missing trailing separator is tolerated
    assert decode_properties("A\x01x\x02B\x01y") == {"A": "x", "B": "y"}
    assert get_property("A\x01x\x02B\x01y", "B") == "y"
    # the value may contain 0x01 after the first one (Java splits at the first separator only)
    assert decode_properties("k\x01a\x01b\x02") == {"k": "a\x01b"}
    # a key that is a suffix of another key is not confused with it
    assert get_property("XKEYS\x01a\x02", "KEYS") is None
    assert get_property("KEYS\x01a\x02", "KEYS") == "a"
    assert get_property("A\x01\x02", "A") is None


def test_properties_encode_skips_none_and_keeps_order() -> None:
    assert encode_properties({"B": "1", "A": None, "C": "2"}) == "B\x011\x02C\x012\x02"
    assert encode_properties(None) == "" and encode_properties({}) == ""


# ---------------------------------------------------------------- ids (§3)


def test_offset_msg_id_v4_v6_roundtrip() -> None:
    mid = create_offset_msg_id(("127.0.0.1", 10911), 194646)
    assert mid == "7F00000100002A9F000000000002F856"
    d = decode_offset_msg_id(mid.lower())
    assert d.store_host == ("127.0.0.1", 10911) and d.commit_log_offset == 194646
    mid6 = create_offset_msg_id(("::1", 10911), 2 ** 40)
    assert len(mid6) == 56 and mid6 == mid6.upper()
    d6 = decode_offset_msg_id(mid6)
    assert d6.store_host == ("::1", 10911) and d6.commit_log_offset == 2 ** 40
    for bad in ("", "XYZ", "7F00000100002A9F00000000", "G" * 32):
        with pytest.raises(ValueError):
            decode_offset_msg_id(bad)


def test_uniq_key_layout_and_decode() -> None:
    now = int(datetime(2026, 3, 5, 12, 0, 0).timestamp() * 1000)
    clock = [now]
    gen = UniqKeyGenerator("10.1.2.3", clock=lambda: clock[0])
    a = gen.next_id()
    clock[0] += 1500
    b = gen.next_id()
    assert len(a) == 32 and a == a.upper() and a[:8] == "0A010203"
    assert a[:20] == b[:20]  # ip + pid + per-process constant stay the same
    da, db = decode_uniq_key(a), decode_uniq_key(b)
    assert da.ip == "10.1.2.3" and da.pid == os.getpid() & 0xFFFF
    month_start = int(datetime(2026, 3, 1).timestamp() * 1000)
    assert da.time_since_month_start_ms == now - month_start
    assert db.time_since_month_start_ms == now + 1500 - month_start
    assert db.counter == (da.counter + 1) & 0xFFFF
    # the month boundary resets the time base
    clock[0] = int(datetime(2026, 4, 1, 0, 0, 1).timestamp() * 1000)
    assert decode_uniq_key(gen.next_id()).time_since_month_start_ms == 1000


def test_uniq_key_time_late_in_a_month_decodes_unsigned() -> None:
    """Past 2**31 ms into a month (about day 25) the id's time field has its top bit set: Java reads it
    unsigned. Read signed, decodeMessageId put such a message ~49.7 days earlier."""
    now = int(datetime(2026, 11, 27, 17, 0, 0).timestamp() * 1000)
    key = UniqKeyGenerator("127.0.0.1", clock=lambda: now).next_id()
    span = now - int(datetime(2026, 11, 1).timestamp() * 1000)
    assert span > 2**31 and decode_uniq_key(key).time_since_month_start_ms == span


def test_uniq_key_counter_wraps_and_ipv6() -> None:
    gen = UniqKeyGenerator("fe80::2", clock=lambda: 1_772_000_000_000)
    ids = [gen.next_id() for _ in range(0x10001)]
    assert len(ids[0]) == 56
    assert decode_uniq_key(ids[0]).ip == "fe80::2"
    assert decode_uniq_key(ids[0xFFFF]).counter == 0xFFFF
    assert decode_uniq_key(ids[0x10000]).counter == 0
    assert len(set(ids[:0x10000])) == 0x10000


def test_golden_uniq_key_decodes() -> None:
    d = decode_uniq_key("7F0000010001000010000000000A0000")
    assert (d.ip, d.pid, d.class_loader_hash, d.time_since_month_start_ms, d.counter) == \
        ("127.0.0.1", 1, 0x1000, 0xA, 0)


# ---------------------------------------------------------------- property-based round trips

_text = st.text(alphabet=st.characters(blacklist_characters="\x00\x01\x02", blacklist_categories=("Cs",)),
                min_size=1, max_size=12)
_props = st.dictionaries(_text, _text, max_size=6)
_ipv4 = st.tuples(st.integers(0, 255), st.integers(0, 255), st.integers(0, 255), st.integers(0, 255)).map(
    lambda t: ".".join(map(str, t)))
_ipv6 = st.integers(0, 2 ** 128 - 1).map(lambda n: ipaddress.IPv6Address(n).compressed)
_host = st.tuples(st.one_of(_ipv4, _ipv6), st.integers(0, 65535))
_i64 = st.integers(-(2 ** 63), 2 ** 63 - 1)


def same_host(a: tuple[str, int], b: tuple[str, int]) -> bool:
    """Equal addresses; inet_ntop may spell an IPv6 address differently (``::0.1.0.0`` vs ``::1:0``)."""
    return ipaddress.ip_address(a[0]) == ipaddress.ip_address(b[0]) and a[1] == b[1]


@settings(max_examples=150, deadline=None)
@given(topic=st.text(alphabet="abcXYZ09%_|-", min_size=1, max_size=300), body=st.binary(max_size=300),
       props=_props, queue_id=st.integers(0, 2 ** 31 - 1), flag=st.integers(-(2 ** 31), 2 ** 31 - 1),
       sys_flag=st.sampled_from([0, 0x1, 0x2, 0x4, 0x8, 0xC, 0x40 | 0x80]), born=_host, store=_host,
       born_ts=_i64, store_ts=_i64, q=_i64, phy=st.integers(0, 2 ** 62), reconsume=st.integers(0, 2 ** 31 - 1),
       prepared=_i64)
def test_record_roundtrip(topic, body, props, queue_id, flag, sys_flag, born, store, born_ts, store_ts, q, phy,
                          reconsume, prepared) -> None:
    msg = MessageInner(topic=topic, body=body, properties=props, queue_id=queue_id, flag=flag, sys_flag=sys_flag,
                       born_timestamp=born_ts, born_host=born, store_host=store, reconsume_times=reconsume,
                       prepared_transaction_offset=prepared)
    buf = encode_record(msg, q, phy, store_ts)
    rc = check_record(buf, 0, len(buf))
    assert rc.kind == RECORD_VALID and rc.size == len(buf)
    m = decode_record(buf)
    assert (m.topic, m.body, m.properties, m.queue_id, m.flag, m.queue_offset, m.commit_log_offset) == \
        (topic, body, props, queue_id, flag, q, phy)
    assert m.sys_flag & ~0x30 == sys_flag
    assert bool(m.sys_flag & 0x10) == (":" in born[0]) and bool(m.sys_flag & 0x20) == (":" in store[0])
    assert same_host(m.born_host, born) and same_host(m.store_host, store)
    assert (m.born_timestamp, m.store_timestamp, m.reconsume_times, m.prepared_transaction_offset) == \
        (born_ts, store_ts, reconsume, prepared)
    assert m.body_crc == rmq_crc32(body)
    assert m.magic_code == (MESSAGE_MAGIC_CODE_V2 if len(topic) > 127 else MESSAGE_MAGIC_CODE_V1)
    assert m.msg_id == create_offset_msg_id(store, phy)
    assert decode_offset_msg_id(m.msg_id).commit_log_offset == phy


@settings(max_examples=200, deadline=None)
@given(props=_props)
def test_properties_roundtrip(props) -> None:
    text = encode_properties(props)
    assert decode_properties(text) == props
    for k, v in props.items():
        assert get_property(text, k) == v
    # the Java parser tolerates a missing trailing separator
    assert decode_properties(text[:-1] if text else text) == props


@settings(max_examples=100, deadline=None)
@given(items=st.lists(st.builds(BatchItem, st.binary(max_size=200), _props, st.integers(-(2 ** 31), 2 ** 31 - 1)),
                      min_size=1, max_size=8))
def test_batch_roundtrip(items) -> None:
    body = encode_batch(items)
    assert decode_batch(body) == items
    # and the packed body survives as the body of an inner-batch record
    m = decode_record(encode_record(MessageInner("BatchTopic", body, {"INNER_NUM": str(len(items))},
                                                 sys_flag=0x80), 0, 0, STORE_TS))
    assert decode_batch(m.body) == items
