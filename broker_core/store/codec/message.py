"""CommitLog record format (spec §1): encode, decode and validate records, V1 and V2, IPv4 and IPv6.

Everything that reads or writes a commitlog record goes through this module: the store's append and
recovery paths, dispatch, the protocol adapters and the Spark jobs. Fixed-layout headers use
precompiled ``struct.Struct`` objects, one per (born host, store host) address family pair.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

from . import hotpath
from .errors import RecordError
from .hashing import rmq_crc32
from .hosts import Host, decode_host
from .properties import decode_properties, get_property
from .sys_flag import BORNHOST_V6_FLAG, STOREHOSTADDRESS_V6_FLAG

MESSAGE_MAGIC_CODE_V1 = -626843481  # 0xDAA320A7
MESSAGE_MAGIC_CODE_V2 = -626843477  # 0xDAA320AB
BLANK_MAGIC_CODE = -875286124  # 0xCBD43194
END_FILE_MIN_BLANK_LENGTH = 8
# enabledAppendPropCRC (spec §1.6): ``__CRC32#`` 0x01 + 10 digits + 0x02 at the end of PROPERTIES.
CRC32_RESERVED_LEN = 20
PROP_CRC_PREFIX = b"__CRC32#\x01"

# Offsets of fields patched inside the append lock (independent of host families).
QUEUE_OFFSET_POS = 20
PHYSICAL_OFFSET_POS = 28
SYS_FLAG_POS = 36
BORN_TIMESTAMP_POS = 40
BORN_HOST_POS = 48

_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_I16 = struct.Struct(">h")
_I8 = struct.Struct(">b")
_BLANK = struct.Struct(">ii")
_PREFIX = struct.Struct(">iiiiiqqiq")  # TOTALSIZE .. BORNTIMESTAMP (48 bytes)


def _header_struct(born_len: int, store_len: int) -> struct.Struct:
    # TOTALSIZE MAGIC BODYCRC QUEUEID FLAG QUEUEOFFSET PHYOFFSET SYSFLAG BORNTS BORNHOST STORETS
    # STOREHOST RECONSUMETIMES PREPAREDTXOFFSET BODYLEN
    return struct.Struct(f">iiiiiqqiq{born_len}sq{store_len}siqi")


_HEADERS = {
    (False, False): _header_struct(8, 8),
    (True, False): _header_struct(20, 8),
    (False, True): _header_struct(8, 20),
    (True, True): _header_struct(20, 20),
}
# QUEUEOFFSET and PHYSICALOFFSET are adjacent: patched with one pack.
_QUEUE_AND_PHY_OFFSET = struct.Struct(">qq")


@dataclass(slots=True)
class MessageInner:
    """A message as the store appends it (MessageExtBrokerInner)."""

    topic: str
    body: bytes = b""
    properties: dict[str, str] = field(default_factory=dict)
    queue_id: int = 0
    flag: int = 0
    sys_flag: int = 0
    born_timestamp: int = 0
    born_host: Host = ("127.0.0.1", 0)
    store_host: Host = ("127.0.0.1", 10911)
    reconsume_times: int = 0
    prepared_transaction_offset: int = 0
    store_timestamp: int = 0  # assigned by the commitlog unless ``keep_store_timestamp``
    keep_store_timestamp: bool = False

    def get_property(self, key: str) -> str | None:
        return self.properties.get(key)

    @property
    def tags(self) -> str | None:
        return self.properties.get("TAGS")

    @property
    def keys(self) -> str | None:
        return self.properties.get("KEYS")


@dataclass(slots=True)
class MessageExt:
    """A record as read back from the commitlog, every header field included."""

    store_size: int
    magic_code: int
    body_crc: int
    queue_id: int
    flag: int
    queue_offset: int
    commit_log_offset: int
    sys_flag: int
    born_timestamp: int
    born_host: Host
    store_timestamp: int
    store_host: Host
    reconsume_times: int
    prepared_transaction_offset: int
    body: bytes
    topic: str
    properties_string: str
    _properties: dict[str, str] | None = None

    @property
    def properties(self) -> dict[str, str]:
        if self._properties is None:
            self._properties = decode_properties(self.properties_string)
        return self._properties

    def get_property(self, key: str) -> str | None:
        if self._properties is not None:
            return self._properties.get(key)
        return get_property(self.properties_string, key)

    @property
    def tags(self) -> str | None:
        return self.get_property("TAGS")

    @property
    def keys(self) -> str | None:
        return self.get_property("KEYS")

    @property
    def uniq_key(self) -> str | None:
        return self.get_property("UNIQ_KEY")

    @property
    def msg_id(self) -> str:
        from .message_id import create_offset_msg_id

        return create_offset_msg_id(self.store_host, self.commit_log_offset)


# The hot functions (record encoding, the dispatch-field decoder, the BODYCRC check) live in
# ``hotpath``: compiled when built, else their pure-Python twin ``hot_py``. Re-exported here because
# this module is where callers look for the record format.
PreparedRecord = hotpath.PreparedRecord
prepare_record = hotpath.prepare_record
write_record = hotpath.write_record
record_parts = hotpath.record_parts
decode_dispatch_fields = hotpath.decode_dispatch_fields
body_crc_matches = hotpath.body_crc_matches


def encode_record(msg: MessageInner, queue_offset: int, physical_offset: int, store_timestamp: int,
                  properties_string: str | None = None, max_message_size: int = 4 * 1024 * 1024,
                  append_prop_crc: bool = False) -> bytearray:
    """Encode one full record into a new buffer (``prepare_record`` + ``write_record``).

    ``append_prop_crc`` is ``enabledAppendPropCRC`` (spec §1.6): the reserved last 20 bytes of
    PROPERTIES are filled with the CRC of the rest of the record; ``patch_record(..., prop_crc=True)``
    refreshes it after patching.
    """
    rec = prepare_record(msg, properties_string, max_message_size, append_prop_crc)
    buf = bytearray(rec[0])
    write_record(buf, 0, rec, msg, queue_offset, physical_offset, store_timestamp)
    if append_prop_crc:
        write_prop_crc(buf, 0, rec[0])
    return buf


def write_prop_crc(buf: bytearray | memoryview, pos: int, total: int) -> None:
    """Fill the reserved last 20 bytes of the record at ``pos`` (Java ``MessageDecoder.createCrc32``).

    The CRC covers ``[0, total - 20)``; its decimal digits are written least significant first,
    padded with '0' to 10 digits, as ``__CRC32#`` 0x01 digits 0x02.
    """
    crc = rmq_crc32(buf[pos:pos + total - CRC32_RESERVED_LEN])
    digits = bytearray()
    for _ in range(10):
        digits.append(0x30 + crc % 10)
        crc //= 10
    buf[pos + total - CRC32_RESERVED_LEN:pos + total] = PROP_CRC_PREFIX + bytes(digits) + b"\x02"


def verify_prop_crc(buf: bytes | bytearray | memoryview, pos: int, total: int) -> bool:
    """True when the record ends with a ``__CRC32#`` property matching its bytes (forceVerifyPropCRC)."""
    tail = bytes(buf[pos + total - CRC32_RESERVED_LEN:pos + total])
    if not tail.startswith(PROP_CRC_PREFIX) or tail[-1:] != b"\x02":
        return False
    digits = tail[len(PROP_CRC_PREFIX):-1]
    if not digits.isdigit():
        return False
    stored = sum((d - 0x30) * 10 ** i for i, d in enumerate(digits))
    return stored == rmq_crc32(buf[pos:pos + total - CRC32_RESERVED_LEN])


