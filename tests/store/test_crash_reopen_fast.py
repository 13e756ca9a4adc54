"""A crash tears the newest index file or consume queue unit: recovery repairs them in place (issue 17).

Why: a kill -9 between a record's index entries and the header that counts them made the whole
newest index file "not whole": it was deleted and every record re-dispatched into a new one (20 s
against 7 s for a clean reopen at 1M messages). Now the file is repaired: entries past the header's
count or past the commitlog's recovered end are cut (kept in lost+found/), the hash slots pointing
at them re-pointed to the newest surviving entry of their chain, and only the records after the
last surviving entry are re-dispatched. A torn newest consume queue unit is rewritten from its
record. What a user sees: every key of a record before the crash point found exactly once, none of
a record after it, every queue complete, and a reopen that re-dispatches a handful of records.

The torn states are made the way a kill -9 leaves them: entries and slots written, the header
(written last by ``put_keys``) still describing the file before that put.
"""

from __future__ import annotations

from pathlib import Path

from store_util import FakeClock, as_after_reboot, crash, make_msg, small_config

from broker_core.store.codec.index_format import (
    HASH_SLOT,
    HASH_SLOT_SIZE,
    INDEX_ENTRY,
    INDEX_ENTRY_SIZE,
    INDEX_HEADER,
    INDEX_HEADER_SIZE,
    entries_base,
)
from broker_core.store.index_file import IndexFile
from broker_core.store.message_store import MessageStore
from broker_core.store.verify import verify_store

TOPIC = "Torn"


def config(index_num: int = 100_000, slots: int = 1024):  # noqa: ANN201 - StoreConfig
    return small_config(max_hash_slot_num=slots, max_index_num=index_num)


def write_and_crash(root: Path, n: int, cfg=None) -> list[int]:  # noqa: ANN001
    """``n`` messages (a UNIQ_KEY and a KEYS token each: two index entries), then a kill -9 state.
    Returns the commitlog offset of each message."""
    store = MessageStore(root, cfg or config(), clock=FakeClock(step=10)).open()
    phys = []
    for i in range(n):
        r = store.put_message(make_msg(TOPIC, i % 2, b"body-%d" % i, key=f"k{i}", uniq=f"U{i:08d}"))
        assert r.ok
        phys.append(r.wrote_offset)
    store.wait_for_dispatch()
    crash(store)
    return phys


def newest_index_file(root: Path) -> Path:
    return sorted((root / "index").iterdir())[-1]


def rewind_header(path: Path, entries_back: int, slots: int, prev_end: tuple[int, int] | None = None) -> None:
    """Set the header back to before the last ``entries_back`` entries were put, leaving the entries
    and the slots pointing at them in place: what a kill -9 between them and the header leaves.
    ``prev_end`` (phy, ts): the previous file's end, preset into a rolled file's empty header."""
    data = bytearray(path.read_bytes())
    bt, et, bp, ep, slot_count, ic = INDEX_HEADER.unpack_from(data, 0)
    n = ic - 1
    base = entries_base(slots)
    for k in range(n, n - entries_back, -1):
        if INDEX_ENTRY.unpack_from(data, base + k * INDEX_ENTRY_SIZE)[3] == 0:
            slot_count -= 1
    new_n = n - entries_back
    if new_n == 0:
        assert prev_end is not None
        INDEX_HEADER.pack_into(data, 0, prev_end[1], prev_end[1], prev_end[0], prev_end[0], 0, 0)
    else:
        _kh, phy, td, _prev = INDEX_ENTRY.unpack_from(data, base + new_n * INDEX_ENTRY_SIZE)
        INDEX_HEADER.pack_into(data, 0, bt, bt + td * 1000, bp, phy, slot_count, new_n + 1)
    path.write_bytes(bytes(data))


def reopen(root: Path, cfg=None) -> MessageStore:  # noqa: ANN001
    return MessageStore(root, cfg or config(), clock=FakeClock(step=10)).open()


