"""Damaged data on disk: torn last record, a flipped byte in an earlier body, a broken config JSON.

Why: recovery must stop at the first invalid record, cut the commitlog there, drop every consume
queue / BatchCQ / index entry that points at or past the cut, and say so once, clearly — an operator
reading the log must learn where the data ended and why. Config files must survive a bad write.
"""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from store_util import FakeClock, make_msg, small_config, verify_consistency

from broker_core.store.codec.batch import BatchItem, encode_batch
from broker_core.store.config_file import ConfigFileError, read_config_json, write_config_json
from broker_core.store.errors import CorruptDataError
from broker_core.store.message_store import MessageStore
from broker_core.store.topic_config import TopicConfig

BATCH_TOPIC = "CorruptBatch"


def write_store(root: Path, n: int, file_size: int) -> list[tuple[int, int, str, int, str]]:
    """Write n messages (SimpleCQ, BatchCQ inner batches, keys) and shut down cleanly."""
    store = MessageStore(root, small_config(mapped_file_size_commit_log=file_size), clock=FakeClock(step=1)).open()
    store.topic_table.put(TopicConfig(BATCH_TOPIC, 1, 1, attributes={"queue.type": "BatchCQ"}), 0)
    store.topic_table.persist()
    out = []
    for i in range(n):
        key = f"ck{i}"
        if i % 4 == 3:
            items = [BatchItem(b"item%d-%d" % (i, j) * 5) for j in range(3)]
            msg = make_msg(BATCH_TOPIC, 0, encode_batch(items), key=key, uniq=f"UQ{i}")
            r = store.put_inner_batch(msg, 3)
            out.append((r.wrote_offset, r.wrote_bytes, BATCH_TOPIC, 0, key))
        else:
            r = store.put_message(make_msg("Corrupt", i % 2, b"body-%d-" % i * 20, key=key, uniq=f"UQ{i}"))
            out.append((r.wrote_offset, r.wrote_bytes, "Corrupt", i % 2, key))
        assert r.ok
    store.shutdown()
    return out


def damage(root: Path, file_size: int, phy: int, pos_in_record: int, data: bytes) -> None:
    path = root / "commitlog" / f"{phy - phy % file_size:020d}"
    with open(path, "r+b") as f:
        f.seek(phy % file_size + pos_in_record)
        f.write(data)


