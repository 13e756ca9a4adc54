"""Byte layouts of the timer files: TimerLog unit and blank, TimerWheel slot, ``config/timercheck``.

Why this module exists: the timer wheel, the timer log and the timer checkpoint are written by Apache
RocketMQ's ``TimerMessageStore`` and must be read and written byte-for-byte the same way (spec §8,
test vector §13.8). Every offset and struct of those files is defined here and nowhere else; the
``broker_core.store.timer`` package only moves these records around.

All integers are big-endian, signed (spec §0).
"""

from __future__ import annotations

import struct
from typing import NamedTuple

# ---------------------------------------------------------------------------------------------
# Shared parameters (spec §8.1)

DEFAULT_PRECISION_MS = 1000
DAY_SECS = 24 * 3600
TIMER_WHEEL_TTL_DAY = 7
#: Slot count is fixed at 7 days of seconds regardless of the precision (TimerMessageStore).
DEFAULT_SLOTS_TOTAL = TIMER_WHEEL_TTL_DAY * DAY_SECS  # 604,800
#: Slots kept free between the roll window and the wheel's wrap-around.
TIMER_BLANK_SLOTS = 60
DEFAULT_TIMER_ROLL_WINDOW_SLOT = 2 * DAY_SECS  # 172,800
DEFAULT_TIMER_MAX_DELAY_SEC = 3 * DAY_SECS  # 259,200
DEFAULT_TIMER_LOG_FILE_SIZE = 100 * 1024 * 1024  # 104,857,600

# ---------------------------------------------------------------------------------------------
# TimerLog unit (52 bytes, spec §8.3)

MAGIC_DEFAULT = 1
MAGIC_ROLL = 1 << 1
MAGIC_DELETE = 1 << 2

#: ``size | prevPos | magic | currWriteTimeMs | delayedTime | offsetPy | sizePy | topicHash | reserved``
UNIT_STRUCT = struct.Struct(">iqiqiqiiq")
UNIT_SIZE = UNIT_STRUCT.size  # 52
#: Offset of offsetPy inside a unit (Java ``UNIT_PRE_SIZE_FOR_MSG``).
UNIT_PRE_SIZE_FOR_MSG = 28
#: Offset of the real-topic hash inside a unit (Java ``UNIT_PRE_SIZE_FOR_METRIC``).
UNIT_PRE_SIZE_FOR_METRIC = 40
#: Only the head of a unit: enough to tell a unit from a blank or garbage while scanning.
UNIT_HEAD_STRUCT = struct.Struct(">iqi")  # size, prevPos, magic (16 bytes)
#: Head of a unit padded to the unit size, for ``iter_unpack`` over whole files during recovery.
UNIT_SCAN_STRUCT = struct.Struct(">iqiqi24x")  # size, prevPos, magic, currWriteTimeMs, delayedTime
_OFFSET_PY_STRUCT = struct.Struct(">qi")  # offsetPy, sizePy at UNIT_PRE_SIZE_FOR_MSG

# End-of-file blank: ``i32 free | i64 0 | i32 BLANK_MAGIC_CODE`` (16 bytes). Java computes the magic as
# ``0xBBCCDDEE ^ 1880681586 + 8`` which is 0xCBD43194, the commitlog blank magic.
BLANK_MAGIC_CODE = -875286124  # 0xCBD43194 as i32
BLANK_STRUCT = struct.Struct(">iqi")
MIN_BLANK_LEN = BLANK_STRUCT.size  # 16


class TimerLogUnit(NamedTuple):
    """One decoded TimerLog unit; ``delivery_ms`` is the absolute slot time it is linked into."""

    size: int
    prev_pos: int
    magic: int
    curr_write_time_ms: int
    delayed_time: int
    offset_py: int
    size_py: int
    topic_hash: int
    reserved: int

    @property
    def delivery_ms(self) -> int:
        """Absolute target (slot) time: the unit stores it relative to the write pointer."""
        return self.curr_write_time_ms + self.delayed_time

    @property
    def is_roll(self) -> bool:
        return bool(self.magic & MAGIC_ROLL)

    @property
    def is_delete(self) -> bool:
        return bool(self.magic & MAGIC_DELETE)


def is_magic_ok(magic: int) -> bool:
    """Java ``isMagicOK``: only the four low bits may be set (a zero magic also passes, as in Java)."""
    return (magic | 0xF) == 0xF


def is_roll(magic: int) -> bool:
    return bool(magic & MAGIC_ROLL)


