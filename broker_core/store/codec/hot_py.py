"""The store's hot byte work in pure Python: the reference for, and the fallback of, ``_hotpath.c``.

Why two implementations: per message the store encodes a record, writes a consume queue unit and
two index entries, and CPython's call and object overhead dominates that work (issue 17 measured
~12 us per 1 KiB message). The compiled module ``_hotpath`` does exactly what this module does, byte
for byte and verdict for verdict; ``hotpath`` picks one (``RMQ_PURE_PYTHON=1`` forces this one) and
the codec, store and golden tests run on both. Everything here is a flat function over buffers and
plain values: file rolls, BLANK records, locks and every decision stay with the callers.
"""

from __future__ import annotations

import struct
from functools import lru_cache
from typing import Protocol

from .errors import RecordError
from .hashing import (
    _ASCII_CHUNK,
    _DIV31,
    _MOD31,
    _crc32,
    index_key_hash,
    java_string_hash,
    rmq_crc32,
    tags_code,
)
from .hosts import encode_host
from .properties import PROPERTY_SEPARATOR, encode_properties
from .sys_flag import BORNHOST_V6_FLAG, STOREHOSTADDRESS_V6_FLAG
from .validate import check_host as _reference_check_host
from .validate import check_message as _reference_check_message

IMPLEMENTATION = "python"

MESSAGE_MAGIC_CODE_V1 = -626843481  # 0xDAA320A7
MESSAGE_MAGIC_CODE_V2 = -626843477  # 0xDAA320AB
CRC32_RESERVED_LEN = 20
SYS_FLAG_POS = 36
SCHEDULE_TOPIC = "SCHEDULE_TOPIC_XXXX"
_HOST_FLAGS = BORNHOST_V6_FLAG | STOREHOSTADDRESS_V6_FLAG

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_I32x2 = struct.Struct(">ii")
_CQ_UNIT = struct.Struct(">qiq")
_BCQ_UNIT = struct.Struct(">qiqqqhii")
_INDEX_HEADER = struct.Struct(">qqqqii")
_INDEX_ENTRY = struct.Struct(">iqii")
_INDEX_HEADER_SIZE = 40
_unpack_i32 = _I32.unpack_from
_pack_i32 = _I32.pack_into
_pack_entry = _INDEX_ENTRY.pack_into
_pack_header = _INDEX_HEADER.pack_into
_INT32_MAX = 0x7FFFFFFF
_MASK32 = 0xFFFFFFFF


def _header_struct(born_len: int, store_len: int) -> struct.Struct:
    # TOTALSIZE MAGIC BODYCRC QUEUEID FLAG QUEUEOFFSET PHYOFFSET SYSFLAG BORNTS BORNHOST STORETS
    # STOREHOST RECONSUMETIMES PREPAREDTXOFFSET BODYLEN
    return struct.Struct(f">iiiiiqqiq{born_len}sq{store_len}siqi")


def _dispatch_struct(born_len: int, store_len: int) -> struct.Struct:
    # TOTALSIZE MAGIC QUEUEID QUEUEOFFSET PHYOFFSET SYSFLAG STORETS PREPAREDTXOFFSET BODYLEN, the rest skipped.
    return struct.Struct(f">ii4xi4xqqi8x{born_len}xq{store_len}x4xqi")


# Keyed by ``sys_flag & _HOST_FLAGS``.
_HEADERS = {flags: _header_struct(20 if flags & BORNHOST_V6_FLAG else 8, 20 if flags & STOREHOSTADDRESS_V6_FLAG else 8)
            for flags in (0, BORNHOST_V6_FLAG, STOREHOSTADDRESS_V6_FLAG, _HOST_FLAGS)}
_DISPATCH = {flags: _dispatch_struct(20 if flags & BORNHOST_V6_FLAG else 8, 20 if flags & STOREHOSTADDRESS_V6_FLAG else 8)
             for flags in (0, BORNHOST_V6_FLAG, STOREHOSTADDRESS_V6_FLAG, _HOST_FLAGS)}

class RecordSource(Protocol):
    """What a record is encoded from (``MessageInner`` has these; a Protocol avoids importing it here)."""

    topic: str
    body: bytes
    properties: dict[str, str]
    queue_id: int
    flag: int
    sys_flag: int
    born_timestamp: int
    born_host: tuple[str, int]
    store_host: tuple[str, int]
    reconsume_times: int
    prepared_transaction_offset: int


# What ``prepare_record`` returns: (TOTALSIZE, MAGICCODE, BODYCRC, SYSFLAG, BORNHOST raw, STOREHOST raw,
# tail = TOPICLEN+TOPIC+PROPERTIESLENGTH+PROPERTIES, PROPERTIES string, TAGS/KEYS/UNIQ_KEY or None).
PreparedRecord = tuple[int, int, int, int, bytes, bytes, bytes, str, "tuple[str | None, str | None, str | None] | None"]


@lru_cache(maxsize=1024)
def _topic_field(topic: str) -> tuple[bytes, bool]:
    """TOPICLEN + TOPIC bytes and whether the V2 (2-byte length) layout is needed; cached: few topics."""
    raw = topic.encode("utf-8")
    n = len(raw)
    if n > 32767:
        raise RecordError(f"topic length {n} too long")
    return (_I16.pack(n) if n > 127 else bytes((n,))) + raw, n > 127


def known_properties(topic: str, properties: dict[str, str], props: str
                     ) -> tuple[str | None, str | None, str | None] | None:
    """TAGS/KEYS/UNIQ_KEY from the dict a record was encoded from, when they say what ``props`` says.

    The dict agrees with the string when it has one separator pair per entry (no key or value holds
    a separator, no None value was skipped). Delay-level tagsCodes (SCHEDULE_TOPIC) and inner batches
    are left to the string: None.
    """
    n = len(properties)
    if topic == SCHEDULE_TOPIC or "INNER_NUM" in properties or props.count("\x01") != n \
            or props.count("\x02") != n:
        return None
    get = properties.get
    return get("TAGS"), get("KEYS") or None, get("UNIQ_KEY") or None


def prepare_record(msg: RecordSource, properties_string: str | None = None, max_message_size: int = 4 * 1024 * 1024,
                   append_prop_crc: bool = False) -> PreparedRecord:
    """Everything of a record that does not depend on where it lands (offsets, store time).

    The append path calls this (and so the body CRC) outside the append lock and then writes the
    record into the mapped file under the lock with ``write_record``. ``append_prop_crc`` reserves
    the 20 bytes of ``enabledAppendPropCRC`` (spec §1.6) at the end of PROPERTIES.
    """
    topic = msg.topic
    properties = msg.properties
    props = encode_properties(properties) if properties_string is None else properties_string
    if append_prop_crc and props and not props.endswith(PROPERTY_SEPARATOR):
        props += PROPERTY_SEPARATOR
    props_bytes = props.encode("utf-8")
    if append_prop_crc:
        props_bytes += bytes(CRC32_RESERVED_LEN)
    props_len = len(props_bytes)
    body = msg.body
    body_len = len(body)
    if body_len > max_message_size:
        raise RecordError(f"message body size {body_len} exceeds maxMessageSize {max_message_size}")
    if props_len > 32767:
        raise RecordError(f"properties size {props_len} exceeds 32767 bytes")
    topic_field, v2 = _topic_field(topic)
    born_raw = encode_host(msg.born_host)
    store_raw = encode_host(msg.store_host)
    sys_flag = msg.sys_flag & ~_HOST_FLAGS
    if len(born_raw) == 20:
        sys_flag |= BORNHOST_V6_FLAG
    if len(store_raw) == 20:
        sys_flag |= STOREHOSTADDRESS_V6_FLAG
    tail = topic_field + _I16.pack(props_len) + props_bytes
    total = 72 + len(born_raw) + len(store_raw) + body_len + len(tail)
    if total > max_message_size + 65536:
        raise RecordError(f"encoded record size {total} exceeds the limit {max_message_size + 65536}")
    known = known_properties(topic, properties, props) if properties_string is None else None
    return (total, MESSAGE_MAGIC_CODE_V2 if v2 else MESSAGE_MAGIC_CODE_V1, rmq_crc32(body) if body_len else 0,
            sys_flag, born_raw, store_raw, tail, props, known)


