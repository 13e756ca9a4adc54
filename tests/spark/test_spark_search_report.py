"""searchMessages / exportMessages / statsMessages: compressed bodies, local-time stats buckets, an
unwritable --out and usage errors (exit 2) -- the tester's report, checked without starting Spark.

Why no Spark: each fix lives in code a Spark task or the driver runs as plain Python (``scan_range``,
``stats_key``, the option checks before the session starts), and the in-process master runs the same
plan and range scans; a Spark start costs seconds per test for nothing more.
"""

from __future__ import annotations

import errno
import json
import os
import zlib
from pathlib import Path

import lz4.frame
import pytest
import zstandard
from golden_helpers import copy_golden_store

from broker_core.store.codec import hot_py
from broker_core.store.codec.message import MessageInner
from broker_core.store.message_store import MessageStore
from broker_core.store.store_config import StoreConfig
from spark import search as search_mod
from spark.scan import scan_range
from spark.search import IN_PROCESS, SearchError, build_query, run_export, run_search, run_stats
from spark.search_query import COLUMNS, MODE_ROWS, stats_key

TEXT = b"compressed needle-compressed body " * 200  # > 4 KiB: what a Java producer compresses
LZ4_FLAG = 0x1 | (1 << 8)  # COMPRESSED_FLAG with compression type 1 (LZ4) in SYSFLAG bits 8-10
ZSTD_FLAG = 0x1 | (2 << 8)  # ... and type 2 (ZSTD)


def _put_all(root: Path, bodies: list[tuple[bytes, int]]) -> None:
    store = MessageStore(root, StoreConfig(mapped_file_size_commit_log=1 << 20)).open()
    store.start()
    try:
        for i, (body, sys_flag) in enumerate(bodies):
            r = store.put_message(MessageInner(topic="Odd", body=body, properties={"KEYS": f"k{i}"}, queue_id=0,
                                               sys_flag=sys_flag, born_timestamp=1700000000000,
                                               born_host=("10.0.0.9", 5555)))
            assert r.ok
    finally:
        store.shutdown()


@pytest.fixture(scope="module")
def odd_store(tmp_path_factory) -> Path:
    """A plain body, a ZLIB body (sysFlag 1), an LZ4-flagged and a ZLIB-flagged body that are garbage,
    then an LZ4 and a ZSTD body (frames, as Apache's Lz4Compressor and ZstdCompressor write them)."""
    root = tmp_path_factory.mktemp("odd") / "store"
    _put_all(root, [(b"plain needle-plain body", 0), (zlib.compress(TEXT), 1),
                    (b"lz4 bytes needle-compressed", LZ4_FLAG), (b"not zlib needle-compressed", 1),
                    (lz4.frame.compress(TEXT), LZ4_FLAG), (zstandard.ZstdCompressor().compress(TEXT), ZSTD_FLAG)])
    return root


def _offsets(root: Path) -> list[int]:
    found = run_search([str(root)], build_query(), limit=0, master=IN_PROCESS)
    return [m["commitLogOffset"] for m in found.messages]


# ------------------------------------------------------------------------------ 1. compressed bodies

def test_body_contains_finds_a_compressed_body_and_shows_it_decompressed(odd_store):
    found = run_search([str(odd_store)], build_query(body_contains="needle-compressed"), limit=0, master=IN_PROCESS)
    assert [m["keys"] for m in found.messages] == ["k1", "k4", "k5"]
    assert [m["body_compression"] for m in found.messages] == ["ZLIB", "LZ4", "ZSTD"]
    for m in found.messages:
        assert m["body"] == TEXT and m["body_text"] == TEXT.decode()
    # broken LZ4 and ZLIB bodies are not matched (their stored bytes hold the needle), but counted
    first = _offsets(odd_store)[2]
    assert found.summary.bodies_not_decompressed == 2
    line = next(w for w in found.summary.warnings if "could not be decompressed" in w)
    assert line.startswith(f"2 compressed bodies could not be decompressed (first at "
                           f"{odd_store.resolve()}/commitlog/00000000000000000000 offset {first}: LZ4 body does not decompress")
    stats = run_stats([str(odd_store)], build_query(body_contains="needle-compressed", stats_by="topic"),
                      master=IN_PROCESS)
    assert [b["messages"] for b in stats.buckets] == [3] and stats.summary.bodies_not_decompressed == 2


