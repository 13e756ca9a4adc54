"""searchMessages / exportMessages / statsMessages with real Spark against the golden RocketMQ stores.

Every answer is compared with a plain sequential Python scan of the same files (``search_oracle``),
which itself is checked against the manifests Java wrote. All Spark tests in this module share one
local[2] SparkSession (the ``spark`` fixture); CLI tests run in subprocesses with their own.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from golden_helpers import copy_golden_store, load_manifest
from search_oracle import FIELDS, scan_store, select
from small_fs import fill

from broker_core.store.codec.message import RECORD_VALID, check_record
from spark import search as search_mod
from spark.search import SearchError, build_query, run_export, run_search, run_stats
from spark.session import spark_home

REPO = Path(__file__).resolve().parents[2]
SPLIT = 16 * 1024  # several ranges per 64 KiB golden file


@pytest.fixture(scope="module")
def stores(tmp_path_factory) -> dict[str, Path]:
    """Read-only use: one copy of each golden store for the whole module."""
    root = tmp_path_factory.mktemp("golden")
    return {n: copy_golden_store(n, root / n) for n in ("store-basic", "store-batchcq", "store-timer")}


@pytest.fixture(scope="module")
def plain(stores) -> dict[str, list[dict]]:
    return {n: scan_store(p)[0] for n, p in stores.items()}


def _rows(result) -> list[dict]:
    return [{k: m[k] for k in FIELDS} for m in result.messages]


def _search(spark, dirs, limit=0, **q):
    return run_search([str(d) for d in dirs], build_query(**q), limit=limit, spark=spark, split_bytes=SPLIT)


# ------------------------------------------------------------------------------ the oracle itself

def test_plain_scan_agrees_with_the_manifests(plain):
    for name in ("store-basic", "store-timer"):
        manifest = load_manifest(name)
        got = {m["commitLogOffset"]: m for m in plain[name]}
        assert len(got) == len(manifest["messages"]) + len(manifest.get("deliveredToRealTopic", []))
        for e in manifest["messages"]:
            m = got[e["physicalOffset"]]
            assert (m["topic"], m["queueId"], m["queueOffset"], m["msgId"], m["tags"], m["keys"], m["uniqKey"],
                    m["bornTimestamp"], m["storeTimestamp"], m["bornHost"], m["storeHost"], m["sysFlag"],
                    m["properties"], m["body"]) == (
                e["topic"], e["queueId"], e["queueOffset"], e["offsetMsgId"], e["tags"], e["keys"], e["uniqKey"],
                e["bornTimestamp"], e["storeTimestamp"], e["bornHost"], e["storeHost"], e["sysFlag"],
                e["properties"], base64.b64decode(e["body"]))
    batch = load_manifest("store-batchcq")
    assert len(plain["store-batchcq"]) == sum(e["msgNum"] for e in batch["messages"]) == 102


# ------------------------------------------------------------------------------ search == plain scan

QUERIES = [
    ("store-basic", dict(where="TAGS = 'TagA'")),
    ("store-basic", dict(where="TAGS IN ('TagB', 'pay', '标签') OR (userProp IS NOT NULL AND TAGS IS NULL)")),
    ("store-basic", dict(where="KEYS = 'hot' OR seq > 150")),
    ("store-basic", dict(topic="GoldenTopicB", where="NOT (TAGS = 'TagC') AND TAGS IS NOT NULL")),
    ("store-batchcq", dict(where="TAGS = 'BTag0'")),  # tags of BatchCQ inner messages
    ("store-batchcq", dict(topic="GoldenBatchTopic")),  # every inner message exploded
    ("store-batchcq", dict(where="KEYS = 'bk-1-0' OR KEYS = 'simple-8'")),
    ("store-timer", dict(where="REAL_TOPIC = 'GoldenTimerTopic' AND TIMER_OUT_MS > 1795318700000")),
]


@pytest.mark.parametrize("name,query", QUERIES, ids=[f"{n}:{q}" for n, q in QUERIES])
def test_search_equals_plain_scan(spark, stores, plain, name, query):
    result = _search(spark, [stores[name]], **query)
    expected = select(plain[name], **query)
    assert expected and len(expected) < len(plain[name]) or query.get("topic") == "GoldenBatchTopic"
    assert _rows(result) == expected
    assert result.summary.messages_matched == len(expected)
    assert result.summary.records_scanned == len({m["commitLogOffset"] for m in plain[name]})
    assert result.summary.stops == []


def test_search_time_bounds_and_body_text(spark, stores, plain):
    msgs = plain["store-basic"]
    times = sorted(m["storeTimestamp"] for m in msgs)
    begin, end = times[40], times[120]
    texts = [m["body_text"] for m in msgs if m["body_text"] and len(m["body_text"]) > 40]
    needle = texts[3][10:16]
    for q in (dict(begin=begin, end=end), dict(begin=begin, end=end, where="TAGS = 'TagB'"),
              dict(body_contains=needle), dict(body_contains="不存在的文本")):
        expected = select(msgs, **q)
        result = _search(spark, [stores["store-basic"]], topic=None, begin_ms=q.get("begin"), end_ms=q.get("end"),
                         where=q.get("where"), body_contains=q.get("body_contains"))
        assert _rows(result) == expected, q
    non_ascii = next(m for m in msgs if m["body_text"] and any(ord(c) > 127 for c in m["body_text"]))
    word = next(c for c in non_ascii["body_text"] if ord(c) > 127)
    result = _search(spark, [stores["store-basic"]], body_contains=word)
    assert _rows(result) == select(msgs, body_contains=word) and result.messages


def test_limit_keeps_the_earliest_matches_and_the_exact_count(spark, stores, plain):
    expected = select(plain["store-basic"], where="TAGS IS NOT NULL")
    result = _search(spark, [stores["store-basic"]], limit=7, where="TAGS IS NOT NULL")
    assert _rows(result) == expected[:7]
    assert result.summary.messages_matched == len(expected) and result.truncated


def test_time_window_prunes_whole_files(spark, stores, plain):
    msgs = plain["store-basic"]
    by_file = {f: [m["storeTimestamp"] for m in msgs if m["commitLogOffset"] // 65536 == f] for f in range(3)}
    begin = min(t for t in by_file[1] if t > max(by_file[0]))
    end = max(t for t in by_file[1] if t < min(by_file[2]))
    result = _search(spark, [stores["store-basic"]], begin_ms=begin, end_ms=end)
    assert _rows(result) == select(msgs, begin=begin, end=end)
    s = result.summary
    assert (s.files_total, s.files_scanned, s.files_pruned) == (3, 1, 2)
    assert s.records_scanned < len(msgs)
    # Ranges inside the kept file are pruned too (first/last store time of each 16 KiB range).
    narrow = _search(spark, [stores["store-basic"]], begin_ms=begin, end_ms=begin)
    assert _rows(narrow) == select(msgs, begin=begin, end=begin)
    assert narrow.summary.ranges_scanned < s.ranges_scanned


def test_two_stores_in_one_job(spark, stores, plain):
    dirs = [stores["store-basic"], stores["store-batchcq"]]
    result = _search(spark, dirs, where="TAGS IS NOT NULL AND KEYS IS NOT NULL")
    expected = select(plain["store-basic"] + plain["store-batchcq"], where="TAGS IS NOT NULL AND KEYS IS NOT NULL")
    assert _rows(result) == expected
    assert {m["store"] for m in result.messages} == {str(d.resolve()) for d in dirs}
    assert result.summary.files_scanned == 4


def test_bad_sql_is_the_parsers_one_line_before_spark(monkeypatch):
    def no_spark(*a, **k):
        raise AssertionError("Spark must not start for a bad query")

    monkeypatch.setattr(search_mod, "get_spark", no_spark)
    with pytest.raises(SearchError) as e:
        build_query(where="TAGS = 'a' AND")
    assert "\n" not in str(e.value) and "position 14" in str(e.value) and "TAGS = 'a' AND" in str(e.value)
    with pytest.raises(SearchError):
        build_query(where="a BETWEEN 5 AND 1")
    env = dict(os.environ, PYTHONPATH=str(REPO))
    proc = subprocess.run([sys.executable, "-m", "mqadmin.app", "searchMessages", "--store", "/nonexistent",
                           "--where", "a == 1"], capture_output=True, text=True, env=env, timeout=60)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "bad --where SQL92" in lines[0] and "position" in lines[0], proc.stderr
    assert proc.stdout == ""


@pytest.mark.parametrize("argv, code, line", [
    (["searchMessages", "--split-mb", "0"], 2, "--split-mb must be at least 1, got 0"),
    (["statsMessages", "--split-mb", "-3"], 2, "--split-mb must be at least 1, got -3"),
    (["searchMessages", "--limit", "-5"], 2, "--limit must be >= 0, got -5"),
    (["exportMessages", "--stores", "{store},{missing}", "--out", "{out}"], 3,
     "{missing} is not a store directory (it does not exist)"),
    (["statsMessages", "--stores", "{store},{empty}"], 3,
     "{empty} is not a store directory (no commitlog, consumequeue, checkpoint or config/topics.json in it)"),
])
def test_bad_options_and_missing_stores_are_one_line_before_spark(monkeypatch, stores, tmp_path, argv, code, line):
    """As every other mqadmin command: usage errors exit 2, a path that is no store exits 3 with the same
    words. --split-mb 0 used to run with one-byte scan ranges, a task per record on a real store."""
    from typer.testing import CliRunner

    from mqadmin.app import app

    def no_spark(*a, **k):
        raise AssertionError("Spark must not start")

    monkeypatch.setattr(search_mod, "get_spark", no_spark)
    (tmp_path / "empty").mkdir()
    names = {"store": stores["store-basic"], "missing": tmp_path / "missing", "empty": tmp_path / "empty",
             "out": tmp_path / "out.jsonl"}
    args = [a.format(**names) for a in argv]
    if "--stores" not in args:
        args += ["--store", str(stores["store-basic"])]
    r = CliRunner().invoke(app, args, env={"NAMESRV_ADDR": "", "RMQ_STORE": ""})
    assert r.exit_code == code, (r.stdout, r.stderr)
    assert r.stderr.splitlines()[0].startswith(f"mqadmin {argv[0]}: {line.format(**names)}"), r.stderr
    assert not (tmp_path / "out.jsonl").exists()


# ------------------------------------------------------------------------------ export

def _from_spark_row(r) -> dict:
    d = r.asDict()
    d["body"] = bytes(d["body"]) if d["body"] is not None else None
    return d


def test_export_parquet_reads_back_field_by_field(spark, stores, plain, tmp_path):
    dirs = [str(stores["store-basic"]), str(stores["store-batchcq"])]
    out = tmp_path / "export"
    result = run_export(dirs, build_query(), out, fmt="parquet", partition_by="topic", spark=spark,
                        split_bytes=SPLIT)
    expected = select(plain["store-basic"] + plain["store-batchcq"])
    assert result.rows_written == len(expected) == 302
    assert sorted(p.name for p in out.iterdir() if p.is_dir()) == sorted(
        f"topic={t}" for t in {m["topic"] for m in expected})
    assert not list(tmp_path.glob(".export.staging-*"))
    back = [_from_spark_row(r) for r in spark.read.parquet(str(out)).collect()]
    back.sort(key=lambda m: (m["storeTimestamp"], m["store"], m["commitLogOffset"], m["queueOffset"]))
    assert [{k: m[k] for k in FIELDS} for m in back] == expected
    # BatchCQ inner batches are one row per inner message.
    assert sum(1 for m in back if m["topic"] == "GoldenBatchTopic") == 95


def test_export_jsonl_and_atomic_output(spark, stores, plain, tmp_path):
    out = tmp_path / "jsonl"
    result = run_export([str(stores["store-batchcq"])], build_query(where="TAGS = 'BTag1'"), out, fmt="jsonl",
                        spark=spark)
    expected = select(plain["store-batchcq"], where="TAGS = 'BTag1'")
    lines = [json.loads(line) for p in sorted(out.glob("part-*")) for line in p.read_text().splitlines()]
    assert result.rows_written == len(lines) == len(expected) > 0
    # every line has every column, a null one too (Spark's JSON writer dropped them: no line had
    # body_compression, and spark.read.json of the export lost the column)
    assert all(d.keys() == lines[0].keys() for d in lines) and "body_compression" in lines[0]
    got = sorted((d["commitLogOffset"], d["queueOffset"], base64.b64decode(d["body"]), d["properties"])
                 for d in lines)
    assert got == sorted((m["commitLogOffset"], m["queueOffset"], m["body"], m["properties"]) for m in expected)
    before = sorted(p.name for p in out.iterdir())
    with pytest.raises(SearchError, match="already exists"):
        run_export([str(stores["store-batchcq"])], build_query(), out, fmt="parquet", spark=spark)
    assert sorted(p.name for p in out.iterdir()) == before
    with pytest.raises(SearchError, match="partition-by"):
        run_export([str(stores["store-batchcq"])], build_query(), tmp_path / "x", partition_by="queueId",
                   spark=spark)


def test_export_to_a_full_disk_is_one_line_with_the_cause_and_leaves_nothing(spark, stores, small_fs):
    """Spark's answer was the py4j error with every stack of the job in one line (and its task
    failures logged with theirs) for one "No space left on device"."""
    fill(small_fs / "filler")
    out = small_fs / "export"
    with pytest.raises(SearchError) as failed:
        run_export([str(stores["store-batchcq"])], build_query(), out, fmt="jsonl", spark=spark)
    assert str(failed.value) == f"cannot write the export to {out}: No space left on device; nothing was written"
    assert sorted(p.name for p in small_fs.iterdir() if p.name != "lost+found") == ["filler"]  # no staging left


# ------------------------------------------------------------------------------ stats

def test_stats_per_topic_minute_equal_plain_counts(spark, stores, plain):
    dirs = [str(stores["store-basic"]), str(stores["store-batchcq"])]
    result = run_stats(dirs, build_query(stats_by="topic,minute"), spark=spark, split_bytes=SPLIT)
    expected: dict[tuple, list[int]] = {}
    seen: set[tuple] = set()
    for m in plain["store-basic"] + plain["store-batchcq"]:
        key = (m["topic"], m["storeTimestamp"] - m["storeTimestamp"] % 60_000)
        acc = expected.setdefault(key, [0, 0, 0])
        acc[0] += 1
        if (m["store"], m["commitLogOffset"]) not in seen:
            seen.add((m["store"], m["commitLogOffset"]))
            acc[1] += 1
            acc[2] += m["storeSize"]
    got = {(b["topic"], b["minute"]): [b["messages"], b["records"], b["bytes"]] for b in result.buckets}
    assert got == expected
    filtered = run_stats(dirs, build_query(where="TAGS = 'BTag0'", stats_by="topic,hour"), spark=spark)
    assert sum(b["messages"] for b in filtered.buckets) == len(select(plain["store-batchcq"], where="TAGS = 'BTag0'"))


# ------------------------------------------------------------------------------ damage and a live broker

def test_corrupt_record_stops_that_files_scan_and_is_reported(spark, plain, tmp_path):
    store = copy_golden_store("store-basic", tmp_path / "store-basic")
    f1 = store / "commitlog" / "00000000000000065536"
    data = bytearray(f1.read_bytes())
    pos = 0
    for _ in range(3):  # the 4th record of file 1: inside its first 16 KiB range, ranges follow it
        pos += check_record(data, pos, len(data), True, False).size
    body_at = pos + 4 * 5 + 8 * 2 + 4 + 8 + 8 + 8 + 8 + 4 + 8 + 4  # first body byte (IPv4 hosts)
    data[body_at + 1] ^= 0xFF
    f1.write_bytes(bytes(data))
    assert check_record(data, pos, len(data), True, False).kind != RECORD_VALID
    expected_msgs, ends = scan_store(store)
    result = _search(spark, [store])
    assert _rows(result) == select(expected_msgs)
    assert [(s.file, s.offset) for s in result.summary.stops] == [(f1.name, 65536 + pos)]
    assert "CRC" in result.summary.stops[0].reason
    assert (f1.name, 65536 + pos, result.summary.stops[0].reason) in ends
    # Records of file 2 are still searched; records of file 1 after the damage are not.
    offsets = {m["commitLogOffset"] for m in result.messages}
    assert any(o >= 131072 for o in offsets) and not any(65536 + pos <= o < 131072 for o in offsets)


def test_search_beside_a_running_broker(spark, tmp_path):
    """A separate process appends (SYNC_FLUSH, holding the store lock) while the search runs."""
    root = tmp_path / "live"
    util = REPO / "tests" / "store" / "store_util.py"
    proc = subprocess.Popen([sys.executable, str(util), "writer", str(root), "0"], stdout=subprocess.PIPE, text=True,
                            env=dict(os.environ, PYTHONPATH=str(REPO)))
    acked: dict[int, tuple[str, str]] = {}
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            parts = line.split()
            assert parts[0] == "ack", line
            acked[int(parts[1])] = (parts[3], parts[6])
            if len(acked) >= 300:
                break
        before = dict(acked)
        result = run_search([str(root)], build_query(topic="CrashA"), limit=0, spark=spark, split_bytes=SPLIT)
    finally:
        proc.terminate()
        rest, _ = proc.communicate(timeout=30)
    for line in rest.splitlines():
        parts = line.split()
        if parts and parts[0] == "ack":
            acked[int(parts[1])] = (parts[3], parts[6])
    found = {m["commitLogOffset"]: m["keys"] for m in result.messages}
    want_before = {o: k for o, (t, k) in before.items() if t == "CrashA"}
    assert want_before.items() <= found.items()  # everything acknowledged before the search is found
    assert all(acked.get(o) == ("CrashA", k) for o, k in found.items())  # and nothing else
    assert result.summary.stops == []
    assert any("broker holds this store" in w for w in result.summary.warnings)


# ------------------------------------------------------------------------------ the two front ends

def test_mqadmin_and_spark_submit_entry_points(stores, plain):
    """Both front ends in their own processes. Each starts its own JVM (most of its time, idle on the
    other core), and both only read the stores: they run side by side."""
    env = dict(os.environ, PYTHONPATH=str(REPO))
    dirs = f"{stores['store-basic']},{stores['store-batchcq']}"
    search = subprocess.Popen([sys.executable, "-m", "mqadmin.app", "searchMessages", "--stores", dirs,
                               "--where", "TAGS = 'TagC' OR TAGS = 'BTag1'", "--limit", "0", "--output", "json"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    submit = Path(spark_home()) / "bin" / "spark-submit"
    submit_env = dict(env, PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable,
                      SPARK_LOCAL_IP="127.0.0.1")
    stats_proc = subprocess.Popen([str(submit), "--master", "local[2]", "--conf", "spark.ui.enabled=false",
                                   str(REPO / "spark" / "stats_messages.py"), "--store", str(stores["store-batchcq"]),
                                   "--by", "topic", "--master", "local[2]", "--output", "json"],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=submit_env,
                                  cwd=str(REPO))
    try:
        search_out, search_err = search.communicate(timeout=300)
        stats_out, stats_err = stats_proc.communicate(timeout=300)
    finally:
        for proc in (search, stats_proc):
            if proc.poll() is None:
                proc.kill()
                proc.communicate()

    assert search.returncode == 0, search_err
    data = json.loads(search_out)
    expected = select(plain["store-basic"] + plain["store-batchcq"], where="TAGS = 'TagC' OR TAGS = 'BTag1'")
    assert [(m["msgId"], m["queueOffset"], base64.b64decode(m["body"])) for m in data["messages"]] == [
        (m["msgId"], m["queueOffset"], m["body"]) for m in expected]
    assert data["summary"]["messages_matched"] == len(expected)

    assert stats_proc.returncode == 0, stats_err[-3000:]
    stats = json.loads(stats_out[stats_out.index("{"):])
    assert {b["topic"]: b["messages"] for b in stats["buckets"]} == {"GoldenBatchTopic": 95, "GoldenSimpleTopic": 7}


def test_in_process_plan_and_scan_equal_plain_scan(stores, plain):
    """The benchmark's single-process baseline runs the same plan and range scans without Spark."""
    from spark.search import IN_PROCESS

    dirs = [str(stores["store-basic"]), str(stores["store-batchcq"])]
    where = "TAGS IN ('TagA', 'BTag1') OR KEYS = 'hot'"
    result = run_search(dirs, build_query(where=where), limit=0, master=IN_PROCESS, split_bytes=SPLIT)
    assert result.summary.master == IN_PROCESS
    assert _rows(result) == select(plain["store-basic"] + plain["store-batchcq"], where=where)
    stats = run_stats(dirs, build_query(stats_by="topic"), master=IN_PROCESS)
    assert {b["topic"]: b["messages"] for b in stats.buckets}["GoldenBatchTopic"] == 95