_I32_MIN, _I32_MAX = -(1 << 31), (1 << 31) - 1
_I64_MIN, _I64_MAX = -(1 << 63), (1 << 63) - 1
# Hosts (exact (str, int) tuples) the reference accepted; a store sees few distinct ones.
_VALID_HOSTS: dict[tuple[str, int], bool] = {}
_VALID_HOSTS_MAX = 4096


def _host_ok(name: str, host: object) -> bool:
    """True for a host the reference accepts (RecordError from it otherwise); False: ask the reference."""
    if type(host) is tuple and len(host) == 2 and type(host[0]) is str and type(host[1]) is int:
        # exact types: an equal tuple is the same value (no 5.0 == 5, True == 1)
        if host not in _VALID_HOSTS:
            _reference_check_host(name, host)
            if len(_VALID_HOSTS) >= _VALID_HOSTS_MAX:
                _VALID_HOSTS.clear()
            _VALID_HOSTS[host] = True
        return True
    return False


def _text_ok(text: str) -> bool:
    """No 0x01/0x02 and encodable as UTF-8 (ASCII needs no encoding to know)."""
    if "\x01" in text or "\x02" in text:
        return False
    if text.isascii():
        return True
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def check_message(msg: RecordSource, properties_given: bool = False) -> None:
    """``validate.check_message``, fast: what a few checks prove valid returns at once, anything else
    (an invalid message, an unusual type) gets the reference's verdict and message.

    Why: the reference costs ~6 us per put (two ipaddress parses, a loop per field); this runs on
    every put. Exact types only (bool, int and str subclasses go to the reference); hosts the
    reference accepted once are remembered. Property names and values are judged by their text (one
    join), so a str subclass is taken for its characters as the reference's checks read them.
    """
    topic = msg.topic
    body = msg.body
    q = msg.queue_id
    f = msg.flag
    sf = msg.sys_flag
    rt = msg.reconsume_times
    bt = msg.born_timestamp
    pto = msg.prepared_transaction_offset
    keep = msg.keep_store_timestamp
    if (type(topic) is str and topic and _text_ok(topic) and type(body) in _BODY_TYPES
            and (type(body) is not memoryview or (body.itemsize == 1 and body.c_contiguous))
            and type(q) is int and _I32_MIN <= q <= _I32_MAX and type(f) is int and _I32_MIN <= f <= _I32_MAX
            and type(sf) is int and _I32_MIN <= sf <= _I32_MAX and type(rt) is int and _I32_MIN <= rt <= _I32_MAX
            and type(bt) is int and _I64_MIN <= bt <= _I64_MAX and type(pto) is int and _I64_MIN <= pto <= _I64_MAX
            and (keep is False or (keep is True and type(msg.store_timestamp) is int
                                   and _I64_MIN <= msg.store_timestamp <= _I64_MAX))
            and _host_ok("born_host", msg.born_host) and _host_ok("store_host", msg.store_host)):
        if properties_given:
            return
        props = msg.properties
        if type(props) is dict:
            if not props:
                return
            values = [*props.values()]
            if "" not in props and None not in values:
                try:
                    joined = "\x03".join(props) + "\x03" + "\x03".join(values)
                except TypeError:
                    joined = None
                if joined is not None and _text_ok(joined):
                    return
    _reference_check_message(msg, properties_given)


_BODY_TYPES = (bytes, bytearray, memoryview)


def offset_msg_id(store_raw: bytes, commit_log_offset: int) -> str:
    """The offset msgId (spec §3): store host bytes + commitlog offset, upper-case hex."""
    return (store_raw + _I64.pack(commit_log_offset)).hex().upper()


def _header(rec: PreparedRecord, msg: RecordSource, queue_offset: int, physical_offset: int, store_timestamp: int) -> bytes:
    total, magic, body_crc, sys_flag, born_raw, store_raw, _tail, _props, _known = rec
    return _HEADERS[sys_flag & _HOST_FLAGS].pack(
        total, magic, body_crc, msg.queue_id, msg.flag, queue_offset, physical_offset, sys_flag,
        msg.born_timestamp, born_raw, store_timestamp, store_raw, msg.reconsume_times,
        msg.prepared_transaction_offset, len(msg.body))


def write_record(buf, pos: int, rec: PreparedRecord, msg: RecordSource, queue_offset: int, physical_offset: int,
                 store_timestamp: int) -> str:
    """Write a prepared record at ``pos`` (header, body, tail); returns its offset msgId."""
    total, magic, body_crc, sys_flag, born_raw, store_raw, tail, _props, _known = rec
    if pos < 0 or pos + total > len(buf):
        raise ValueError(f"record of {total} bytes at {pos} does not fit a buffer of {len(buf)}")
    header = _HEADERS[sys_flag & _HOST_FLAGS]
    body = msg.body
    body_len = len(body)
    p = pos + header.size
    if header.size + body_len + len(tail) != total:
        raise ValueError("rec does not describe this message (sizes differ)")
    header.pack_into(buf, pos, total, magic, body_crc, msg.queue_id, msg.flag, queue_offset, physical_offset,
                     sys_flag, msg.born_timestamp, born_raw, store_timestamp, store_raw, msg.reconsume_times,
                     msg.prepared_transaction_offset, body_len)
    buf[p:p + body_len] = body
    buf[p + body_len:pos + total] = tail
    return (store_raw + _I64.pack(physical_offset)).hex().upper()


def record_parts(rec: PreparedRecord, msg: RecordSource, queue_offset: int, physical_offset: int,
                 store_timestamp: int) -> tuple[bytes, bytes, bytes]:
    """A prepared record as (header, body, tail) buffers for a vectored write: the body is not copied."""
    return _header(rec, msg, queue_offset, physical_offset, store_timestamp), msg.body, rec[6]


def decode_dispatch_fields(buf, pos: int, limit: int):
    """What dispatch needs from the record at ``pos``, or None unless it is a complete, well-formed record.

    Returns ``(total_size, topic, queue_id, queue_offset, commit_log_offset, sys_flag, store_timestamp,
    prepared_transaction_offset, properties_string)``: one unpack of the header, no body copy.
    It accepts exactly the records ``check_record(..., check_crc=False)`` finds valid; on None
    (BLANK marker, torn or corrupt data) the caller asks ``check_record`` for the verdict and reason.
    """
    n = len(buf)
    if pos < 0 or pos + SYS_FLAG_POS + 4 > n:
        return None
    header = _DISPATCH[buf[pos + SYS_FLAG_POS + 3] & _HOST_FLAGS]  # the flag bits are in SYSFLAG's low byte
    if pos + header.size > n:
        return None
    total, magic, queue_id, queue_offset, phy_offset, sys_flag, store_ts, prepared, body_len = \
        header.unpack_from(buf, pos)
    end = pos + total
    if total <= 0 or end > limit or end > n or body_len < 0:
        return None
    p = pos + header.size + body_len
    if magic == MESSAGE_MAGIC_CODE_V1:
        if p + 1 > end:
            return None
        topic_len = buf[p]
        if topic_len > 127:  # a signed byte on disk: negative lengths are corrupt
            return None
        p += 1
    elif magic == MESSAGE_MAGIC_CODE_V2:
        if p + 2 > end:
            return None
        topic_len = _I16.unpack_from(buf, p)[0]
        p += 2
    else:
        return None
    if topic_len < 0 or p + topic_len + 2 > end:
        return None
    topic = str(buf[p:p + topic_len], "utf-8", "replace")
    p += topic_len
    props_len = _I16.unpack_from(buf, p)[0]
    p += 2
    if props_len < 0 or p + props_len != end:
        return None
    props = str(buf[p:end], "utf-8", "replace") if props_len else ""
    return total, topic, queue_id, queue_offset, phy_offset, sys_flag, store_ts, prepared, props


