"""The two header serializations of spec A.2: JSON (type 0) and ROCKETMQ binary (type 1).

Why both: Java clients and servers default to JSON, but any peer may be configured for the binary
form and a server answers in the request's type. Decoding is strict about structure (a malformed
header raises ``HeaderDecodeError``, the connection is closed) and lenient about content (unknown
JSON fields ignored, duplicate binary keys keep the last value, as Java does).

Text is read as Java reads it: a binary string goes through Netty's ``readCharSequence(len, UTF_8)``,
which puts U+FFFD for bytes that are not UTF-8, while a JSON header that is not UTF-8 makes fastjson's
``parseObject(byte[])`` return null and Java closes the connection.
"""

from __future__ import annotations

import json
import struct

from .codes import LanguageCode, SerializeType
from .command import RemotingCommand


class HeaderDecodeError(ValueError):
    """The header bytes are not a valid RocketMQ header; the text names the field."""


_LANG_BY_NAME = {m.name: m for m in LanguageCode}
_FIXED = struct.Struct(">hBhiii")  # code, language, version, opaque, flag, remarkLen
_I32 = struct.Struct(">i")
_I16 = struct.Struct(">h")


# -- JSON ------------------------------------------------------------------------------------------
def encode_json(cmd: RemotingCommand) -> bytes:
    """fastjson's form: keys sorted, null fields omitted, language by name (spec A.2)."""
    obj: dict[str, object] = {"code": cmd.code, "flag": cmd.flag, "language": cmd.language.name,
                              "opaque": cmd.opaque, "serializeTypeCurrentRPC": "JSON", "version": cmd.version}
    if cmd.ext_fields:
        obj["extFields"] = cmd.ext_fields
    if cmd.remark is not None:
        obj["remark"] = cmd.remark
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


_JAVA_INT = range(-2**31, 2**31)


def _int_field(obj: dict[str, object], name: str, default: int = 0) -> int:
    """An ``int`` field of Java's RemotingCommand as fastjson reads it: absent or null is the field's
    default (0 for ``code``, so Java answers "request type 0 not supported"), a quoted decimal is its
    number; anything else (text, a fraction, a boolean, beyond int) fails the header, as in Java."""
    value = obj.get(name)
    if value is None:
        return default
    if isinstance(value, str) and value.strip().lstrip("+-").isdecimal() and value.isascii():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or value not in _JAVA_INT:
        raise HeaderDecodeError(f"JSON header field {name!r} must be an integer, got {obj.get(name)!r}")
    return value


def decode_json(data: bytes) -> RemotingCommand:
    try:
        obj = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as e:
        raise HeaderDecodeError(f"JSON header is not valid UTF-8 JSON: {e}") from None
    except RecursionError:  # "[[[[..." thousands deep: the C scanner recurses per level
        raise HeaderDecodeError("JSON header is nested too deeply") from None
    if not isinstance(obj, dict):
        raise HeaderDecodeError("JSON header is not an object")
    code = _int_field(obj, "code")
    lang_value = obj.get("language", "JAVA")
    if isinstance(lang_value, int) and not isinstance(lang_value, bool):
        language = _language_by_byte(lang_value)
    elif isinstance(lang_value, str):
        language = _LANG_BY_NAME.get(lang_value, LanguageCode.OTHER)
    else:
        raise HeaderDecodeError(f"JSON header field 'language' is {lang_value!r}")
    ext = obj.get("extFields") or {}
    if not isinstance(ext, dict):
        raise HeaderDecodeError("JSON header field 'extFields' is not an object")
    ext_fields = {str(k): _ext_value(v) for k, v in ext.items() if v is not None}
    remark = obj.get("remark")
    if remark is not None and not isinstance(remark, str):
        remark = str(remark)
    # no "version" is Java's field default 0 (an old client to every version check), not ours
    return RemotingCommand(code, _int_field(obj, "opaque", 0), _int_field(obj, "flag", 0), remark, ext_fields,
                           b"", language, _int_field(obj, "version", 0), SerializeType.JSON)


def _ext_value(v: object) -> str:
    if isinstance(v, str):
        return v
    if isinstance(v, bool):
        return "true" if v else "false"
    return json.dumps(v, separators=(",", ":")) if isinstance(v, (dict, list)) else str(v)