def store_warnings(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    """The store's warnings about its data. The disk-usage warning is left out: it is about the disk the
    tests run on (a CI run on a disk 76% full failed every test here on it), not the damage under test."""
    return [r for r in caplog.records if r.levelno >= logging.WARNING and r.name.startswith("rmqops")
            and not r.getMessage().startswith("disk of ")]


def check_cut(root: Path, file_size: int, written: list[tuple[int, int, str, int, str]], cut_index: int,
              abnormal: bool) -> MessageStore:
    store = MessageStore(root, small_config(mapped_file_size_commit_log=file_size), clock=FakeClock(step=1)).open()
    cut = written[cut_index][0]
    rep = store.recovery_report
    assert rep.abnormal is abnormal
    assert rep.process_offset == cut and store.get_max_phy_offset() == cut
    by_phy = verify_consistency(store)
    assert sorted(by_phy) == [w[0] for w in written[:cut_index]]
    kept = written[:cut_index]
    assert store.get_max_offset_in_queue("Corrupt", 0) == sum(1 for w in kept if w[2:4] == ("Corrupt", 0))
    assert store.get_max_offset_in_queue("Corrupt", 1) == sum(1 for w in kept if w[2:4] == ("Corrupt", 1))
    assert store.get_max_offset_in_queue(BATCH_TOPIC, 0) == 3 * sum(1 for w in kept if w[2] == BATCH_TOPIC)
    for phy, _size, topic, _qid, key in written:
        got = [m.commit_log_offset for m in store.query_message(topic, key)]
        assert got == ([phy] if phy < cut else []), key
        assert store.query_offsets_by_key(topic, key) == ([phy] if phy < cut else [])
    return store


@pytest.mark.parametrize("abnormal", [True, False])
def test_torn_last_record(tmp_path: Path, caplog: pytest.LogCaptureFixture, abnormal: bool) -> None:
    fs = 4096
    written = write_store(tmp_path, 40, fs)
    phy, size = written[-1][0], written[-1][1]
    damage(tmp_path, fs, phy, size // 2, bytes(size - size // 2))  # the second half never reached the disk
    if abnormal:
        (tmp_path / "abort").write_text("4242")
    caplog.set_level(logging.INFO, logger="rmqops")
    store = check_cut(tmp_path, fs, written, len(written) - 1, abnormal)
    try:
        warns = store_warnings(caplog)
        assert len(warns) == 1, [w.getMessage() for w in warns]
        text = warns[0].getMessage()
        assert str(phy) in text and ("CRC" in text or "torn" in text or "lengths" in text), text
        r = store.put_message(make_msg("Corrupt", 0, b"after"))
        assert r.ok and r.wrote_offset == phy
        verify_consistency(store)
    finally:
        store.shutdown()


@pytest.mark.parametrize("abnormal", [True, False])
def test_flipped_byte_in_earlier_body(tmp_path: Path, caplog: pytest.LogCaptureFixture, abnormal: bool) -> None:
    # one big commitlog file so normal recovery scans from its start; CQ/BCQ/index span many files
    fs = 1 << 16
    written = write_store(tmp_path, 60, fs)
    victim = 21  # a plain message; 38 records follow it
    phy = written[victim][0]
    damage(tmp_path, fs, phy, 88 + 5, b"\xff")  # inside the BODY (IPv4 hosts: body starts at 88)
    if abnormal:
        (tmp_path / "abort").write_text("4242")
    caplog.set_level(logging.INFO, logger="rmqops")
    store = check_cut(tmp_path, fs, written, victim, abnormal)
    try:
        warns = store_warnings(caplog)
        assert len(warns) == 1, [w.getMessage() for w in warns]
        text = warns[0].getMessage()
        assert str(phy) in text and "CRC" in text, text
        assert store.recovery_report.truncated_bytes > 0
        assert store.consume_queues[(BATCH_TOPIC, 0)].file_count() >= 1
    finally:
        store.shutdown()


def test_flipped_byte_in_earlier_file_abnormal(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Several commitlog files: the damaged record is in file 1 of 4+; files after it are deleted."""
    fs = 4096
    written = write_store(tmp_path, 80, fs)
    victim = next(i for i, w in enumerate(written) if w[0] // fs == 1 and w[2] == "Corrupt")
    phy = written[victim][0]
    damage(tmp_path, fs, phy, 88 + 3, b"\x00\x01")
    (tmp_path / "abort").write_text("4242")
    caplog.set_level(logging.INFO, logger="rmqops")
    store = check_cut(tmp_path, fs, written, victim, True)
    try:
        assert [mf.file_from_offset for mf in store.commit_log.file_queue.files] == [0, fs]
        assert sorted(p.name for p in (tmp_path / "commitlog").iterdir()) == [f"{0:020d}", f"{fs:020d}"]
        warns = store_warnings(caplog)
        assert len(warns) == 1 and str(phy) in warns[0].getMessage(), [w.getMessage() for w in warns]
    finally:
        store.shutdown()


# ---------------------------------------------------------------- config JSON


def test_damaged_config_json_falls_back_to_bak(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    store = MessageStore(tmp_path, small_config()).open()
    store.topic_table.put(TopicConfig("First", 4, 4), 1)
    store.topic_table.persist()
    store.topic_table.put(TopicConfig("Second", 2, 2, attributes={"queue.type": "BatchCQ"}), 2)
    store.topic_table.persist()  # topics.json has both, topics.json.bak has First only
    store.shutdown()
    path = tmp_path / "config" / "topics.json"
    text = path.read_text(encoding="utf-8")
    path.write_text(text[: len(text) // 2], encoding="utf-8")  # a torn write
    caplog.set_level(logging.INFO, logger="rmqops")
    store = MessageStore(tmp_path, small_config()).open()
    try:
        assert set(store.topic_table.topics) == {"First"}
        warns = store_warnings(caplog)
        assert len(warns) == 1, [w.getMessage() for w in warns]
        msg = warns[0].getMessage()
        assert "topics.json" in msg and "topics.json.bak" in msg, msg
    finally:
        store.shutdown()


def test_config_json_both_damaged_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "consumerOffset.json"
    write_config_json(path, {"offsetTable": {"T@g": {0: 1}}})
    write_config_json(path, {"offsetTable": {"T@g": {0: 2}}})
    path.write_text("{\"offsetTable\":{", encoding="utf-8")
    assert read_config_json(path) == {"offsetTable": {"T@g": {"0": 1}}}
    path.with_name("consumerOffset.json.bak").write_text("garbage", encoding="utf-8")
    with pytest.raises(ConfigFileError, match="consumerOffset.json"):
        read_config_json(path)
    # an empty file (crash right after creation) also falls back
    path.write_text("", encoding="utf-8")
    write_config_json(path.with_name("x.json"), {"a": 1})
    assert read_config_json(path.with_name("x.json")) == {"a": 1}


def test_a_missing_commitlog_file_is_named_at_open(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """A commitlog file gone from between two others cannot be rebuilt (the records are the data):
    the open says which file once, and a read of a record in it fails naming the queue and offset
    instead of returning other bytes."""
    write_store(tmp_path, 60, 4096)
    files = sorted((tmp_path / "commitlog").iterdir())
    files[2].unlink()
    with caplog.at_level(logging.ERROR, logger="rmqops.store"):
        store = MessageStore(tmp_path, small_config(), clock=FakeClock(step=1)).open()
    try:
        assert f"commitlog: file {files[2].name} is missing" in caplog.text
        with pytest.raises(CorruptDataError, match=r"expected a record at commitlog offset (\d+)") as err:
            for qid in store.queue_ids("Corrupt"):
                store.get_messages("Corrupt", qid, 0, 1000)
        at = int(str(err.value).split("commitlog offset ")[1].split(";")[0])
        assert int(files[2].name) <= at < int(files[3].name)
    finally:
        store.shutdown()