def test_search_and_export_rows_carry_the_decompressed_body(odd_store):
    shown = run_search([str(odd_store)], build_query(), limit=0, master=IN_PROCESS)
    got = [(m["body_compression"], m["body_text"] is not None) for m in shown.messages]
    assert got == [(None, True), ("ZLIB", True), ("LZ4", False), ("ZLIB", False), ("LZ4", True), ("ZSTD", True)]
    assert shown.messages[1]["body"] == TEXT and shown.messages[2]["body"] == b"lz4 bytes needle-compressed"
    assert shown.summary.bodies_not_decompressed == 2  # shown as stored, and said so
    # export tasks build their rows with scan_range(MODE_ROWS); the new column is the last one
    task = (0, str(odd_store), 0, 0, str(odd_store / "commitlog" / "00000000000000000000"), 0, 0, -1, True)
    rows = scan_range(task, build_query(), MODE_ROWS).rows
    assert COLUMNS[-1] == "body_compression" and COLUMNS[18:20] == ("body", "body_text")
    assert [(r[18] == TEXT, r[-1]) for r in rows[1:2]] == [(True, "ZLIB")]
    assert [f.name for f in search_mod._message_schema(False).fields] == list(COLUMNS)


def test_compiled_walk_and_twin_hand_compressed_records_back_for_the_needle(odd_store):
    from broker_core.store.codec import _hotpath  # type: ignore[attr-defined]

    data = (odd_store / "commitlog" / "00000000000000000000").read_bytes()
    offsets = _offsets(odd_store)
    for impl in (hot_py, _hotpath):
        pos, n, hits, deferred, stopped = impl.select_records(data, 0, len(data), len(data), True, None, None, None,
                                                              (), {}, None, b"needle-compressed")
        assert (n, hits, deferred) == (6, [], offsets[1:]), impl
        _pos, _n, hits, deferred, _s = impl.select_records(data, 0, len(data), len(data), True, None, None, None,
                                                           (), {}, None, None)
        assert (hits, deferred) == (offsets, []), impl  # no needle: nothing to decompress


# ------------------------------------------------------------------------------ 2. local-time buckets

def _local_start(ts: int, dim: str, name: str) -> int:
    from datetime import datetime
    from zoneinfo import ZoneInfo

    t = datetime.fromtimestamp(ts / 1000, ZoneInfo(name))
    fields = {"hour": dict(minute=0, second=0, microsecond=0),
              "day": dict(hour=0, minute=0, second=0, microsecond=0)}[dim]
    return int(t.replace(**fields).timestamp() * 1000)


@pytest.mark.parametrize("name", ["Asia/Kolkata", "America/New_York"])
def test_stats_hours_and_days_are_cut_in_the_zone_they_are_printed_in(zone, tmp_path, name):
    zone(name)
    store = copy_golden_store("store-basic", tmp_path / "store-basic")
    msgs = run_search([str(store)], build_query(), limit=0, master=IN_PROCESS).messages
    for dim in ("hour", "day"):
        stats = run_stats([str(store)], build_query(stats_by=dim), master=IN_PROCESS)
        expected: dict[int, int] = {}
        for m in msgs:
            start = _local_start(m["storeTimestamp"], dim, name)
            expected[start] = expected.get(start, 0) + 1
        assert {b[dim]: b["messages"] for b in stats.buckets} == expected, dim


