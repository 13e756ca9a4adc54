"""What a message must satisfy before it may become a commitlog record (spec §1.2, §2.1).

Why a separate step: the append path assigns queue offsets under its lock and only then writes the
header. A field that cannot be encoded (a born timestamp past int64, a port past int32, a lone
surrogate, a property name holding a 0x01/0x02 separator or a value holding 0x02) would fail *after*
an offset was taken and leave the queue one off, or, worse, be stored and read back as other
properties. Every check here runs before any offset is assigned and raises ``RecordError`` naming
the field.

A 0x01 inside a property VALUE is stored, as Apache stores it: MessageDecoder.string2messageProperties
splits each ``name 0x01 value`` pair at its first 0x01, so the rest of the pair, 0x01s included, is
the value and reads back byte for byte (``decode_properties`` and every decoder here split there too).

The separator check only protects what reaches the store as a dict (embedded sends, gRPC). A message
that crossed the remoting wire arrives as an already encoded properties string, where a 0x02 in a
value has already become another property: producers must refuse it before encoding, and the
Python client and mqadmin sendMessage do, with ``check_properties``.
"""

from __future__ import annotations

import ipaddress
from typing import TYPE_CHECKING

from .errors import RecordError
from .properties import MAX_PROPERTIES_SIZE, NAME_VALUE_SEPARATOR, PROPERTY_SEPARATOR, encode_properties

if TYPE_CHECKING:  # message imports the hot path, which registers these checks: no import cycle
    from .message import MessageInner

INT32_MIN, INT32_MAX = -(1 << 31), (1 << 31) - 1
INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1

_INT32_FIELDS = ("queue_id", "flag", "sys_flag", "reconsume_times")
_INT64_FIELDS = ("born_timestamp", "prepared_transaction_offset")


def _check_int(name: str, value: object, lo: int, hi: int) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or not lo <= value <= hi:
        raise RecordError(f"{name} {value!r} is not an integer in [{lo}, {hi}]")


def _check_text(what: str, text: object, value: bool = False) -> None:
    """``text`` is a str that encodes as UTF-8 and holds no separator. A property ``value`` may hold
    0x01: the pair is split at its first 0x01 (the one after the name), so only 0x02, which ends the
    pair, would change what is read back."""
    if not isinstance(text, str):
        raise RecordError(f"{what} must be a string, got {type(text).__name__}")
    if value:
        if PROPERTY_SEPARATOR in text:
            raise RecordError(f"{what} {text!r} contains a property separator (\\x02)")
    elif NAME_VALUE_SEPARATOR in text or PROPERTY_SEPARATOR in text:
        raise RecordError(f"{what} {text!r} contains a property separator (\\x01 or \\x02)")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as e:
        raise RecordError(f"{what} {text!r} is not valid Unicode ({e.reason} at position {e.start})") from None


def check_host(name: str, host: object) -> None:
    """An (ip, port) pair a record can hold: an IPv4/IPv6 literal and a port in [0, 65535]."""
    if not (isinstance(host, tuple) and len(host) == 2 and isinstance(host[0], str)):
        raise RecordError(f"{name} {host!r} is not an (ip, port) pair")
    ip, port = host
    try:
        ipaddress.ip_address(ip)
    except ValueError:
        raise RecordError(f"{name} {ip!r} is not an IPv4 or IPv6 address") from None
    if not isinstance(port, int) or isinstance(port, bool) or not 0 <= port <= 65535:
        raise RecordError(f"{name} port {port!r} is not in [0, 65535]")


def check_message(msg: MessageInner, properties_given: bool = False) -> None:
    """Raise RecordError (one line naming the field) unless ``msg`` can be encoded faithfully.

    This is the reference: the append path calls ``hotpath.check_message``, which accepts what it can
    prove valid in a few checks (the compiled one in C) and asks this function about everything else,
    so the verdicts and messages are this function's.

    ``properties_given``: the caller supplies an already encoded properties string (a record being
    re-put from the commitlog), so the dict is not what will be stored and is not checked.
    """
    _check_text("topic", msg.topic)
    if not msg.topic:
        raise RecordError("topic is empty")
    if not isinstance(msg.body, bytes | bytearray | memoryview):
        raise RecordError(f"body must be bytes, got {type(msg.body).__name__}")
    if isinstance(msg.body, memoryview) and (msg.body.itemsize != 1 or not msg.body.c_contiguous):
        # its len() is not its size in bytes (cast("I")), or it has no one run of bytes to write (strided)
        raise RecordError(f"body must be bytes, got a memoryview of format {msg.body.format!r}"
                          f"{'' if msg.body.c_contiguous else ', not contiguous'}")
    for name in _INT32_FIELDS:
        _check_int(name, getattr(msg, name), INT32_MIN, INT32_MAX)
    for name in _INT64_FIELDS:
        _check_int(name, getattr(msg, name), INT64_MIN, INT64_MAX)
    if msg.keep_store_timestamp:
        _check_int("store_timestamp", msg.store_timestamp, INT64_MIN, INT64_MAX)
    check_host("born_host", msg.born_host)
    check_host("store_host", msg.store_host)
    if properties_given:
        return
    check_properties(msg.properties)


def check_properties(properties: object) -> None:
    """Raise RecordError (naming the property) unless every name and value encodes faithfully: no
    0x01/0x02 separator in a name, no 0x02 in a value (TAGS, KEYS and user properties alike), valid
    Unicode, no empty name. A 0x01 in a value is taken: Apache's decoder splits a pair at its first
    0x01, so ``pv 0x01 a 0x01 b`` reads back as pv = ``a 0x01 b`` (Java's putUserProperty checks none).

    Producers call this too (the Python client, mqadmin sendMessage over -n), before a message is
    encoded for the wire: a broker decoding ``KEYS\x01k1\x02KEYS\x01evil`` cannot tell it from what
    the user meant, so the check has to happen where the dict still exists."""
    if not isinstance(properties, dict):
        raise RecordError(f"properties must be a dict, got {type(properties).__name__}")
    for key, value in properties.items():
        _check_text("property name", key)
        if not key:
            raise RecordError("a property name is empty")
        if value is not None:
            _check_text(f"property {key}", value, value=True)


class PropertiesSizeError(RecordError):
    """Encoded properties longer than the i16 PROPERTIES length holds (``size`` bytes)."""

    def __init__(self, size: int) -> None:
        super().__init__(f"properties size {size} bytes exceeds the limit of {MAX_PROPERTIES_SIZE} bytes")
        self.size = size


def check_properties_fit(properties: dict[str, str]) -> None:
    """``check_properties``, and the encoded properties fit a record's (or a batch item's) PROPERTIES
    length; PropertiesSizeError otherwise. What a producer checks before it encodes a message, and the
    broker before it encodes a batch item (the struct error of an i16 overflow named nothing)."""
    check_properties(properties)
    size = len(encode_properties(properties).encode("utf-8"))
    if size > MAX_PROPERTIES_SIZE:
        raise PropertiesSizeError(size)
