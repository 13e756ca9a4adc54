"""A 0x01 inside a property VALUE is stored and reads back byte for byte, as in Apache RocketMQ.

Apache's MessageDecoder.string2messageProperties splits each ``name 0x01 value 0x02`` pair at its
FIRST 0x01, so ``pv 0x01 a 0x01 b`` is pv = ``a 0x01 b``; Java's putUserProperty checks no separator.
Sends holding one were refused (MESSAGE_ILLEGAL "property pv 'a\\x01b' contains a property
separator"). A 0x01/0x02 in a NAME, or a 0x02 in a value, really changes what Apache's decoder reads:
those stay refused. Every parser here (``decode_properties``, ``get_property``, the C and Python
twins' dispatch decoder, range dispatch and record selection, which the Spark scans run) must read
the pair as Apache's does. The store round trip runs on both implementations (the file is in
test_hotpath's BYTE_IDENTITY_TESTS, which runs it again with RMQ_PURE_PYTHON)."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from store_util import BASE_TS, make_msg, small_config

from broker_core.store.codec import hot_py, validate
from broker_core.store.codec.errors import RecordError
from broker_core.store.codec.hashing import java_string_hash
from broker_core.store.codec.message import MessageInner, encode_record
from broker_core.store.codec.properties import decode_properties, encode_properties, get_property
from broker_core.store.dispatch import dispatch_request_of
from broker_core.store.message_store import MessageStore

try:
    from broker_core.store.codec import _hotpath as compiled
except ImportError:  # no compiler here: only the twin runs
    compiled = None

IMPLS = [pytest.param(hot_py, id="python"),
         pytest.param(compiled, id="c", marks=pytest.mark.skipif(compiled is None, reason="_hotpath is not built"))]

PROPS = {"pv": "a\x01b", "TAGS": "t\x01x", "KEYS": "k1 k\x01y", "UNIQ_KEY": "U\x01NIQ", "lead": "\x01", "z": "v"}


def java_string2message_properties(text: str) -> dict[str, str]:
    """Apache's MessageDecoder.string2messageProperties, step for step (a HashMap: last put wins)."""
    out: dict[str, str] = {}
    index, n = 0, len(text)
    while index < n:
        new_index = text.find("\x02", index)
        if new_index < 0:
            new_index = n
        if new_index - index >= 3:
            kv = text.find("\x01", index)
            if index < kv < new_index - 1:
                out[text[index:kv]] = text[kv + 1:new_index]
        index = new_index + 1
    return out


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(alphabet="ab\x01\x02", max_size=24))
def test_every_parser_splits_a_pair_at_its_first_x01_as_apache(text: str) -> None:
    want = java_string2message_properties(text)
    assert decode_properties(text) == want
    for key in {*want, "a", "b", "ab", "ba"}:
        assert get_property(text, key) == want.get(key), key
        simple = hot_py._simple_property(text, key)
        if simple is not hot_py._UNDECIDED:
            assert simple == want.get(key), key
    names = ("a", "ab", "b")
    assert hot_py._selected_values(text, names) == tuple(want.get(n) for n in names)


def test_check_properties_takes_x01_in_a_value_and_refuses_what_apache_would_misread() -> None:
    validate.check_properties(PROPS)
    validate.check_properties_fit(PROPS)
    cases = {
        "property pv 'a\\x02b' contains a property separator (\\x02)": {"pv": "a\x02b"},
        "property name 'a\\x01b' contains a property separator (\\x01 or \\x02)": {"a\x01b": "c"},
        "property name 'a\\x02b' contains a property separator (\\x01 or \\x02)": {"a\x02b": "c"},
    }
    for message, props in cases.items():
        with pytest.raises(RecordError) as ei:
            validate.check_properties(props)
        assert str(ei.value) == message


@pytest.mark.parametrize("impl", IMPLS)
def test_both_fast_checks_give_the_reference_verdict(impl) -> None:
    msg = MessageInner(topic="TEnc", body=b"k2", properties=dict(PROPS))
    impl.check_message(msg)  # accepted, as the reference accepts it
    bad = MessageInner(topic="TEnc", body=b"k2", properties={"p\x01v": "x"})
    with pytest.raises(RecordError, match="property name 'p\\\\x01v' contains a property separator"):
        impl.check_message(bad)


