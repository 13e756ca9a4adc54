"""Property tests pinning the store codec's fast paths to slow, obviously-right references.

Why: the hot paths (base-31 numeral Java hash, header-only dispatch decode, rfind property lookup,
encode-then-patch, one-pack index entries) were rewritten for speed; each is checked here against a
plain implementation of the spec (§1, §2.1, §5.2, §6.1, §7, §13) or against the full decoder, on
random input including the awkward cases (non-ASCII, surrogate pairs, V2 topics, IPv6 hosts,
duplicate and empty properties, torn and corrupt records).
"""

from __future__ import annotations

import ipaddress
import struct
import sys
import zlib

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from broker_core.store.codec.hashing import index_key_hash, java_string_hash, rmq_crc32, tags_code
from broker_core.store.codec.message import (
    CRC32_RESERVED_LEN,
    RECORD_VALID,
    MessageExt,
    MessageInner,
    check_record,
    decode_dispatch_fields,
    decode_record,
    encode_blank,
    encode_record,
    patch_record,
    verify_prop_crc,
    write_prop_crc,
)
from broker_core.store.codec.properties import decode_properties, encode_properties, get_property
from broker_core.store.dispatch import (
    SCHEDULE_TOPIC,
    DispatchRequest,
    build_dispatch_request,
    dispatch_request_of,
)
from broker_core.store.index_file import IndexFile
from broker_core.store.store_config import DEFAULT_DELAY_LEVELS, parse_delay_levels

FAST = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
DELAY_LEVELS = parse_delay_levels(DEFAULT_DELAY_LEVELS)


# ---------------------------------------------------------------- references (written from the spec)

def java_hash_reference(s: str) -> int:
    """Spec §13.1: ``h = 31*h + c`` over UTF-16 code units, wrapped to a signed 32-bit int."""
    data = s.encode("utf-16-be", "surrogatepass")  # a lone surrogate is one code unit, as in a Java String
    h = 0
    for i in range(0, len(data), 2):
        h = (31 * h + int.from_bytes(data[i:i + 2], "big")) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def host_bytes(host: tuple[str, int]) -> bytes:
    ip, port = host
    return ipaddress.ip_address(ip).packed + struct.pack(">i", port)


def reference_record(msg: MessageInner, queue_offset: int, phy: int, store_ts: int, props: str) -> bytes:
    """Spec §1.1 field by field, no shared code with the codec."""
    body = msg.body
    topic = msg.topic.encode("utf-8")
    props_raw = props.encode("utf-8")
    born, store = host_bytes(msg.born_host), host_bytes(msg.store_host)
    sys_flag = (msg.sys_flag & ~0x30) | (0x10 if len(born) == 20 else 0) | (0x20 if len(store) == 20 else 0)
    v2 = len(topic) > 127
    rest = b"".join([
        struct.pack(">i", -626843477 if v2 else -626843481),
        struct.pack(">i", zlib.crc32(body) & 0x7FFFFFFF),
        struct.pack(">iiqqiq", msg.queue_id, msg.flag, queue_offset, phy, sys_flag, msg.born_timestamp),
        born, struct.pack(">q", store_ts), store,
        struct.pack(">iqi", msg.reconsume_times, msg.prepared_transaction_offset, len(body)), body,
        struct.pack(">h" if v2 else ">b", len(topic)), topic,
        struct.pack(">h", len(props_raw)), props_raw,
    ])
    return struct.pack(">i", 4 + len(rest)) + rest


def reference_dispatch(m: MessageExt, delay_levels: list[int]) -> DispatchRequest:
    """What dispatch must produce, computed from the fully decoded record and its property dict."""
    props = m.properties
    code = 0
    delay = props.get("DELAY")
    due = False
    if m.topic == SCHEDULE_TOPIC and delay is not None:
        try:
            level = int(delay)
        except ValueError:
            level = 0
        level = min(level, len(delay_levels))
        if level > 0:
            code, due = m.store_timestamp + delay_levels[level - 1], True
    if not due:
        tags = props.get("TAGS")
        code = java_hash_reference(tags) if tags else 0
    batch, base = 1, m.queue_offset
    if "INNER_NUM" in props:
        try:
            batch = int(props["INNER_NUM"])
            if "INNER_BASE" in props:
                base = int(props["INNER_BASE"])
        except ValueError:
            batch, base = 1, m.queue_offset
    return DispatchRequest(m.topic, m.queue_id, m.commit_log_offset, m.store_size, code, m.store_timestamp,
                           m.queue_offset, props.get("KEYS"), props.get("UNIQ_KEY"), m.sys_flag,
                           m.prepared_transaction_offset, batch, base, m.properties_string)


