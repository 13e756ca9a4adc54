"""``dispatch_range`` (the Spark rebuild's per-record dispatch of plain records) on both implementations.

Why: the rebuild writes consume queues and index files from what it appends, and its output must be
byte-identical to the store's own dispatch. Each implementation is checked against the reference
(``check_record`` + ``build_dispatch_request``, the store's decision for every record) over a real
commitlog holding plain records and every kind it must leave to the full path, and the compiled one
against the pure-Python twin on damaged bytes.
"""

from __future__ import annotations

import struct
from itertools import pairwise
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from store_util import FakeClock, make_msg, small_config

from broker_core.store.codec import hot_py, hotpath
from broker_core.store.codec.hashing import index_key_hash
from broker_core.store.codec.message import RECORD_VALID, check_record
from broker_core.store.codec.sys_flag import (
    TRANSACTION_ROLLBACK_TYPE,
    TRANSACTION_TYPE_MASK,
    is_dispatched_to_queue,
)
from broker_core.store.dispatch import build_dispatch_request
from broker_core.store.message_store import MessageStore

try:
    from broker_core.store.codec import _hotpath as compiled
except ImportError:  # no compiler on this machine: the twin is all there is
    compiled = None

IMPLS = [hot_py] + ([compiled] if compiled is not None else [])
FAST = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
CQ_REC = struct.Struct(">qqqiqqh")
IDX_REC = struct.Struct(">iqq")
DELAYS = [1000, 5000, 10000]


def _store_bytes(tmp: Path) -> tuple[bytes, list[tuple[int, bool]]]:
    """A real commitlog file and ``(pos, plain)`` of each record: ``plain`` says dispatch_range takes it."""
    store = MessageStore(tmp, small_config(mapped_file_size_commit_log=256 * 1024), clock=FakeClock(step=10)).open()
    plain: list[bool] = []
    try:
        cl = store.commit_log
        for i in range(60):
            kind = i % 12
            msg = make_msg(f"T{i % 3}", i % 2, f"body {i}".encode(), key=f"k{i}  o{i % 5} " if i % 4 else None,
                           tags=f"tag{i % 4}" if i % 6 else None, uniq=f"U{i:08X}" if i % 5 else None)
            props = None
            if kind == 1:
                msg.properties["note"] = "é"  # non-ASCII properties: full path
            elif kind == 2:
                msg.topic = "SCHEDULE_TOPIC_XXXX"
                msg.properties["DELAY"] = "2"
            elif kind == 3:
                msg.sys_flag = 0x4  # prepared: index keys, no queue unit
            elif kind == 4:
                msg.sys_flag = 0xC  # rollback: neither
            elif kind == 5:
                msg.sys_flag = 0x8  # commit
            elif kind == 6:
                props = f"KEYS\x01early{i}\x02TAGS\x01t\x02KEYS\x01\x02"  # last KEYS empty: full path
            elif kind == 7:
                props = f"TAGS\x01\x02KEYS\x01a{i} b{i}"  # first (empty) TAGS: plain
            elif kind == 8:
                msg.properties["INNER_NUM"] = "3"
            assert cl.put_message(msg, properties_string=props).ok
            plain.append(kind not in (1, 2, 6, 8))
        mf = cl.file_queue.files[0]
        data = bytes(mf.mv[:mf.wrote_position]) + bytes(200)
    finally:
        store.shutdown()
    out, pos = [], 0
    while (chk := check_record(data, pos, len(data), True, False)).kind == RECORD_VALID:
        out.append((pos, plain[len(out)]))
        pos += chk.size
    assert len(out) == 60
    return data, out


@pytest.fixture(scope="module")
def commitlog(tmp_path_factory):
    return _store_bytes(tmp_path_factory.mktemp("dispatch_range"))


def _reference(data: bytes, pos: int, want_index: bool) -> tuple[dict, bytearray, int]:
    """What the store's dispatch decides for the record at ``pos``: queue unit, index keys, size."""
    chk = check_record(data, pos, len(data), True, False)
    req = build_dispatch_request(chk.message, DELAYS)
    cq, index = {}, bytearray()
    if is_dispatched_to_queue(req.sys_flag):
        cq[(req.topic, req.queue_id)] = bytearray(CQ_REC.pack(
            req.consume_queue_offset, req.msg_base_offset, req.commit_log_offset, req.msg_size, req.tags_code,
            req.store_timestamp, req.batch_size))
    if want_index and req.sys_flag & TRANSACTION_TYPE_MASK != TRANSACTION_ROLLBACK_TYPE:
        keys = ([req.uniq_key] if req.uniq_key is not None else []) + [t for t in (req.keys or "").split(" ") if t]
        for k in keys:
            index += IDX_REC.pack(index_key_hash(f"{req.topic}#{k}"), req.commit_log_offset, req.store_timestamp)
    return cq, index, chk.size