def is_delete(magic: int) -> bool:
    return bool(magic & MAGIC_DELETE)


def encode_unit(prev_pos: int, magic: int, curr_write_time_ms: int, delayed_time: int, offset_py: int,
                size_py: int, topic_hash: int, reserved: int = 0) -> bytes:
    """The 52 bytes Java's ``doEnqueue`` appends; ``delayed_time`` is relative to ``curr_write_time_ms``."""
    return UNIT_STRUCT.pack(UNIT_SIZE, prev_pos, magic, curr_write_time_ms, delayed_time, offset_py,
                            size_py, topic_hash, reserved)


def pack_unit_into(buf: bytearray | memoryview, pos: int, prev_pos: int, magic: int, curr_write_time_ms: int,
                   delayed_time: int, offset_py: int, size_py: int, topic_hash: int, reserved: int = 0) -> None:
    """Write a unit straight into a mapped buffer (no intermediate bytes object on the hot path)."""
    UNIT_STRUCT.pack_into(buf, pos, UNIT_SIZE, prev_pos, magic, curr_write_time_ms, delayed_time, offset_py,
                          size_py, topic_hash, reserved)


def decode_unit(buf: bytes | bytearray | memoryview, pos: int = 0) -> TimerLogUnit:
    """Decode the 52-byte unit at ``pos`` (no validation; see ``is_unit``)."""
    return TimerLogUnit._make(UNIT_STRUCT.unpack_from(buf, pos))


def unpack_unit(buf: bytes | bytearray | memoryview, pos: int = 0) -> tuple[int, int, int, int, int, int, int, int, int]:
    """The nine unit fields as a plain tuple, in ``TimerLogUnit`` order (hot path: no named tuple)."""
    return UNIT_STRUCT.unpack_from(buf, pos)


def read_unit_head(buf: bytes | bytearray | memoryview, pos: int) -> tuple[int, int, int]:
    """``(size, prevPos, magic)`` of the record at ``pos``: tells a unit, a blank or garbage apart."""
    return UNIT_HEAD_STRUCT.unpack_from(buf, pos)


def read_offset_py(buf: bytes | bytearray | memoryview, pos: int) -> tuple[int, int]:
    """``(offsetPy, sizePy)`` of the unit at ``pos`` without decoding the rest."""
    return _OFFSET_PY_STRUCT.unpack_from(buf, pos + UNIT_PRE_SIZE_FOR_MSG)


def is_unit(size: int, magic: int) -> bool:
    """A record head that recovery accepts as a unit (Java: ``size == UNIT_SIZE && isMagicOK``)."""
    return size == UNIT_SIZE and (magic | 0xF) == 0xF


def encode_blank(free: int) -> bytes:
    """End-of-file filler: the free byte count, 8 zero bytes, then the blank magic at offset 12."""
    return BLANK_STRUCT.pack(free, 0, BLANK_MAGIC_CODE)


def unit_fits(free: int) -> bool:
    """Java appends a unit only if it leaves room for a blank after it: ``52 + 16 <= free``."""
    return UNIT_SIZE + MIN_BLANK_LEN <= free


def offset_for_last_unit(file_size: int) -> int:
    """In-file position of the last unit a full TimerLog file holds (Java ``getOffsetForLastUnit``)."""
    return file_size - (file_size - MIN_BLANK_LEN) % UNIT_SIZE - MIN_BLANK_LEN - UNIT_SIZE


# ---------------------------------------------------------------------------------------------
# TimerWheel slot (32 bytes, spec §8.2)

#: ``time / precision | firstPos | lastPos | num | magic``
SLOT_STRUCT = struct.Struct(">qqqii")
SLOT_SIZE = SLOT_STRUCT.size  # 32
_SLOT_HEAD_STRUCT = struct.Struct(">qqq")  # the 3-field ``putSlot`` variant leaves num/magic alone
_SLOT_POS_STRUCT = struct.Struct(">q")
_SLOT_TIME_DIV_UNPACK = _SLOT_POS_STRUCT.unpack_from  # the slot's first field is an i64 too


class Slot(NamedTuple):
    """A wheel slot as Java's ``Slot``: ``time_ms`` is absolute (stored value × precision).

    An empty / stale slot reads as ``Slot(-1, -1, -1, 0, 0)``.
    """

    time_ms: int
    first_pos: int
    last_pos: int
    num: int = 0
    magic: int = 0


EMPTY_SLOT = Slot(-1, -1, -1, 0, 0)