# ---------------------------------------------------------------- strategies

no_lone_surrogates = st.characters(exclude_categories=("Cs",))
astral = st.characters(min_codepoint=0x10000, max_codepoint=0x10FFFF, exclude_categories=("Cs",))
ascii_text = st.text(st.characters(max_codepoint=127), max_size=300)
any_text = st.one_of(
    ascii_text,
    st.text(no_lone_surrogates, max_size=200),
    st.text(st.one_of(astral, st.characters(max_codepoint=127)), max_size=60),
)

ports = st.integers(0, 65535)
hosts = st.one_of(st.tuples(st.ip_addresses(v=4).map(str), ports), st.tuples(st.ip_addresses(v=6).map(str), ports))
i32 = st.integers(-(2 ** 31), 2 ** 31 - 1)
i64 = st.integers(-(2 ** 63), 2 ** 63 - 1)
topics = st.one_of(
    st.sampled_from(["TopicTest", SCHEDULE_TOPIC, "rmq_sys_wheel_timer", "%RETRY%g", ""]),
    st.text(no_lone_surrogates, max_size=60),
    st.integers(120, 400).map(lambda n: "t" * n),  # both sides of the V1/V2 boundary (127 bytes)
    st.text(st.characters(min_codepoint=0x80, exclude_categories=("Cs",)), min_size=30, max_size=90),
)

# Raw property strings (§2.1) built to collide: keys that are prefixes/suffixes of each other and of
# the well-known keys, duplicate keys, empty values, values holding 0x01, junk segments, missing or
# doubled separators.
KEY_POOL = ["TAGS", "TAG", "AGS", "XTAGS", "KEYS", "KEY", "UNIQ_KEY", "DELAY", "INNER_NUM", "INNER_BASE",
            "XINNER_NUM", "K", "KK", "XK", "KX"]
prop_keys = st.one_of(st.sampled_from(KEY_POOL), st.text(st.sampled_from("KXS"), max_size=3))
prop_values = st.one_of(
    st.text(st.characters(exclude_characters="\x02", exclude_categories=("Cs",)), max_size=8),
    st.integers(-3, 40).map(str),
    st.just(""),
)
segments = st.one_of(
    st.tuples(prop_keys, prop_values).map(lambda kv: f"{kv[0]}\x01{kv[1]}"),
    st.text(st.sampled_from("KX\x01"), max_size=3),
)
raw_props = st.builds(
    lambda segs, lead, trail: ("\x02" if lead else "") + "\x02".join(segs) + ("\x02" if trail and segs else ""),
    st.lists(segments, max_size=8), st.booleans(), st.booleans(),
)
dict_props = st.dictionaries(
    st.text(st.characters(exclude_characters="\x01\x02", exclude_categories=("Cs",)), min_size=1, max_size=10),
    st.text(st.characters(exclude_characters="\x02", exclude_categories=("Cs",)), min_size=1, max_size=20),
    max_size=5,
)
special_props = st.fixed_dictionaries({}, optional={
    "TAGS": st.text(st.characters(exclude_characters="\x02", exclude_categories=("Cs",)), max_size=12),
    "KEYS": st.text(st.characters(exclude_characters="\x01\x02", exclude_categories=("Cs",)), min_size=1,
                    max_size=12),
    "UNIQ_KEY": st.just("C0A8000A12341B6D3586000000640000"),
    "DELAY": st.integers(-2, 25).map(str),
    "INNER_NUM": st.integers(1, 500).map(str),
    "INNER_BASE": st.integers(0, 2 ** 40).map(str),
})
properties = st.builds(
    lambda a, b, specials_first: {**b, **a} if specials_first else {**a, **b},
    dict_props, special_props.map(lambda d: {k: v for k, v in d.items() if v}), st.booleans())

