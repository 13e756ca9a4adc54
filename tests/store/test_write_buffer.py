"""The write buffer (transientStorePoolEnable) for BatchCQ inner-batch records.

Why these tests: with the buffer a put is acknowledged before its bytes are in the commitlog file;
they reach it in one large write (``CommitLog.commit``). What a user must be able to rely on:
the files come out byte for byte as without the buffer; a record is visible (consume queue, reads)
only once committed, and committed by the next other put, a flush, shutdown, or the commit interval
of a started store; a commit that fails changes nothing and loses nothing; a crash in the middle of
a commit leaves a store that recovers to the last whole record.
"""

from __future__ import annotations

import errno
from pathlib import Path

import pytest
from store_util import FakeClock, crash, make_msg, small_config, verify_consistency

from broker_core.store import commit_log as commit_log_module
from broker_core.store.codec.batch import BatchItem, encode_batch
from broker_core.store.mapped_file import MappedFile
from broker_core.store.message_store import MessageStore
from broker_core.store.store_config import SYNC_FLUSH
from broker_core.store.topic_config import TopicConfig

BATCH = "WbBatch"


def open_store(root: Path, buffered: bool, **over: object) -> MessageStore:
    cfg = small_config(mapped_file_size_commit_log=64 * 1024, transient_store_pool_enable=buffered, **over)
    # Time moves per put (``tick``), not per clock reading: the buffered store dispatches later, and
    # dispatch reads the clock too.
    store = MessageStore(root, cfg, clock=FakeClock(step=0)).open()
    if store.topic_table.get(BATCH) is None:
        store.topic_table.put(TopicConfig(BATCH, 2, 2, attributes={"queue.type": "BatchCQ"}), 0)
    return store


def tick(store: MessageStore) -> None:
    store.commit_log.clock.advance(1)  # type: ignore[attr-defined]


def inner(qid: int, n: int, size: int, tag: str) -> object:
    body = encode_batch([BatchItem(bytes([i % 251]) * size, {"TAGS": tag}) for i in range(n)])
    return make_msg(BATCH, qid, body, key=f"key-{tag}", uniq=f"U-{tag}", tags=tag)


def run_puts(store: MessageStore) -> list[tuple[int, int, str]]:
    """A mix that makes the buffer commit for every reason: file ends, the byte and iovec limits,
    single and exploded puts in between, mutable bodies. Returns (offset, queue offset, msgId)."""
    acks = []
    for i in range(40):
        tick(store)  # 1-9 KiB records over 64 KiB files: the buffer must commit before each roll
        r = store.put_inner_batch(inner(i % 2, 1 + i % 5, 200 + 397 * (i % 7), f"a{i}"), 1 + i % 5)
        assert r.ok
        acks.append((r.wrote_offset, r.queue_offset, r.msg_id))
        if i % 9 == 4:
            tick(store)
            assert store.put_message(make_msg("Plain", 0, b"between %d" % i, key=f"p{i}")).ok
        if i % 13 == 6:
            tick(store)
            assert store.put_messages([make_msg("Plain", 1, b"x%d" % j, key=f"e{i}.{j}") for j in range(3)]).ok
    for i in range(400):  # tiny records: 3 buffers each, so the iovec limit commits first
        tick(store)
        r = store.put_inner_batch(inner(i % 2, 1, 1, f"t{i}"), 1)
        assert r.ok
        acks.append((r.wrote_offset, r.queue_offset, r.msg_id))
    body = bytearray(encode_batch([BatchItem(b"mutable", {})]))
    r = store.put_inner_batch(make_msg(BATCH, 0, body, key="mut", uniq="U-mut"), 1)  # type: ignore[arg-type]
    assert r.ok
    acks.append((r.wrote_offset, r.queue_offset, r.msg_id))
    body[:] = bytes(len(body))  # the caller reuses its buffer: the stored record must not change
    return acks


def tree_bytes(root: Path, sub: str) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted((root / sub).rglob("*")) if p.is_file()}