@pytest.mark.parametrize("impl", IMPLS, ids=lambda m: m.IMPLEMENTATION)
@pytest.mark.parametrize("want_index", [True, False])
def test_dispatch_range_writes_what_the_store_dispatches(commitlog, impl, want_index):
    data, records = commitlog
    end = records[-1][0] + check_record(data, records[-1][0], len(data), True, False).size
    cq: dict = {}
    index = bytearray()
    exp_cq: dict = {}
    exp_index = bytearray()
    pos, i = 0, 0
    while pos < end:
        new_pos, n = impl.dispatch_range(data, pos, end, len(data), True, want_index, cq, index)
        # it takes exactly the run of plain records in front of it
        run = 0
        while i + run < len(records) and records[i + run][1]:
            run += 1
        assert n == run
        for _ in range(n):
            rcq, ridx, size = _reference(data, records[i][0], want_index)
            for k, v in rcq.items():
                exp_cq.setdefault(k, bytearray()).extend(v)
            exp_index += ridx
            i += 1
        assert new_pos == (records[i][0] if i < len(records) else end)
        pos = new_pos
        if pos < end:  # the caller's full path takes the record dispatch_range left
            rcq, ridx, size = _reference(data, pos, want_index)
            for k, v in rcq.items():
                cq.setdefault(k, bytearray()).extend(v)
                exp_cq.setdefault(k, bytearray()).extend(v)
            index += ridx
            exp_index += ridx
            pos += size
            i += 1
    assert cq == exp_cq
    assert index == exp_index
    assert want_index == bool(index)


@pytest.mark.parametrize("impl", IMPLS, ids=lambda m: m.IMPLEMENTATION)
def test_dispatch_range_stops_at_a_bad_crc_and_at_stop(commitlog, impl):
    data, records = commitlog
    buf = bytearray(data)
    assert all(plain for _p, plain in records[9:12])
    bad = records[10][0]
    buf[bad + 88] ^= 0xFF  # first body byte of record 10 (IPv4 hosts): its BODYCRC no longer matches
    assert impl.dispatch_range(bytes(buf), records[9][0], len(buf), len(buf), True, True, {}, bytearray()) == (bad, 1)
    assert impl.dispatch_range(bytes(buf), records[9][0], len(buf), len(buf), False, True, {}, bytearray())[1] > 2
    assert impl.dispatch_range(bytes(buf), bad, records[12][0], len(buf), False, True, {}, bytearray()) == \
        (records[12][0], 2)
    assert impl.dispatch_range(data, records[3][0], records[3][0], len(data), True, True, {}, bytearray()) == \
        (records[3][0], 0)


@pytest.mark.skipif(compiled is None, reason="the _hotpath extension is not built here")
@FAST
@given(damage=st.lists(st.tuples(st.integers(0, 6000), st.integers(0, 255)), max_size=4),
       start=st.integers(0, 20), stop_cut=st.integers(0, 5000), crc=st.booleans(), want_index=st.booleans())
def test_compiled_and_twin_agree_on_damaged_bytes(commitlog, damage, start, stop_cut, crc, want_index):
    data, records = commitlog
    buf = bytearray(data)
    for pos, value in damage:
        if pos < len(buf):
            buf[pos] = value
    buf = bytes(buf)
    outs = []
    for impl in (compiled, hot_py):
        cq: dict = {}
        index = bytearray()
        r = impl.dispatch_range(buf, records[start][0], len(buf) - stop_cut, len(buf), crc, want_index, cq, index)
        outs.append((r, cq, index))
    assert outs[0] == outs[1]


def test_hotpath_exports_dispatch_range():
    assert hotpath.dispatch_range is (compiled or hot_py).dispatch_range or hotpath.IMPLEMENTATION == "python"


# ------------------------------------------------------------------------------ link_index_entries

def _put_keys_file(records, slot_num: int, index_num: int, prev_phy: int, prev_ts: int) -> bytes:
    """The reference: an index file filled record by record with the store's ``index_put_keys``."""
    from broker_core.store.codec.index_format import INDEX_HEADER, index_file_size

    buf = bytearray(index_file_size(slot_num, index_num))
    INDEX_HEADER.pack_into(buf, 0, prev_ts, prev_ts, prev_phy, prev_phy, 0, 1)
    count, begin_ts, begin_phy, slot_count = 1, prev_ts, prev_phy, 0
    for topic, keys, phy, ts in records:
        _w, _n, begin_ts, begin_phy, slot_count, count = hot_py.index_put_keys(
            buf, slot_num, index_num, count, begin_ts, begin_phy, slot_count, topic, None, keys, phy, ts)
    return bytes(buf)