messages = st.builds(
    MessageInner, topic=topics, body=st.one_of(st.just(b""), st.binary(max_size=80)), properties=properties,
    queue_id=i32, flag=i32, sys_flag=st.one_of(st.sampled_from([0, 0x4, 0x8, 0xC, 0x80, 0xC0, 0x30]), i32),
    born_timestamp=i64, born_host=hosts, store_host=hosts, reconsume_times=i32, prepared_transaction_offset=i64,
)
final_fields = st.tuples(i64, i64, i64)  # queue offset, physical offset, store timestamp


def fields_of(m: MessageExt) -> tuple:
    return (m.store_size, m.topic, m.queue_id, m.queue_offset, m.commit_log_offset, m.sys_flag,
            m.store_timestamp, m.prepared_transaction_offset, m.properties_string)


# ---------------------------------------------------------------- (1) java_string_hash

@FAST
@given(any_text)
@example("")
@example("TagA")
@example("\U0001F600")  # one astral char = a surrogate pair in UTF-16
@example("a\U00010000b\uffff\x00\x7f")
def test_java_string_hash_matches_the_java_loop(s: str) -> None:
    assert java_string_hash(s) == java_hash_reference(s)
    assert tags_code(s) == (java_hash_reference(s) if s else 0)
    h = abs(java_hash_reference(s))
    assert index_key_hash(s) == (0 if h == 2 ** 31 else h)


@pytest.mark.parametrize("s, java", [("\udcff", 0xDCFF), ("a\ud800", 97 * 31 + 0xD800),
                                      ("\ud83d\ude00", java_hash_reference("\U0001F600"))])
def test_java_string_hash_of_lone_surrogates(s: str, java: int) -> None:
    """A key Java can hold (a lone UTF-16 surrogate: a JSON "\\udcff" escape, an undecodable argv byte)
    hashed to a UnicodeEncodeError, which failed QUERY_MESSAGE and queryMsgByKey with a traceback."""
    assert java_string_hash(s) == java
    assert index_key_hash("T#" + s) == abs(java_hash_reference("T#" + s))


@pytest.mark.parametrize("n", [4299, 4300, 4301, 10_000, 100_003])
@pytest.mark.parametrize("kind", ["ascii", "mixed", "astral"])
def test_java_string_hash_of_very_long_strings(n: int, kind: str) -> None:
    """Index keys come from user-supplied KEYS: a key of any length must hash, not raise."""
    unit = {"ascii": "Key#0123456789~\x7f", "mixed": "Kéy#0123", "astral": "k\U0001F680"}[kind]
    s = (unit * (n // len(unit) + 1))[:n]
    assert java_string_hash(s) == java_hash_reference(s)
    assert java_string_hash(s + "x") == java_hash_reference(s + "x")


def test_java_string_hash_ignores_a_lowered_int_digit_limit() -> None:
    """The ASCII path parses base-31 numerals: it must not depend on ``sys.set_int_max_str_digits``."""
    old = sys.get_int_max_str_digits()
    try:
        sys.set_int_max_str_digits(640)  # the smallest limit Python allows
        s = "TopicTest#" + "K" * 2000
        assert java_string_hash(s) == java_hash_reference(s)
    finally:
        sys.set_int_max_str_digits(old)


def test_tags_code_cache_does_not_mix_up_strings() -> None:
    tags = [f"Tag{i}" for i in range(5000)] + ["Ä", "\U0001F600", "TagA"]
    first = [tags_code(t) for t in tags]
    again = [tags_code(t) for t in reversed(tags)][::-1]
    assert first == again == [java_hash_reference(t) for t in tags]
    assert tags_code(None) == tags_code("") == 0


# ---------------------------------------------------------------- (2) decode_dispatch_fields

@FAST
@given(messages, final_fields, st.binary(max_size=16), st.binary(max_size=64),
       st.sampled_from([bytes, bytearray, memoryview]))
def test_dispatch_fields_equal_full_decode_on_valid_records(msg: MessageInner, final: tuple[int, int, int],
                                                            before: bytes, after: bytes, kind: type) -> None:
    q, phy, ts = final
    rec = encode_record(msg, q, phy, ts)
    data = before + bytes(rec) + after
    buf = memoryview(bytearray(data)) if kind is memoryview else kind(data)
    pos, limit = len(before), len(data)
    f = decode_dispatch_fields(buf, pos, limit)
    full = decode_record(buf, pos)
    rc = check_record(buf, pos, limit, check_crc=True, read_body=False)
    assert rc.kind == RECORD_VALID and rc.size == len(rec)
    assert f == fields_of(full) == fields_of(rc.message)
    # The record ends exactly at the limit: still valid; one byte short: not a record.
    assert decode_dispatch_fields(buf, pos, pos + len(rec)) == f
    assert decode_dispatch_fields(buf, pos, pos + len(rec) - 1) is None


def _mutate(data: bytearray, pos: int, kind: str, draw) -> tuple[bytearray, int]:
    """Damage ``data`` (a record at ``pos``) the ways a crash or bad disk does; returns (data, limit)."""
    n = len(data)
    if kind == "truncate":
        cut = draw(st.integers(0, n - 1))
        return data[:cut], cut
    if kind == "limit":
        return data, draw(st.integers(0, n - 1))
    if kind == "flip":
        for _ in range(draw(st.integers(1, 3))):
            i = draw(st.integers(0, n - 1))
            data[i] ^= 1 << draw(st.integers(0, 7))
        return data, n
    if kind == "byte":
        i = draw(st.integers(pos, n - 1))
        data[i] = draw(st.integers(0, 255))
        return data, n
    if kind == "zero":
        a = draw(st.integers(pos, n - 1))
        b = draw(st.integers(a + 1, n))
        data[a:b] = bytes(b - a)
        return data, n
    if kind == "blank":
        free = draw(st.integers(8, 1 << 20))
        data[pos:pos + 8] = encode_blank(free)
        return data, n
    if kind == "size":  # TOTALSIZE rewritten: a little shorter or longer, zero, negative, huge
        if pos + 4 > n:
            return data[:pos], pos
        old = struct.unpack_from(">i", data, pos)[0]
        new = draw(st.one_of(st.integers(-(2 ** 31), 2 ** 31 - 1), st.integers(-9, 9).map(lambda d: old + d)))
        struct.pack_into(">i", data, pos, max(-(2 ** 31), min(2 ** 31 - 1, new)))
        return data, n
    raise AssertionError(kind)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(messages, final_fields), min_size=1, max_size=3),
       st.sampled_from(["truncate", "limit", "flip", "byte", "zero", "blank", "size"]), st.data())
