"""Helpers shared by the store tests (and run as a subprocess by the lock and crash tests).

Why a module: the crash and lock tests need a *separate process* that writes to a store, and the
in-process tests need the same small-file configuration and message builders.

``python store_util.py writer ROOT COUNT`` opens ROOT with SYNC_FLUSH and small files, puts COUNT
messages (forever if COUNT is 0) and prints ``ack <phy> <size> <topic> <qid> <qoff> <key>`` after
each acknowledged put, flushing stdout so the parent knows exactly what was acknowledged.
``python store_util.py hold ROOT`` opens ROOT, puts 5 messages, prints ``ready`` and waits for
stdin to close (a live broker holding the lock).
"""

from __future__ import annotations

import random
import sys
from pathlib import Path

if __name__ == "__main__":  # run as a script: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from broker_core.store.codec.message import MessageInner  # noqa: E402
from broker_core.store.message_store import MessageStore  # noqa: E402
from broker_core.store.store_config import ASYNC_FLUSH, SYNC_FLUSH, StoreConfig  # noqa: E402

BASE_TS = 1_795_000_000_000


class FakeClock:
    """Injected store clock: tests move time explicitly instead of sleeping."""

    def __init__(self, now: int = BASE_TS, step: int = 0) -> None:
        self.now = now
        self.step = step

    def __call__(self) -> int:
        t = self.now
        self.now += self.step
        return t

    def advance(self, ms: int) -> None:
        self.now += ms


def small_config(**over: object) -> StoreConfig:
    """Tiny files so a few hundred messages cross commitlog, CQ, BCQ and index file boundaries."""
    cfg = StoreConfig(mapped_file_size_commit_log=4096, mapped_file_size_consume_queue=20 * 16,
                      mapper_file_size_batch_consume_queue=46 * 8, max_hash_slot_num=64, max_index_num=64,
                      flush_disk_type=ASYNC_FLUSH)
    for k, v in over.items():
        setattr(cfg, k, v)
    return cfg


def make_msg(topic: str, queue_id: int, body: bytes, key: str | None = None, tags: str | None = None,
             uniq: str | None = None, **extra: str) -> MessageInner:
    props: dict[str, str] = {}
    if key:
        props["KEYS"] = key
    if uniq:
        props["UNIQ_KEY"] = uniq
    if tags:
        props["TAGS"] = tags
    props.update(extra)
    return MessageInner(topic=topic, body=body, properties=props, queue_id=queue_id,
                        born_timestamp=BASE_TS, born_host=("10.0.0.9", 5555), store_host=("127.0.0.1", 10911))