def test_day_buckets_across_a_dst_change_start_at_local_midnight(zone):
    """New York, 2026-11-01: a 25-hour day with 01:00-02:00 twice (two hour buckets, one day)."""
    zone("America/New_York")
    midnight = 1793505600000  # 2026-11-01T00:00-04:00
    first_one_thirty, second_one_thirty = midnight + 90 * 60_000, midnight + 150 * 60_000
    late = midnight + 24 * 3_600_000 + 30 * 60_000  # 23:30 local (-05:00), still the same day
    for ts in (first_one_thirty, second_one_thirty, late):
        assert stats_key(("day",), "T", 0, ts) == (midnight,)
    assert stats_key(("hour",), "T", 0, first_one_thirty) == (midnight + 3_600_000,)
    assert stats_key(("hour",), "T", 0, second_one_thirty) == (midnight + 2 * 3_600_000,)
    assert stats_key(("topic", "day"), "T", 0, late + 3_600_000) == ("T", midnight + 25 * 3_600_000)


@pytest.mark.parametrize("option, value, expect", [
    ("--begin", "2023-11-05#01:30:00:000", ["est"]), ("--end", "2023-11-05#01:30:00:000", ["spring", "edt"]),
    ("--begin", "2023-11-05T01:30", ["est"]), ("--end", "2023-03-12#02:30:00:000", ["spring"])])
def test_begin_and_end_in_a_repeated_or_skipped_hour_are_read_as_java_reads_them(zone, tmp_path, option, value,
                                                                                 expect):
    """New York: 01:30 on 2023-11-05 happens twice. --begin took the first (01:30 EDT, 05:30Z) where mqadmin's
    Java tools take the second (01:30 EST, 06:30Z); a skipped time (02:30 in March) is 03:30 EDT in both."""
    from typer.testing import CliRunner

    from broker_core.broker.broker import Broker
    from broker_core.broker.broker_config import BrokerConfig
    from mqadmin.app import app

    zone("America/New_York")
    now = [0]
    broker = Broker(tmp_path / "store", BrokerConfig(), clock=lambda: now[0], audit_log_path=None)
    try:
        broker.create_or_update_topic("Dst", 1, 1)
        for body, at in [("spring", 1678606200000 - 1), ("edt", 1699162200000 + 60_000),
                         ("est", 1699165800000 + 60_000)]:  # 03:29:59.999 EDT, 01:31 EDT, 01:31 EST
            now[0] = at
            broker.send_message("Dst", body.encode(), {"KEYS": body}, queue_id=0)
    finally:
        broker.shutdown()
    r = CliRunner().invoke(app, ["searchMessages", "--store", str(tmp_path / "store"), "--master", IN_PROCESS,
                                 option, value, "--output", "json"], env={"NAMESRV_ADDR": "", "RMQ_STORE": ""})
    assert r.exit_code == 0, r.output
    assert [m["keys"] for m in json.loads(r.stdout)["messages"]] == expect


# ------------------------------------------------------------------------------ 3. unwritable --out

@pytest.fixture
def no_spark(monkeypatch):
    def refuse(*a, **k):
        raise AssertionError("Spark must not start")

    monkeypatch.setattr(search_mod, "get_spark", refuse)


@pytest.mark.parametrize("parent, reason", [("/proc", errno.ENOENT), ("/sys", errno.EACCES),
                                            ("{file}", errno.ENOTDIR), ("{missing}", errno.ENOENT)])
def test_unwritable_out_is_one_line_with_the_real_errno_before_spark(no_spark, tmp_path, parent, reason):
    (tmp_path / "file").write_text("x")
    parent = parent.format(file=tmp_path / "file", missing=tmp_path / "missing")
    out = Path(parent) / "sparkout"
    with pytest.raises(SearchError) as failed:
        run_export([str(copy_golden_store("store-batchcq", tmp_path / "s"))], build_query(), out, fmt="jsonl")
    assert str(failed.value) == f"cannot write the export to {out}: {parent}: {os.strerror(reason)}"
    assert "No space" not in str(failed.value)


def test_a_failed_write_claims_a_full_disk_only_for_enospc(tmp_path):
    class Context:
        def setLogLevel(self, level: str) -> None:
            pass

    class Session:
        sparkContext = Context()

    class Writer:
        def option(self, *a):
            return self

        def json(self, path: str) -> None:
            raise RuntimeError("java.io.IOException: Mkdirs failed to create /proc/sparkout/_temporary")

    with pytest.raises(SearchError) as failed:  # /proc: 0 bytes free, yet not full
        search_mod._write_export(Session(), Writer(), "jsonl", Path("/proc/.staging"), Path("/proc/sparkout"))
    assert "No space" not in str(failed.value) and "Mkdirs failed" in str(failed.value)


