"""The compiled hot path (``_hotpath.c``) against its pure-Python twin (``hot_py``), and both in the suite.

Why: the store writes bytes that Java RocketMQ must read, through whichever implementation loaded.
Three layers of checking: (1) every function of the two implementations gives the same result,
bytes and exception type on random input, awkward cases included; (2) the codec, store and golden
byte-identity test files run again in a subprocess on the other implementation (``RMQ_PURE_PYTHON``);
(3) a built extension must load (a broken build must not fall back silently).
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from store_util import make_msg, small_config

from broker_core.store.codec import hot_py, hotpath
from broker_core.store.codec.errors import RecordError
from broker_core.store.codec.message import MessageInner
from broker_core.store.message_store import MessageStore
from broker_core.store.store_config import SYNC_FLUSH

REPO = Path(__file__).resolve().parents[2]
CODEC_DIR = REPO / "broker_core" / "store" / "codec"

try:
    from broker_core.store.codec import _hotpath as compiled
except ImportError:  # no compiler on this machine: the twin is all there is
    compiled = None

needs_c = pytest.mark.skipif(compiled is None, reason="the _hotpath extension is not built here")
FAST = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# The test files that pin record, unit and index bytes; run again on the other implementation.
BYTE_IDENTITY_TESTS = [
    "tests/store/test_codec.py",
    "tests/store/test_codec_fast_paths.py",
    "tests/store/test_golden_read.py",
    "tests/store/test_golden_write.py",
    "tests/store/test_store_basic.py",
    "tests/store/test_index_file.py",
    "tests/store/test_index_service.py",
    "tests/store/test_dispatch_from_append.py",
    "tests/store/test_commit_log_paths.py",
    "tests/store/test_input_validation.py",
    "tests/store/test_cq_damage.py",  # recovery's end of valid units (valid_units_end) on both
    "tests/store/test_crash_reopen_fast.py",  # torn index file / CQ unit repaired in place, on both
    "tests/store/test_put_fast.py",  # the one-call put against the general path's bytes
    "tests/store/test_put_inner_batch_fast.py",  # the one-call BatchCQ put against the general path
    "tests/store/test_write_buffer.py",  # buffered inner batches (flat put and dispatch) vs direct writes
    "tests/store/test_buffered_put.py",  # the flat write-buffer put and dispatch against the general path
    "tests/store/test_property_value_separator.py",  # a 0x01 inside a property value, put and read back
]
# Two halves of about equal run time on the pure-Python twin (measured: ~30 s each), run side by side.
_SECOND_SHARD = {"tests/store/test_buffered_put.py", "tests/store/test_put_inner_batch_fast.py",
                 "tests/store/test_commit_log_paths.py", "tests/store/test_write_buffer.py"}
BYTE_IDENTITY_SHARDS = [[f for f in BYTE_IDENTITY_TESTS if f not in _SECOND_SHARD],
                        [f for f in BYTE_IDENTITY_TESTS if f in _SECOND_SHARD]]


def _outcome(fn, *args):
    """(True, result) or (False, exception type) — what both implementations must agree on."""
    try:
        return True, fn(*args)
    except Exception as e:  # noqa: BLE001 - the type is the comparison
        return False, type(e)


def test_built_extension_loads() -> None:
    """A compiled module next to the sources must import: a broken build never falls back silently."""
    built = list(CODEC_DIR.glob("_hotpath*.so")) + list(CODEC_DIR.glob("_hotpath*.pyd"))
    if not built:
        pytest.skip("the _hotpath extension is not built here (pip install -e . builds it)")
    assert compiled is not None
    forced = os.environ.get(hotpath.FORCE_PURE_PYTHON_ENV, "") not in ("", "0")
    assert hotpath.IMPLEMENTATION == ("python" if forced else "c")


# ---------------------------------------------------------------- (1) function by function

texts = st.text(st.characters(blacklist_categories=("Cs",)), max_size=40)
awkward_texts = st.one_of(texts, st.sampled_from(["", "a\x01b", "x\x02", "日本語", "😀", "TagA", " k  k2 "]))
hosts = st.one_of(
    st.tuples(st.sampled_from(["127.0.0.1", "10.0.0.1", "255.255.255.255", "0.0.0.0", "127.1"]),
              st.integers(-(2 ** 31), 2 ** 31 - 1)),
    st.tuples(st.sampled_from(["::1", "fe80::1", "2001:db8::ff00:42:8329", "::"]), st.integers(0, 65535)),
)


@st.composite
def messages(draw) -> MessageInner:
    props = draw(st.dictionaries(awkward_texts, st.one_of(awkward_texts, st.none()), max_size=5))
    for name in ("TAGS", "KEYS", "UNIQ_KEY"):
        if draw(st.booleans()):
            props[name] = draw(awkward_texts)
    topic = draw(st.one_of(st.sampled_from(["T", "SCHEDULE_TOPIC_XXXX", "x" * 128, "主题"]),
                           st.text(min_size=1, max_size=200)))
    return MessageInner(topic=topic, body=draw(st.binary(max_size=300)), properties=props,
                        queue_id=draw(st.integers(0, 2 ** 31 - 1)), flag=draw(st.integers(-(2 ** 31), 2 ** 31 - 1)),
                        sys_flag=draw(st.integers(0, 0xFFFF)), born_timestamp=draw(st.integers(0, 2 ** 62)),
                        born_host=draw(hosts), store_host=draw(hosts), reconsume_times=draw(st.integers(0, 16)),
                        prepared_transaction_offset=draw(st.integers(0, 2 ** 62)))


@needs_c
@FAST
@given(msg=messages(), props_string=st.one_of(st.none(), awkward_texts), prop_crc=st.booleans(),
       max_size=st.sampled_from([4 * 1024 * 1024, 100, 0]), q=st.integers(0, 2 ** 62), phy=st.integers(0, 2 ** 62),
       ts=st.integers(0, 2 ** 62), pos=st.integers(0, 9))
def test_record_encoding_is_identical(msg, props_string, prop_crc, max_size, q, phy, ts, pos) -> None:
    args = (msg, props_string, max_size, prop_crc)
    ok_py, rec_py = _outcome(hot_py.prepare_record, *args)
    ok_c, rec_c = _outcome(compiled.prepare_record, *args)
    assert (ok_py, rec_py) == (ok_c, rec_c)
    if not ok_py:
        return
    buf_py, buf_c = bytearray(rec_py[0] + 12), bytearray(rec_py[0] + 12)
    assert hot_py.write_record(buf_py, pos, rec_py, msg, q, phy, ts) == compiled.write_record(buf_c, pos, rec_c, msg, q,
                                                                                              phy, ts)
    assert buf_py == buf_c
    assert hot_py.record_parts(rec_py, msg, q, phy, ts) == compiled.record_parts(rec_c, msg, q, phy, ts)
    assert hot_py.offset_msg_id(rec_py[5], phy) == compiled.offset_msg_id(rec_c[5], phy)
    for limit in (len(buf_py), pos + rec_py[0], pos + rec_py[0] - 1):
        assert hot_py.decode_dispatch_fields(buf_py, pos, limit) == compiled.decode_dispatch_fields(buf_py, pos, limit)
    assert hot_py.body_crc_matches(buf_py, pos, rec_py[3]) == compiled.body_crc_matches(buf_py, pos, rec_py[3]) is True


@needs_c
def test_record_errors_are_identical() -> None:
    big = MessageInner(topic="T", body=b"x" * 10, properties={"p": "v" * 40000})
    for fn in (hot_py.prepare_record, compiled.prepare_record):
        with pytest.raises(RecordError, match="properties size"):
            fn(big)
        with pytest.raises(RecordError, match="maxMessageSize"):
            fn(MessageInner(topic="T", body=b"x" * 10), None, 5)
        with pytest.raises(RecordError, match="topic length"):
            fn(MessageInner(topic="t" * 40000))
        with pytest.raises(OSError):
            fn(MessageInner(topic="T", born_host=("not-an-ip", 1)))
        with pytest.raises(UnicodeEncodeError):
            fn(MessageInner(topic="T", properties={"k": "\ud800"}))
    # Non-str property values go through the reference encoder in both.
    odd = MessageInner(topic="T", properties={"n": 5, "KEYS": "a b"})  # type: ignore[dict-item]
    assert hot_py.prepare_record(odd) == compiled.prepare_record(odd)


@needs_c
def test_body_crc_is_zlibs_crc_at_every_length_and_alignment() -> None:
    """BODYCRC of large bodies is computed in C (VPCLMULQDQ folding where the CPU has it): it must be
    zlib's CRC-32 with the top bit cleared for every length (whole 16-byte blocks or not, around the
    folding threshold) and start address, as the reference computes it, in record bytes and in the
    recovery check."""
    import random
    import zlib

    rnd = random.Random(17)
    data = rnd.randbytes(300_000)
    lengths = [*range(0, 700), 67_584, 1 << 16, (1 << 16) + 15, 262_144, *(rnd.randrange(700, 299_000) for _ in range(200))]
    for n in lengths:
        off = rnd.randrange(0, 64)
        body = memoryview(data)[off:off + n]
        msg = MessageInner(topic="T", body=body)
        want = zlib.crc32(body) & 0x7FFFFFFF
        rec = compiled.prepare_record(msg)
        assert rec[2] == (want if n else 0) == hot_py.prepare_record(msg)[2], (n, off, compiled.BODY_CRC)
        if n:
            record = bytearray(rec[0])
            compiled.write_record(record, 0, rec, msg, 0, 0, 0)
            assert compiled.body_crc_matches(record, 0, rec[3])
            record[rec[0] - len(rec[6]) - 1] ^= 1  # the body's last byte
            assert not compiled.body_crc_matches(record, 0, rec[3])


@needs_c
@FAST
@given(data=st.binary(min_size=0, max_size=200), pos=st.integers(-3, 210), limit=st.integers(-1, 220))
@example(data=b"\x00" * 100, pos=0, limit=100)
def test_dispatch_decoder_is_identical_on_garbage(data, pos, limit) -> None:
    assert hot_py.decode_dispatch_fields(data, pos, limit) == compiled.decode_dispatch_fields(data, pos, limit)


@needs_c
@FAST
@given(msg=messages(), flips=st.lists(st.tuples(st.integers(0, 400), st.integers(0, 255)), max_size=4))
def test_dispatch_decoder_is_identical_on_damaged_records(msg, flips) -> None:
    try:
        rec = hot_py.prepare_record(msg)
    except (RecordError, OSError, OverflowError, UnicodeEncodeError):
        return
    buf = bytearray(rec[0] + 8)
    hot_py.write_record(buf, 0, rec, msg, 1, 2, 3)
    for at, value in flips:
        if at < len(buf):
            buf[at] = value
    assert hot_py.decode_dispatch_fields(buf, 0, len(buf)) == compiled.decode_dispatch_fields(buf, 0, len(buf))
    if hot_py.decode_dispatch_fields(buf, 0, len(buf)) is not None:
        sys_flag = hot_py.decode_dispatch_fields(buf, 0, len(buf))[5]
        assert _outcome(hot_py.body_crc_matches, buf, 0, sys_flag) == _outcome(compiled.body_crc_matches, buf, 0,
                                                                               sys_flag)


@needs_c
@FAST
@given(s=st.text(max_size=60))
@example(s="\ud800")
@example(s="polygenelubricants")  # Java hash MIN_VALUE: the index key hash maps it to 0
def test_java_hashes_are_identical(s) -> None:
    assert _outcome(hot_py.java_string_hash, s) == _outcome(compiled.java_string_hash, s)
    assert _outcome(hot_py.index_key_hash, s) == _outcome(compiled.index_key_hash, s)
    for tags in (s, None, ""):
        assert _outcome(hot_py.tags_code, tags) == _outcome(compiled.tags_code, tags)


@needs_c
@FAST
@given(args=st.tuples(st.integers(0, 2 ** 62), st.integers(-(2 ** 31), 2 ** 31 - 1), st.integers(-(2 ** 63), 2 ** 63 - 1),
                      st.integers(0, 2 ** 62), st.integers(0, 2 ** 62), st.integers(-(2 ** 15), 2 ** 15 - 1)),
       pos=st.integers(0, 60))
def test_queue_units_are_identical(args, pos) -> None:
    phy, size, tags, store_time, base, batch = args
    a, b = bytearray(100), bytearray(100)
    assert _outcome(hot_py.put_cq_unit, a, pos, phy, size, tags) == _outcome(compiled.put_cq_unit, b, pos, phy, size,
                                                                             tags)
    assert a == b
    assert _outcome(hot_py.put_bcq_unit, a, pos, phy, size, tags, store_time, base, batch) == \
        _outcome(compiled.put_bcq_unit, b, pos, phy, size, tags, store_time, base, batch)
    assert a == b


@needs_c
@FAST
@given(records=st.lists(st.tuples(st.one_of(st.none(), awkward_texts), st.one_of(st.none(), awkward_texts),
                                  st.integers(0, 5000)), min_size=1, max_size=30),
       slots=st.integers(1, 7), index_num=st.integers(2, 12), pre_ts=st.sampled_from([0, 1_700_000_000_000]),
       topic=st.sampled_from(["T", "主题", "BenchTopic"]))
def test_index_entries_are_identical(records, slots, index_num, pre_ts, topic) -> None:
    """Whole index files written record by record (rolling skip included) are byte-identical."""
    size = 40 + slots * 4 + index_num * 20
    outs = []
    for impl in (hot_py, compiled):
        buf = bytearray(size)
        state = (1, pre_ts, 0, 0)
        results = []
        phy = 0
        ts = 1_700_000_000_000
        for uniq, keys, step in records:
            phy += 100
            ts += step
            skip = 0
            while True:
                r = impl.index_put_keys(buf, slots, index_num, *state, topic, uniq, keys, phy, ts, skip)
                results.append(r)
                if r[0]:
                    state = (r[5], r[2], r[3], r[4])
                skip += r[0]
                if skip >= r[1] or r[0] == 0:
                    break
        outs.append((bytes(buf), results))
    assert outs[0] == outs[1]


# check_message: both fast checks must give the reference's verdict (and message) on anything.
odd_texts = st.one_of(awkward_texts, st.sampled_from(["\ud800x", "a\udfff", "\x01", "k\x02v"]))
odd_ints = st.one_of(st.integers(-(2 ** 64), 2 ** 64), st.sampled_from([True, False, 1.0, "1", None]))
odd_hosts = st.one_of(hosts, st.tuples(st.sampled_from(["999.1.1.1", "01.2.3.4", "1.2.3", "fe80::1%eth0", "::g",
                                                        "", "1.2.3.4 "]), st.integers(-5, 70000)),
                      st.sampled_from([("1.2.3.4", True), ("1.2.3.4", 5.0), ["1.2.3.4", 5], "1.2.3.4:5", None,
                                       ("1.2.3.4",), ("1.2.3.4", 5, 6), ([], 1)]))


@st.composite
def odd_messages(draw) -> MessageInner:
    msg = draw(messages())
    if draw(st.booleans()):
        msg.properties = draw(st.one_of(
            st.dictionaries(odd_texts, st.one_of(odd_texts, st.none(), st.integers()), max_size=4),
            st.sampled_from([None, [("a", "b")], {1: "x"}, {"": "v"}, {"k": b"v"}])))
    for name in ("queue_id", "flag", "sys_flag", "reconsume_times", "born_timestamp", "prepared_transaction_offset",
                 "store_timestamp"):
        if draw(st.integers(0, 7)) == 0:
            setattr(msg, name, draw(odd_ints))
    if draw(st.integers(0, 3)) == 0:
        msg.keep_store_timestamp = draw(st.sampled_from([True, False, 0, 1, None]))
    if draw(st.integers(0, 3)) == 0:
        msg.topic = draw(st.one_of(odd_texts, st.sampled_from([None, b"T", ""])))
    if draw(st.integers(0, 5)) == 0:
        msg.body = draw(st.sampled_from(["text", None, bytearray(b"x"), memoryview(b"y"), 5]))
    if draw(st.integers(0, 3)) == 0:
        setattr(msg, draw(st.sampled_from(["born_host", "store_host"])), draw(odd_hosts))
    return msg


def _verdict(fn, *args):
    """(True, None) or (False, exception type, message): messages must be the reference's too."""
    try:
        fn(*args)
        return True, None
    except Exception as e:  # noqa: BLE001 - the type and text are the comparison
        return False, type(e), str(e)