def _records() -> tuple[bytearray, list[int]]:
    buf, positions = bytearray(), []
    for i in range(3):
        msg = MessageInner(topic="TEnc", body=b"k%d" % i, properties=dict(PROPS, i=str(i)), queue_id=1,
                           born_timestamp=BASE_TS, born_host=("10.0.0.9", 5555), store_host=("127.0.0.1", 10911))
        positions.append(len(buf))
        buf += encode_record(msg, i, len(buf), BASE_TS + i)
    return buf, positions


@pytest.mark.parametrize("impl", IMPLS)
def test_decoders_read_the_value_back_byte_for_byte(impl) -> None:
    buf, positions = _records()
    for i, pos in enumerate(positions):
        fields = impl.decode_dispatch_fields(buf, pos, len(buf))
        assert fields is not None
        props = fields[-1]
        assert props == encode_properties(dict(PROPS, i=str(i)))
        assert decode_properties(props)["pv"] == "a\x01b"
    # record selection (mqadmin and Spark message search): the SQL sees pv = a\x01b
    seen: list[object] = []

    def judge(values):
        seen.append(values)
        return values == ("a\x01b", "t\x01x")

    _, records, hits, deferred, stopped = impl.select_records(buf, 0, len(buf), len(buf), True, "TEnc", None, None,
                                                               ("pv", "TAGS"), {}, judge, None)
    assert (records, hits, deferred, stopped) == (3, positions, [], False)
    assert seen == [("a\x01b", "t\x01x")]


@pytest.mark.parametrize("impl", IMPLS)
def test_range_dispatch_gives_the_reference_units_and_keys(impl) -> None:
    """The rebuild job's dispatch: tagsCode of TAGS t\\x01x, index keys KEYS/UNIQ_KEY with their 0x01,
    as ``dispatch_request_of`` (the reput path's reference) reads them."""
    buf, positions = _records()
    cq: dict = {}
    index = bytearray()
    pos, count = impl.dispatch_range(buf, 0, len(buf), len(buf), True, True, cq, index)
    assert (pos, count) == (len(buf), 3)
    ref = dispatch_request_of("TEnc", 1, positions[0], positions[1], 0, BASE_TS, 0, 0,
                              impl.decode_dispatch_fields(buf, 0, len(buf))[-1], [])
    assert ref.tags_code == java_string_hash("t\x01x") and ref.keys == "k1 k\x01y" and ref.uniq_key == "U\x01NIQ"
    unit = bytes(cq[("TEnc", 1)][:46])
    assert int.from_bytes(unit[36:44], "big", signed=True) == BASE_TS  # CQ_REC ">qqqiqqh": store time
    assert int.from_bytes(unit[28:36], "big", signed=True) == ref.tags_code
    hashes = [int.from_bytes(index[i:i + 4], "big", signed=True) for i in range(0, 60, 20)]
    assert hashes == [impl.index_key_hash(k) for k in ("TEnc#U\x01NIQ", "TEnc#k1", "TEnc#k\x01y")]


def test_store_round_trip_keeps_the_value(tmp_path: Path) -> None:
    """Put through the store (whichever implementation is loaded: this file runs on both), read back by
    queue, by offset, by key and by the UNIQ_KEY index."""
    store = MessageStore(tmp_path / "store", small_config()).open()
    try:
        msg = make_msg("TEnc", 0, b"k2", key="k1 k\x01y", tags="t\x01x", uniq="U\x01NIQ", pv="a\x01b")
        r = store.put_message(msg)
        assert r.ok, r
        got = store.look_message_by_offset(r.wrote_offset)
        assert got is not None and got.properties["pv"] == "a\x01b"
        assert "pv\x01a\x01b\x02" in got.properties_string
        assert got.tags == "t\x01x" and got.keys == "k1 k\x01y" and got.uniq_key == "U\x01NIQ"
        (pulled,) = store.get_messages("TEnc", 0, 0, 10).messages
        assert pulled.properties == msg.properties
        for key in ("k\x01y", "U\x01NIQ"):
            assert [m.commit_log_offset for m in store.query_message("TEnc", key)] == [r.wrote_offset], key
    finally:
        store.shutdown()
