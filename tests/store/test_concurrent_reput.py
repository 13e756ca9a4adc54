"""enableBuildConsumeQueueConcurrently: the pool-parsed reput writes exactly the serial reput's files.

What an operator relies on when turning the option on: the consume queues and index files are the
same bytes the serial reput writes (a consumer cannot tell), and bad bytes in the commitlog stop
dispatch at the same offset with the same verdict.
"""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import pytest

from broker_core.store import concurrent_reput
from broker_core.store.dispatch import DispatchRequest, dispatch_request_of
from broker_core.store.message_store import MessageStore
from broker_core.store.reput_parse import parse_block
from tests.store.store_util import FakeClock, make_msg, small_config


def _config(concurrent: bool):
    return small_config(mapped_file_size_commit_log=256 * 1024, mapped_file_size_consume_queue=20 * 400,
                        max_hash_slot_num=512, max_index_num=1500,
                        enable_build_consume_queue_concurrently=concurrent, batch_dispatch_request_thread_pool_nums=2)


def _write(root: Path) -> int:
    ms = MessageStore(root, _config(False), clock=FakeClock(step=1))
    ms.open()
    n = 0
    for i in range(2400):
        topic = f"T{i % 3}"
        extra = {"DELAY": "2"} if i % 97 == 0 else {}
        r = ms.put_message(make_msg(topic, i % 4, b"x" * (100 + i % 300), key=f"k{i} order{i % 50}", tags=f"tag{i % 5}",
                                    uniq=f"7F0000010001{i:020X}", **extra))
        assert r.ok
        n += 1
    ms.shutdown()
    return n


def _reput_from_start(root: Path, concurrent: bool) -> tuple[MessageStore, int]:
    """As bench/rebuild.py: open (recovery), drop what was derived, dispatch everything again."""
    ms = MessageStore(root, _config(concurrent), clock=FakeClock(step=1))
    ms.open()
    ms.delete_topics(ms.topics())
    assert ms.index_service is not None
    ms.index_service.destroy()
    ms.reput.reput_from_offset = ms.commit_log.min_offset()
    return ms, ms.reput.do_reput()


def _digest(root: Path) -> tuple[str, str]:
    cq = hashlib.sha256()
    for p in sorted((root / "consumequeue").rglob("*")):
        if p.is_file():
            cq.update(p.relative_to(root).as_posix().encode() + p.read_bytes())
    index = hashlib.sha256()
    for p in sorted((root / "index").iterdir()):  # names are creation times: compare contents in order
        index.update(p.read_bytes())
    return cq.hexdigest(), index.hexdigest()


@pytest.fixture
def small_blocks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(concurrent_reput, "BLOCK_BYTES", 16 * 1024)
    monkeypatch.setattr(concurrent_reput, "MIN_PARALLEL_BYTES", 32 * 1024)


def test_parse_block_answers_the_serial_dispatch_requests(tmp_path: Path) -> None:
    root = tmp_path / "s"
    _write(root)
    ms = MessageStore(root, _config(False))
    ms.open()
    try:
        mf = ms.commit_log.file_queue.files[0]
        fields, reached = parse_block(str(mf.path), 0, mf.wrote_position, list(ms.delay_levels_ms))
        from broker_core.store.codec.message import decode_dispatch_fields

        pos, want = 0, []
        while (f := decode_dispatch_fields(mf.mv, pos, mf.wrote_position)) is not None:
            size, topic, qid, qoff, phy, flag, ts, prep, props = f
            want.append(dispatch_request_of(topic, qid, phy, size, flag, ts, qoff, prep, props, ms.delay_levels_ms))
            pos += size
        assert [DispatchRequest(*t) for t in fields] == want and reached == pos  # stops at the BLANK end
    finally:
        ms.shutdown()


def test_concurrent_reput_writes_the_serial_reputs_bytes(tmp_path: Path, small_blocks: None) -> None:
    src = tmp_path / "src"
    _write(src)
    results = {}
    for mode in (False, True):
        root = tmp_path / f"copy-{mode}"
        shutil.copytree(src, root)
        ms, dispatched = _reput_from_start(root, mode)
        parallel = getattr(ms.reput, "parallel_records", 0)
        end = ms.reput.reput_from_offset
        ms.shutdown()
        results[mode] = (dispatched, end, _digest(root), parallel)
    assert results[True][:3] == results[False][:3]
    assert results[True][0] >= 2400
    assert results[True][3] > results[True][0] // 2  # most of it really went through the pool


def test_bad_bytes_stop_both_reputs_at_the_same_offset(tmp_path: Path, small_blocks: None) -> None:
    src = tmp_path / "src"
    _write(src)
    # a record in the middle of the first file gets an impossible size field
    ms = MessageStore(src, _config(False))
    ms.open()
    from broker_core.store.codec.message import decode_dispatch_fields

    pos, n = 0, 0
    while n < 400:
        pos += decode_dispatch_fields(ms.commit_log.file_queue.files[0].mv, pos, 256 * 1024)[0]
        n += 1
    ms.shutdown()
    results = {}
    for mode in (False, True):
        root = tmp_path / f"copy-{mode}"
        shutil.copytree(src, root)
        ms, _ = _reput_from_start(root, mode)
        # damage after the open (recovery would otherwise cut the commitlog there)
        ms.commit_log.file_queue.files[0].mv[pos + 4:pos + 8] = b"\xde\xad\xbe\xef"
        ms.delete_topics(ms.topics())
        ms.index_service.destroy()
        ms.reput.reput_from_offset = ms.commit_log.min_offset()
        dispatched = ms.reput.do_reput()
        results[mode] = (dispatched, ms.reput.reput_from_offset, getattr(ms.reput, "parallel_records", -1))
        ms.shutdown()
        results[mode] += _digest(root)
    assert results[True][2] > 0  # the pool parsed the blocks before the bad record
    assert results[True][:2] + results[True][3:] == results[False][:2] + results[False][3:]
    assert results[True][1] == pos and results[True][0] == 400


def test_a_dead_worker_pool_falls_back_to_the_serial_reput(tmp_path: Path, small_blocks: None,
                                                           caplog: pytest.LogCaptureFixture) -> None:
    src = tmp_path / "src"
    _write(src)
    results = {}
    for mode in (False, True):
        root = tmp_path / f"copy-{mode}"
        shutil.copytree(src, root)
        ms = MessageStore(root, _config(mode), clock=FakeClock(step=1))
        ms.open()
        ms.delete_topics(ms.topics())
        assert ms.index_service is not None
        ms.index_service.destroy()
        ms.reput.reput_from_offset = ms.commit_log.min_offset()
        if mode:
            assert isinstance(ms.reput, concurrent_reput.ConcurrentReputMessageService)
            pool = ms.reput._get_pool()
            list(pool.map(abs, range(4)))
            for proc in list(pool._processes.values()):  # the workers die (OOM killer, kill -9)
                proc.kill()
                proc.join()
        dispatched = ms.reput.do_reput()
        failed = getattr(ms.reput, "pool_failed", None)
        ms.shutdown()
        results[mode] = (dispatched, _digest(root), failed)
    assert results[True][:2] == results[False][:2]
    assert results[True][2] and "serially" in caplog.text