@FAST
@given(msg=odd_messages(), given_props=st.booleans())
def test_check_message_gives_the_reference_verdict(msg, given_props) -> None:
    """The fast checks (C and Python twin) accept exactly what validate.check_message accepts, and
    refuse with its exception and message."""
    from broker_core.store.codec import validate

    ref = _verdict(validate.check_message, msg, given_props)
    assert _verdict(hot_py.check_message, msg, given_props) == ref
    if compiled is not None:
        assert _verdict(compiled.check_message, msg, given_props) == ref
        # twice: the second call takes the remembered-host path
        assert _verdict(compiled.check_message, msg, given_props) == ref
    assert _verdict(hot_py.check_message, msg, given_props) == ref


def test_check_message_refuses_after_a_host_was_remembered() -> None:
    """A remembered valid host never lets an equal-looking bad one through (5.0 == 5, True == 1)."""
    from broker_core.store.codec import validate

    impls = [hot_py.check_message] + ([compiled.check_message] if compiled is not None else [])
    for fn in impls:
        fn(MessageInner(topic="T", born_host=("1.2.3.4", 1)))
        for bad in (("1.2.3.4", True), ("1.2.3.4", 1.0)):
            msg = MessageInner(topic="T", born_host=bad)  # type: ignore[arg-type]
            assert _verdict(fn, msg) == _verdict(validate.check_message, msg)
            assert _verdict(fn, msg)[0] is False


