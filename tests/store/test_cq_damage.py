"""A damaged consume queue is detected and rebuilt, never silently dropped (issue 11 item 5).

Why: a zeroed CQ/BCQ file used to pass verifyStore as "not yet dispatched" and the next writable open
restarted the queue where the zeros began, handing out queue offsets that records already had; a
last file of zeros hid stale units from crash truncation. Recovery must check the queues against the
commitlog and re-dispatch what is missing or wrong; verifyStore must call such files damaged.
"""

from __future__ import annotations

import struct
from pathlib import Path

from store_util import BASE_TS, FakeClock, crash, make_msg, set_checkpoint, small_config, zero_cq_from
from test_read_only_crashed import N, crashed_store, read_all

from broker_core.store.codec.batch import BatchItem, encode_batch
from broker_core.store.message_store import MessageStore
from broker_core.store.topic_config import TopicConfig
from broker_core.store.verify import verify_store


def clean_store(root: Path, n: int = 40) -> None:
    store = MessageStore(root, small_config(), clock=FakeClock(step=1)).open()
    store.topic_table.put(TopicConfig("DmgB", 1, 1, attributes={"queue.type": "BatchCQ"}), 0)
    store.topic_table.persist()
    for i in range(n):
        assert store.put_message(make_msg("Dmg", 0, b"m%d" % i, key=f"k{i}")).ok
        items = encode_batch([BatchItem(b"b%d-%d" % (i, j)) for j in range(2)])
        assert store.put_inner_batch(make_msg("DmgB", 0, items), 2).ok
    store.shutdown()


def kinds(report) -> set[str]:  # noqa: ANN001 - VerifyReport
    return {i.kind for i in report.issues}


def test_zeroed_first_cq_file_is_damaged_and_rebuilt(tmp_path: Path) -> None:
    clean_store(tmp_path)
    zero_cq_from(tmp_path, "Dmg", 0, 0)  # every unit of the queue: its files are all zeros now
    zero_cq_from(tmp_path, "DmgB", 0, 0, 46, "batchconsumequeue")
    ro = MessageStore(tmp_path, small_config(), read_only=True).open()
    try:
        rep = verify_store(ro)
        assert {"cq-damaged", "bcq-damaged"} <= kinds(rep), rep.issues
        assert rep.undispatched_records == 0
    finally:
        ro.shutdown()
    store = MessageStore(tmp_path, small_config(), clock=FakeClock(step=1)).open()
    try:
        assert read_all(store, "Dmg") == list(range(40))
        assert read_all(store, "DmgB") == list(range(80))
        r = store.put_message(make_msg("Dmg", 0, b"new"))
        assert r.ok and r.queue_offset == 40  # no offset handed out twice
        store.wait_for_dispatch()
        assert store.get_messages("Dmg", 0, 40, 1).messages[0].body == b"new"
    finally:
        store.shutdown()
    ro = MessageStore(tmp_path, small_config(), read_only=True).open()
    try:
        assert verify_store(ro).ok
    finally:
        ro.shutdown()


def test_zeroed_middle_file_is_saved_aside_and_rebuilt(tmp_path: Path) -> None:
    clean_store(tmp_path)
    qdir = tmp_path / "consumequeue" / "Dmg" / "0"
    middle = sorted(qdir.iterdir())[1]
    middle.write_bytes(bytes(middle.stat().st_size))
    ro = MessageStore(tmp_path, small_config(), read_only=True).open()
    try:
        rep = verify_store(ro)
        assert "cq-damaged" in kinds(rep), rep.issues
    finally:
        ro.shutdown()
    store = MessageStore(tmp_path, small_config(), clock=FakeClock(step=1)).open()
    try:
        assert read_all(store, "Dmg") == list(range(40))
    finally:
        store.shutdown()
    saved = list((tmp_path / "lost+found" / "consumequeue" / "Dmg" / "0").iterdir())
    assert saved, "the units after the damage were not kept"