def test_dispatch_fields_never_wrong_on_damaged_data(recs: list, kind: str, data) -> None:
    encoded = [bytes(encode_record(m, *f)) for m, f in recs]
    starts = [sum(len(e) for e in encoded[:i]) for i in range(len(encoded))]
    buf = bytearray(b"".join(encoded))
    pos = data.draw(st.one_of(st.sampled_from(starts), st.integers(0, len(buf) - 1)))
    buf, limit = _mutate(buf, pos, kind, data.draw)
    for view in (memoryview(buf), bytes(buf)):
        f = decode_dispatch_fields(view, pos, limit)  # must never raise
        rc = check_record(view, pos, limit, check_crc=False, read_body=False)
        if rc.kind == RECORD_VALID:
            assert f == fields_of(rc.message)
        else:
            assert f is None, (rc.reason, f)


def _as_v1(v2_record: bytes) -> bytes:
    """A V2 record re-laid-out as V1 with its >127-byte topic length in the one unsigned length byte."""
    m = decode_record(v2_record)
    topic = m.topic.encode()
    at = len(v2_record) - len(topic) - 2 - 2 - len(m.properties_string.encode())
    raw = bytearray(v2_record[:at]) + bytes([len(topic)]) + v2_record[at + 2:]
    struct.pack_into(">ii", raw, 0, len(raw), -626843481)
    return bytes(raw)


@pytest.mark.parametrize("topic_len", [128, 200, 255])
def test_dispatch_fields_reject_v1_topic_length_with_the_sign_bit(topic_len: int) -> None:
    """TOPICLEN of V1 is a signed byte on disk: 0x80..0xFF are negative, so the record is corrupt."""
    rec = _as_v1(bytes(encode_record(MessageInner(topic="t" * topic_len, properties={"K": "v"}), 1, 2, 3)))
    assert check_record(rec, 0, len(rec), check_crc=False).kind != RECORD_VALID
    assert decode_dispatch_fields(memoryview(rec), 0, len(rec)) is None