def _units_end_one_by_one(buf: bytes, start: int, limit: int, batch: bool) -> int:
    """The rule as recovery states it (spec §5.5): check each unit with the codec's validity test."""
    from broker_core.store.codec.cq_unit import BCQ_UNIT, CQ_UNIT, is_valid_bcq_unit, is_valid_cq_unit
    unit = 46 if batch else 20
    pos = start
    while pos + unit <= min(limit, len(buf)):
        if batch:
            phy, size, _t, _s, base, num, _c, _r = BCQ_UNIT.unpack_from(buf, pos)
            ok = is_valid_bcq_unit(phy, size, base, num)
        else:
            phy, size, _t = CQ_UNIT.unpack_from(buf, pos)
            ok = is_valid_cq_unit(phy, size)
        if not ok:
            break
        pos += unit
    return pos


_unit_field = st.sampled_from([0, 1, 0x7F, 0x80, 0xFF])


@FAST
@given(batch=st.booleans(), count=st.integers(0, 40), damage=st.lists(
    st.tuples(st.integers(0, 45 * 46), _unit_field), max_size=4), start_units=st.integers(0, 3),
    slack=st.integers(-50, 50))
@example(batch=False, count=3, damage=[(28, 0x80)], start_units=0, slack=0)  # size's sign byte
@example(batch=True, count=3, damage=[(46 + 36, 0), (46 + 37, 0)], start_units=0, slack=0)  # batchSize 0
def test_valid_units_end_is_the_unit_by_unit_rule_in_both(batch, count, damage, start_units, slack) -> None:
    """Both implementations give exactly the end the unit-by-unit rule gives (a torn unit anywhere,
    a negative or zero field, a limit inside a unit or past the buffer), so recovery is exact."""
    from broker_core.store.codec.cq_unit import pack_bcq_unit, pack_cq_unit
    unit = 46 if batch else 20
    buf = bytearray()
    for i in range(count):
        buf += pack_bcq_unit(100 * i, 90 + i, 7, 1_700_000_000_000, 4 * i, 4) if batch else \
            pack_cq_unit(100 * i, 90 + i, 7)
    buf += bytes(unit * 2)
    for pos, value in damage:
        if pos < len(buf):
            buf[pos] = value
    data = bytes(buf)
    start = min(start_units * unit, len(data))
    limit = len(data) + slack
    want = _units_end_one_by_one(data, start, limit, batch)
    impls = [hot_py] + ([compiled] if compiled is not None else [])
    for impl in impls:
        for view in (data, memoryview(data), bytearray(data)):
            assert impl.valid_units_end(view, start, limit, batch) == want, impl.IMPLEMENTATION