def test_torn_tail_record_is_reported(spark, plain, tmp_path):
    """A half-written record after the last one of the newest file (a crash mid-append) is reported."""
    store = copy_golden_store("store-basic", tmp_path / "store-basic")
    f2 = store / "commitlog" / "00000000000000131072"
    data = bytearray(f2.read_bytes())
    pos = 0
    while check_record(data, pos, len(data), True, False).kind == RECORD_VALID:
        pos += check_record(data, pos, len(data), True, False).size
    data[pos:pos + 120] = data[0:120]  # the head of a record whose rest never reached the disk
    f2.write_bytes(bytes(data))
    result = _search(spark, [store])
    expected = select(scan_store(store)[0])
    assert _rows(result) == expected and len(expected) == len(plain["store-basic"])
    assert [(s.file, s.offset) for s in result.summary.stops] == [(f2.name, 131072 + pos)]


def test_rendering_of_tables_plot_and_json(stores):
    import io

    from rich.console import Console

    from spark.search import IN_PROCESS
    from spark.search_render import print_search, print_stats, search_json

    dirs = [str(stores["store-batchcq"])]
    buf = io.StringIO()
    console = Console(file=buf, width=200, color_system=None)
    found = run_search(dirs, build_query(where="TAGS = 'S'"), limit=3, master=IN_PROCESS)
    print_search(found, console)
    stats = run_stats(dirs, build_query(stats_by="topic,minute"), master=IN_PROCESS)
    print_stats(stats, console, plot=True)
    text = buf.getvalue()
    assert "#MsgId" in text and "showing the first 3 of 7 matches" in text
    assert "records scanned: 33, messages matched: 7, files scanned: 1/1" in text
    assert "GoldenBatchTopic" in text and "█" * 40 in text and "95" in text
    data = json.loads(json.dumps(search_json(found)))
    assert base64.b64decode(data["messages"][0]["body"]) == found.messages[0]["body"]


