"""CommitLog append paths and MappedFile.populate against a byte-level model of spec §1.7.

Why: the single-message put path, the batch path and the inner-batch path were written separately
for speed; all three must lay records, BLANK markers and queue offsets out exactly as the spec's
"encode with final fields, blank when ``size + 8 > free``" rule does. ``populate`` pre-faults pages of
live mappings, so it must provably never change a byte nor touch read-only files.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from store_util import FakeClock

from broker_core.store import mapped_file as mapped_file_module
from broker_core.store.codec.message import MessageInner, encode_blank, encode_record
from broker_core.store.codec.message_id import create_offset_msg_id
from broker_core.store.commit_log import CommitLog, PutMessageResult, PutMessageStatus
from broker_core.store.mapped_file import PAGE_SIZE, MappedFile
from broker_core.store.store_config import ASYNC_FLUSH, StoreConfig

FILE_SIZE = 4096
SETTINGS = settings(max_examples=40, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@contextmanager
def commit_log(clock: FakeClock, file_size: int = FILE_SIZE) -> Iterator[CommitLog]:
    with tempfile.TemporaryDirectory() as root:
        cfg = StoreConfig(store_path_root_dir=root, mapped_file_size_commit_log=file_size,
                          flush_disk_type=ASYNC_FLUSH)
        cl = CommitLog(cfg, clock)
        cl.load()
        try:
            yield cl
        finally:
            cl.close()


def log_bytes(cl: CommitLog) -> bytes:
    return b"".join(bytes(mf.mv) for mf in cl.file_queue.files)


def result_tuple(r: PutMessageResult) -> tuple:
    return (r.status, r.wrote_offset, r.wrote_bytes, r.msg_id, r.queue_offset, r.msg_num, r.store_timestamp,
            r.msg_ids)


class CommitLogModel:
    """Spec §1.7 / §1.11 as a flat byte array: every record encoded once with its final fields."""

    def __init__(self, file_size: int, clock: FakeClock) -> None:
        self.file_size = file_size
        self.clock = clock
        self.log = bytearray()
        self.table: dict[str, int] = {}

    def _start(self, total: int) -> int:
        pos = len(self.log)
        free = self.file_size - pos % self.file_size
        if total + 8 > free:
            self.log += encode_blank(free) + bytes(free - 8)
        return len(self.log)

    def put(self, msgs: list[MessageInner], props: list[str | None], step: int = 1,
            fixed_q: int | None = None, inner: bool = False) -> tuple:
        first = msgs[0]
        key = f"{first.topic}-{first.queue_id}"
        sizes = [len(encode_record(m, 0, 0, 0, p)) for m, p in zip(msgs, props, strict=True)]
        total = sum(sizes)
        if total + 8 > self.file_size:
            return (PutMessageStatus.MESSAGE_ILLEGAL,)
        pos = self._start(total)
        ts = first.store_timestamp if first.keep_store_timestamp else self.clock()
        tran = not inner and (first.sys_flag & 0xC) in (0x4, 0xC)
        base = fixed_q if fixed_q is not None else self.table.get(key, 0)
        q, phy, ids = base, pos, []
        for m, p in zip(msgs, props, strict=True):
            t = m.store_timestamp if m.keep_store_timestamp else ts
            rec = encode_record(m, 0 if tran else q, phy, t, p)
            self.log += rec
            ids.append(create_offset_msg_id(m.store_host, phy))
            phy += len(rec)
            q += 1 if len(msgs) > 1 else step
        if not tran and fixed_q is None:
            self.table[key] = q
        msg_id = ids[0] if len(ids) == 1 else ",".join(ids)
        return (PutMessageStatus.PUT_OK, pos, total, msg_id, base, len(msgs) if len(msgs) > 1 else step, ts, ids)

    def files(self) -> bytes:
        return bytes(self.log) + bytes(-len(self.log) % self.file_size)


# ---------------------------------------------------------------- strategies

hosts = st.sampled_from([("127.0.0.1", 10911), ("10.1.2.3", 4000), ("::1", 9876), ("fe80::1:2", 65000)])
props = st.dictionaries(st.sampled_from(["KEYS", "TAGS", "UNIQ_KEY", "WAIT", "X"]),
                        st.text(st.characters(exclude_characters="\x01\x02", exclude_categories=("Cs",)),
                                min_size=1, max_size=20), max_size=4)


def message(topic: str, queue_id: int, sys_flag: int) -> st.SearchStrategy[MessageInner]:
    return st.builds(
        MessageInner, topic=st.just(topic), queue_id=st.just(queue_id), sys_flag=st.just(sys_flag),
        body=st.one_of(st.just(b""), st.binary(max_size=40), st.integers(300, 1500).map(lambda n: b"b" * n)),
        properties=props, born_host=hosts, store_host=hosts, born_timestamp=st.integers(0, 2 ** 45),
        keep_store_timestamp=st.sampled_from([False, False, False, True]),
        store_timestamp=st.integers(0, 2 ** 45),
    )


queue_keys = st.tuples(st.sampled_from(["TopicA", "TopicB", "T" * 140]), st.integers(0, 2),
                       st.sampled_from([0, 0, 0, 0x8, 0x4, 0xC]))
single_messages = queue_keys.flatmap(lambda k: message(*k))
groups = queue_keys.flatmap(lambda k: st.lists(message(*k), min_size=1, max_size=4))


# ---------------------------------------------------------------- (5) single path == batch path == model

@SETTINGS
@given(st.lists(single_messages, min_size=1, max_size=25))
def test_single_put_equals_batch_of_one_equals_model(msgs: list[MessageInner]) -> None:
    clock_a, clock_b, clock_m = FakeClock(step=3), FakeClock(step=3), FakeClock(step=3)
    model = CommitLogModel(FILE_SIZE, clock_m)
    with commit_log(clock_a) as a, commit_log(clock_b) as b:
        for m in msgs:
            ra = a.put_message(m)
            rb = b.put_messages([m])
            expected = model.put([m], [None])
            assert result_tuple(ra) == result_tuple(rb) == expected
        assert log_bytes(a) == log_bytes(b) == model.files()
        assert a.queue_offsets.table == b.queue_offsets.table == model.table
        assert a.max_offset() == b.max_offset() == len(model.log)


@SETTINGS
@given(st.lists(groups, min_size=1, max_size=12))
def test_batches_cross_file_boundaries_like_the_model(batches: list[list[MessageInner]]) -> None:
    clock, clock_m = FakeClock(step=5), FakeClock(step=5)
    model = CommitLogModel(FILE_SIZE, clock_m)
    with commit_log(clock) as cl:
        for group in batches:
            r = cl.put_messages(group)
            expected = model.put(group, [None] * len(group))
            assert result_tuple(r)[:len(expected)] == expected
        assert log_bytes(cl) == model.files()
        assert cl.queue_offsets.table == model.table


ops = st.one_of(
    st.tuples(st.just("single"), single_messages, st.integers(1, 50), st.none() | st.integers(0, 2 ** 40),
              st.none() | st.just("TAGS\x01raw\x02KEYS\x01k1 k2")),
    st.tuples(st.just("batch"), groups),
    st.tuples(st.just("inner"), single_messages, st.integers(1, 300)),
)


@SETTINGS
@given(st.lists(ops, min_size=1, max_size=20))
def test_every_put_path_interleaved_matches_the_model(steps: list[tuple]) -> None:
    """put_message with queue_step / fixed queue offset / raw properties, batches and inner batches."""
    clock, clock_m = FakeClock(step=7), FakeClock(step=7)
    model = CommitLogModel(FILE_SIZE, clock_m)
    with commit_log(clock) as cl:
        for op in steps:
            if op[0] == "single":
                _, m, step, fixed, raw = op
                r = cl.put_message(m, queue_step=step, queue_offset=fixed, properties_string=raw)
                expected = model.put([m], [raw], step, fixed)
            elif op[0] == "batch":
                r = cl.put_messages(op[1])
                expected = model.put(op[1], [None] * len(op[1]))
            else:
                _, m, n = op
                q = cl.queue_offsets.next(m.topic, m.queue_id)
                r = cl.put_inner_batch(m, n)
                assert m.properties["INNER_BASE"] == str(q) and m.properties["INNER_NUM"] == str(n)
                expected = model.put([m], [None], n, inner=True)
            assert result_tuple(r)[:len(expected)] == expected
        assert log_bytes(cl) == model.files()
        assert cl.queue_offsets.table == model.table


def _sized(total: int, topic: str = "TopicA") -> MessageInner:
    """A message whose record is exactly ``total`` bytes."""
    base = len(encode_record(MessageInner(topic=topic), 0, 0, 0))
    return MessageInner(topic=topic, body=b"z" * (total - base))


@pytest.mark.parametrize("path", ["single", "batch"])
def test_exact_fit_leaves_eight_bytes_then_blank(path: str) -> None:
    """``size + 8 <= free`` fits (spec §1.7); the next record gets an 8-byte BLANK and the next file."""
    clock = FakeClock(step=1)
    with commit_log(clock) as cl:
        put = cl.put_message if path == "single" else (lambda m: cl.put_messages([m]))
        assert put(_sized(FILE_SIZE - 8)).wrote_offset == 0
        r = put(_sized(100))
        assert r.ok and r.wrote_offset == FILE_SIZE and r.queue_offset == 1
        data = log_bytes(cl)
        assert data[FILE_SIZE - 8:FILE_SIZE] == encode_blank(8)
        assert len(cl.file_queue.files) == 2
        # One byte more than a file can hold with its blank: refused, nothing written, no offset used.
        before = log_bytes(cl)
        bad = put(_sized(FILE_SIZE - 7))
        assert bad.status is PutMessageStatus.MESSAGE_ILLEGAL and log_bytes(cl) == before
        assert cl.queue_offsets.next("TopicA", 0) == 2


@pytest.mark.parametrize("path", ["single", "batch"])
def test_refused_puts_write_nothing(path: str) -> None:
    clock = FakeClock(step=1)
    with commit_log(clock) as cl:
        put = cl.put_message if path == "single" else (lambda m: cl.put_messages([m]))
        assert put(MessageInner(topic="T", body=b"ok")).ok
        before, table = log_bytes(cl), dict(cl.queue_offsets.table)
        big_props = put(MessageInner(topic="T", properties={"X": "v" * 40000}))
        assert big_props.status is PutMessageStatus.PROPERTIES_SIZE_EXCEEDED
        cl.config.max_message_size = 10
        too_big = put(MessageInner(topic="T", body=b"x" * 11))
        assert too_big.status is PutMessageStatus.MESSAGE_ILLEGAL
        assert log_bytes(cl) == before and cl.queue_offsets.table == table


# ---------------------------------------------------------------- (6) MappedFile.populate

def _sha(data: bytes | memoryview) -> str:
    return hashlib.sha256(data).hexdigest()


populate_ops = st.lists(st.one_of(
    st.tuples(st.just("append"), st.binary(min_size=1, max_size=3000)),
    st.tuples(st.just("populate"), st.integers(-PAGE_SIZE, 20 * PAGE_SIZE)),
    st.tuples(st.just("write_at"), st.integers(0, 16 * PAGE_SIZE - 1), st.binary(min_size=1, max_size=200)),
), max_size=25)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(populate_ops)
def test_populate_never_changes_a_byte(steps: list[tuple]) -> None:
    size = 16 * PAGE_SIZE
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "00000000000000000000"
        mf = MappedFile(path, size)
        model = bytearray(size)
        try:
            for op in steps:
                if op[0] == "append":
                    data = op[1][:mf.free]
                    mf.append(data)
                    model[mf.wrote_position - len(data):mf.wrote_position] = data
                elif op[0] == "write_at":
                    data = op[2][:size - op[1]]
                    mf.write_at(op[1], data)
                    model[op[1]:op[1] + len(data)] = data
                else:
                    before = _sha(mf.mv)
                    mf.populate(op[1])
                    assert _sha(mf.mv) == before
                    assert mf.populated_to <= size
                assert mf.mv == model
            mf.flush_all()
        finally:
            mf.close()
        assert os.path.getsize(path) == size
        assert path.read_bytes() == model


def test_populate_keeps_data_of_partly_written_pages_and_advances() -> None:
    size = 8 * PAGE_SIZE
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "00000000000000004096"
        path.write_bytes(os.urandom(3 * PAGE_SIZE + 123) + bytes(size - 3 * PAGE_SIZE - 123))
        digest = _sha(path.read_bytes())
        mf = MappedFile(path, size)
        try:
            mf.wrote_position = 3 * PAGE_SIZE + 123  # mid-page, as after recovery
            mf.populate(mf.wrote_position + 1)
            assert _sha(mf.mv) == digest
            if mapped_file_module._MADV_POPULATE_WRITE is not None:
                assert mf.populated_to == 4 * PAGE_SIZE
            mf.populate(10 * size)  # capped at the file size
            mf.populate(PAGE_SIZE)  # behind what is populated: nothing to do
            assert _sha(mf.mv) == digest and mf.populated_to <= size
            mf.flush_all()
        finally:
            mf.close()
        assert _sha(path.read_bytes()) == digest and os.path.getsize(path) == size


@pytest.mark.parametrize("length", [0, 5 * PAGE_SIZE + 17])
def test_populate_is_a_no_op_on_read_only_files(length: int) -> None:
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "00000000000000000000"
        path.write_bytes(os.urandom(length))
        before = (path.read_bytes(), os.stat(path).st_mtime_ns)
        mf = MappedFile(path, 8 * PAGE_SIZE, read_only=True)
        try:
            for end in (0, PAGE_SIZE, length, 100 * PAGE_SIZE):
                mf.populate(end)
            assert mf.populated_to == 0
            assert bytes(mf.mv) == before[0]
        finally:
            mf.close()
        assert (path.read_bytes(), os.stat(path).st_mtime_ns) == before