def assert_keys_exactly_once(store: MessageStore, phys: list[int], upto: int) -> None:
    """Keys of messages ``< upto`` each find their one record, exactly once; later ones nothing."""
    for i, phy in enumerate(phys):
        for key in (f"k{i}", f"U{i:08d}"):
            offsets = store.query_offsets_by_key(TOPIC, key)
            if i < upto:
                assert offsets == [phy], (key, offsets, phy)
                assert [m.body for m in store.query_message(TOPIC, key)] == [b"body-%d" % i]
            else:
                assert phy not in offsets and not store.query_message(TOPIC, key), key


def entries(store: MessageStore) -> int:
    assert store.index_service is not None
    return store.index_service.stats().entry_count


def test_torn_index_file_is_repaired_in_place(tmp_path: Path) -> None:
    n = 200
    phys = write_and_crash(tmp_path, n)
    path = newest_index_file(tmp_path)
    rewind_header(path, 6, 1024)  # the last three records' entries and slots past the header
    store = reopen(tmp_path)
    try:
        r = store.recovery_report
        assert r.abnormal and r.dispatched <= 4, r  # those three (and the newest, de-duplicated)
        assert newest_index_file(tmp_path) == path  # the same file, not a rebuilt one
        assert store.index_service.repaired_files and not store.index_service.damaged_files
        assert entries(store) == 2 * n
        assert_keys_exactly_once(store, phys, n)
    finally:
        store.shutdown()
    kept = list((tmp_path / "lost+found" / "index").iterdir())
    assert len(kept) == 1 and kept[0].stat().st_size == 6 * INDEX_ENTRY_SIZE  # the cut entries, kept aside
    ro = MessageStore(tmp_path, config(), read_only=True).open()
    try:
        assert verify_store(ro).ok
    finally:
        ro.shutdown()


def test_torn_entry_past_the_header_and_a_header_ahead_of_its_entries(tmp_path: Path) -> None:
    """Two other shapes of a torn file: the newest entry only half written (its hash, no offset) with
    its slot already pointing at it; a header counting entries that never reached the file."""
    n = 120
    phys = write_and_crash(tmp_path, n)
    path = newest_index_file(tmp_path)
    rewind_header(path, 2, 1024)
    data = bytearray(path.read_bytes())
    base = entries_base(1024)
    last = base + 2 * n * INDEX_ENTRY_SIZE
    data[last + 4:last + INDEX_ENTRY_SIZE] = bytes(INDEX_ENTRY_SIZE - 4)  # offset, time, link: not written
    path.write_bytes(bytes(data))
    store = reopen(tmp_path)
    try:
        assert store.recovery_report.dispatched <= 2
        assert entries(store) == 2 * n
        assert_keys_exactly_once(store, phys, n)
    finally:
        store.shutdown()

    crash_root = tmp_path / "ahead"
    phys = write_and_crash(crash_root, n)
    path = newest_index_file(crash_root)
    data = bytearray(path.read_bytes())
    INDEX_HEADER.pack_into(data, 0, *INDEX_HEADER.unpack_from(data, 0)[:5], 10_000)  # count: 10,000
    path.write_bytes(bytes(data))
    store = reopen(crash_root)
    try:
        assert store.recovery_report.dispatched <= 1
        assert entries(store) == 2 * n
        assert_keys_exactly_once(store, phys, n)
    finally:
        store.shutdown()