def _language_by_byte(b: int) -> LanguageCode:
    try:
        return LanguageCode(b)
    except ValueError:
        return LanguageCode.OTHER


# -- ROCKETMQ binary -----------------------------------------------------------------------------
def encode_rocketmq(cmd: RemotingCommand) -> bytes:
    """Fixed layout of spec A.2. Codes outside int16 (POP family) do not fit: use JSON for those."""
    if not -32768 <= cmd.code <= 32767:
        raise ValueError(f"code {cmd.code} does not fit the ROCKETMQ header's int16; use the JSON header")
    remark = cmd.remark.encode("utf-8") if cmd.remark is not None else b""
    parts = [_FIXED.pack(cmd.code, int(cmd.language), cmd.version, cmd.opaque, cmd.flag, len(remark)), remark]
    entries: list[bytes] = []
    for k, v in cmd.ext_fields.items():
        kb, vb = k.encode("utf-8"), v.encode("utf-8")
        entries += [_I16.pack(len(kb)), kb, _I32.pack(len(vb)), vb]
    ext = b"".join(entries)
    parts += [_I32.pack(len(ext)), ext]
    return b"".join(parts)


def decode_rocketmq(data: bytes) -> RemotingCommand:
    n = len(data)
    if n < _FIXED.size + 4:
        raise HeaderDecodeError(f"ROCKETMQ header is {n} bytes, shorter than the fixed 21")
    code, lang, version, opaque, flag, remark_len = _FIXED.unpack_from(data, 0)
    pos = _FIXED.size
    if remark_len < 0 or pos + remark_len + 4 > n:
        raise HeaderDecodeError(f"ROCKETMQ header remarkLen {remark_len} at offset 13 overruns the header ({n} bytes)")
    remark = _java_str(data, pos, remark_len)
    pos += remark_len
    (ext_len,) = _I32.unpack_from(data, pos)
    pos += 4
    if ext_len < 0 or pos + ext_len != n:
        raise HeaderDecodeError(f"ROCKETMQ header extLen {ext_len} at offset {pos - 4} does not match "
                                f"the {n - pos} bytes left")
    ext: dict[str, str] = {}
    end = pos + ext_len
    while pos < end:
        if pos + 2 > end:
            raise HeaderDecodeError(f"ROCKETMQ header ext entry at offset {pos} is cut off")
        (klen,) = _I16.unpack_from(data, pos)
        pos += 2
        if klen < 0 or pos + klen + 4 > end:
            raise HeaderDecodeError(f"ROCKETMQ header ext key length {klen} at offset {pos - 2} overruns")
        key = _java_str(data, pos, klen)
        pos += klen
        (vlen,) = _I32.unpack_from(data, pos)
        pos += 4
        if vlen < 0 or pos + vlen > end:
            raise HeaderDecodeError(f"ROCKETMQ header ext value length {vlen} at offset {pos - 4} overruns")
        value = _java_str(data, pos, vlen)
        pos += vlen
        if key is None:  # Java keeps a null key, but no header field is ever looked up by it
            continue
        # duplicate keys: the last one wins (quirk), a null one too; a null value is an absent field,
        # so a required one fails as in Java ("the custom field <x> is null")
        if value is None:
            ext.pop(key, None)
        else:
            ext[key] = value
    return RemotingCommand(code, opaque, flag, remark, ext, b"", _language_by_byte(lang), version,
                           SerializeType.ROCKETMQ)


def _java_str(data: bytes, pos: int, length: int) -> str | None:
    """RocketMQSerializable.readStr: a zero-length string is null; bytes that are not UTF-8 read as
    U+FFFD (Netty decodes with REPLACE), they do not fail the header."""
    return data[pos:pos + length].decode("utf-8", "replace") if length else None


def encode_header(cmd: RemotingCommand) -> bytes:
    return encode_rocketmq(cmd) if cmd.serialize_type == SerializeType.ROCKETMQ else encode_json(cmd)


def decode_header(serialize_type: int, data: bytes) -> RemotingCommand:
    if serialize_type == SerializeType.JSON:
        return decode_json(data)
    if serialize_type == SerializeType.ROCKETMQ:
        return decode_rocketmq(data)
    raise HeaderDecodeError(f"unknown serialize type {serialize_type} in the header-length word")
