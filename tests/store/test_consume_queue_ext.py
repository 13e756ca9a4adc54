"""ConsumeQueueExt in the store: units written at dispatch, read back with the CQ unit, kept across a
restart, cut back after a crash like the consume queue itself, and nothing of it when the flag is off."""

from __future__ import annotations

import shutil
import struct
from pathlib import Path

from broker_core.store.codec.cq_ext import CqExtUnit, decorate, pack_cq_ext_unit
from broker_core.store.codec.hashing import tags_code
from broker_core.store.codec.properties import decode_properties
from broker_core.store.message_store import MessageStore
from tests.store.store_util import FakeClock, make_msg, small_config

EXT_FILE = 128  # 6 units of 21 bytes per file: 5 fit before the 4 bytes kept for the end marker


class PickBitMap:
    """A FilterBitMapHook: bit 0 set when the message's ``pick`` property is ``yes`` (one consumer)."""

    def __init__(self) -> None:
        self.calls = 0

    def calc_filter_bit_map(self, topic: str, properties_string: str) -> bytes | None:
        self.calls += 1
        return b"\x01" if decode_properties(properties_string).get("pick") == "yes" else b"\x00"


def _open(root: Path, ext: bool = True, hook: PickBitMap | None = None) -> MessageStore:
    store = MessageStore(root, small_config(enable_consume_queue_ext=ext, mapped_file_size_consume_queue_ext=EXT_FILE),
                         clock=FakeClock(step=1))
    store.filter_bit_map_hook = hook or PickBitMap()
    return store.open()


def _put(store: MessageStore, n: int, start: int = 0) -> list[int]:
    return [store.put_message(make_msg("T", 0, b"m%d" % i, tags="TagA", pick="yes" if i % 3 == 0 else "no"))
            .store_timestamp for i in range(start, start + n)]


def _raw_tags(root: Path) -> list[int]:
    data = b"".join(p.read_bytes() for p in sorted((root / "consumequeue" / "T" / "0").iterdir()))
    return [t for phy, size, t in struct.iter_unpack(">qiq", data) if size > 0]


def _check_units(store: MessageStore, store_times: list[int]) -> None:
    units = store.get_units("T", 0, 0, 100)
    assert [u.queue_offset for u in units] == list(range(len(store_times)))
    for i, u in enumerate(units):
        assert u.ext == CqExtUnit(tags_code("TagA"), store_times[i], b"\x01" if i % 3 == 0 else b"\x00")
        assert u.tags_code == tags_code("TagA") and u.store_time == store_times[i]


def test_units_point_at_ext_units_across_files(tmp_path: Path) -> None:
    store = _open(tmp_path)
    try:
        times = _put(store, 12)
        _check_units(store, times)
        ext_dir = tmp_path / "consumequeue_ext" / "T" / "0"
        files = sorted(ext_dir.iterdir())
        assert [p.name for p in files] == [f"{o:020d}" for o in (0, 128, 256)]
        assert all(p.stat().st_size == EXT_FILE for p in files)
        first = files[0].read_bytes()
        assert first[:21] == pack_cq_ext_unit(CqExtUnit(tags_code("TagA"), times[0], b"\x01"))
        assert first[105:107] == b"\xff\xff"  # fullFillToEnd: the sixth unit did not fit
        # the CQ unit's tagsCode is the decorated ext offset: 5 units per file, 21 bytes each
        assert _raw_tags(tmp_path) == [decorate(f * 128 + j * 21) for f in range(3) for j in range(5)][:12]
    finally:
        store.shutdown()


def test_flag_off_writes_tags_hash_and_no_ext(tmp_path: Path) -> None:
    hook = PickBitMap()
    store = _open(tmp_path, ext=False, hook=hook)
    try:
        _put(store, 4)
        assert all(u.ext is None and u.tags_code == tags_code("TagA") for u in store.get_units("T", 0, 0, 10))
    finally:
        store.shutdown()
    assert not (tmp_path / "consumequeue_ext").exists()
    assert _raw_tags(tmp_path) == [tags_code("TagA")] * 4 and hook.calls == 0


def test_ext_survives_restart_and_keeps_appending(tmp_path: Path) -> None:
    store = _open(tmp_path)
    times = _put(store, 7)
    store.shutdown()
    store = _open(tmp_path)
    try:
        _check_units(store, times)
        times += _put(store, 4, start=7)
        _check_units(store, times)
        assert _raw_tags(tmp_path)[7] == decorate(128 + 2 * 21)  # right after the 7th unit, not over it
    finally:
        store.shutdown()