@pytest.mark.parametrize("commit_bytes", [commit_log_module.WRITE_BUFFER_COMMIT_BYTES, 8 * 1024])
def test_the_buffered_store_is_byte_for_byte_the_direct_one(tmp_path: Path, monkeypatch, commit_bytes: int) -> None:
    monkeypatch.setattr(commit_log_module, "WRITE_BUFFER_COMMIT_BYTES", commit_bytes)
    direct = open_store(tmp_path / "direct", False)
    buffered = open_store(tmp_path / "buffered", True)
    assert not direct.commit_log.write_buffer and buffered.commit_log.write_buffer
    acks = [run_puts(s) for s in (direct, buffered)]
    assert acks[0] == acks[1]  # same offsets, queue offsets and msgIds acknowledged
    assert buffered.wait_for_dispatch()
    for store in (direct, buffered):
        store.index_service.flush()
    try:
        for sub in ("commitlog", "batchconsumequeue", "consumequeue"):
            files = tree_bytes(tmp_path / "direct", sub)
            assert files and files == tree_bytes(tmp_path / "buffered", sub), sub
        assert len(tree_bytes(tmp_path / "direct", "commitlog")) > 3  # several files, each ended by BLANK
        index = list(tree_bytes(tmp_path / "direct", "index").values())
        assert index and index == list(tree_bytes(tmp_path / "buffered", "index").values())
        last = buffered.look_message_by_offset(acks[1][-1][0])
        assert last is not None and b"mutable" in last.body
        assert [m.commit_log_offset for m in buffered.query_message(BATCH, "key-a17")] == [acks[1][17][0]]
    finally:
        direct.shutdown()
        buffered.shutdown()


def test_a_buffered_record_is_seen_only_once_committed(tmp_path: Path) -> None:
    store = open_store(tmp_path, True)
    try:
        end = store.get_max_phy_offset()
        assert store.checkpoint is not None
        physic_ts = store.checkpoint.physic_msg_timestamp
        tick(store)
        r = store.put_inner_batch(inner(0, 7, 100, "first"), 7)
        assert r.ok and r.queue_offset == 0 and r.msg_num == 7
        # the checkpoint's physic time (where recovery after a reboot starts) ignores buffered records
        assert store.checkpoint.physic_msg_timestamp == physic_ts < r.store_timestamp
        # acknowledged, not yet in the file: no reader sees it, not even by its offset
        assert store.commit_log.buffered_bytes == r.wrote_bytes
        assert store.get_max_phy_offset() == end
        assert store.get_max_offset_in_queue(BATCH, 0) == 0
        assert store.look_message_by_offset(r.wrote_offset) is None
        # the next put of another kind commits it first: its record comes after the batch
        plain = store.put_message(make_msg("Plain", 0, b"after", key="after"))
        assert plain.ok and plain.wrote_offset == r.wrote_offset + r.wrote_bytes
        assert store.commit_log.buffered_bytes == 0
        assert store.get_max_offset_in_queue(BATCH, 0) == 7
        got = store.get_messages(BATCH, 0, 0, 32)
        assert [m.commit_log_offset for m in got.messages] == [r.wrote_offset] * 7  # its 7 inner messages
        # a second batch: committed by an explicit commit (and by flush, which commits first)
        r2 = store.put_inner_batch(inner(0, 3, 100, "second"), 3)
        assert store.get_max_offset_in_queue(BATCH, 0) == 7
        store.flush()
        assert store.commit_log.buffered_bytes == 0 and store.commit_log.flushed_offset >= r2.wrote_offset + r2.wrote_bytes
        assert store.wait_for_dispatch() and store.get_max_offset_in_queue(BATCH, 0) == 10
    finally:
        store.shutdown()


def test_shutdown_commits_and_a_reopened_store_has_everything(tmp_path: Path) -> None:
    store = open_store(tmp_path, True)
    acks = [store.put_inner_batch(inner(1, 4, 50, f"s{i}"), 4) for i in range(5)]
    assert store.commit_log.buffered_bytes > 0
    store.shutdown()
    store = open_store(tmp_path, True)
    try:
        assert store.get_max_offset_in_queue(BATCH, 1) == 20
        assert [m.commit_log_offset for m in store.get_messages(BATCH, 1, 0, 32).messages] == \
            [a.wrote_offset for a in acks for _ in range(4)]
    finally:
        store.shutdown()


