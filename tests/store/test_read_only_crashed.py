"""Read-only readers return exactly what is stored, on clean and crashed stores (issue 11 item 4).

Why: after a kill -9 the consume queue files lag the commitlog; a read-only reader cannot write the
missing units and keeps them in memory. Merging that view with the files used to jump from the end
of a CQ file straight to the first in-memory unit, so printMsgByQueue returned a third of the
messages with exit 0 while topicStatus counted all of them.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from store_util import (
    BASE_TS,
    FakeClock,
    crash,
    make_msg,
    set_checkpoint,
    small_config,
    small_config_file,
    zero_cq_from,
)
from typer.testing import CliRunner

from broker_core.store.codec.batch import BatchItem, encode_batch
from broker_core.store.codec.sys_flag import INNER_BATCH_FLAG
from broker_core.store.message_store import MessageStore
from broker_core.store.topic_config import TopicConfig

N = 300
STEP = 100  # ms between store timestamps: the checkpoint then points well into the log


def crashed_store(root: Path) -> None:
    store = MessageStore(root, small_config(), clock=FakeClock(step=STEP)).open()
    store.topic_table.put(TopicConfig("RoBatch", 1, 1, attributes={"queue.type": "BatchCQ"}), 0)
    store.topic_table.put(TopicConfig("Ro", 1, 1), 0)  # with topics.json, a queue without a config is no topic
    store.topic_table.persist()
    for i in range(N):
        assert store.put_message(make_msg("Ro", 0, b"m%d" % i, key=f"k{i}")).ok
        if i % 10 == 0:
            items = encode_batch([BatchItem(b"b%d-%d" % (i, j)) for j in range(3)])
            assert store.put_inner_batch(make_msg("RoBatch", 0, items, key=f"b{i}"), 3).ok
    store.wait_for_dispatch()
    store.flush()
    crash(store)
    # the consume queues lagged behind the commitlog when the process died
    zero_cq_from(root, "Ro", 0, 200)
    zero_cq_from(root, "RoBatch", 0, 20, 46, "batchconsumequeue")
    set_checkpoint(root, logics_ts=BASE_TS + 200 * STEP)


def read_all(store: MessageStore, topic: str) -> list[int]:
    out, off = [], 0
    while True:
        r = store.get_messages(topic, 0, off, 32)
        out += [m.queue_offset for m in r.messages]
        if r.next_begin_offset <= off or r.next_begin_offset >= r.max_offset:
            return out
        off = r.next_begin_offset


def test_read_only_reader_on_crashed_store_returns_everything(tmp_path: Path) -> None:
    crashed_store(tmp_path)
    ro = MessageStore(tmp_path, small_config(), read_only=True).open()
    try:
        assert ro.recovery_report.abnormal and ro.recovery_report.start_offset > 0
        assert ro.get_max_offset_in_queue("Ro", 0) == N
        assert read_all(ro, "Ro") == list(range(N))
        assert read_all(ro, "RoBatch") == list(range(3 * (N // 10)))
    finally:
        ro.shutdown()


def test_print_msg_by_queue_cli_on_crashed_store(tmp_path: Path) -> None:
    from mqadmin.app import app

    store = tmp_path / "store"
    crashed_store(store)
    conf = small_config_file(tmp_path / "broker.conf")
    res = CliRunner().invoke(app, ["printMsgByQueue", "--store", str(store), "--config", str(conf), "-t", "Ro",
                                   "-a", "broker-a", "-i", "0", "-p", "true", "-d", "true"])
    assert res.exit_code == 0, res.output
    bodies = re.findall(r"\bm(\d+)\b", res.output)
    assert sorted(set(map(int, bodies))) == list(range(N))


def test_read_only_open_skips_a_file_whose_creation_was_interrupted(tmp_path: Path) -> None:
    """kill -9 between creating a CQ file and giving it its size leaves a 0-byte last file."""
    crashed_store(tmp_path)
    qdir = tmp_path / "consumequeue" / "Ro" / "0"
    last = max(int(p.name) for p in qdir.iterdir())
    (qdir / f"{last + 320:020d}").touch()
    ro = MessageStore(tmp_path, small_config(), read_only=True).open()
    try:
        assert read_all(ro, "Ro") == list(range(N))
    finally:
        ro.shutdown()
    assert (qdir / f"{last + 320:020d}").exists()  # read-only: nothing changed on disk


def test_read_only_reader_sees_queues_the_writer_never_dispatched_to(tmp_path: Path) -> None:
    """A writer killed before its dispatch (reput thread behind) created a queue's files: its records
    are in the commitlog only. A read-only reader (mqadmin's inspection commands) must see those
    queues as the writer's recovery will, SimpleCQ and BatchCQ alike, and find their records by key;
    it used to drop the queues, and knew only the index files' keys."""
    from mqadmin.app import app

    store = MessageStore(tmp_path / "store", small_config(), clock=FakeClock(step=STEP)).open()
    store.topic_table.put(TopicConfig("LateBatch", 1, 1, attributes={"queue.type": "BatchCQ"}), 0)
    for name, queues in (("Ro", 1), ("Late", 2)):  # with topics.json, a queue without a config is no topic
        store.topic_table.put(TopicConfig(name, queues, queues), 0)
    store.topic_table.persist()
    for i in range(20):
        assert store.put_message(make_msg("Ro", 0, b"m%d" % i)).ok
    cl = store.commit_log  # appended, never dispatched
    for i in range(7):
        assert cl.put_message(make_msg("Late", 1, b"late%d" % i, key=f"late-{i}")).ok
        items = encode_batch([BatchItem(b"lb%d-%d" % (i, j)) for j in range(3)])
        msg = make_msg("LateBatch", 0, items, key=f"lb-{i}")
        msg.sys_flag |= INNER_BATCH_FLAG
        assert cl.put_inner_batch(msg, 3).ok
    crash(store)
    assert not (tmp_path / "store" / "consumequeue" / "Late").exists()
    assert not (tmp_path / "store" / "batchconsumequeue" / "LateBatch").exists()

    ro = MessageStore(tmp_path / "store", small_config(), read_only=True).open()
    try:
        assert read_all(ro, "Ro") == list(range(20))
        assert ro.queue_ids("Late") == [1] and ro.get_max_offset_in_queue("Late", 1) == 7
        assert [m.body for m in ro.get_messages("Late", 1, 0, 32).messages] == [b"late%d" % i for i in range(7)]
        assert ro.get_max_offset_in_queue("LateBatch", 0) == 21
        assert [m.body for m in ro.get_messages("LateBatch", 0, 0, 32).messages] \
            == [b"lb%d-%d" % (i, j) for i in range(7) for j in range(3)]
        # and by key, as the writer's recovery will index them
        assert [m.body for m in ro.query_message("Late", "late-3")] == [b"late3"]
        assert [m.keys for m in ro.query_message("LateBatch", "lb-6")] == ["lb-6"]
        assert ro.query_message("Late", "late-9") == []
    finally:
        ro.shutdown()
    assert not (tmp_path / "store" / "consumequeue" / "Late").exists()  # read-only: nothing written

    conf = small_config_file(tmp_path / "broker.conf")
    res = CliRunner().invoke(app, ["topicStatus", "--store", str(tmp_path / "store"), "--config", str(conf),
                                   "-t", "Late", "--output", "json"])
    assert res.exit_code == 0, res.output
    assert {r["queueId"]: r["maxOffset"] for r in json.loads(res.output)}.get(1) == 7

    res = CliRunner().invoke(app, ["queryMsgByKey", "--store", str(tmp_path / "store"), "--config", str(conf),
                                   "-t", "Late", "-k", "late-5", "--output", "json"])
    assert res.exit_code == 0, res.output
    assert len(json.loads(res.output)) == 1

    writer = MessageStore(tmp_path / "store", small_config()).open()  # the writer's recovery agrees
    try:
        assert writer.get_max_offset_in_queue("Late", 1) == 7 and writer.get_max_offset_in_queue("LateBatch", 0) == 21
        assert [m.body for m in writer.query_message("Late", "late-3")] == [b"late3"]
    finally:
        writer.shutdown()


def test_read_only_reader_finds_by_key_what_the_index_lacks_behind_the_queues(tmp_path: Path) -> None:
    """Dispatch may have written a run's consume queue units before its index entries when the writer
    died: those records are in their queue but not in the index files. A read-only reader finds them
    by key all the same (from memory, as the writer's recovery re-indexes them), and still once."""
    store = MessageStore(tmp_path, small_config(), clock=FakeClock(step=STEP)).open()
    for i in range(30):
        assert store.put_message(make_msg("Ro", 0, b"m%d" % i, key=f"k{i}")).ok
    store.config.message_index_enable = False  # queues dispatched, index entries not (yet)
    for i in range(30, 40):
        assert store.put_message(make_msg("Ro", 0, b"m%d" % i, key=f"k{i}")).ok
    store.config.message_index_enable = True
    crash(store)

    ro = MessageStore(tmp_path, small_config(), read_only=True).open()
    try:
        assert read_all(ro, "Ro") == list(range(40))
        for i in (0, 29, 30, 35, 39):
            assert [m.body for m in ro.query_message("Ro", f"k{i}")] == [b"m%d" % i], i
            assert len(ro.query_offsets_by_key("Ro", f"k{i}")) == 1, i
    finally:
        ro.shutdown()


def test_read_only_reader_finds_by_key_a_new_stores_records_that_no_index_entry_holds_yet(tmp_path: Path) -> None:
    """A new store killed in its first seconds: its first records' units written, no index entry yet.
    The read-only reader indexed in memory only behind an index that has entries, so a key query of a
    message its queue held found nothing (a kill -9 loop caught it after the first put)."""
    store = MessageStore(tmp_path, small_config(), clock=FakeClock(step=STEP)).open()
    store.config.message_index_enable = False  # queues dispatched, index entries not (yet)
    for i in range(3):
        assert store.put_message(make_msg("Ro", 0, b"m%d" % i, key=f"k{i}")).ok
    store.config.message_index_enable = True
    crash(store)

    ro = MessageStore(tmp_path, small_config(), read_only=True).open()
    try:
        assert read_all(ro, "Ro") == list(range(3))
        for i in range(3):
            assert [m.body for m in ro.query_message("Ro", f"k{i}")] == [b"m%d" % i], i
    finally:
        ro.shutdown()


def test_read_only_reader_finds_the_keys_of_a_record_split_across_index_files(tmp_path: Path) -> None:
    """The newest indexed record may be only partly in the files: its UNIQ_KEY entry filled the last
    file and the writer died before writing its KEYS entry into the next. The reader finds it by
    either key, once; the records before it only from the files."""
    cfg = small_config()  # 63 entries a file: the 32nd message's two keys straddle the first two files
    store = MessageStore(tmp_path, cfg, clock=FakeClock(step=STEP)).open()
    for i in range(32):
        assert store.put_message(make_msg("Ro", 0, b"m%d" % i, key=f"k{i}", uniq=f"U{i}")).ok
    crash(store)
    index_files = sorted((tmp_path / "index").iterdir())
    assert len(index_files) >= 2
    for later in index_files[1:]:  # as if the writer had died before making the next file
        later.unlink()

    ro = MessageStore(tmp_path, cfg, read_only=True).open()
    try:
        assert ro.index_service.last_index_file_end_phy_offset == ro.get_messages("Ro", 0, 31, 1).messages[0] \
            .commit_log_offset
        for i in (0, 30, 31):
            assert [m.body for m in ro.query_message("Ro", f"k{i}")] == [b"m%d" % i], i
            assert [m.body for m in ro.query_message("Ro", f"U{i}")] == [b"m%d" % i], i
            assert len(ro.query_offsets_by_key("Ro", f"k{i}")) == len(ro.query_offsets_by_key("Ro", f"U{i}")) == 1
    finally:
        ro.shutdown()