def body_crc_matches(buf, pos: int, sys_flag: int) -> bool:
    """Recovery's BODYCRC check for a record ``decode_dispatch_fields`` accepted (spec §9.4).

    An empty body always matches, as in ``check_record(..., check_crc=True)``.
    """
    body_pos = pos + _HEADERS[sys_flag & _HOST_FLAGS].size
    body_len = _I32.unpack_from(buf, body_pos - 4)[0]
    if body_len <= 0:
        return True
    with memoryview(buf) as mv:
        crc = rmq_crc32(mv[body_pos:body_pos + body_len])
    return crc == _I32.unpack_from(buf, pos + 8)[0]


def put_cq_unit(buf, pos: int, phy_offset: int, size: int, tags_code: int) -> None:
    """SimpleCQ unit (spec §5.1): phyOffset, size, tagsCode."""
    _CQ_UNIT.pack_into(buf, pos, phy_offset, size, tags_code)


def put_bcq_unit(buf, pos: int, phy_offset: int, size: int, tags_code: int, store_time: int,
                 msg_base_offset: int, batch_size: int) -> None:
    """BatchCQ unit (spec §6.1); compactedOffset -1 and the reserved int 0, as Java writes them."""
    _BCQ_UNIT.pack_into(buf, pos, phy_offset, size, tags_code, store_time, msg_base_offset, batch_size, -1, 0)


# 1 for a byte whose top bit is set (the first byte of a negative big-endian integer), else 0.
_NEGATIVE_BYTE = bytes(int(b >= 0x80) for b in range(256))



def first_record_stored_after(buf, pos: int, limit: int, timestamp: int) -> int:
    """Position of the first record from ``pos`` stored after ``timestamp`` (or where the walk met
    something that is not a message record: a BLANK end, a torn or corrupt header, ``limit``).

    Why: abnormal recovery must CRC-check only what may not have reached the disk. Java restarts at
    the first *file* older than the checkpoint, so a file that began shortly before a crash made it
    validate the whole previous gigabyte; walking the size fields to the checkpoint's time is the
    same rule at record granularity. Only sizes, magic and store time are read: a record it steps
    over is older than the checkpoint, so it was flushed and dispatched before it.
    """
    if pos < 0:
        raise ValueError("pos must be >= 0")
    limit = min(limit, len(buf))
    while pos + SYS_FLAG_POS + 4 <= limit:
        total, magic = _I32x2.unpack_from(buf, pos)
        if magic != MESSAGE_MAGIC_CODE_V1 and magic != MESSAGE_MAGIC_CODE_V2:
            break
        born_len = 20 if buf[pos + SYS_FLAG_POS + 3] & BORNHOST_V6_FLAG else 8
        if total < 56 + born_len or pos + total > limit:
            break
        if _I64.unpack_from(buf, pos + 48 + born_len)[0] > timestamp:
            break
        pos += total
    return pos