def test_body_imitating_a_record_header_does_not_mislead_the_plan(tmp_path):
    """Ranges start where a record names its own offset; a body that imitates such a header right
    after a planned cut makes the walk overshoot it, and the file is scanned again as one range."""
    import struct

    from broker_core.store.codec.message import MessageInner
    from broker_core.store.message_store import MessageStore
    from broker_core.store.store_config import ASYNC_FLUSH, StoreConfig
    from spark.search import IN_PROCESS

    split = 4096
    root = tmp_path / "store"
    store = MessageStore(root, StoreConfig(store_path_root_dir=str(root), mapped_file_size_commit_log=64 * 1024,
                                           flush_disk_type=ASYNC_FLUSH)).open()
    planted = False
    try:
        for i in range(30):
            body = bytearray(b"x" * 1000)
            body_at = store.commit_log.max_offset() + 88  # IPv4 hosts: the body follows an 88-byte header
            if not planted and body_at < split + 16 and body_at + len(body) > split + 300:
                q = split + 16  # past the cut, before the next real record
                fake = struct.pack(">ii", 200, -626843477) + bytes(20) + struct.pack(">q", q)
                body[q - body_at:q - body_at + len(fake)] = fake
                planted = True
            msg = MessageInner(topic="Fake", body=bytes(body), queue_id=0, properties={"KEYS": f"k{i}"},
                               born_host=("127.0.0.1", 1), store_host=("127.0.0.1", 10911))
            assert store.put_message(msg).ok
    finally:
        store.shutdown()
    assert planted
    expected = run_search([str(root)], build_query(), limit=0, master=IN_PROCESS)  # one range: no plan
    planned = run_search([str(root)], build_query(begin_ms=0), limit=0, master=IN_PROCESS, split_bytes=split)
    assert planned.summary.ranges_scanned > 1 and planned.summary.stops == [] and expected.summary.stops == []
    assert [m["keys"] for m in planned.messages] == [f"k{i}" for i in range(30)]
    assert _rows(planned) == _rows(expected) and planned.summary.records_scanned == 30


@pytest.mark.parametrize("parser", ["rebuild", "search"])
def test_spark_submit_front_ends_refuse_a_split_below_one_mib(parser, capsys):
    from spark import rebuild_store, search_cli

    build = rebuild_store.build_parser if parser == "rebuild" else lambda: search_cli.build_parser("searchMessages")
    with pytest.raises(SystemExit) as e:
        build().parse_args(["--store", "s", "--split-mb", "0"])
    assert e.value.code == 2
    assert "argument --split-mb: must be at least 1, got 0" in capsys.readouterr().err