@pytest.mark.parametrize("extra", [1, 2, 7, 64])
def test_dispatch_fields_reject_totalsize_longer_than_the_fields(extra: int) -> None:
    """Trailing bytes inside TOTALSIZE (fields do not add up) make a record invalid, as in recovery."""
    rec = bytearray(encode_record(MessageInner(topic="T", body=b"b", properties={"K": "v"}), 1, 2, 3))
    struct.pack_into(">i", rec, 0, len(rec) + extra)
    rec += bytes(extra)
    assert check_record(rec, 0, len(rec), check_crc=False).kind != RECORD_VALID
    assert decode_dispatch_fields(memoryview(rec), 0, len(rec)) is None


@pytest.mark.parametrize("data", [bytes(4096), encode_blank(4096) + bytes(4088), b"", b"\xda\xa3",
                                  b"\xff" * 300])
def test_dispatch_fields_none_on_blank_zero_and_garbage(data: bytes) -> None:
    for pos in (0, 1, 7, 8, max(0, len(data) - 8)):
        assert decode_dispatch_fields(memoryview(data), pos, len(data)) is None


# ---------------------------------------------------------------- dispatch request

@FAST
@given(messages, st.one_of(st.none(), raw_props), final_fields,
       st.sampled_from([DELAY_LEVELS, [1000, 5000], []]))
@example(MessageInner(topic="B"), "INNER_NUM\x015\x02INNER_BASE\x0177\x02", (3, 4, 5), DELAY_LEVELS)
@example(MessageInner(topic="B"), "INNER_NUM\x015", (3, 4, 5), DELAY_LEVELS)
@example(MessageInner(topic="B"), "XINNER_NUM\x015\x02INNER_BASE\x017", (3, 4, 5), DELAY_LEVELS)
@example(MessageInner(topic=SCHEDULE_TOPIC), "DELAY\x014\x02TAGS\x01a\x02DELAY\x01", (3, 4, 5), DELAY_LEVELS)
def test_dispatch_request_fast_path_equals_full_decode(msg: MessageInner, raw: str | None,
                                                      final: tuple[int, int, int], levels: list[int]) -> None:
    q, phy, ts = final
    ts %= 2 ** 62  # a due time is store time + delay: keep it in i64 range as real clocks do
    rec = encode_record(msg, q, phy, ts, properties_string=raw)
    full = decode_record(rec)
    expected = reference_dispatch(full, levels)
    assert build_dispatch_request(full, levels) == expected
    size, topic, queue_id, queue_offset, commit_log_offset, sys_flag, store_ts, prepared, props = \
        decode_dispatch_fields(memoryview(rec), 0, len(rec))
    assert dispatch_request_of(topic, queue_id, commit_log_offset, size, sys_flag, store_ts, queue_offset,
                               prepared, props, levels) == expected


@pytest.mark.parametrize(("props", "levels", "expected"), [
    ({"DELAY": "3", "TAGS": "TagA"}, DELAY_LEVELS, 1700000000123 + 10_000),  # spec §13.5 derived row
    ({"DELAY": "99", "TAGS": "TagA"}, DELAY_LEVELS, 1700000000123 + 7_200_000),  # clamped to level 18
    ({"DELAY": "0", "TAGS": "TagA"}, DELAY_LEVELS, 2598919),
    ({"DELAY": "-1", "TAGS": "TagA"}, DELAY_LEVELS, 2598919),
    ({"DELAY": "2", "TAGS": "TagA"}, [], 2598919),
    ({"TAGS": "TagA"}, DELAY_LEVELS, 2598919),
])
def test_schedule_topic_due_time_rule(props: dict[str, str], levels: list[int], expected: int) -> None:
    msg = MessageInner(topic=SCHEDULE_TOPIC, body=b"x", properties=props, queue_id=2)
    rec = encode_record(msg, 0, 0, 1700000000123)
    f = decode_dispatch_fields(rec, 0, len(rec))
    req = dispatch_request_of(f[1], f[2], f[4], f[0], f[5], f[6], f[3], f[7], f[8], levels)
    assert req.tags_code == expected == reference_dispatch(decode_record(rec), levels).tags_code
    # Outside the schedule topic DELAY is just a property.
    other = encode_record(MessageInner(topic="TopicTest", properties=props), 0, 0, 1700000000123)
    assert build_dispatch_request(decode_record(other), levels).tags_code == 2598919


# ---------------------------------------------------------------- (3) get_property