def test_a_started_store_commits_within_the_commit_interval(tmp_path: Path) -> None:
    store = open_store(tmp_path, True, commit_interval_commit_log=20, flush_interval_commit_log=60_000)
    store.start()
    try:
        r = store.put_inner_batch(inner(0, 5, 10, "timed"), 5)
        assert r.ok
        # nothing else happens: the commit service alone makes it visible (the wait is a hang guard)
        import time

        deadline = time.monotonic() + 30
        while store.get_max_offset_in_queue(BATCH, 0) < 5 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert store.get_max_offset_in_queue(BATCH, 0) == 5
        assert store.look_message_by_offset(r.wrote_offset) is not None
    finally:
        store.shutdown()


def test_no_write_buffer_under_sync_flush(tmp_path: Path) -> None:
    """RocketMQ's rule: a SYNC_FLUSH put waits for its bytes on disk, they cannot wait in a buffer."""
    store = open_store(tmp_path, True, flush_disk_type=SYNC_FLUSH)
    try:
        assert not store.commit_log.write_buffer
        r = store.put_inner_batch(inner(0, 2, 10, "sync"), 2)
        assert r.ok and store.commit_log.buffered_bytes == 0 and store.get_max_offset_in_queue(BATCH, 0) == 2
    finally:
        store.shutdown()