def test_crash_with_torn_ext_tail_is_cut_back_like_the_queue(tmp_path: Path) -> None:
    live, crashed = tmp_path / "live", tmp_path / "crashed"
    store = _open(live)
    times = _put(store, 8)
    store.flush()
    shutil.copytree(live, crashed)  # what the disk holds if the process died now (abort still there)
    store.shutdown()
    assert (crashed / "abort").exists()
    # The crash lost the last CQ unit after its ext unit was written, and left half of another ext unit.
    cq_file = sorted((crashed / "consumequeue" / "T" / "0").iterdir())[0]
    with open(cq_file, "r+b") as f:
        f.seek(7 * 20)
        f.write(bytes(20))
    ext_file = crashed / "consumequeue_ext" / "T" / "0" / f"{128:020d}"
    with open(ext_file, "r+b") as f:
        f.seek(3 * 21)
        f.write(b"\x00\x15" + b"\x12" * 7)
    store = _open(crashed)
    try:
        _check_units(store, times)  # the lost unit was re-dispatched, with a new ext unit where the old one was
        assert _raw_tags(crashed)[7] == decorate(128 + 2 * 21)
        assert ext_file.read_bytes()[3 * 21:] == bytes(EXT_FILE - 3 * 21)  # the torn bytes are gone
        times += _put(store, 2, start=8)
        _check_units(store, times)
    finally:
        store.shutdown()
    store = _open(crashed)
    try:
        _check_units(store, times)
    finally:
        store.shutdown()


def test_verify_store_with_and_without_the_ext_opened(tmp_path: Path) -> None:
    from broker_core.store.verify import verify_store

    store = _open(tmp_path)
    _put(store, 6)
    store.shutdown()
    for ext in (True, False):  # a store inspected without enableConsumeQueueExt sees ext addresses
        ro = MessageStore(tmp_path, small_config(enable_consume_queue_ext=ext,
                                                 mapped_file_size_consume_queue_ext=EXT_FILE), read_only=True).open()
        try:
            rep = verify_store(ro)
            assert rep.ok, rep
            assert all(u.ext is not None for u in ro.get_units("T", 0, 0, 10)) == ext
        finally:
            ro.shutdown()


def test_lost_ext_pages_mean_evaluate_and_new_units_never_reuse_old_addresses(tmp_path: Path) -> None:
    live, crashed = tmp_path / "live", tmp_path / "crashed"
    store = _open(live)
    times = _put(store, 8)
    store.flush()
    shutil.copytree(live, crashed)
    store.shutdown()
    # a power cut kept the queue's units but not the ext pages of units 5..7 (the second file)
    ext_file = crashed / "consumequeue_ext" / "T" / "0" / f"{128:020d}"
    ext_file.write_bytes(bytes(EXT_FILE))
    store = _open(crashed)
    try:
        units = store.get_units("T", 0, 0, 100)
        assert [u.ext is not None for u in units] == [True] * 5 + [False] * 3  # those are read and evaluated
        times += _put(store, 2, start=8)
        tags = _raw_tags(crashed)
        assert tags[5:8] == [decorate(128 + j * 21) for j in range(3)]  # still pointing at the lost units
        assert tags[8:] == [decorate(256), decorate(256 + 21)]  # new units in a new file, past them
        after = store.get_units("T", 0, 0, 100)
        assert [u.ext is not None for u in after] == [True] * 5 + [False] * 3 + [True] * 2
        assert after[8].ext == CqExtUnit(tags_code("TagA"), times[8], b"\x00")
    finally:
        store.shutdown()
    store = _open(crashed)
    try:
        assert [u.ext is not None for u in store.get_units("T", 0, 0, 100)] == [True] * 5 + [False] * 3 + [True] * 2
    finally:
        store.shutdown()


def test_expired_queue_files_take_their_ext_files_along(tmp_path: Path) -> None:
    store = _open(tmp_path)
    try:
        times = _put(store, 40)  # CQ files of 16 units, ext files of 5 units
        cq = store.find_consume_queue("T", 0)
        first_kept = store.get_units("T", 0, 32, 1)[0]
        assert cq.delete_expired_files(first_kept.phy_offset) == 2
        ext_dir = tmp_path / "consumequeue_ext" / "T" / "0"
        # unit 32's ext unit is in the 7th file (offset 6 * 128): the six before it are gone
        assert sorted(p.name for p in ext_dir.iterdir()) == [f"{o * 128:020d}" for o in (6, 7)]
        units = store.get_units("T", 0, 32, 20)
        assert [u.queue_offset for u in units] == list(range(32, 40))
        assert [u.ext.msg_store_time for u in units] == times[32:]
    finally:
        store.shutdown()
