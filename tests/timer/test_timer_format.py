"""Timer byte layouts against spec §8 and the §13.8 test vector."""

from __future__ import annotations

import struct

import pytest

from broker_core.store.codec import timer_format as tf
from broker_core.store.codec.hashing import java_string_hash

# §13.8: TIMER_DELIVER_MS 1700000010500 -> TIMER_OUT_MS 1700000010000; copy at commitlog 0, size 211;
# currWriteTimeMs 1700000000000; REAL_TOPIC TopicTest; slot empty.
VECTOR_UNIT_HEX = ("00000034 ffffffffffffffff 00000001 0000018bcfe56800 00002710 0000000000000000 "
                   "000000d3 8e987641 0000000000000000")
VECTOR_SLOT_HEX = "000000006553f10a 0000000000000000 0000000000000000 00000001 00000000"


def _hex(s: str) -> bytes:
    return bytes.fromhex(s.replace(" ", ""))


def test_struct_sizes() -> None:
    assert tf.UNIT_SIZE == 52
    assert tf.MIN_BLANK_LEN == 16
    assert tf.SLOT_SIZE == 32
    assert tf.UNIT_SCAN_STRUCT.size == tf.UNIT_SIZE
    assert tf.CHECKPOINT_ENCODED_SIZE == 56
    assert tf.wheel_length() == 38_707_200
    assert tf.DEFAULT_SLOTS_TOTAL == 604_800


def test_blank_magic_is_javas_expression() -> None:
    # Java: 0xBBCCDDEE ^ 1880681586 + 8  ('+' binds tighter than '^'), as a signed int
    raw = (0xBBCCDDEE ^ (1880681586 + 8)) & 0xFFFFFFFF
    assert raw == 0xCBD43194
    assert struct.unpack(">i", raw.to_bytes(4, "big"))[0] == tf.BLANK_MAGIC_CODE


def test_vector_unit_bytes() -> None:
    topic_hash = java_string_hash("TopicTest")
    assert topic_hash == -1902610879
    data = tf.encode_unit(prev_pos=-1, magic=tf.MAGIC_DEFAULT, curr_write_time_ms=1700000000000,
                          delayed_time=1700000010000 - 1700000000000, offset_py=0, size_py=211,
                          topic_hash=topic_hash)
    assert data == _hex(VECTOR_UNIT_HEX)
    unit = tf.decode_unit(data)
    assert unit.size == 52 and unit.prev_pos == -1 and unit.delayed_time == 10_000
    assert unit.delivery_ms == 1700000010000
    assert (unit.offset_py, unit.size_py, unit.topic_hash, unit.reserved) == (0, 211, -1902610879, 0)
    assert not unit.is_roll and not unit.is_delete
    buf = bytearray(60)
    tf.pack_unit_into(buf, 4, -1, 1, 1700000000000, 10_000, 0, 211, topic_hash)
    assert bytes(buf[4:56]) == data
    assert tf.read_offset_py(buf, 4) == (0, 211)
    assert tf.read_unit_head(buf, 4) == (52, -1, 1)


def test_vector_slot_bytes() -> None:
    assert tf.slot_index(1700000010000, 1000) == 512010
    assert tf.slot_index(1700000010000, 1000) * tf.SLOT_SIZE == 16_384_320
    assert tf.encode_slot(1700000010, 0, 0, 1, 0) == _hex(VECTOR_SLOT_HEX)
    assert tf.unpack_slot_raw(_hex(VECTOR_SLOT_HEX), 0) == (1700000010, 0, 0, 1, 0)


def test_slot_head_pack_keeps_num_and_magic() -> None:
    buf = bytearray(tf.encode_slot(1, 2, 3, 7, 9))
    tf.pack_slot_head_into(buf, 0, 10, 20, 30)
    assert tf.unpack_slot_raw(buf, 0) == (10, 20, 30, 7, 9)
    tf.pack_slot_pos_into(buf, 16, 99)
    assert tf.unpack_slot_raw(buf, 0) == (10, 20, 99, 7, 9)


def test_blank_bytes() -> None:
    assert tf.encode_blank(44) == _hex("0000002c 0000000000000000 cbd43194")


@pytest.mark.parametrize(("free", "fits"), [(68, True), (67, False), (120, True), (16, False)])
def test_unit_fits_needs_room_for_blank(free: int, fits: bool) -> None:
    assert tf.unit_fits(free) is fits


def test_offset_for_last_unit() -> None:
    # 16384-byte files (golden): units at 0..16276 (314 units), blank at 16328 (56 bytes free)
    assert tf.offset_for_last_unit(16384) == 16276
    assert tf.offset_for_last_unit(16384) + 52 + 68 > 16384
    assert tf.offset_for_last_unit(16384) + 68 <= 16384
    assert tf.offset_for_last_unit(tf.DEFAULT_TIMER_LOG_FILE_SIZE) % 52 == 0


def test_magic_flags() -> None:
    assert (tf.MAGIC_DEFAULT, tf.MAGIC_ROLL, tf.MAGIC_DELETE) == (1, 2, 4)
    assert tf.is_magic_ok(1) and tf.is_magic_ok(1 | 2 | 4) and tf.is_magic_ok(0xF)
    assert not tf.is_magic_ok(0x10) and not tf.is_magic_ok(-1) and not tf.is_magic_ok(tf.BLANK_MAGIC_CODE)
    assert tf.is_unit(52, 3) and not tf.is_unit(16, 1) and not tf.is_unit(52, 0x20)
    assert tf.is_roll(3) and not tf.is_roll(5) and tf.is_delete(5)


def test_java_division_truncates_toward_zero() -> None:
    assert tf.java_div(-1500, 1000) == -1
    assert tf.java_div(1500, 1000) == 1
    assert tf.java_div(-2000, 1000) == -2


def test_checkpoint_round_trip() -> None:
    cp = tf.TimerCheckpointData(1795318704000, 520, 10, 10, 0, 1795318704163, 8)
    data = tf.encode_checkpoint(cp)
    assert len(data) == 56
    assert data[:8] == (1795318704000).to_bytes(8, "big")
    assert tf.decode_checkpoint(data) == cp
    # an encoding from before DataVersion was added has only four fields
    assert tf.decode_checkpoint(data[:32]) == tf.TimerCheckpointData(1795318704000, 520, 10, 10)