def test_a_failed_commit_keeps_the_records_and_refuses_puts_behind_them(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(commit_log_module, "WRITE_BUFFER_COMMIT_BYTES", 30_000)
    store = open_store(tmp_path, True)
    try:
        acks = [store.put_inner_batch(inner(0, 2, 300, f"f{i}"), 2) for i in range(3)]
        end = store.get_max_phy_offset()
        real = MappedFile.write_vectored

        def broken(self: MappedFile, pos: int, parts: tuple) -> None:
            raise OSError(errno.EIO, "Input/output error")

        monkeypatch.setattr(MappedFile, "write_vectored", broken)
        assert not store.commit_log.commit()
        assert store.commit_log.buffered_bytes == sum(a.wrote_bytes for a in acks)
        # batches go on into the buffer up to its size; then they are refused too, nothing lost
        more = []
        while (r := store.put_inner_batch(inner(1, 1, 20_000, f"m{len(more)}"), 1)).ok:
            more.append(r)
        # 2.4 KB buffered + 20 KB: under the limit; + 20 KB more: over it (the commit it tries fails)
        assert r.status == "UNKNOWN_ERROR" and len(more) == 2
        assert store.commit_log.buffered_bytes == sum(a.wrote_bytes for a in acks + more)
        # a put that would have to be written behind them is refused, and nothing of it is stored
        refused = store.put_message(make_msg("Plain", 0, b"behind", key="behind"))
        assert refused.status == "UNKNOWN_ERROR" and "write buffer" in refused.remark
        assert store.get_max_phy_offset() == end and store.get_max_offset_in_queue("Plain", 0) == 0
        monkeypatch.setattr(MappedFile, "write_vectored", real)
        assert store.commit_log.commit() and store.commit_log.buffered_bytes == 0
        assert store.wait_for_dispatch()
        assert store.get_max_offset_in_queue(BATCH, 0) == 6 and store.get_max_offset_in_queue(BATCH, 1) == len(more)
        assert [store.look_message_by_offset(a.wrote_offset).queue_offset for a in acks] == [0, 2, 4]  # type: ignore[union-attr]
        assert store.put_message(make_msg("Plain", 0, b"now", key="now")).ok
    finally:
        store.shutdown()


def test_a_full_disk_refuses_the_batch_before_buffering_it(tmp_path: Path, monkeypatch) -> None:
    from broker_core.store import mapped_file

    monkeypatch.setattr(mapped_file, "RESERVE_AHEAD", 0)  # blocks reserved just past each record
    store = open_store(tmp_path, True)
    try:
        first = store.put_inner_batch(inner(0, 2, 3000, "ok"), 2)  # >= DIRECT_WRITE_MIN: nothing populated ahead
        assert first.ok

        def full(self: MappedFile, end: int) -> None:
            if end > self.reserved_to:
                raise OSError(errno.ENOSPC, "No space left on device")

        monkeypatch.setattr(MappedFile, "reserve", full)
        big = store.put_inner_batch(inner(0, 4, 5000, "big"), 4)  # past what is reserved
        assert big.status == "SERVICE_NOT_AVAILABLE" and "disk full" in big.remark
        assert store.commit_log.buffered_bytes == first.wrote_bytes  # nothing of it buffered
        monkeypatch.undo()
        assert store.commit_log.commit() and store.wait_for_dispatch()
        assert store.get_max_offset_in_queue(BATCH, 0) == 2  # the refused batch took no queue offsets
        nxt = store.put_inner_batch(inner(0, 1, 10, "next"), 1)
        assert nxt.queue_offset == 2 and nxt.wrote_offset == first.wrote_offset + first.wrote_bytes
    finally:
        store.shutdown()


def test_a_crash_in_the_middle_of_a_commit_recovers_to_the_last_whole_record(tmp_path: Path, monkeypatch) -> None:
    """kill -9 while the commit's pwritev is half done: the first half of the buffered bytes is in the
    file, the process is gone. Recovery must keep every record committed before, cut the torn
    write (moved aside, not deleted) and leave queues and index pointing only at whole records."""
    store = open_store(tmp_path, True)
    committed = [store.put_inner_batch(inner(i % 2, 3, 500, f"c{i}"), 3) for i in range(6)]
    assert store.commit_log.commit() and store.wait_for_dispatch()
    torn = [store.put_inner_batch(inner(i % 2, 3, 500, f"t{i}"), 3) for i in range(4)]
    real = MappedFile.write_vectored

    class Killed(BaseException):
        """The process dying inside the write (not an error the store could handle)."""

    written_to: list[int] = []

    def half_then_die(self: MappedFile, pos: int, parts: tuple) -> None:
        data = b"".join(bytes(p) for p in parts)
        cut = len(data) // 2 + 123
        real(self, pos, (data[:cut],))
        written_to.append(self.file_from_offset + pos + cut)
        raise Killed

    monkeypatch.setattr(MappedFile, "write_vectored", half_then_die)
    with pytest.raises(Killed):
        store.commit_log.commit()
    monkeypatch.undo()
    crash(store)

    store = open_store(tmp_path, True)
    try:
        by_phy = verify_consistency(store)
        # records the torn write holds whole are as good as any (their bytes are in the page cache);
        # the one it cut, and everything after, are gone
        whole = [t for t in torn if t.wrote_offset + t.wrote_bytes <= written_to[0]]
        assert 0 < len(whole) < len(torn)
        end = (whole or committed)[-1].wrote_offset + (whole or committed)[-1].wrote_bytes
        assert store.get_max_phy_offset() == end
        assert sorted(by_phy) == [r.wrote_offset for r in committed + whole]
        for q in (0, 1):
            assert store.get_max_offset_in_queue(BATCH, q) == 9 + 3 * sum(1 for t in whole if t.queue_offset >= 9
                                                                          and torn.index(t) % 2 == q)
        cut = torn[len(whole)]
        assert not store.query_message(BATCH, f"key-t{len(whole)}") and store.query_message(BATCH, "key-c5")
        assert store.look_message_by_offset(cut.wrote_offset) is None
        assert any((tmp_path / "lost+found").rglob("*"))  # the torn bytes were kept aside
        # the store goes on from the last whole record, buffer and all
        q0 = store.get_max_offset_in_queue(BATCH, 0)
        again = store.put_inner_batch(inner(0, 3, 500, "again"), 3)
        assert again.ok and again.wrote_offset == end and again.queue_offset == q0
        assert store.commit_log.commit() and store.wait_for_dispatch()
        verify_consistency(store)
    finally:
        store.shutdown()


def test_a_plain_put_lands_behind_the_buffered_records(tmp_path: Path) -> None:
    """A single put after buffered batches is appended behind them, never at the file's stale write
    position (the one-call put once wrote there, over the buffered records' place)."""
    store = open_store(tmp_path, True)
    try:
        tick(store)
        assert store.put_message(make_msg("Plain", 0, b"before", key="plain-0")).ok  # the queue exists
        tick(store)
        b = store.put_inner_batch(inner(0, 3, 300, "first"), 3)
        assert b.ok and store.commit_log.buffered_bytes == b.wrote_bytes
        tick(store)
        p = store.put_message(make_msg("Plain", 0, b"after the batch", key="plain-1"))
        assert p.ok and p.wrote_offset == b.wrote_offset + b.wrote_bytes
        assert store.wait_for_dispatch()
        assert store.look_message_by_offset(b.wrote_offset) is not None
        assert [m.body for m in store.query_message("Plain", "plain-1")] == [b"after the batch"]
        verify_consistency(store)
    finally:
        store.shutdown()