@settings(max_examples=400, deadline=None)
@given(raw_props, st.one_of(st.sampled_from(KEY_POOL), st.text(st.sampled_from("KXS"), min_size=1, max_size=3)))
@example("K\x01v\x02K\x01\x02", "K")  # a later empty value does not hide the earlier one (Java)
@example("K\x01v\x02K\x01", "K")
@example("XK\x01v", "K")
@example("K\x01a\x01b", "K")
def test_get_property_equals_decoded_dict(text: str, key: str) -> None:
    assert get_property(text, key) == decode_properties(text).get(key)


def test_get_property_skips_many_empty_duplicates() -> None:
    text = "K\x01v\x02" + "K\x01\x02" * 10_000 + "X\x01y"
    assert get_property(text, "K") == decode_properties(text)["K"] == "v"
    assert get_property("\x02" + text, "K") == "v"
    assert get_property("K\x01\x02" * 10_000, "K") is None


@FAST
@given(dict_props)
def test_get_property_round_trips_encoded_dicts(props: dict[str, str]) -> None:
    text = encode_properties(props)
    for key, value in props.items():
        assert get_property(text, key) == value
        assert get_property(text.rstrip("\x02"), key) == value  # missing trailing separator
    assert decode_properties(text) == props


# ---------------------------------------------------------------- (4) encode_record + patch_record

SPEC_13_5 = bytes.fromhex(
    "000000d3daa320a7248c774f000000010000000000000000000000000000000000000000000000000000018bcfe56800"
    "c0a8000a0000d4310000018bcfe5687bc0a8000100002a9f0000000000000000000000000000001048656c6c6f20526f"
    "636b65744d51203009546f70696354657374005f554e49515f4b455901433041383030304131323334314236443335"
    "383630303030303036343030303002434c55535445520144656661756c74436c757374657202544147530154616741"
    "024b455953014b4559300257414954017472756502")
SPEC_13_10_TAIL = bytes.fromhex("5f5f435243333223013231323439343834373002")


def msg_13_5() -> MessageInner:
    props = {"UNIQ_KEY": "C0A8000A12341B6D3586000000640000", "CLUSTER": "DefaultCluster", "TAGS": "TagA",
             "KEYS": "KEY0", "WAIT": "true"}
    return MessageInner(topic="TopicTest", body=b"Hello RocketMQ 0", properties=props, queue_id=1,
                        born_timestamp=1700000000000, born_host=("192.168.0.10", 54321),
                        store_host=("192.168.0.1", 10911))


def test_spec_13_5_and_13_10_via_encode_then_patch() -> None:
    for q, phy, ts in [(0, 0, 0), (9, 99, 1)]:
        buf = encode_record(msg_13_5(), q, phy, ts)
        patch_record(buf, 0, 0, 0, 1700000000123)
        assert bytes(buf) == SPEC_13_5 == reference_record(msg_13_5(), 0, 0, 1700000000123,
                                                           encode_properties(msg_13_5().properties))
        crc = encode_record(msg_13_5(), q, phy, ts, append_prop_crc=True)
        patch_record(crc, 0, 0, 0, 1700000000123, prop_crc=True)
        assert len(crc) == 231 and bytes(crc[-20:]) == SPEC_13_10_TAIL and verify_prop_crc(crc, 0, 231)


@FAST
@given(messages, st.one_of(st.none(), raw_props), final_fields, st.binary(max_size=9))
@example(MessageInner(topic="t" * 127), None, (1, 2, 3), b"")  # last V1 length
@example(MessageInner(topic="t" * 128), None, (1, 2, 3), b"")  # first V2 length
@example(MessageInner(topic="é" * 64, born_host=("::1", 1)), None, (1, 2, 3), b"")  # 128 bytes, 64 chars
def test_encode_then_patch_equals_direct_encoding(msg: MessageInner, raw: str | None,
                                                  final: tuple[int, int, int], before: bytes) -> None:
    q, phy, ts = final
    direct = encode_record(msg, q, phy, ts, properties_string=raw)
    props = encode_properties(msg.properties) if raw is None else raw
    assert bytes(direct) == reference_record(msg, q, phy, ts, props)
    # The append path: encode with zeros, patch inside the lock (also at an offset in a bigger buffer).
    buf = encode_record(msg, 0, 0, 0, properties_string=raw)
    patch_record(buf, 0, q, phy, ts)
    assert buf == direct
    host = bytearray(before) + encode_record(msg, 5, 6, 7, properties_string=raw) + b"\xee" * 3
    patch_record(memoryview(host), len(before), q, phy, ts)
    assert host == bytearray(before) + direct + b"\xee" * 3
    # store_timestamp None keeps the encoded one (keepStoreTimestamp).
    keep = encode_record(msg, 0, 0, ts, properties_string=raw)
    patch_record(keep, 0, q, phy, None)
    assert keep == direct