def store_timestamp_pos(sys_flag: int) -> int:
    return BORN_HOST_POS + (20 if sys_flag & BORNHOST_V6_FLAG else 8)


def patch_record(buf: bytearray | memoryview, pos: int, queue_offset: int, physical_offset: int,
                 store_timestamp: int | None, prop_crc: bool = False) -> None:
    """Fill the fields only known inside the append lock (and then the whole-record CRC, if any)."""
    _QUEUE_AND_PHY_OFFSET.pack_into(buf, pos + QUEUE_OFFSET_POS, queue_offset, physical_offset)
    if store_timestamp is not None:
        born_v6 = buf[pos + SYS_FLAG_POS + 3] & BORNHOST_V6_FLAG  # the flag bit is in SYSFLAG's low byte
        _I64.pack_into(buf, pos + BORN_HOST_POS + (20 if born_v6 else 8), store_timestamp)
    if prop_crc:
        write_prop_crc(buf, pos, _I32.unpack_from(buf, pos)[0])


def encode_blank(free: int) -> bytes:
    """End-of-file marker: the remaining byte count and BLANK_MAGIC_CODE (spec §1.7)."""
    return _BLANK.pack(free, BLANK_MAGIC_CODE)


def read_total_size(buf, pos: int) -> int:
    return _I32.unpack_from(buf, pos)[0]


def read_magic(buf, pos: int) -> int:
    return _I32.unpack_from(buf, pos + 4)[0]


def decode_record(buf: bytes | bytearray | memoryview, pos: int = 0, read_body: bool = True) -> MessageExt:
    """Decode the record starting at ``pos``. Raises RecordError when it is not a complete record."""
    try:
        total, magic = _BLANK.unpack_from(buf, pos)
    except struct.error as e:
        raise RecordError(f"truncated record header at {pos}") from e
    if magic not in (MESSAGE_MAGIC_CODE_V1, MESSAGE_MAGIC_CODE_V2):
        raise RecordError(f"bad magic code {magic & 0xFFFFFFFF:#010x} at {pos}")
    if total <= 0 or pos + total > len(buf):
        raise RecordError(f"record size {total} at {pos} runs past the end of the data")
    try:
        return _decode_checked(buf, pos, total, magic, read_body)
    except (struct.error, IndexError, UnicodeError) as e:  # a field that does not fit TOTALSIZE
        raise RecordError(f"record at {pos} (TOTALSIZE {total}) is malformed: {e}") from None