def valid_units_end(buf, start: int, limit: int, batch: bool = False) -> int:
    """End of the run of valid consume queue units that starts at ``start`` (below ``min(limit, len)``).

    Why: recovery must find each queue's end exactly as the unit-by-unit rules say (SimpleCQ:
    phyOffset >= 0, size > 0; BatchCQ also msgBaseOffset >= 0, batchSize > 0): a guess (binary search
    for the written prefix) let a torn unit inside it be served. A Python loop costs ~1 us a unit, so
    the rules are checked column-wise: a field is negative when its first byte's top bit is set, and
    positive when not negative and not all zero; the first unit failing one is the end.
    """
    if start < 0:
        raise ValueError("start must be >= 0")
    unit = 46 if batch else 20
    n = max(0, (min(limit, len(buf)) - start) // unit)
    data = bytes(buf[start:start + n * unit])
    first = n
    for p in ((0, 28) if batch else (0,)):  # phyOffset (msgBaseOffset) >= 0
        i = data[p::unit].translate(_NEGATIVE_BYTE).find(1)
        if 0 <= i < first:
            first = i
    for lo, hi in (((8, 12), (36, 38)) if batch else ((8, 12),)):  # size (batchSize) > 0
        i = data[lo::unit].translate(_NEGATIVE_BYTE).find(1)
        if 0 <= i < first:
            first = i
        acc = 0
        for q in range(lo, hi):
            acc |= int.from_bytes(data[q::unit], "big")
        i = acc.to_bytes(n, "big").find(0)
        if 0 <= i < first:
            first = i
    return start + first * unit


def index_keys(topic: str, uniq_key: str | None, keys: str | None) -> list[str]:
    """The index keys of a record in Java's order: ``topic#UNIQ_KEY``, then ``topic#token`` per KEYS token."""
    out = [f"{topic}#{uniq_key}"] if uniq_key is not None else []
    if keys:
        out += [f"{topic}#{token}" for token in keys.split(" ") if token]
    return out


def index_put_keys(buf, hash_slot_num: int, index_num: int, index_count: int, begin_timestamp: int,
                   begin_phy_offset: int, hash_slot_count: int, topic: str, uniq_key: str | None, keys: str | None,
                   phy_offset: int, store_timestamp: int, skip: int = 0) -> tuple[int, int, int, int, int, int]:
    """Append the index entries of one record to an IndexFile mapping (spec §7), as Java's putKey does.

    ``index_count`` .. ``hash_slot_count`` are the file's live header values (IndexFile keeps them).
    The keys are ``index_keys``; the first ``skip`` are left out (already in the previous file). As
    many as fit are written: entries, slots, and the whole header once. ``timeDiff`` is taken against
    the begin time *before* the first entry resets it, as Java. Returns ``(written, key_count,
    beginTimestamp, beginPhyOffset, hashSlotCount, indexCount)``; the caller rolls to a new file
    when ``skip + written < key_count``.
    """
    if index_count < 1 or index_count > index_num:
        raise ValueError("index_count must be between 1 and index_num")
    all_keys = index_keys(topic, uniq_key, keys)
    n = index_count
    begin_ts = begin_timestamp
    begin_phy = begin_phy_offset
    slot_count = hash_slot_count
    room = index_num - n
    entries_base = _INDEX_HEADER_SIZE + hash_slot_num * 4
    written = 0
    for key in all_keys[skip:] if skip else all_keys:
        if written >= room:
            break
        if len(key) <= _ASCII_CHUNK and key.isascii():  # index_key_hash, inlined (two calls per key saved)
            raw = key.encode()
            key_hash = (int(raw.translate(_MOD31), 31) + int(raw.translate(_DIV31) + b"0", 31)) & _MASK32
            if key_hash & 0x80000000:  # negative as Java's int: its absolute value, abs(MIN_INT) -> 0
                key_hash = 0x100000000 - key_hash
                if key_hash == 0x80000000:
                    key_hash = 0
        else:
            key_hash = index_key_hash(key)
        spos = _INDEX_HEADER_SIZE + (key_hash % hash_slot_num) * 4
        slot_value = _unpack_i32(buf, spos)[0]
        if slot_value <= 0 or slot_value > n:
            slot_value = 0
            slot_count += 1
        if begin_ts <= 0:
            time_diff = 0
        else:
            time_diff = min(max((store_timestamp - begin_ts) // 1000, 0), _INT32_MAX)
        if n <= 1:
            begin_phy = phy_offset
            begin_ts = store_timestamp
        _pack_entry(buf, entries_base + n * 20, key_hash, phy_offset, time_diff, slot_value)
        _pack_i32(buf, spos, n)
        n += 1
        written += 1
    if written:
        _pack_header(buf, 0, begin_ts, store_timestamp, begin_phy, phy_offset, slot_count, n)
    return written, len(all_keys), begin_ts, begin_phy, slot_count, n


_TRANSACTION_PREPARED_TYPE = 0x4
_PLAIN_BODY_TYPES = (bytes, bytearray)  # a memoryview may be strided or of wider items: the general path
# The exact types put_fast takes for (topic, body, properties, queueId, flag, sysFlag, reconsumeTimes,
# bornTimestamp, preparedTransactionOffset): one tuple of types looked up in a set, instead of nine
# ``type(x) is T`` tests (bool and other int subclasses, str subclasses, ... are not in it).
_PLAIN_FIELD_TYPES = frozenset((str, body_type, dict, int, int, int, int, int, int) for body_type in _PLAIN_BODY_TYPES)
# The ranges of those ints, checked by one pack (struct.error when one is out of range): queueId,
# flag, sysFlag, reconsumeTimes are Java ints, bornTimestamp and preparedTransactionOffset longs.
_PLAIN_FIELD_RANGES = struct.Struct(">iiiiqq")
# The exact types of (born host name, born port, store host name, store port) put_fast takes.
_HOST_FIELD_TYPES = (str, int, str, int)
_CQ_UNIT_SIZE = 20
_I16_MAX = 32767
_MAX_KEYS = 64  # more index keys than this in one message: the general path (C keeps them on the stack)
_MASK64 = (1 << 64) - 1


# 31**k mod 2**32 for k <= _ASCII_CHUNK: continuing a Java hash over k more characters.
_POW31_MOD32 = [pow(31, k, 1 << 32) for k in range(_ASCII_CHUNK + 1)]


@lru_cache(maxsize=1024)
def _index_prefix_hash(topic: str) -> int:
    """Java hash of ``topic#`` as an unsigned 32-bit value (few topics: cached)."""
    return java_string_hash(topic + "#") & _MASK32


# What put_fast needs of a host the reference accepted, keyed by the (exact-typed) tuple: the raw
# bytes (BORNHOST/STOREHOST), their upper-case hex (the offset msgId's prefix) and the SYSFLAG bit
# it sets as the born host and as the store host (0 for IPv4). A store sees few distinct hosts, so
# the per-put work is one dict lookup.
_PLAIN_HOSTS: dict[tuple[str, int], tuple[bytes, str, int, int]] = {}


def _plain_host(name: str, host: object) -> tuple[bytes, str, int, int] | None:
    """``_PLAIN_HOSTS``'s entry for a host ``check_host`` accepts, given as an exact (str, int) tuple; else None."""
    if type(host) is not tuple or len(host) != 2 or type(host[0]) is not str or type(host[1]) is not int:
        return None
    entry = _PLAIN_HOSTS.get(host)
    if entry is None:
        try:
            _host_ok(name, host)
        except RecordError:
            return None
        if len(_PLAIN_HOSTS) >= _VALID_HOSTS_MAX:
            _PLAIN_HOSTS.clear()
        raw = encode_host(host)
        v6 = len(raw) == 20
        entry = _PLAIN_HOSTS[host] = (raw, raw.hex().upper(), BORNHOST_V6_FLAG if v6 else 0,
                                      STOREHOSTADDRESS_V6_FLAG if v6 else 0)
    return entry


# What put_fast needs of a topic it takes, keyed by the exact str: (TOPICLEN + TOPIC, MAGICCODE, Java
# hash of "topic#" unsigned). A store sees few topics; one lookup replaces four checks and two caches.
_PLAIN_TOPICS: dict[str, tuple[bytes, int, int]] = {}
_PLAIN_TOPICS_MAX = 4096


def _plain_topic(topic: str) -> tuple[bytes, int, int] | None:
    """``_PLAIN_TOPICS``'s entry for an exact str topic, or None (not cached) when put_fast must decline:
    empty, SCHEDULE_TOPIC_XXXX (delay-level tagsCode), a separator in it, not encodable, too long."""
    if not topic or topic == SCHEDULE_TOPIC or "\x01" in topic or "\x02" in topic:
        return None
    try:
        topic_field, v2 = _topic_field(topic)
    except (UnicodeEncodeError, RecordError):
        return None
    if len(_PLAIN_TOPICS) >= _PLAIN_TOPICS_MAX:
        _PLAIN_TOPICS.clear()
    entry = _PLAIN_TOPICS[topic] = (topic_field, MESSAGE_MAGIC_CODE_V2 if v2 else MESSAGE_MAGIC_CODE_V1,
                                    _index_prefix_hash(topic))
    return entry


# tagsCode by TAGS value (an exact str: put_fast has checked every property): the cache of ``tags_code``
# (a pure function of the text) looked up inline, without the two calls of tags_code + lru_cache.
_TAGS_CODES: dict[str, int] = {}


def _tags_code(tags: str) -> int:
    code = tags_code(tags)
    if len(_TAGS_CODES) >= _PLAIN_TOPICS_MAX:
        _TAGS_CODES.clear()
    _TAGS_CODES[tags] = code
    return code


def put_fast(msg: RecordSource, max_message_size: int, cl_buf, cl_pos: int, cl_limit: int, phy: int,
             queue_offset: int, store_ts: int, cq_buf, cq_pos: int, idx_buf, hash_slot_num: int, index_num: int,
             index_count: int, begin_timestamp: int, begin_phy_offset: int, hash_slot_count: int,
             inner_num: int = 0) -> tuple[int, str, int, str, int, int, int, int] | None:
    """One plain put in one call: the record at ``cl_pos`` of the commitlog mapping, its consume queue
    unit at ``cq_pos``, its index entries (when ``idx_buf`` is not None); None, with nothing written,
    when the message or the files need anything but that.

    Why one call: issue 17 measured the Python around several hot-path calls at ~3.6 us a message,
    more than the byte work itself. The caller (``fast_put.put_fast``) keeps every decision: it picks
    the files, takes the locks, assigns the queue offset and store time, and commits the returned
    state; this function only proves the plain case and writes its bytes, the same bytes as
    ``prepare_record`` + ``write_record`` + ``put_cq_unit`` + ``index_put_keys``. It is written flat
    (no calls into the other functions here) because it is also the fallback's whole put: what is
    the same for every message of a topic or a host (its encoded field, MAGICCODE, the hash of
    ``topic#``, the msgId prefix) comes from one dict lookup each, and tagsCodes from a dict.

    Declines (the general path then gives the verdict and does the work) unless: the fields are of
    exact types and in range (``check_message``'s fast case; hosts exact (str, int) tuples the
    reference accepts; the body bytes or bytearray); every property is an exact str pair with a
    non-empty name, no separators and no lone surrogate, and there is no INNER_NUM; the topic is not
    SCHEDULE_TOPIC_XXXX (delay-level tagsCode); the record is not a PREPARED/ROLLBACK one;
    ``keep_store_timestamp`` is False; the record fits below ``cl_limit`` and the size limits; the
    unit fits ``cq_buf``; at most 64 index keys, all fitting the index file. Returns ``(TOTALSIZE,
    offset msgId, tagsCode, PROPERTIES string, beginTimestamp, beginPhyOffset, hashSlotCount,
    indexCount)``
    (the last four unchanged when nothing was indexed).

    With ``inner_num`` > 0 the message is a BatchCQ inner batch (``fast_put.put_inner_batch_fast``):
    its dict must hold INNER_NUM = ``inner_num`` and INNER_BASE = ``queue_offset`` (the caller sets
    them as ``CommitLog.put_inner_batch`` does), and the unit is the 46-byte BatchCQ unit (storeTime,
    msgBaseOffset ``queue_offset``, batchSize ``inner_num``) at ``cq_pos`` of ``cq_buf``. One call for
    both cases so the record, CRC and index code is shared, not copied.
    """
    if inner_num < 0 or inner_num > _I16_MAX:  # a BatchCQ unit's batchSize is a short
        return None
    topic = msg.topic
    body = msg.body
    props = msg.properties
    q = msg.queue_id
    f = msg.flag
    sf = msg.sys_flag
    rt = msg.reconsume_times
    bt = msg.born_timestamp
    pto = msg.prepared_transaction_offset
    if (type(topic), type(body), type(props), type(q), type(f), type(sf), type(rt), type(bt), type(pto)) \
            not in _PLAIN_FIELD_TYPES:
        return None
    try:
        _PLAIN_FIELD_RANGES.pack(q, f, sf, rt, bt, pto)  # exact ints: no user code runs here
    except struct.error:  # one is out of its Java type's range
        return None
    if sf & _TRANSACTION_PREPARED_TYPE or msg.keep_store_timestamp is not False \
            or ("INNER_NUM" in props) is not (inner_num > 0) or "" in props:
        return None
    # The topic's TOPICLEN + TOPIC, MAGICCODE and hash of "topic#"; None: a topic put_fast declines
    topic_entry = _PLAIN_TOPICS.get(topic) or _plain_topic(topic)
    if topic_entry is None:
        return None
    born = msg.born_host
    store = msg.store_host
    # _plain_host, its cache hit inlined. A hit is a tuple equal to an exact (str, int) pair the
    # reference accepted, so it has two items; their types are checked after the lookup, since
    # equal is not enough (("h", 1.0) == ("h", True) == ("h", 1)).
    if type(born) is not tuple or type(store) is not tuple:
        return None
    try:
        born_entry = _PLAIN_HOSTS.get(born) or _plain_host("born_host", born)
        store_entry = _PLAIN_HOSTS.get(store) or _plain_host("store_host", store)
    except Exception:  # noqa: BLE001 - an unhashable item, or an item type's own __hash__/__eq__
        return None  # failing: C declines such a host on its item types without hashing it
    if born_entry is None or store_entry is None \
            or (type(born[0]), type(born[1]), type(store[0]), type(store[1])) != _HOST_FIELD_TYPES:
        return None
    # Every name and value an exact str: the string has one separator pair per entry exactly when
    # none holds a separator (then the dict says what the string says); the text must encode.
    parts = []
    for k, v in props.items():
        if type(k) is not str or type(v) is not str:
            return None
        parts.append(f"{k}\x01{v}\x02")
    if inner_num and (props["INNER_NUM"] != str(inner_num) or props.get("INNER_BASE") != str(queue_offset)):
        return None
    text = "".join(parts)
    n_props = len(props)
    if text.count("\x01") != n_props or text.count("\x02") != n_props:
        return None
    try:
        props_bytes = text.encode()
    except UnicodeEncodeError:  # a lone surrogate
        return None
    body_len = len(body)
    props_len = len(props_bytes)
    if body_len > max_message_size or props_len > 32767:
        return None
    topic_field, magic, prefix = topic_entry
    born_raw = born_entry[0]
    store_raw, store_hex, _, store_bit = store_entry
    sf = sf & ~_HOST_FLAGS | born_entry[2] | store_bit
    header = _HEADERS[sf & _HOST_FLAGS]
    tail = topic_field + _I16.pack(props_len) + props_bytes
    total = header.size + body_len + len(tail)
    if total > max_message_size + 65536 or cl_pos < 0 or cl_pos + total > cl_limit:
        return None
    tags = props.get("TAGS")
    # tags_code(tags), its cache hit inlined
    tc = (_TAGS_CODES.get(tags) or _tags_code(tags)) if tags else 0
    n = index_count
    tokens = None
    if idx_buf is not None:
        uniq = props.get("UNIQ_KEY")
        keys = props.get("KEYS")
        tokens = [uniq] if uniq else []
        if keys:
            if " " in keys:
                tokens += [token for token in keys.split(" ") if token]
            else:  # one key (the usual case): no split
                tokens.append(keys)
        count = len(tokens)
        # (1 <= n <= index_num - count: n >= 1, n <= index_num and count <= index_num - n)
        if count > _MAX_KEYS or hash_slot_num <= 0 or not 1 <= n <= index_num - count \
                or _INDEX_HEADER_SIZE + hash_slot_num * 4 + (n + count) * 20 > len(idx_buf):
            return None
    if cl_pos + total > len(cl_buf) or cq_pos < 0 or cq_pos + (_BCQ_UNIT.size if inner_num else _CQ_UNIT_SIZE) \
            > len(cq_buf):
        return None
    # -- the record (spec §1), the consume queue unit (§5.1), the index entries (§7)
    p = cl_pos + header.size
    header.pack_into(cl_buf, cl_pos, total, magic, _crc32(body) & 0x7FFFFFFF if body_len else 0, q, f,
                     queue_offset, phy, sf, bt, born_raw, store_ts, store_raw, rt, pto, body_len)
    cl_buf[p:p + body_len] = body
    cl_buf[p + body_len:cl_pos + total] = tail
    if inner_num:
        _BCQ_UNIT.pack_into(cq_buf, cq_pos, phy, total, tc, store_ts, queue_offset, inner_num, -1, 0)
    else:
        _CQ_UNIT.pack_into(cq_buf, cq_pos, phy, total, tc)
    # the offset msgId: store host bytes + commitlog offset as 8 big-endian bytes, upper-case hex
    msg_id = f"{store_hex}{phy & _MASK64:016X}"
    if not tokens:
        return total, msg_id, tc, text, begin_timestamp, begin_phy_offset, hash_slot_count, n
    entries_base = _INDEX_HEADER_SIZE + hash_slot_num * 4
    begin_ts = begin_timestamp
    begin_phy = begin_phy_offset
    slot_count = hash_slot_count
    # timeDiff is taken against the begin time before the file's first entry resets it, as
    # index_put_keys does per key: it is the same for every key of the message, except that keys
    # after a reset see the new begin time, this store time (diff 0)
    if begin_ts <= 0:
        time_diff = 0
    else:
        time_diff = (store_ts - begin_ts) // 1000
        if time_diff < 0:
            time_diff = 0
        elif time_diff > _INT32_MAX:
            time_diff = _INT32_MAX
    # Every token is short ASCII when the whole properties text is (UTF-8 as long as the text): then
    # no token needs its own test.
    short_ascii = len(text) <= _ASCII_CHUNK and len(props_bytes) == len(text)
    for token in tokens:
        # index_key_hash(f"{topic}#{token}"), continued from the hash of "topic#" for ASCII tokens:
        # h(a + b) = h(a) * 31**len(b) + h(b) mod 2**32 (Java's hash is a polynomial). The tokens are
        # parts of ``text``, which encoded: no hash can fail once writing has begun.
        if short_ascii or (len(token) <= _ASCII_CHUNK and token.isascii()):
            raw = token.encode()
            key_hash = (prefix * _POW31_MOD32[len(raw)] + int(raw.translate(_MOD31), 31)
                        + int(raw.translate(_DIV31) + b"0", 31)) & _MASK32
            if key_hash & 0x80000000:  # negative as Java's int: its absolute value; abs(MIN_INT) -> 0
                key_hash = (0x100000000 - key_hash) & 0x7FFFFFFF
        else:
            key_hash = index_key_hash(f"{topic}#{token}")
        spos = _INDEX_HEADER_SIZE + (key_hash % hash_slot_num) * 4
        slot_value = _unpack_i32(idx_buf, spos)[0]
        if slot_value <= 0 or slot_value > n:
            slot_value = 0
            slot_count += 1
        _pack_entry(idx_buf, entries_base + n * 20, key_hash, phy, time_diff, slot_value)
        _pack_i32(idx_buf, spos, n)
        if n <= 1:
            begin_phy = phy
            begin_ts = store_ts
            time_diff = 0
        n += 1
    _pack_header(idx_buf, 0, begin_ts, store_ts, begin_phy, phy, slot_count, n)
    return total, msg_id, tc, text, begin_ts, begin_phy, slot_count, n


__all__ = [
    "IMPLEMENTATION", "PreparedRecord", "body_crc_matches", "check_message", "decode_dispatch_fields",
    "first_record_stored_after", "index_key_hash",
    "index_keys", "index_put_keys", "java_string_hash", "known_properties", "offset_msg_id", "prepare_record",
    "put_bcq_unit", "put_cq_unit", "put_fast", "record_parts", "tags_code", "valid_units_end", "write_record",
]


# ---------------------------------------------------------------------------------------- scans
# Read-only walks over commitlog bytes for the Spark search/rebuild jobs (``spark/scan.py``): the
# per-record work is done here so a record that does not match never becomes Python objects.

_INNER_BATCH_FLAG = 0x80
_COMPRESSED_FLAG = 0x1  # sys_flag.COMPRESSED_FLAG
_INNER_NUM_MARK = "INNER_NUM\x01"
VERDICT_CACHE_MAX = 65536


def hop_records(buf, pos: int, limit: int, split_bytes: int):
    """Hop TOTALSIZE to TOTALSIZE from ``pos`` (headers only), cutting a range every ``split_bytes``.

    Returns ``(splits, first_ts, last_ts, end, records)``: record-aligned range starts (``pos``
    first), the store timestamps of each range's first and last record, where hopping stopped (a
    header that is not a message record: BLANK, zeros, bad magic, TOTALSIZE < 80 or past ``limit``)
    and how many records were stepped over. A trailing range that starts at ``end`` has no records:
    its timestamps are -1.
    """
    if pos < 0 or split_bytes <= 0:
        raise ValueError("pos must be >= 0 and split_bytes > 0")
    limit = min(limit, len(buf))
    splits, first_ts, last_ts = [pos], [], []
    records = 0
    prev = -1
    next_split = pos + split_bytes
    range_open = False
    while limit - pos >= 8:
        total, magic = _I32x2.unpack_from(buf, pos)
        if (magic != MESSAGE_MAGIC_CODE_V1 and magic != MESSAGE_MAGIC_CODE_V2) or total < 80 or total > limit - pos:
            break
        if not range_open:
            first_ts.append(_I64.unpack_from(buf, pos + (68 if buf[pos + SYS_FLAG_POS + 3] & BORNHOST_V6_FLAG else 56))[0])
            range_open = True
        prev = pos
        pos += total
        records += 1
        if pos >= next_split and limit - pos >= 8:
            last_ts.append(_I64.unpack_from(buf, prev + (68 if buf[prev + SYS_FLAG_POS + 3] & BORNHOST_V6_FLAG else 56))[0])
            range_open = False
            splits.append(pos)
            next_split = pos + split_bytes
    if range_open:
        last_ts.append(_I64.unpack_from(buf, prev + (68 if buf[prev + SYS_FLAG_POS + 3] & BORNHOST_V6_FLAG else 56))[0])
    while len(first_ts) < len(splits):
        first_ts.append(-1)
        last_ts.append(-1)
    return splits, first_ts, last_ts, pos, records


def _selected_values(props: str, names: tuple[str, ...]):
    """The values ``decode_properties(props)`` gives ``names`` (None when absent): one str, or a tuple."""
    found: dict[str, str] = {}
    for segment in props.split("\x02"):
        key, sep, value = segment.partition("\x01")
        if sep and key and value and key in names:
            found[key] = value
    if len(names) == 1:
        return found.get(names[0])
    return tuple(found.get(n) for n in names)


def select_records(buf, pos: int, stop: int, limit: int, check_crc: bool, topic: str | None,
                   begin_ms: int | None, end_ms: int | None, names: tuple[str, ...], verdicts: dict,
                   judge, needle: bytes | None):
    """Validate the records from ``pos`` while ``pos < stop`` and keep those a query selects.

    Each record is checked as the reput decoder checks it (``decode_dispatch_fields`` within
    ``limit``, plus ``body_crc_matches`` when ``check_crc``); the walk returns at the first one that
    fails, so the caller can ask ``check_record`` for the verdict. A valid record is kept when its
    topic equals ``topic`` (None: any), its store timestamp is within ``[begin_ms, end_ms]`` (None:
    open), the SQL verdict of its properties is true and its body contains ``needle`` (None: any).
    The verdict depends only on the values of the properties ``names`` (as ``decode_properties``
    reads them), so it is looked up in ``verdicts`` by those values (one str or None for one name,
    else a tuple) and asked of ``judge(values)`` only for values not seen yet; ``verdicts`` is
    emptied when it holds ``VERDICT_CACHE_MAX`` entries. No names: no SQL. A BatchCQ inner batch
    record (INNER_BATCH_FLAG and an INNER_NUM property) that passes topic and time is not judged
    here: its messages have their own properties. Nor is the body of a record with COMPRESSED_FLAG
    that passes the SQL when there is a ``needle``: its stored bytes are not the text (the caller
    decompresses it), so it is deferred too.

    Returns ``(pos, records, hits, deferred, stopped)``: where the walk ended, records validated,
    positions of kept records, positions of inner batch and compressed-body records to judge in
    Python, and whether it ended at a record that failed validation (at ``pos``).
    """
    hits: list[int] = []
    deferred: list[int] = []
    records = 0
    while pos < stop:
        fields = decode_dispatch_fields(buf, pos, limit)
        if fields is None or (check_crc and not body_crc_matches(buf, pos, fields[5])):
            return pos, records, hits, deferred, True
        size, rec_topic, _qid, _qoff, _phy, sys_flag, ts, _prep, props = fields
        records += 1
        rec_pos = pos
        pos += size
        if (topic is not None and rec_topic != topic) or (begin_ms is not None and ts < begin_ms) \
                or (end_ms is not None and ts > end_ms):
            continue
        if sys_flag & _INNER_BATCH_FLAG and _INNER_NUM_MARK in props:
            deferred.append(rec_pos)
            continue
        if names:
            key = _selected_values(props, names)
            verdict = verdicts.get(key)
            if verdict is None:
                verdict = bool(judge(key))
                if len(verdicts) >= VERDICT_CACHE_MAX:
                    verdicts.clear()
                verdicts[key] = verdict
            if not verdict:
                continue
        if needle is not None:
            if sys_flag & _COMPRESSED_FLAG:
                deferred.append(rec_pos)
                continue
            body_pos = rec_pos + _HEADERS[sys_flag & _HOST_FLAGS].size
            body_len = _I32.unpack_from(buf, body_pos - 4)[0]
            with memoryview(buf) as mv:
                if mv[body_pos:body_pos + body_len].tobytes().find(needle) < 0:
                    continue
        hits.append(rec_pos)
    return pos, records, hits, deferred, False


# ---------------------------------------------------------------------------- range dispatch
# The rebuild job's per-record dispatch (``spark/scan.decode_range``) for plain records, done in one
# call per run of them so a record never becomes a DispatchRequest: the record layout facts are
# ``decode_dispatch_fields``', the unit/key layouts are ``spark/scan``'s CQ_REC and IDX_REC.

_CQ_REC = struct.Struct(">qqqiqqh")
_IDX_REC = struct.Struct(">iqq")
_SCHEDULE_TOPIC = "SCHEDULE_TOPIC_XXXX"
_UNDECIDED = object()


def _simple_property(props: str, key: str):
    """``properties.get_property`` where it needs no look-back: the value, None, or _UNDECIDED when the
    last occurrence is empty (an earlier one may then count: the caller's full path decides)."""
    found = props.rfind("\x02" + key + "\x01")
    if found >= 0:
        start = found + len(key) + 2
    elif props.startswith(key + "\x01"):
        start = len(key) + 1
    else:
        return None
    end = props.find("\x02", start)
    value = props[start:] if end < 0 else props[start:end]
    if not value and found > 0:
        return _UNDECIDED
    return value or None


def dispatch_range(buf, pos: int, stop: int, limit: int, check_crc: bool, want_index: bool,
                   cq: dict, index: bytearray) -> tuple[int, int]:
    """Dispatch the plain records from ``pos`` up to ``stop``; returns ``(pos, records)`` where it stopped.

    For each record it appends, as ``dispatch_request_of`` would decide them, one CQ_REC unit to
    ``cq[(topic, queueId)]`` (a bytearray, created when missing) when the record enters a queue, and
    its IDX_REC index keys (``topic#UNIQ_KEY``, then ``topic#token`` per KEYS token) to ``index``
    with ``want_index`` unless it is a rollback. It stops before the first record that is not plain,
    leaving it to the caller's full path: not accepted by ``decode_dispatch_fields`` (or a BODYCRC
    mismatch with ``check_crc``), a non-ASCII topic or properties, an inner batch, an INNER_NUM
    property, SCHEDULE_TOPIC_XXXX (delay-level tagsCode), or a TAGS/KEYS/UNIQ_KEY whose last
    occurrence is empty.
    """
    records = 0
    pack_cq = _CQ_REC.pack
    pack_idx = _IDX_REC.pack
    while pos < stop:
        fields = decode_dispatch_fields(buf, pos, limit)
        if fields is None:
            break
        size, topic, queue_id, queue_offset, phy, sys_flag, ts, _prepared, props = fields
        if sys_flag & _INNER_BATCH_FLAG or not topic.isascii() or not props.isascii() \
                or topic == _SCHEDULE_TOPIC or _INNER_NUM_MARK in props:
            break
        tags = _simple_property(props, "TAGS")
        keys = _simple_property(props, "KEYS")
        uniq = _simple_property(props, "UNIQ_KEY")
        if tags is _UNDECIDED or keys is _UNDECIDED or uniq is _UNDECIDED:
            break
        if check_crc and not body_crc_matches(buf, pos, sys_flag):
            break
        tran = sys_flag & 0xC
        if tran == 0x0 or tran == 0x8:
            blob = cq.get((topic, queue_id))
            if blob is None:
                blob = cq[(topic, queue_id)] = bytearray()
            blob += pack_cq(queue_offset, queue_offset, phy, size, tags_code(tags), ts, 1)
        if want_index and tran != 0xC:
            prefix = topic + "#"
            if uniq is not None:
                index += pack_idx(index_key_hash(prefix + uniq), phy, ts)
            if keys:
                for token in keys.split(" "):
                    if token:
                        index += pack_idx(index_key_hash(prefix + token), phy, ts)
        pos += size
        records += 1
    return pos, records


def link_index_entries(keys, hash_slot_num: int, prev_phy: int, prev_ts: int) -> tuple[bytes, bytes, tuple]:
    """One index file's hash slots and entries for packed ``(keyHash, phyOffset, storeTimestamp)`` keys
    (spark/scan.py's IDX_REC) in commitlog order, linked as IndexFile.put_key does (spec §7).

    ``prev_phy``/``prev_ts`` are the previous file's last key (0 for the first file): Java pre-sets
    a new file's begin values from them and the first entry's timeDiff is taken against that.
    Returns ``(slots, entries, header)``: the big-endian slot table (4 bytes per slot), the entries
    for entry numbers 1..n (20 bytes each) and the header values (beginTimestamp, endTimestamp,
    beginPhyOffset, endPhyOffset, hashSlotCount, indexCount).
    """
    if hash_slot_num <= 0:
        raise ValueError("hash_slot_num must be positive")
    if len(keys) % _IDX_REC.size:
        raise struct.error("keys must be a whole number of (keyHash, phyOffset, storeTimestamp) records")
    slots = [0] * hash_slot_num
    entries = bytearray(len(keys) // _IDX_REC.size * 20)
    begin_ts = prev_ts if prev_ts > 0 else 0
    begin_phy = prev_phy if prev_phy > 0 else 0
    end_ts, end_phy = begin_ts, begin_phy
    slot_count = 0
    pack_entry = _INDEX_ENTRY.pack_into
    n = 0
    for key_hash, phy, ts in _IDX_REC.iter_unpack(keys):
        n += 1
        s = key_hash % hash_slot_num
        prev = slots[s]
        if prev == 0:
            slot_count += 1
        diff = 0 if begin_ts <= 0 else min(max((ts - begin_ts) // 1000, 0), _INT32_MAX)
        pack_entry(entries, (n - 1) * 20, key_hash, phy, diff, prev)
        slots[s] = n
        if n == 1:
            begin_ts, begin_phy = ts, phy
        end_ts, end_phy = ts, phy
    return (struct.pack(f">{hash_slot_num}i", *slots), bytes(entries),
            (begin_ts, end_ts, begin_phy, end_phy, slot_count, n + 1))


def cq_units_of(recs, granularity_ms: int) -> tuple[bytes, bool, list[tuple[int, int]]]:
    """A queue's consume-queue units from its packed CQ_REC records (queue-offset order), in one call.

    Returns ``(units, contiguous, table)``: the 20-byte CQ units (phyOffset, size, tagsCode) in record
    order; whether each record's queue offset is the previous one's + 1 and its end (phy + size)
    above the previous end, i.e. every unit lands right after the previous one (the store's
    ``put_message_position_info`` would neither skip nor leave a gap); and per
    ``granularity_ms`` time bucket of the store timestamps, ``(bucket start, queue offset)`` of its
    first record, buckets in order of first appearance.
    """
    if granularity_ms <= 0:
        raise ValueError("granularity_ms must be positive")
    if len(recs) % _CQ_REC.size:
        raise struct.error("recs must be a whole number of CQ_REC records")
    units = bytearray()
    contiguous = True
    table: list[tuple[int, int]] = []
    seen: set[int] = set()
    last_bucket = None
    prev_off = prev_end = 0
    first = True
    pack_unit = _CQ_UNIT.pack
    for off, _base, phy, size, tags, ts, _batch in _CQ_REC.iter_unpack(recs):
        units += pack_unit(phy, size, tags)
        if not first and (off != prev_off + 1 or phy + size <= prev_end):
            contiguous = False
        first = False
        prev_off, prev_end = off, phy + size
        bucket = ts - ts % granularity_ms
        if bucket != last_bucket:
            last_bucket = bucket
            if bucket not in seen:
                seen.add(bucket)
                table.append((bucket, off))
    return bytes(units), contiguous, table


# ---------------------------------------------------------------------------------------- write buffer
# Inner batches on the write buffer (``store/buffered_put.py``): the record is encoded at the put,
# written by the commit, and its BatchCQ unit and index entries are written after the commit.


def inner_batch_known(topic: str, properties: dict[str, str], props: str
                      ) -> tuple[str | None, str | None, str | None] | None:
    """TAGS/KEYS/UNIQ_KEY of an inner batch's record from its property dict, so that dispatch does not
    parse its properties string: ``known_properties`` without its exclusion of INNER_NUM (an inner
    batch's INNER_NUM/INNER_BASE are dispatched from what the put knew). The same rule otherwise:
    only when the dict says what the string says and the topic has no delay-level tagsCode.
    """
    n = len(properties)
    if topic == SCHEDULE_TOPIC or props.count("\x01") != n or props.count("\x02") != n:
        return None
    get = properties.get
    return get("TAGS"), get("KEYS") or None, get("UNIQ_KEY") or None


def buffer_inner_batch(msg: RecordSource, max_message_size: int, phy: int, queue_offset: int, store_ts: int,
                       inner_num: int, room: int, small_room: int, small_size: int, parts: list, records: list
                       ) -> tuple[int, str] | None:
    """An inner batch's record into the write buffer in one call: INNER_BASE/INNER_NUM set as
    ``CommitLog.put_inner_batch`` sets them, ``check_message``, ``prepare_record`` and ``record_parts``
    (so the verdicts and bytes are theirs), then the record's (header, body, tail) appended to
    ``parts`` and its dispatch entry (``AppendedRecord``, with ``inner_batch_known``) to ``records``.

    Why one call: the general path makes these calls and the bookkeeping around them in Python,
    several microseconds a batch beside a ~4 us encode (issue 17). Returns ``(TOTALSIZE, offset
    msgId)``, or None with nothing changed (the two properties put back as they were) when the
    properties are not an exact dict, any of the three refuses the message with a RecordError (the
    general path then gives the verdict), or the record is larger than ``room`` (or than
    ``small_room`` when it is smaller than ``small_size``: the caller's file limits). The body is
    the message's own ``bytes`` object, or a copy of any other buffer (the caller may reuse its
    buffer once the put returns; the record is written at the commit).
    """
    properties = msg.properties
    if type(properties) is not dict:
        return None
    old_base = properties.get("INNER_BASE", _ABSENT)
    old_num = properties.get("INNER_NUM", _ABSENT)
    properties["INNER_BASE"] = str(queue_offset)
    properties["INNER_NUM"] = str(inner_num)
    try:
        check_message(msg)
        rec = prepare_record(msg, None, max_message_size)
        size = rec[0]
        if size > room or (size < small_size and size > small_room):
            rec = None
        else:
            header, body, tail = record_parts(rec, msg, queue_offset, phy, store_ts)
            props = rec[7]
            known = inner_batch_known(msg.topic, properties, props)
            msg_id = offset_msg_id(rec[5], phy)
            if type(body) is not bytes:
                body = bytes(body)
    except RecordError:
        rec = None
    except BaseException:  # not a verdict: raised as it is, the message as the caller gave it
        _put_back(properties, "INNER_BASE", old_base)
        _put_back(properties, "INNER_NUM", old_num)
        raise
    if rec is None:
        _put_back(properties, "INNER_BASE", old_base)
        _put_back(properties, "INNER_NUM", old_num)
        return None
    parts += (header, body, tail)
    records.append((phy, size, msg.topic, msg.queue_id, queue_offset, rec[3], store_ts,
                    msg.prepared_transaction_offset, props, known))
    return size, msg_id


_ABSENT = object()


def _put_back(properties: dict, name: str, old: object) -> None:
    """A property as it was before ``buffer_inner_batch`` set it (absent: removed)."""
    if old is _ABSENT:
        properties.pop(name, None)
    else:
        properties[name] = old


def dispatch_inner_batch(cq_buf, cq_pos: int, phy: int, size: int, tags: str | None, store_ts: int, base: int,
                         batch_size: int, idx_buf, hash_slot_num: int, index_num: int, index_count: int,
                         begin_timestamp: int, begin_phy_offset: int, hash_slot_count: int, topic: str,
                         uniq_key: str | None, keys: str | None) -> tuple[int, int, int, int, int, int, int]:
    """A committed inner batch's dispatch in one call: its BatchCQ unit at ``cq_pos`` (``put_bcq_unit``
    with the tagsCode of ``tags``) and, when ``idx_buf`` is not None, its index entries
    (``index_put_keys``). Returns ``(tagsCode, written, key_count, beginTimestamp, beginPhyOffset,
    hashSlotCount, indexCount)``; the index values are the ones given when ``idx_buf`` is None. The
    caller has made sure the unit fits (a struct error otherwise, nothing written) and rolls the
    index file for the keys that did not fit (``written`` < ``key_count``).
    """
    tc = tags_code(tags)
    if idx_buf is not None:  # checked before the unit is written, so a bad index file writes nothing
        if index_count < 1 or index_count > index_num:
            raise ValueError("index_count must be between 1 and index_num")
    put_bcq_unit(cq_buf, cq_pos, phy, size, tc, store_ts, base, batch_size)
    if idx_buf is None:
        return tc, 0, 0, begin_timestamp, begin_phy_offset, hash_slot_count, index_count
    return (tc, *index_put_keys(idx_buf, hash_slot_num, index_num, index_count, begin_timestamp, begin_phy_offset,
                                hash_slot_count, topic, uniq_key, keys, phy, store_ts))


def dispatch_inner_batches(appended, sizes, cqs, offset: int, idx_buf, hash_slot_num: int, index_num: int,
                           index_count: int, begin_timestamp: int, begin_phy_offset: int, hash_slot_count: int,
                           end_phy_offset: int, end_timestamp: int, room_needed: int, arrivals: list | None) -> tuple:
    """The committed inner batches at the head of ``appended`` dispatched in one call: per record
    ``dispatch_inner_batch`` (its BatchCQ unit and index entries), its queue and the index state
    moved on, its entries taken off ``appended`` and ``sizes`` (``CommitLog.inner_batch_sizes``).

    Why one call a commit: the Python loop around one ``dispatch_inner_batch`` a record cost several
    microseconds a record (issue 17). The caller (``buffered_put.dispatch_committed``) holds the
    dispatch and index locks and makes every decision about the rest: the first record that is not
    an inner batch this path knows, starts its queue (base 0) or does not continue it exactly,
    finds its queue file full, or the index file without ``room_needed`` entries of room (or
    already past it) stops the call, nothing of it written. ``cqs`` maps (topic, queueId) to the
    BatchConsumeQueue (its last file's unit written, ``max_offset``/``max_physic_offset`` moved).
    ``idx_buf`` None: no index. A record whose keys did not all fit the index file stops the call
    after its unit and the keys that fit (``partial`` = (written, key_count, tagsCode)), left at
    the head of both deques for the caller's index roll. ``arrivals`` (when not None) gets each
    dispatched record's (topic, queueId, next queue offset, tagsCode, storeTimestamp, properties)
    for the arrival listeners.

    Returns ``(offset, count, last_store_timestamp or None, indexCount, beginTimestamp,
    beginPhyOffset, hashSlotCount, endPhyOffset, endTimestamp, partial or None)``: the commitlog
    offset after the last record taken off, how many were, and the index file's header values.
    """
    indexed = idx_buf is not None
    if indexed and (index_count < 1 or index_count > index_num):
        raise ValueError("index_count must be between 1 and index_num")
    count = 0
    last_ts = None
    partial = None
    while appended:
        entry = appended[0]
        if not isinstance(entry, tuple) or len(entry) != 10:
            raise ValueError("a dispatch entry must be a 10-tuple")
        phy, size, topic, queue_id, base, sys_flag, store_ts, _prepared, props, known = entry
        if phy != offset or known is None or not sys_flag & _INNER_BATCH_FLAG or sys_flag & _TRANSACTION_PREPARED_TYPE:
            break
        while sizes and sizes[0][0] < phy:
            sizes.popleft()
        if not sizes or sizes[0][0] != phy or sizes[0][1] != base:
            break
        num = sizes[0][2]
        cq = cqs.get((topic, queue_id))
        # the queue continues exactly here (its first unit sets minOffset: the general path)
        if cq is None or not cq.is_batch or cq.max_offset != base or base == 0 or phy <= cq.max_physic_offset:
            break
        cq_files = cq.file_queue.files
        if not cq_files:
            break
        cq_mf = cq_files[-1]
        cq_pos = cq_mf.wrote_position
        if cq_pos + _BCQ_UNIT.size > cq_mf.file_size:
            break
        tags, keys, uniq_key = known
        # a file the keys go into without a roll, and a record not indexed yet
        if indexed and (index_num - index_count < room_needed or phy <= end_phy_offset):
            break
        tc, written, key_count, begin_ts, begin_phy, slot_count, n = dispatch_inner_batch(
            cq_mf.mv, cq_pos, phy, size, tags, store_ts, base, num, idx_buf, hash_slot_num, index_num, index_count,
            begin_timestamp, begin_phy_offset, hash_slot_count, topic, uniq_key, keys)
        if written:  # IndexFile.put_keys's header values
            index_count, begin_timestamp, begin_phy_offset, hash_slot_count = n, begin_ts, begin_phy, slot_count
            end_phy_offset, end_timestamp = phy, store_ts
        cq_mf.wrote_position = cq_pos + _BCQ_UNIT.size
        cq.max_physic_offset = phy
        cq.max_offset = base + num
        last_ts = store_ts
        if written < key_count:  # the rest of its keys go into the next index file: the caller's roll
            partial = (written, key_count, tc)
            break
        appended.popleft()
        sizes.popleft()
        offset = phy + size
        count += 1
        if arrivals is not None:
            arrivals.append((topic, queue_id, base + num, tc, store_ts, props))
    return (offset, count, last_ts, index_count, begin_timestamp, begin_phy_offset, hash_slot_count, end_phy_offset,
            end_timestamp, partial)