def test_entries_past_the_recovered_commitlog_end_are_cut(tmp_path: Path) -> None:
    """A power cut lost the commitlog's last records but not their index entries (nor a torn header):
    recovery cuts the log before them, and no key of theirs may find anything any more."""
    n = 150
    phys = write_and_crash(tmp_path, n)
    rewind_header(newest_index_file(tmp_path), 2, 1024)
    lost = 3
    log_files = sorted((tmp_path / "commitlog").iterdir())
    cfg = config()
    first_lost = phys[n - lost]
    f = log_files[first_lost // cfg.mapped_file_size_commit_log]
    data = bytearray(f.read_bytes())
    pos = first_lost % cfg.mapped_file_size_commit_log
    data[pos:] = bytes(len(data) - pos)
    f.write_bytes(bytes(data))
    for later in log_files[first_lost // cfg.mapped_file_size_commit_log + 1:]:
        later.write_bytes(bytes(later.stat().st_size))
    as_after_reboot(tmp_path)
    store = reopen(tmp_path)
    try:
        assert store.get_max_phy_offset() == first_lost
        assert entries(store) == 2 * (n - lost)
        assert_keys_exactly_once(store, phys, n - lost)
        got = sum(len(store.get_messages(TOPIC, q, 0, 1000).messages) for q in (0, 1))
        assert got == n - lost
    finally:
        store.shutdown()


def test_repair_cuts_entries_at_or_past_the_safe_point(tmp_path: Path) -> None:
    """``repair_torn_tail(safe_phy)`` on a file directly: entries pointing at or past the safe point go,
    every slot that pointed at one leads to the newest surviving entry of its chain (or nowhere)."""
    path = tmp_path / "20261126000000000"
    f = IndexFile(path, 8, 200)  # 8 slots: long chains, every slot shared
    for i in range(60):
        f.put_key(f"T#key{i % 20}", 1000 + 10 * i, 1_795_000_000_000 + i)
    f.flush()
    rep = f.repair_torn_tail(safe_phy=1000 + 10 * 45)
    assert (rep.kept, rep.cut) == (45, 15)
    assert f.is_consistent() and f.end_phy_offset == 1000 + 10 * 44
    for k in range(20):
        want = sorted(1000 + 10 * i for i in range(45) if i % 20 == k)
        assert sorted(f.select_phy_offsets(f"T#key{k}", 64, 0, 2 ** 62)) == want, k
    slot_values = [HASH_SLOT.unpack_from(f._buf, INDEX_HEADER_SIZE + s * HASH_SLOT_SIZE)[0] for s in range(8)]
    assert max(slot_values) <= 45
    f.close()


def test_torn_consume_queue_unit_is_rewritten(tmp_path: Path) -> None:
    n = 41
    write_and_crash(tmp_path, n)
    qfiles = sorted((tmp_path / "consumequeue" / TOPIC / "0").iterdir())
    last = qfiles[-1]
    data = bytearray(last.read_bytes())
    end = len(data.rstrip(b"\0"))
    end += -end % 20
    unit_pos = end - 20
    whole = bytes(data[unit_pos:end])
    data[unit_pos + 8:end] = bytes(12)  # its size and tags code never written
    last.write_bytes(bytes(data))
    store = reopen(tmp_path)
    try:
        assert store.recovery_report.dispatched <= 2
        got = store.get_messages(TOPIC, 0, 0, 100).messages
        assert [m.body for m in got] == [b"body-%d" % i for i in range(0, n, 2)]
        assert store.put_message(make_msg(TOPIC, 0, b"next")).queue_offset == (n + 1) // 2
    finally:
        store.shutdown()
    assert last.read_bytes()[unit_pos:end] == whole  # rewritten in place, the same bytes
    assert not (tmp_path / "lost+found").exists()  # nothing was discarded


def test_torn_unit_of_a_record_that_did_not_survive_is_kept_aside(tmp_path: Path) -> None:
    n = 41
    phys = write_and_crash(tmp_path, n)
    qfiles = sorted((tmp_path / "consumequeue" / TOPIC / "0").iterdir())
    last = qfiles[-1]
    data = bytearray(last.read_bytes())
    end = len(data.rstrip(b"\0"))
    end += -end % 20
    data[end - 12:end] = bytes(12)
    last.write_bytes(bytes(data))
    cfg = config()
    f = sorted((tmp_path / "commitlog").iterdir())[phys[-1] // cfg.mapped_file_size_commit_log]
    log_data = bytearray(f.read_bytes())
    pos = phys[-1] % cfg.mapped_file_size_commit_log
    log_data[pos:] = bytes(len(log_data) - pos)  # message n-1 (queue 0's newest) is gone too
    f.write_bytes(bytes(log_data))
    as_after_reboot(tmp_path)
    store = reopen(tmp_path)
    try:
        got = store.get_messages(TOPIC, 0, 0, 100).messages
        assert [m.body for m in got] == [b"body-%d" % i for i in range(0, n - 1, 2)]
    finally:
        store.shutdown()
    assert not any(last.read_bytes()[end - 20:end])
    assert list((tmp_path / "lost+found" / "consumequeue" / TOPIC / "0").iterdir())


def test_crash_right_after_an_index_file_roll(tmp_path: Path) -> None:
    """Index files of 63 entries: the 32nd message's UNIQ_KEY is the first file's last entry, its KEYS
    token the second file's first. Killed before the second file's header counted it (or before it
    counted the next message): the keys of every message are found once, none lost, none doubled."""
    cfg = config(index_num=64, slots=64)
    for n, back in ((32, 1), (33, 3), (34, 2)):
        root = tmp_path / f"n{n}"
        phys = write_and_crash(root, n, cfg)
        files = sorted((root / "index").iterdir())
        assert len(files) >= 2
        first = IndexFile(files[0], 64, 64, read_only=True)
        prev_end = (first.end_phy_offset, first.end_timestamp)
        first.close()
        rewind_header(files[1], back, 64, prev_end)
        store = reopen(root, cfg)
        try:
            assert store.recovery_report.dispatched <= 3, store.recovery_report
            assert entries(store) == 2 * n
            assert_keys_exactly_once(store, phys, n)
        finally:
            store.shutdown()


def test_zero_check_sees_data_after_holes(tmp_path: Path) -> None:
    """``is_zero`` with the file's path skips the holes the filesystem reports, and still finds a
    non-zero byte anywhere after them (the check recovery makes of each queue's unused tail)."""
    import mmap

    from broker_core.store.mapped_file import is_zero

    path = tmp_path / "sparse"
    size = 8 << 20
    with open(path, "wb") as fh:
        fh.truncate(size)
    with open(path, "r+b") as fh:
        mm = mmap.mmap(fh.fileno(), size)
    mv = memoryview(mm)
    try:
        assert is_zero(mv, 0, size, path) and is_zero(mv, 0, size)
        mv[5 << 20] = 7  # data after megabytes of holes
        for p in (path, None):
            assert not is_zero(mv, 100, size, p)
            assert is_zero(mv, 100, 5 << 20, p) and is_zero(mv, (5 << 20) + 1, size, p)
            assert not is_zero(mv, 5 << 20, (5 << 20) + 1, p)
    finally:
        mv.release()
        mm.close()


def test_torn_batch_consume_queue_unit_is_rewritten(tmp_path: Path) -> None:
    """The same for a BatchCQ (46-byte units): the newest unit with only its offset written."""
    from store_util import make_msg as msg

    from broker_core.store.codec.batch import BatchItem, encode_batch
    from broker_core.store.topic_config import TopicConfig

    store = MessageStore(tmp_path, config(), clock=FakeClock(step=10)).open()
    store.topic_table.put(TopicConfig("TornB", 1, 1, attributes={"queue.type": "BatchCQ"}), 0)
    for i in range(13):
        items = encode_batch([BatchItem(b"b%d-%d" % (i, j)) for j in range(3)])
        assert store.put_inner_batch(msg("TornB", 0, items), 3).ok
    store.wait_for_dispatch()
    crash(store)
    last = sorted((tmp_path / "batchconsumequeue" / "TornB" / "0").iterdir())[-1]
    data = bytearray(last.read_bytes())
    end = len(data.rstrip(b"\0"))
    end += -end % 46
    whole = bytes(data[end - 46:end])
    data[end - 46 + 8:end] = bytes(38)  # only its commitlog offset reached the file
    last.write_bytes(bytes(data))
    store = reopen(tmp_path)
    try:
        got = store.get_messages("TornB", 0, 0, 100).messages
        assert [m.body for m in got] == [b"b%d-%d" % (i, j) for i in range(13) for j in range(3)]
    finally:
        store.shutdown()
    assert last.read_bytes()[end - 46:end] == whole
    assert not (tmp_path / "lost+found").exists()