def wheel_length(slots_total: int = DEFAULT_SLOTS_TOTAL) -> int:
    """File size of the wheel: twice the slot count (so a full TTL plus the roll window fits), 32 B each."""
    return slots_total * 2 * SLOT_SIZE


def java_div(a: int, b: int) -> int:
    """Java long division (truncates toward zero); Python's ``//`` floors for negative values."""
    q = a // b
    if q < 0 and q * b != a:
        q += 1
    return q


def slot_index(time_ms: int, precision_ms: int, slots_total: int = DEFAULT_SLOTS_TOTAL) -> int:
    """Index of the slot for ``time_ms`` (Java ``getSlotIndex``): ``time / precision mod 2·slotsTotal``."""
    return java_div(time_ms, precision_ms) % (slots_total * 2)


def pack_slot_into(buf: bytearray | memoryview, pos: int, time_div: int, first_pos: int, last_pos: int,
                   num: int, magic: int) -> None:
    """Write all five slot fields; ``time_div`` is the slot time divided by the precision."""
    SLOT_STRUCT.pack_into(buf, pos, time_div, first_pos, last_pos, num, magic)


def pack_slot_head_into(buf: bytearray | memoryview, pos: int, time_div: int, first_pos: int,
                        last_pos: int) -> None:
    """Java's 3-argument ``putSlot``: time, firstPos, lastPos; num and magic bytes stay as they are."""
    _SLOT_HEAD_STRUCT.pack_into(buf, pos, time_div, first_pos, last_pos)


def pack_slot_pos_into(buf: bytearray | memoryview, pos: int, value: int) -> None:
    """Overwrite one i64 of a slot (firstPos at +8 or lastPos at +16) during ``reviseSlot``."""
    _SLOT_POS_STRUCT.pack_into(buf, pos, value)


def read_slot_time_div(buf: bytes | bytearray | memoryview, pos: int) -> int:
    """Only the stored ``time / precision`` of the slot at ``pos`` (tells which lap it holds)."""
    return _SLOT_TIME_DIV_UNPACK(buf, pos)[0]


def unpack_slot_raw(buf: bytes | bytearray | memoryview, pos: int) -> tuple[int, int, int, int, int]:
    """``(time_div, firstPos, lastPos, num, magic)`` exactly as stored."""
    return SLOT_STRUCT.unpack_from(buf, pos)


def encode_slot(time_div: int, first_pos: int, last_pos: int, num: int, magic: int) -> bytes:
    return SLOT_STRUCT.pack(time_div, first_pos, last_pos, num, magic)


# ---------------------------------------------------------------------------------------------
# Timer checkpoint ``config/timercheck`` (4,096 bytes, spec §8.5)

CHECKPOINT_FILE_SIZE = 4096
#: lastReadTimeMs, lastTimerLogFlushPos, lastTimerQueueOffset, masterTimerQueueOffset,
#: dataVersion.stateVersion, dataVersion.timestamp, dataVersion.counter
CHECKPOINT_STRUCT = struct.Struct(">qqqqqqq")
CHECKPOINT_ENCODED_SIZE = CHECKPOINT_STRUCT.size  # 56 (Java ``TimerCheckpoint.encode``)
CHECKPOINT_LEGACY_SIZE = 32  # the four offsets/times only, before dataVersion was added


class TimerCheckpointData(NamedTuple):
    """The seven i64 fields of ``timercheck`` in file order."""

    last_read_time_ms: int = 0
    last_timer_log_flush_pos: int = 0
    last_timer_queue_offset: int = 0
    master_timer_queue_offset: int = 0
    state_version: int = 0
    timestamp: int = 0
    counter: int = 0


def encode_checkpoint(cp: TimerCheckpointData) -> bytes:
    """The 56 meaningful bytes (the file is zero beyond them)."""
    return CHECKPOINT_STRUCT.pack(*cp)


def pack_checkpoint_into(buf: bytearray | memoryview, cp: TimerCheckpointData) -> None:
    CHECKPOINT_STRUCT.pack_into(buf, 0, *cp)


def decode_checkpoint(buf: bytes | bytearray | memoryview) -> TimerCheckpointData:
    """Decode the head of a checkpoint; a 32-byte legacy encoding (no dataVersion) is accepted too."""
    if len(buf) >= CHECKPOINT_ENCODED_SIZE:
        return TimerCheckpointData._make(CHECKPOINT_STRUCT.unpack_from(buf, 0))
    head = struct.unpack_from(">qqqq", buf, 0)  # CHECKPOINT_LEGACY_SIZE bytes
    return TimerCheckpointData(*head)
