"""One damaged consume queue unit must not move the min offset past good units (fuzz2 repro).

A unit whose commitlog offset was overwritten with -1 (entry 2 of GoldenTopicA/2): verifyStore said
"store OK" with 3 units fewer, and the queue's min offset jumped to 3, so the intact entries 0 and 1
(whose records the commitlog still holds) became unreachable. Now verifyStore names the file and byte
of the damaged unit, a writable open saves it to lost+found/ and rebuilds the queue from the
commitlog, and ``correct_min_offset`` checks what its binary search found.
"""

from __future__ import annotations

from pathlib import Path

from golden_helpers import GOLDEN_ROOT, golden_store_config

from broker_core.store.codec.cq_unit import CQ_UNIT
from broker_core.store.consume_queue import ConsumeQueue
from broker_core.store.lost_found import lost_found_dir
from broker_core.store.message_store import GetMessageStatus, MessageStore
from broker_core.store.store_config import StoreConfig
from broker_core.store.verify import verify_store

NAME = "store-basic"
TOPIC, QID = "GoldenTopicA", 2
CQ_REL = Path("consumequeue") / TOPIC / str(QID) / "00000000000000000000"
UNIT_POS = 40  # entry 2: its commitlog offset is bytes 40..47


def _damage(root: Path, value: int = -1) -> None:
    f = root / CQ_REL
    data = bytearray(f.read_bytes())
    data[UNIT_POS:UNIT_POS + 8] = value.to_bytes(8, "big", signed=True)
    f.write_bytes(bytes(data))


def _open(root: Path, read_only: bool) -> MessageStore:
    return MessageStore(root, StoreConfig.from_properties(golden_store_config(NAME)), read_only=read_only).open()


def _read_all(store: MessageStore) -> list[int]:
    offset, got = 0, []
    while True:
        r = store.get_messages(TOPIC, QID, offset, 7)
        if r.status is not GetMessageStatus.FOUND:
            break
        got.extend(m.queue_offset for m in r.messages)
        offset = r.next_begin_offset
    return got


def test_verify_names_damaged_unit_and_min_stays(golden_copy) -> None:
    root = golden_copy(NAME)
    _damage(root)
    store = _open(root, read_only=True)
    try:
        assert store.get_min_offset_in_queue(TOPIC, QID) == 0
        report = verify_store(store)
    finally:
        store.shutdown()
    assert not report.ok
    named = [i for i in report.issues if i.where == f"{TOPIC}/{QID}" and str(root / CQ_REL) in i.detail
             and f"byte {UNIT_POS}" in i.detail]
    assert named, report.issues
    assert not (root / "lost+found").exists()  # a read-only open writes nothing


def test_writable_open_moves_damaged_unit_aside_and_rebuilds(golden_copy) -> None:
    root = golden_copy(NAME)
    _damage(root)
    store = _open(root, read_only=False)
    try:
        assert store.get_min_offset_in_queue(TOPIC, QID) == 0
        assert _read_all(store) == list(range(store.get_max_offset_in_queue(TOPIC, QID)))
    finally:
        store.shutdown()
    # rebuilt byte for byte from the commitlog; the damaged bytes are kept in lost+found/
    assert (root / CQ_REL).read_bytes() == (GOLDEN_ROOT / NAME / CQ_REL).read_bytes()
    saved = [p for p in lost_found_dir(root).rglob("*") if p.is_file()]
    assert any((-1).to_bytes(8, "big", signed=True) in p.read_bytes() for p in saved), saved
    store = _open(root, read_only=True)
    try:
        report = verify_store(store)
    finally:
        store.shutdown()
    assert report.ok, report.issues


def test_verify_reports_units_below_min_whose_records_are_kept(golden_copy) -> None:
    """A min offset already past kept units (what the old search left) is reported, unit by unit."""
    root = golden_copy(NAME)
    store = _open(root, read_only=True)
    try:
        cq = store.consume_queues[(TOPIC, QID)]
        cq.min_logic_offset = 3 * 20
        report = verify_store(store)
    finally:
        store.shutdown()
    hits = [i for i in report.issues if i.kind == "cq-unreachable"]
    assert hits and hits[0].offset == 0 and str(root / CQ_REL) in hits[0].detail, report.issues
    assert report.mismatch_count >= 3


def _queue(tmp_path: Path, phys: list[int]) -> ConsumeQueue:
    cq = ConsumeQueue("T", 0, tmp_path / "consumequeue", 20 * 40)
    cq.load()
    for q, phy in enumerate(phys):
        cq.put_message_position_info(phy, 100, 0, q)
    return cq


def _set_phy(cq: ConsumeQueue, q: int, phy: int) -> None:
    mf = cq.file_queue.files[0]
    _, size, tags = CQ_UNIT.unpack_from(mf.mv, q * 20)
    mf.write_at(q * 20, CQ_UNIT.pack(phy, size, tags))


def test_correct_min_offset_not_fooled_by_negative_unit(tmp_path: Path) -> None:
    cq = _queue(tmp_path, [i * 100 for i in range(20)])
    try:
        _set_phy(cq, 5, -1)  # the binary search lands on it: it moved the min to 6
        cq.correct_min_offset(300)  # units 0..2 expired
        assert cq.get_min_offset_in_queue() == 3
        cq.correct_min_offset(0)
        assert cq.get_min_offset_in_queue() == 3  # never goes down
    finally:
        cq.close()


def test_correct_min_offset_not_fooled_by_out_of_order_unit(tmp_path: Path) -> None:
    cq = _queue(tmp_path, [i * 100 for i in range(20)])
    try:
        _set_phy(cq, 5, 50)  # valid-looking but below the commitlog min, among kept units
        cq.correct_min_offset(300)
        assert cq.get_min_offset_in_queue() == 3
    finally:
        cq.close()


def test_correct_min_offset_normal_search_unchanged(tmp_path: Path) -> None:
    cq = _queue(tmp_path, [i * 100 for i in range(20)])
    try:
        cq.correct_min_offset(1250)
        assert cq.get_min_offset_in_queue() == 13
        cq.correct_min_offset(1300)
        assert cq.get_min_offset_in_queue() == 13
        cq.correct_min_offset(5000)
        assert cq.get_min_offset_in_queue() == 20
    finally:
        cq.close()