def _decode_checked(buf: bytes | bytearray | memoryview, pos: int, total: int, magic: int,
                    read_body: bool) -> MessageExt:
    if total < _HEADERS[(False, False)].size + 3:
        raise RecordError(f"record size {total} at {pos} is smaller than a record header")
    sys_flag = _I32.unpack_from(buf, pos + SYS_FLAG_POS)[0]
    header = _HEADERS[(bool(sys_flag & BORNHOST_V6_FLAG), bool(sys_flag & STOREHOSTADDRESS_V6_FLAG))]
    if header.size + 3 > total:
        raise RecordError(f"record size {total} at {pos} is smaller than its header")
    (_, _, body_crc, queue_id, flag, queue_offset, phy_offset, _, born_ts, born_raw, store_ts, store_raw,
     reconsume, prepared, body_len) = header.unpack_from(buf, pos)
    p = pos + header.size
    end = pos + total
    if body_len < 0 or p + body_len > end:
        raise RecordError(f"bad body length {body_len} at {pos}")
    body = bytes(buf[p:p + body_len]) if read_body else b""
    p += body_len
    if magic == MESSAGE_MAGIC_CODE_V2:
        topic_len = _I16.unpack_from(buf, p)[0]
        p += 2
    else:
        topic_len = _I8.unpack_from(buf, p)[0]
        p += 1
    if topic_len < 0 or p + topic_len + 2 > end:
        raise RecordError(f"bad topic length {topic_len} at {pos}")
    topic = bytes(buf[p:p + topic_len]).decode("utf-8", errors="replace")
    p += topic_len
    props_len = _I16.unpack_from(buf, p)[0]
    p += 2
    if props_len < 0 or p + props_len != end:
        raise RecordError(f"record at {pos}: field lengths do not add up to TOTALSIZE {total}")
    props = bytes(buf[p:p + props_len]).decode("utf-8", errors="replace") if props_len else ""
    return MessageExt(total, magic, body_crc, queue_id, flag, queue_offset, phy_offset, sys_flag, born_ts,
                      decode_host(born_raw), store_ts, decode_host(store_raw), reconsume, prepared, body,
                      topic, props)


# Result kinds of ``check_record``.
RECORD_VALID = 1
RECORD_BLANK = 0
RECORD_INVALID = -1


@dataclass(slots=True)
class RecordCheck:
    """What recovery needs from one position: the verdict, the size, the reason if invalid."""

    kind: int
    size: int
    reason: str = ""
    message: MessageExt | None = None


def check_record(buf, pos: int, limit: int, check_crc: bool = True, read_body: bool = True) -> RecordCheck:
    """Validate the record at ``pos`` (spec §9.4) without reading past ``limit`` (end of file)."""
    remaining = limit - pos
    if remaining <= 4:
        return RecordCheck(RECORD_INVALID, 0, "end of file data")
    total = _I32.unpack_from(buf, pos)[0]
    if remaining < 8:
        return RecordCheck(RECORD_INVALID, 0, "truncated record header")
    magic = _I32.unpack_from(buf, pos + 4)[0]
    if magic == BLANK_MAGIC_CODE:
        return RecordCheck(RECORD_BLANK, 0)
    if magic not in (MESSAGE_MAGIC_CODE_V1, MESSAGE_MAGIC_CODE_V2):
        if total == 0 and magic == 0:
            return RecordCheck(RECORD_INVALID, 0, "no more data (zero bytes)")
        return RecordCheck(RECORD_INVALID, 0, f"bad magic code {magic & 0xFFFFFFFF:#010x}")
    if total <= 0 or remaining < total:
        return RecordCheck(RECORD_INVALID, 0, f"torn record: TOTALSIZE {total} but only {remaining} bytes left")
    try:
        # The body is copied only when the caller wants it; the CRC is computed in place.
        msg = decode_record(buf, pos, read_body=read_body)
    except (RecordError, struct.error) as e:
        return RecordCheck(RECORD_INVALID, 0, str(e))
    if check_crc:
        sys_flag = msg.sys_flag
        body_len_pos = pos + BORN_HOST_POS + (20 if sys_flag & BORNHOST_V6_FLAG else 8) + 8 \
            + (20 if sys_flag & STOREHOSTADDRESS_V6_FLAG else 8) + 12
        body_len = _I32.unpack_from(buf, body_len_pos)[0]
        if body_len > 0:
            with memoryview(buf) as mv:
                crc = rmq_crc32(mv[body_len_pos + 4:body_len_pos + 4 + body_len])
            if crc != msg.body_crc:
                return RecordCheck(RECORD_INVALID, 0, f"body CRC mismatch (stored {msg.body_crc}, computed {crc})")
    return RecordCheck(RECORD_VALID, total, "", msg)