# ------------------------------------------------------------------------------ 4. usage errors exit 2

@pytest.mark.parametrize("argv, line", [
    (["exportMessages", "--store", "{store}", "--out", "{out}", "--format", "csv"],
     "bad --format 'csv': choose parquet or jsonl"),
    (["exportMessages", "--store", "{store}", "--out", "{out}", "--partition-by", "topic,nosuch"],
     "bad --partition-by 'topic,nosuch': choose from topic,date"),
    (["exportMessages", "--store", "{store}", "--out", "{existing}"],
     "output directory {existing} already exists; choose a new --out"),
    (["searchMessages", "--stores", "{store},{store}"], "the same store directory is given twice: {store}"),
    (["rebuildStore", "--store", "{store}", "--parts", "cq,bogus"],
     "unknown part 'bogus' in --parts; choose from cq,index,offsets"),
    # beyond Java's long: it failed inside a Spark task with a worker traceback (struct.error)
    (["searchMessages", "--store", "{store}", "--end", "9223372036854775808"],
     "bad --end '9223372036854775808': epoch millis outside Java's long range"),
    # SSS is three digits: ':7' was read as 700 ms (Python's %f), another window with no word said
    (["statsMessages", "--store", "{store}", "--begin", "2026-11-22#03:37:42:7"],
     "bad --begin '2026-11-22#03:37:42:7': expected yyyy-MM-dd#HH:mm:ss:SSS (three digits of milliseconds)"),
    # "--5" ended as "unexpected failure: invalid literal for int()" (exit 1), and "-5" was taken, though
    # every other time flag refuses negative millis
    *[([cmd, "--store", "{store}", *extra, f"--{flag}={value}"],
       f"bad --{flag} '{value}': expected epoch millis >= 0, now, yyyy-MM-dd#HH:mm:ss:SSS")
      for cmd, extra in [("searchMessages", []), ("statsMessages", []), ("exportMessages", ["--out", "{out}"])]
      for flag, value in [("begin", "--5"), ("end", "-5"), ("begin", "+-5")]],
])
def test_usage_errors_exit_2_with_one_line(no_spark, monkeypatch, tmp_path, argv, line):
    from typer.testing import CliRunner

    from mqadmin.app import app
    from spark import rebuild

    monkeypatch.setattr(rebuild, "get_spark", search_mod.get_spark)  # refuses too
    store = copy_golden_store("store-batchcq", tmp_path / "s").resolve()
    names = {"store": store, "out": tmp_path / "out", "existing": tmp_path}
    r = CliRunner().invoke(app, [a.format(**names) for a in argv], env={"NAMESRV_ADDR": "", "RMQ_STORE": ""})
    assert r.exit_code == 2, (r.stdout, r.stderr)
    assert len(r.stderr.splitlines()) == 1 and r.stderr.startswith(f"mqadmin {argv[0]}: {line.format(**names)}")


def test_spark_submit_front_ends_exit_2_for_usage_and_1_for_failures(no_spark, tmp_path, capsys):
    from spark import rebuild_store, search_cli

    store = str(copy_golden_store("store-batchcq", tmp_path / "s"))
    assert search_cli.main(search_cli.EXPORT, ["--store", store, "--out", str(tmp_path / "o"),
                                               "--partition-by", "topic,nosuch"]) == 2
    assert search_cli.main(search_cli.SEARCH, ["--stores", f"{store},{store}"]) == 2
    assert search_cli.main(search_cli.EXPORT, ["--store", store, "--out", "/proc/sparkout"]) == 1
    assert rebuild_store.main(["--store", store, "--parts", "cq,bogus"]) == 2
    out = capsys.readouterr()
    assert "unknown part 'bogus' in --parts" in out.out and "/proc: No such file or directory" in out.err