def verify_consistency(store: MessageStore) -> dict[int, object]:
    """After recovery: CQ units, BCQ units and index entries all point at valid records before the tail.

    Returns the valid records by physical offset. Raises AssertionError on the first inconsistency.
    """
    from broker_core.store.batch_consume_queue import BatchConsumeQueue

    max_phy = store.get_max_phy_offset()
    records = list(store.iter_commit_log(check_crc=True))
    by_phy = {m.commit_log_offset: m for m in records}
    fs = store.commit_log.file_size
    if records:
        last = records[-1]
        end = last.commit_log_offset + last.store_size
        # the tail is the end of the last record, or the end of its file when a BLANK closed it
        assert end == max_phy or (max_phy % fs == 0 and max_phy - end < fs and end // fs == (max_phy - 1) // fs), \
            f"valid records end at {end}, the recovered tail is {max_phy}"
    assert all(mf.file_from_offset <= max_phy for mf in store.commit_log.file_queue.files)
    assert all(mf.file_from_offset < max_phy or mf.file_from_offset == max_phy - max_phy % fs
               for mf in store.commit_log.file_queue.files)
    per_queue: dict[tuple[str, int], int] = {}
    for m in records:
        if m.sys_flag & 0xC in (0, 0x8):
            per_queue[(m.topic, m.queue_id)] = per_queue.get((m.topic, m.queue_id), 0) + 1
    for (topic, qid), cq in store.consume_queues.items():
        expect_q = cq.get_min_offset_in_queue()
        n = 0
        for u in cq.iter_all_units():
            rec = by_phy.get(u.phy_offset)
            assert rec is not None, f"{topic}-{qid} unit {u.queue_offset} points at {u.phy_offset}: no record"
            assert u.phy_offset + u.size <= max_phy
            assert (rec.topic, rec.queue_id, rec.store_size) == (topic, qid, u.size), (topic, qid, u)
            assert u.queue_offset == expect_q and rec.queue_offset == u.queue_offset, (topic, qid, u)
            expect_q += u.batch_num
            n += 1
        assert cq.get_max_offset_in_queue() == expect_q
        if not isinstance(cq, BatchConsumeQueue):
            assert n == per_queue.get((topic, qid), 0), (topic, qid, n, per_queue.get((topic, qid)))
    for f in store.index_service.files:
        for _n, _h, phy, _td, _prev in f.iter_entries():
            assert phy < max_phy and phy in by_phy, f"index {f.file_name} entry at {phy} beyond tail {max_phy}"
    return by_phy


def small_config_file(path: Path, **over: object) -> Path:
    """``small_config`` as a broker.conf for the CLI's ``--config`` (RocketMQ key names)."""
    lines = {"mappedFileSizeCommitLog": 4096, "mappedFileSizeConsumeQueue": 20 * 16,
             "mapperFileSizeBatchConsumeQueue": 46 * 8, "maxHashSlotNum": 64, "maxIndexNum": 64}
    lines.update(over)
    path.write_text("".join(f"{k}={v}\n" for k, v in lines.items()))
    return path


def as_after_reboot(root: Path) -> None:
    """Make ``root``'s crash look like a power cut (another kernel boot), not a killed process: only
    then may mapped writes be lost, so only then does recovery re-check from the checkpoint as Java
    does (a crash in the same boot re-checks only from where the consume queues confirm)."""
    (root / "abort").write_text("1\nan-earlier-boot\n")


def crash(store: MessageStore) -> None:
    """Leave ``store`` as kill -9 would: mapped bytes stay (page cache), ``abort`` stays, the lock goes.

    Nothing is flushed or dispatched beyond what already happened; used to build crashed stores
    deterministically in-process.
    """
    store._stopping = True
    if store.reput is not None and store.reput._thread is not None:
        store.reput._stopping = True
        store.reput.wake()
        store.reput._thread.join(5)
        store.reput._thread = None
    store.commit_log._stopping = True
    # what the write buffer holds dies with the process (a clean close would commit it)
    store.commit_log._wb_file, store.commit_log._wb_parts, store.commit_log._wb_records = None, [], []
    store._close_files()
    store._lock_file.release()
    store._opened = False


def set_checkpoint(root: Path, physic_ts: int | None = None, logics_ts: int | None = None,
                   index_ts: int | None = None) -> None:
    """Overwrite checkpoint fields (big-endian i64 at 0, 8, 16; spec §9.1)."""
    import struct

    path = Path(root) / "checkpoint"
    data = bytearray(path.read_bytes())
    for pos, value in ((0, physic_ts), (8, logics_ts), (16, index_ts)):
        if value is not None:
            struct.pack_into(">q", data, pos, value)
    path.write_bytes(bytes(data))


def zero_cq_from(root: Path, topic: str, queue_id: int, unit_offset: int, unit_size: int = 20,
                 directory: str = "consumequeue") -> None:
    """Zero every consume queue unit from ``unit_offset`` on (a dispatch that lagged behind the crash)."""
    qdir = Path(root) / directory / topic / str(queue_id)
    start = unit_offset * unit_size
    for p in sorted(qdir.iterdir()):
        base, size = int(p.name), p.stat().st_size
        if base + size <= start:
            continue
        with open(p, "r+b") as f:
            f.seek(max(0, start - base))
            f.write(bytes(size - max(0, start - base)))


def _writer(root: str, count: int) -> None:
    cfg = small_config(flush_disk_type=SYNC_FLUSH)
    store = MessageStore(root, cfg).open()
    store.start()
    rnd = random.Random()
    i = 0
    out = sys.stdout
    while count == 0 or i < count:
        topic = "CrashA" if i % 3 else "CrashB"
        qid = i % 2
        key = f"k{i}-{rnd.randrange(1 << 30)}"
        r = store.put_message(make_msg(topic, qid, rnd.randbytes(rnd.randrange(0, 700)), key=key, tags=f"t{i % 4}"))
        if not r.ok:
            print(f"fail {r.status}", flush=True)
            break
        out.write(f"ack {r.wrote_offset} {r.wrote_bytes} {topic} {qid} {r.queue_offset} {key}\n")
        out.flush()
        i += 1
    store.shutdown()
    print("done", flush=True)


def _hold(root: str) -> None:
    store = MessageStore(root, small_config()).open()
    for i in range(5):
        store.put_message(make_msg("Held", 0, b"held-%d" % i, key=f"held{i}"))
    print("ready", flush=True)
    sys.stdin.read()
    store.shutdown()


if __name__ == "__main__":
    if sys.argv[1] == "writer":
        _writer(sys.argv[2], int(sys.argv[3]))
    elif sys.argv[1] == "hold":
        _hold(sys.argv[2])
    else:
        raise SystemExit(f"unknown mode {sys.argv[1]}")