def test_crashed_store_with_lagging_queues_is_rebuilt_exactly(tmp_path: Path) -> None:
    crashed_store(tmp_path)
    rw = MessageStore(tmp_path, small_config(), clock=FakeClock(BASE_TS + 10 ** 6)).open()
    try:
        assert read_all(rw, "Ro") == list(range(N))
        assert read_all(rw, "RoBatch") == list(range(3 * (N // 10)))
        assert rw.put_message(make_msg("Ro", 0, b"next")).queue_offset == N
    finally:
        rw.shutdown()


def test_empty_last_file_does_not_hide_stale_units(tmp_path: Path) -> None:
    """Crash right after a CQ file was created, with the commitlog cut before units of the previous file."""
    store = MessageStore(tmp_path, small_config(), clock=FakeClock(step=1)).open()
    acks = [store.put_message(make_msg("Stale", 0, b"s%d" % i * 30)) for i in range(16)]
    store.wait_for_dispatch()
    crash(store)
    qdir = tmp_path / "consumequeue" / "Stale" / "0"
    (qdir / f"{16 * 20:020d}").write_bytes(bytes(320))  # created, no unit yet
    # the last two acked records never reached the disk (torn): the commitlog is cut before them
    cut = acks[14].wrote_offset
    with open(tmp_path / "commitlog" / f"{cut - cut % 4096:020d}", "r+b") as f:
        f.seek(cut % 4096)
        f.write(b"\xff" * 8)
    set_checkpoint(tmp_path, physic_ts=BASE_TS, logics_ts=BASE_TS)
    store = MessageStore(tmp_path, small_config(), clock=FakeClock(BASE_TS + 10 ** 6)).open()
    try:
        assert store.get_max_offset_in_queue("Stale", 0) == 14
        r = store.put_message(make_msg("Stale", 0, b"fresh"))
        assert r.queue_offset == 14
        store.wait_for_dispatch()
        got = store.get_messages("Stale", 0, 14, 1)
        assert got.messages and got.messages[0].body == b"fresh"
    finally:
        store.shutdown()


def test_unit_pointing_at_the_wrong_record_is_rewritten(tmp_path: Path) -> None:
    store = MessageStore(tmp_path, small_config(), clock=FakeClock(step=1)).open()
    acks = [store.put_message(make_msg("Wrong", 0, b"w%d" % i)) for i in range(10)]
    store.wait_for_dispatch()
    store.flush()
    crash(store)
    path = tmp_path / "consumequeue" / "Wrong" / "0" / f"{0:020d}"
    data = bytearray(path.read_bytes())
    struct.pack_into(">q", data, 5 * 20, acks[2].wrote_offset)  # unit 5 -> record 2
    path.write_bytes(bytes(data))
    set_checkpoint(tmp_path, physic_ts=BASE_TS, logics_ts=BASE_TS)
    ro = MessageStore(tmp_path, small_config(), read_only=True).open()
    try:
        assert "cq-mismatch" in kinds(verify_store(ro)) or ro.consume_queues[("Wrong", 0)].damage
    finally:
        ro.shutdown()
    store = MessageStore(tmp_path, small_config(), clock=FakeClock(BASE_TS + 10 ** 6)).open()
    try:
        got = store.get_messages("Wrong", 0, 0, 20).messages
        assert [m.body for m in got] == [b"w%d" % i for i in range(10)]
    finally:
        store.shutdown()


def test_torn_unit_inside_the_written_run_is_damage_not_served(tmp_path: Path) -> None:
    """A unit with a negative size (or batchSize) among valid ones in a queue's last file ends the
    valid run exactly there (the unit-by-unit rule, compiled and twin alike): the units after it are
    damage, saved aside and rebuilt from the commitlog. Finding the end by binary search over the
    written prefix skipped such a unit (it sits between the probes) and served it as valid."""
    clean_store(tmp_path, 43)  # Dmg/0: two full 16-unit files + 11 units; DmgB/0: five full files + 3
    cq_last = sorted((tmp_path / "consumequeue" / "Dmg" / "0").iterdir())[-1]
    with open(cq_last, "r+b") as f:
        f.seek(2 * 20 + 8)  # unit 2's size: its sign byte
        f.write(b"\xff")
    bcq_last = sorted((tmp_path / "batchconsumequeue" / "DmgB" / "0").iterdir())[-1]
    with open(bcq_last, "r+b") as f:
        f.seek(1 * 46 + 36)  # unit 1's batchSize
        f.write(b"\xff")
    ro = MessageStore(tmp_path, small_config(), read_only=True).open()
    try:
        rep = verify_store(ro)
        assert {"cq-damaged", "bcq-damaged"} <= kinds(rep), rep.issues
    finally:
        ro.shutdown()
    store = MessageStore(tmp_path, small_config(), clock=FakeClock(step=1)).open()
    try:
        assert read_all(store, "Dmg") == list(range(43))
        assert read_all(store, "DmgB") == list(range(86))
    finally:
        store.shutdown()
    assert list((tmp_path / "lost+found" / "consumequeue" / "Dmg" / "0").iterdir())
    ro = MessageStore(tmp_path, small_config(), read_only=True).open()
    try:
        assert verify_store(ro).ok
    finally:
        ro.shutdown()


def test_a_missing_file_between_two_others_is_rebuilt(tmp_path: Path) -> None:
    """A consume queue file gone from the middle of its queue (deleted by hand, or its directory
    entry lost): the units after the gap are damage like those after a zeroed region, and the queue
    is rebuilt from the commitlog from there. Before, the queue ended at the gap: consumers stopped
    there for good, though the messages after it were in the commitlog."""
    clean_store(tmp_path, n=120)
    for qdir in (tmp_path / "consumequeue" / "Dmg" / "0", tmp_path / "batchconsumequeue" / "DmgB" / "0"):
        files = sorted(qdir.iterdir())
        assert len(files) >= 3
        files[1].unlink()
    ro = MessageStore(tmp_path, small_config(), read_only=True).open()
    try:
        assert {"cq-damaged", "bcq-damaged"} <= kinds(verify_store(ro))
    finally:
        ro.shutdown()
    store = MessageStore(tmp_path, small_config(), clock=FakeClock(step=1)).open()
    try:
        assert [bytes(m.body) for m in store.get_messages("Dmg", 0, 0, 500).messages] == [b"m%d" % i for i in range(120)]
        assert [bytes(m.body) for m in store.get_messages("DmgB", 0, 0, 500).messages] == \
            [b"b%d-%d" % (i, j) for i in range(120) for j in range(2)]
        assert store.put_message(make_msg("Dmg", 0, b"next")).queue_offset == 120
    finally:
        store.shutdown()
    assert (tmp_path / "lost+found" / "consumequeue" / "Dmg" / "0").is_dir()  # the cut units, kept aside