def _commitlog_bytes(tmp: Path, n: int) -> tuple[bytes, list[tuple[int, int]]]:
    """A real commitlog file of ``n`` records (store time +10 ms each, some IPv6 born hosts) and each
    record's (position, store timestamp)."""
    from store_util import FakeClock

    store = MessageStore(tmp, small_config(mapped_file_size_commit_log=64 * 1024), clock=FakeClock(step=10)).open()
    try:
        for i in range(n):
            msg = make_msg("Walk", i % 2, b"b" * (i % 40), key=f"k{i}")
            if i % 3 == 0:
                msg.born_host = ("::1", 7000)
            assert store.put_message(msg).ok
        mf = store.commit_log.file_queue.files[0]
        data = bytes(mf.mv[:mf.wrote_position])
        records, pos = [], 0
        while (f := hotpath.decode_dispatch_fields(data, pos, len(data))) is not None:
            records.append((pos, f[6]))
            pos += f[0]
        return data, records
    finally:
        store.shutdown()


def test_first_record_stored_after_steps_over_older_records_in_both(tmp_path: Path) -> None:
    data, records = _commitlog_bytes(tmp_path, 40)
    impls = [hot_py] + ([compiled] if compiled is not None else [])
    for impl in impls:
        for k in (0, 7, 39):
            ts = records[k][1]
            want = records[k + 1][0] if k + 1 < len(records) else records[-1][0] + (len(data) - records[-1][0])
            assert impl.first_record_stored_after(data, 0, len(data), ts) == want, (impl.IMPLEMENTATION, k)
        assert impl.first_record_stored_after(data, 0, len(data), 0) == 0
        # a limit inside a record stops before it; so does a record that is not a message
        assert impl.first_record_stored_after(data, 0, records[5][0] + 3, 1 << 62) == records[5][0]
        bad = bytearray(data)
        bad[records[9][0] + 4] ^= 0xFF  # magic
        assert impl.first_record_stored_after(bytes(bad), 0, len(bad), 1 << 62) == records[9][0]


