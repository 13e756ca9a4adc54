"""The read-only scans of the hot path (``hop_records``, ``select_records``) on both implementations.

Why: the Spark search and rebuild walk commitlog files with them, so a record they keep or drop
decides an operator's answer. Each is checked against a plain oracle built from the codec
(``check_record``, ``decode_properties``, the broker's SQL92 filter) and the compiled one against the
pure-Python twin on damaged bytes.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from store_util import FakeClock, make_msg, small_config

from broker_core.broker.filter.sql92 import compile_sql92
from broker_core.store.codec import hot_py, hotpath
from broker_core.store.codec.message import RECORD_VALID, check_record
from broker_core.store.codec.properties import decode_properties
from broker_core.store.message_store import MessageStore

try:
    from broker_core.store.codec import _hotpath as compiled
except ImportError:  # no compiler on this machine: the twin is all there is
    compiled = None

IMPLS = [hot_py] + ([compiled] if compiled is not None else [])
FAST = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _store_bytes(tmp: Path, n: int) -> tuple[bytes, list[dict]]:
    """A real commitlog file: ``n`` records over 3 topics with TAGS/KEYS/user properties, some IPv6."""
    store = MessageStore(tmp, small_config(mapped_file_size_commit_log=256 * 1024), clock=FakeClock(step=10)).open()
    try:
        for i in range(n):
            msg = make_msg(f"T{i % 3}", i % 2, f"body {i} {'needle' if i % 7 == 0 else ''} é".encode(), key=f"k{i}")
            msg.properties["TAGS"] = f"tag{i % 4}"
            msg.properties["amount"] = str(i * 37 % 1000)
            if i % 5 == 0:
                msg.properties["odd"] = "x=y é"
            if i % 3 == 0:
                msg.born_host = ("::1", 7000)
            assert store.put_message(msg).ok
        mf = store.commit_log.file_queue.files[0]
        data = bytes(mf.mv[:mf.wrote_position]) + bytes(200)
    finally:
        store.shutdown()
    records, pos = [], 0
    while (chk := check_record(data, pos, len(data), True, True)).kind == RECORD_VALID:
        m = chk.message
        records.append(dict(pos=pos, size=chk.size, topic=m.topic, ts=m.store_timestamp, body=bytes(m.body),
                            props=decode_properties(m.properties_string)))
        pos += chk.size
    return data, records


@pytest.fixture(scope="module")
def commitlog(tmp_path_factory):
    return _store_bytes(tmp_path_factory.mktemp("scan"), 120)


def _judge_for(where: str, names: tuple[str, ...]):
    sql = compile_sql92(where)

    def judge(values):
        vals = (values,) if len(names) == 1 else values
        return sql.is_matched_by_commit_log({k: v for k, v in zip(names, vals, strict=True) if v is not None})
    return judge


@pytest.mark.parametrize("impl", IMPLS, ids=lambda m: m.IMPLEMENTATION)
@pytest.mark.parametrize(("topic", "window", "where", "names", "needle"), [
    (None, None, None, (), None),
    ("T1", None, None, (), None),
    (None, (3, 60), None, (), None),
    (None, None, "TAGS = 'tag1'", ("TAGS",), None),
    ("T2", None, "TAGS IN ('tag0', 'tag2') AND amount > 300", ("TAGS", "amount"), None),
    (None, None, "odd = 'x=y é' OR amount < 100", ("amount", "odd"), b"needle"),
    (None, (10, 100), None, (), "é".encode()),
])
def test_select_records_keeps_what_the_query_selects(commitlog, impl, topic, window, where, names, needle):
    data, records = commitlog
    begin = end = None
    if window:
        begin, end = records[window[0]]["ts"], records[window[1]]["ts"]
    sql = compile_sql92(where) if where else None
    want = [r["pos"] for r in records
            if (topic is None or r["topic"] == topic) and (begin is None or begin <= r["ts"] <= end)
            and (sql is None or sql.is_matched_by_commit_log(r["props"])) and (needle is None or needle in r["body"])]
    verdicts: dict = {}
    judged = []

    def judge(values):
        judged.append(values)
        return _judge_for(where, names)(values)

    pos, n, hits, deferred, stopped = impl.select_records(data, 0, len(data), len(data), True, topic, begin, end,
                                                          names, verdicts, judge if names else None, needle)
    assert hits == want and deferred == [] and n == len(records)
    assert stopped and pos == records[-1]["pos"] + records[-1]["size"]  # the zeros after the last record
    assert len(judged) == len(set(judged))  # each distinct combination judged once
    # Stopping at ``stop``: the walk ends at the first record boundary at or after it.
    mid = records[50]["pos"] + 1
    pos, n, hits, _d, stopped = impl.select_records(data, 0, mid, len(data), True, topic, begin, end, names, {},
                                                    judge if names else None, needle)
    assert (pos, n, stopped) == (records[51]["pos"], 51, False) and hits == [p for p in want if p < pos]


@pytest.mark.parametrize("impl", IMPLS, ids=lambda m: m.IMPLEMENTATION)
def test_select_records_stops_at_a_bad_crc_and_at_the_limit(commitlog, impl):
    data, records = commitlog
    bad = bytearray(data)
    bad[records[10]["pos"] + records[10]["size"] - 60] ^= 0x55  # inside the body or the properties
    out = impl.select_records(bytes(bad), 0, len(bad), len(bad), True, None, None, None, (), {}, None, None)
    assert out[0] == records[10]["pos"] and out[1] == 10 and out[4] is True
    # a limit that cuts a record: the walk stops before it
    cut = records[20]["pos"] + 30
    out = impl.select_records(data, 0, len(data), cut, True, None, None, None, (), {}, None, None)
    assert out[0] == records[20]["pos"] and out[4] is True


@pytest.mark.parametrize("impl", IMPLS, ids=lambda m: m.IMPLEMENTATION)
def test_hop_records_cuts_ranges_with_their_store_times(commitlog, impl):
    data, records = commitlog
    split = 3000
    splits, first, last, end, n = impl.hop_records(data, 0, len(data), split)
    assert n == len(records) and end == records[-1]["pos"] + records[-1]["size"]
    starts = {r["pos"]: r for r in records}
    assert splits[0] == 0 and all(s in starts for s in splits)
    for i, s in enumerate(splits):
        inside = [r for r in records if s <= r["pos"] < (splits[i + 1] if i + 1 < len(splits) else end)]
        assert (first[i], last[i]) == (inside[0]["ts"], inside[-1]["ts"])
        if i:
            assert s >= splits[i - 1] + split  # a cut at the first record boundary past each split
    with pytest.raises(ValueError):
        impl.hop_records(data, 0, len(data), 0)


@pytest.mark.skipif(compiled is None, reason="the _hotpath extension is not built here")
@FAST
@given(damage=st.lists(st.tuples(st.integers(0, 6000), st.integers(0, 255)), max_size=4),
       start=st.integers(0, 5), stop_cut=st.integers(0, 5000), crc=st.booleans(),
       where=st.sampled_from([None, "TAGS = 'tag3'", "amount >= 500 OR odd IS NOT NULL"]),
       needle=st.sampled_from([None, b"", b"needle", b"\x01"]), topic=st.sampled_from([None, "T0", "\ufffd", "\ud800"]))
def test_select_and_hop_agree_on_damaged_bytes(commitlog, damage, start, stop_cut, crc, where, needle, topic):
    data, records = commitlog
    buf = bytearray(data)
    for pos, value in damage:
        if pos < len(buf):
            buf[pos] = value
    buf = bytes(buf)
    pos = records[start]["pos"]
    names = tuple(sorted({"TAGS"} if where and "TAGS" in where else {"amount", "odd"})) if where else ()
    judge = _judge_for(where, names) if where else None
    outs = [impl.select_records(buf, pos, len(buf) - stop_cut, len(buf), crc, topic, None, None, names, {}, judge,
                                needle) for impl in (compiled, hot_py)]
    assert outs[0] == outs[1]
    assert compiled.hop_records(buf, pos, len(buf), 2000) == hot_py.hop_records(buf, pos, len(buf), 2000)


def test_hotpath_exports_the_scans():
    assert hotpath.select_records is (compiled or hot_py).select_records or hotpath.IMPLEMENTATION == "python"
    assert hotpath.hop_records is not None