@pytest.mark.parametrize("impl", IMPLS, ids=lambda m: m.IMPLEMENTATION)
@FAST
@given(records=st.lists(st.tuples(st.sampled_from(["T0", "T1"]), st.text("ab c", min_size=1, max_size=6),
                                  st.integers(0, 2**40), st.integers(0, 2**42)), max_size=30),
       prev=st.sampled_from([(0, 0), (12345, 1_700_000_000_000), (7, 2**41)]))
def test_link_index_entries_builds_the_file_put_key_builds(impl, records, prev):
    from broker_core.store.codec.index_format import INDEX_HEADER, entry_pos, index_file_size

    slot_num, index_num = 7, 200
    keys = bytearray()
    for topic, text, phy, ts in records:
        for token in text.split(" "):
            if token:
                keys += IDX_REC.pack(index_key_hash(f"{topic}#{token}"), phy, ts)
    slots, entries, header = impl.link_index_entries(bytes(keys), slot_num, *prev)
    built = bytearray(index_file_size(slot_num, index_num))
    if not keys:  # a file with no keys keeps the pre-set header
        header = (prev[1], prev[1], prev[0], prev[0], 0, 1)
    INDEX_HEADER.pack_into(built, 0, *header)
    built[INDEX_HEADER.size:INDEX_HEADER.size + len(slots)] = slots
    built[entry_pos(slot_num, 1):entry_pos(slot_num, 1) + len(entries)] = entries
    assert bytes(built) == _put_keys_file(records, slot_num, index_num, *prev)


@pytest.mark.parametrize("impl", IMPLS, ids=lambda m: m.IMPLEMENTATION)
def test_link_index_entries_over_many_slot_buckets(impl):
    """Slots far apart and repeated keys: the compiled linking walks the slot table bucket by bucket
    (16,384 slots each), and chains must still run in commitlog order across the whole key list."""
    import random

    from broker_core.store.codec.index_format import INDEX_HEADER, entry_pos, index_file_size

    rnd = random.Random(17)
    slot_num, index_num = 70_001, 6_000
    words = [f"k{rnd.getrandbits(40):x}" for _ in range(900)]  # repeats: chains longer than one
    records = [(f"T{i % 3}", " ".join(rnd.choice(words) for _ in range(rnd.randint(1, 3))),
                1_000 + 97 * i, 1_700_000_000_000 + 450 * i) for i in range(2_000)]
    keys = bytearray()
    for topic, text, phy, ts in records:
        for token in text.split(" "):
            keys += IDX_REC.pack(index_key_hash(f"{topic}#{token}"), phy, ts)
    prev = (555, 1_699_999_999_000)
    slots, entries, header = impl.link_index_entries(bytes(keys), slot_num, *prev)
    built = bytearray(index_file_size(slot_num, index_num))
    INDEX_HEADER.pack_into(built, 0, *header)
    built[INDEX_HEADER.size:INDEX_HEADER.size + len(slots)] = slots
    built[entry_pos(slot_num, 1):entry_pos(slot_num, 1) + len(entries)] = entries
    assert bytes(built) == _put_keys_file(records, slot_num, index_num, *prev)


def test_link_index_entries_rejects_a_torn_key_list():
    for impl in IMPLS:
        with pytest.raises(struct.error):
            impl.link_index_entries(b"\x00" * 21, 7, 0, 0)


# ------------------------------------------------------------------------------------ cq_units_of

@pytest.mark.parametrize("impl", IMPLS, ids=lambda m: m.IMPLEMENTATION)
@FAST
@given(recs=st.lists(st.tuples(st.integers(0, 40), st.integers(0, 2**40), st.integers(1, 5000),
                               st.integers(-2**31, 2**31 - 1), st.integers(-5000, 2**42)), max_size=25),
       gran=st.sampled_from([1, 1000, 60_000]))
def test_cq_units_of_packs_units_and_first_offsets_per_time_bucket(impl, recs, gran):
    blob = b"".join(CQ_REC.pack(off, off, phy, size, tags, ts, 1) for off, phy, size, tags, ts in recs)
    units, contiguous, table = impl.cq_units_of(blob, gran)
    assert units == b"".join(struct.pack(">qiq", phy, size, tags) for _o, phy, size, tags, _ts in recs)
    assert contiguous == all(b[0] == a[0] + 1 and b[1] + b[2] > a[1] + a[2] for a, b in pairwise(recs))
    first: dict[int, int] = {}
    for off, _phy, _size, _tags, ts in recs:
        first.setdefault(ts - ts % gran, off)
    assert table == list(first.items())


def test_cq_units_of_rejects_a_torn_record_list():
    for impl in IMPLS:
        with pytest.raises(struct.error):
            impl.cq_units_of(b"\x00" * 47, 1000)