@FAST
@given(damage=st.lists(st.tuples(st.integers(0, 4000), st.integers(0, 255)), max_size=4),
       ts_shift=st.integers(-50, 500), start=st.integers(0, 3), limit_cut=st.integers(0, 300))
def test_first_record_stored_after_agrees_on_damaged_bytes(tmp_path_factory, damage, ts_shift, start,
                                                          limit_cut) -> None:
    global _WALK_DATA
    if _WALK_DATA is None:
        _WALK_DATA = _commitlog_bytes(tmp_path_factory.mktemp("walk"), 60)
    data, records = _WALK_DATA
    buf = bytearray(data)
    for pos, value in damage:
        if pos < len(buf):
            buf[pos] = value
    pos = records[start][0]
    limit = len(buf) - limit_cut
    ts = records[0][1] + ts_shift
    if compiled is not None:
        assert compiled.first_record_stored_after(bytes(buf), pos, limit, ts) == \
            hot_py.first_record_stored_after(bytes(buf), pos, limit, ts)


_WALK_DATA: tuple[bytes, list[tuple[int, int]]] | None = None


# ---------------------------------------------------------------- (2) the byte-identity tests on the other one

def test_byte_identity_tests_on_the_other_implementation(tmp_path: Path) -> None:
    """Run the codec, store and golden tests again with the implementation this process is not using.

    The re-run is CPU-bound (pure Python when this process runs C) while this process only waits, so the
    files are split into two shards of about equal run time that run side by side: the 2 cores of a CI
    machine finish it in about half the wall time, every file still runs, each with ``-x``.
    """
    if hotpath.IMPLEMENTATION == "c":
        force = "1"
    elif compiled is not None:
        force = "0"
    else:
        pytest.skip("only the pure-Python implementation exists here; this run already covered it")
    env = dict(os.environ, **{hotpath.FORCE_PURE_PYTHON_ENV: force})
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    probe = subprocess.run([sys.executable, "-c", "from broker_core.store.codec import hotpath;"
                            "print(hotpath.IMPLEMENTATION)"], cwd=REPO, env=env, capture_output=True, text=True,
                           timeout=60)
    assert probe.stdout.strip() == ("python" if force == "1" else "c"), probe.stderr
    assert sorted(f for shard in BYTE_IDENTITY_SHARDS for f in shard) == sorted(BYTE_IDENTITY_TESTS)
    procs = []
    for i, shard in enumerate(BYTE_IDENTITY_SHARDS):
        out = (tmp_path / f"shard{i}.out").open("w+")
        procs.append((subprocess.Popen([sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider",
                                        f"--basetemp={tmp_path / f'bt{i}'}", *shard],
                                       cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT, text=True), out))
    try:
        for proc, _ in procs:
            proc.wait(timeout=900)
    finally:
        for proc, _ in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    for proc, out in procs:
        out.seek(0)
        assert proc.returncode == 0, out.read()[-6000:]
        out.close()