def _crc_digits_reference(crc: int) -> bytes:
    return str(crc).zfill(10)[::-1].encode()  # least significant digit first, '0'-padded (§1.6)


@FAST
@given(messages, st.one_of(st.none(), raw_props), final_fields, st.data())
def test_prop_crc_fast_path(msg: MessageInner, raw: str | None, final: tuple[int, int, int], data) -> None:
    q, phy, ts = final
    direct = encode_record(msg, q, phy, ts, properties_string=raw, append_prop_crc=True)
    buf = encode_record(msg, 0, 0, 0, properties_string=raw, append_prop_crc=True)
    patch_record(buf, 0, q, phy, ts, prop_crc=True)
    assert buf == direct
    props = encode_properties(msg.properties) if raw is None else raw
    if props and not props.endswith("\x02"):
        props += "\x02"
    total = len(direct)
    assert bytes(direct[:total - CRC32_RESERVED_LEN]) == reference_record(msg, q, phy, ts, props + "\0" * 20)[
        :total - CRC32_RESERVED_LEN]
    crc = zlib.crc32(bytes(direct[:total - CRC32_RESERVED_LEN])) & 0x7FFFFFFF
    assert bytes(direct[-20:]) == b"__CRC32#\x01" + _crc_digits_reference(crc) + b"\x02"
    assert verify_prop_crc(direct, 0, total)
    # The property is a real property: the decoder sees it, dispatch still works.
    assert decode_record(direct).properties.get("__CRC32#") == _crc_digits_reference(crc).decode()
    # Any damage before the CRC is detected.
    i = data.draw(st.integers(0, total - CRC32_RESERVED_LEN - 1))
    bad = bytearray(direct)
    bad[i] ^= 1 << data.draw(st.integers(0, 7))
    assert not verify_prop_crc(bad, 0, total)
    # write_prop_crc at an offset inside a larger buffer (the mapped file) gives the same tail.
    host = bytearray(b"\x00" * 5) + bytearray(direct)
    host[-20:] = bytes(20)
    write_prop_crc(host, 5, total)
    assert host[5:] == direct and verify_prop_crc(host, 5, total)
    assert rmq_crc32(bytes(host[5:5 + total - 20])) == crc


# ---------------------------------------------------------------- IndexFile.put_key

@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(st.text(st.sampled_from("abAB#é"), max_size=6), st.integers(0, 30)), min_size=1,
                max_size=60))
def test_index_put_key_matches_a_model(tmp_path_factory, puts: list[tuple[str, int]]) -> None:
    """Entries, slot chains and header as spec §7.3 lays them out (7 slots: many collisions)."""
    slots, index_num, t0 = 7, 40, 1_700_000_000_000
    f = IndexFile(tmp_path_factory.mktemp("idx") / "20240101000000000", slots, index_num)
    try:
        slot_head: dict[int, int] = {}
        entries: list[tuple[int, int, int, int, int]] = []
        for i, (key, dt) in enumerate(puts):
            phy, ts = 100 * (i + 1), t0 + dt * 1000 + i * 1000
            n = len(entries) + 1
            ok = f.put_key(key, phy, ts)
            assert ok == (n < index_num)
            if not ok:
                continue
            kh = index_key_hash(key)
            begin = t0 + puts[0][1] * 1000
            diff = max(0, (ts - begin) // 1000) if n > 1 else 0
            entries.append((n, kh, phy, diff, slot_head.get(kh % slots, 0)))
            slot_head[kh % slots] = n
        assert list(f.iter_entries()) == entries
        assert f.hash_slot_count == len(slot_head) and f.index_count == len(entries) + 1
        for key in {k for k, _ in puts}:
            kh = index_key_hash(key)
            expected = [phy for _, h, phy, _, _ in reversed(entries) if h == kh]
            assert f.select_phy_offsets(key, 1000, 0, 2 ** 62) == expected
    finally:
        f.close()