# ---------------------------------------------------------------- group commit

def test_group_commit_flushes_every_waiting_request_together(tmp_path: Path, monkeypatch) -> None:
    """16 SYNC_FLUSH producers: a flush covers (nearly) every producer's waiting put, not ~half of them.

    A generous gathering bound keeps this mostly independent of the machine's load; without the
    gathering step the first request of a round starts a flush and puts per fsync stay around 8, so
    the bound is 10 (a fresh-clone CI run beside a Spark job measured 480 puts in 41 fsyncs: 11.7).
    """
    from broker_core.store import commit_log

    monkeypatch.setattr(commit_log, "GROUP_COMMIT_GATHER_S", 0.5)

    store = MessageStore(tmp_path, small_config(flush_disk_type=SYNC_FLUSH, mapped_file_size_commit_log=1 << 22)).open()
    store.start()
    per_thread = 30
    errors: list[object] = []
    start = threading.Barrier(16)

    def producer(t: int) -> None:
        start.wait()
        for i in range(per_thread):
            r = store.put_message(make_msg("Gc", t % 4, b"g" * 100, key=f"g{t}-{i}"))
            if not r.ok or store.commit_log.flushed_offset < r.wrote_offset + r.wrote_bytes:
                errors.append(r)

    threads = [threading.Thread(target=producer, args=(t,)) for t in range(16)]
    try:
        f0 = store.commit_log.fsync_count
        for th in threads:
            th.start()
        for th in threads:
            th.join(60)
        assert not errors
        fsyncs = store.commit_log.fsync_count - f0
        assert (16 * per_thread) / fsyncs >= 10, fsyncs
    finally:
        store.shutdown()
